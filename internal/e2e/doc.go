// Package e2e holds end-to-end tests and benchmarks that drive the built
// `sky` binary the way a user does: every command goes through the CLI to
// a real API server (auto-started in a private HOME on a free port) and on
// to real local clusters whose nodes run `sky agent`. Nothing is mocked.
//
// Each test gets its own HOME, server and clusters, and at cleanup checks
// the process table: any process still carrying the test HOME in its
// environment is a leak and fails the test.
package e2e

// Package client is the Go SDK for the SkyGo API server: submit a request,
// wait for it, stream its log. Every CLI command goes through it.
package client

// Client talks to one API server endpoint. The server/client work owns it.
type Client struct {
	Endpoint string
}

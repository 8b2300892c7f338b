package state

import (
	"os"
	"testing"

	"github.com/skygo/skygo/internal/testutil/pgtest"
)

// The store suite runs against a real PostgreSQL server that TestMain
// starts (internal/testutil/pgtest) and stops at the end.
var (
	pgBaseURL  string // postgres://postgres@127.0.0.1:PORT  (no database)
	pgSetupErr error
)

func TestMain(m *testing.M) {
	var stop func()
	if !pgtest.Skipped() {
		pgBaseURL, stop, pgSetupErr = pgtest.Start()
	}
	code := m.Run()
	if stop != nil {
		stop()
	}
	os.Exit(code)
}

// newPGDatabase creates a fresh database for one test and returns its URI.
// Missing PostgreSQL binaries fail the test rather than skip it: CI has
// them, so a silent skip would only hide the PostgreSQL half of the suite.
func newPGDatabase(t testing.TB) string {
	t.Helper()
	if pgtest.Skipped() {
		t.Skip(pgtest.SkipEnv + "=1")
	}
	if pgSetupErr != nil {
		t.Fatalf("PostgreSQL test server: %v", pgSetupErr)
	}
	return pgtest.NewDatabase(t, pgBaseURL)
}

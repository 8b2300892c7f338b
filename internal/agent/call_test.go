package agent

import (
	"context"
	"net"
	"os"
	"testing"
	"time"
)

// TestCallBoundedByCallerDeadline: a daemon that accepts a call and
// never answers (a stopped process) holds an in-process caller only
// until the caller's deadline, not for the call's own 30 minutes.
func TestCallBoundedByCallerDeadline(t *testing.T) {
	p := paths{t.TempDir()}
	if err := os.MkdirAll(p.dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", p.socket())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			held <- c // accepted, never answered
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := call(ctx, p.home, "cancel", cancelRequest{JobIDs: []int{1}})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a call nobody answered succeeded")
		}
	case <-time.After(time.Minute):
		t.Fatal("the call outlived its caller's deadline by a minute")
	}
	select {
	case c := <-held:
		c.Close()
	default:
	}
}

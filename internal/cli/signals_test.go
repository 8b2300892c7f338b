package cli

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"
)

// Each stop signal ends the wait and is named, with the exit status a
// shell would report; the test process itself survives because the
// handler caught it.
func TestStopContextCatches(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		// onStop runs first, while what the context guards still runs.
		ran := make(chan bool, 1)
		handed := make(chan context.Context, 1)
		ctx, caught, stop := stopContext(context.Background(), func() { ran <- (<-handed).Err() == nil })
		handed <- ctx
		if err := syscall.Kill(syscall.Getpid(), sig); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("%v did not end the context", sig)
		}
		if before := <-ran; !before {
			t.Errorf("%v: onStop ran after the context ended", sig)
		}
		if got := caught(); got != sig {
			t.Errorf("caught %v, want %v", got, sig)
		}
		var ee *ExitError
		if err := signalExit(caught()); !errors.As(err, &ee) || ee.Code != 128+int(sig) {
			t.Errorf("%v: exit %v, want %d", sig, err, 128+int(sig))
		}
		stop()
	}
}

// A context that ends for another reason names no signal.
func TestStopContextParentEnds(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx, caught, stop := stopContext(parent, nil)
	defer stop()
	cancel()
	<-ctx.Done()
	if got := caught(); got != nil {
		t.Errorf("caught %v without a signal", got)
	}
}

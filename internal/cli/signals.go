package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/client"
)

// stopSignals end a command that follows a request: Ctrl-C, kill's
// default signal, and the terminal going away. Without a handler the last
// two would kill the process before it could cancel what it follows.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// stopContext is parent, cancelled when one of stopSignals arrives,
// after onStop (if not nil) has run. caught names that signal (nil when
// ctx ended otherwise); stop restores the default handling, so a second
// signal after it kills as usual.
func stopContext(parent context.Context, onStop func()) (ctx context.Context, caught func() os.Signal, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, stopSignals...)
	var mu sync.Mutex
	var got os.Signal
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			mu.Lock()
			got = s
			mu.Unlock()
			if onStop != nil {
				onStop()
			}
			cancel()
		case <-done:
		}
	}()
	caught = func() os.Signal {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			signal.Stop(ch)
			close(done)
			cancel()
		})
	}
	return ctx, caught, stop
}

// signalExit is the exit status of a process stopped by sig, as a shell
// reports it (130 for Ctrl-C).
func signalExit(sig os.Signal) error {
	if s, ok := sig.(syscall.Signal); ok {
		return &ExitError{Code: 128 + int(s)}
	}
	return &ExitError{Code: 130}
}

// cancelBound is how long a stopped command waits for its request to be
// cancelled; the server answers once the request's processes are gone
// (within 10 s), and a stopped command must not hang on a dead server.
const cancelBound = 15 * time.Second

// cancelFollowed cancels the request a stopped command was following,
// when that request is of no use to anyone else (a log tail).
func cancelFollowed(errOut io.Writer, c *client.Client, id string) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelBound)
	defer cancel()
	if _, err := c.Cancel(ctx, []string{id}, false); err != nil {
		fmt.Fprintf(errOut, "\nCould not cancel request %s: %v\nCancel it with: sky api cancel %s\n", id, err, shortID(id))
	}
}

// printContinues is SkyPilot's hint when a command stops waiting on a
// request that keeps running on the server (spec/cli-output.md, Async
// hint: "Ctrl-C during a sync wait").
func printContinues(s *IOStreams, w io.Writer, endpoint, id string) {
	short := shortID(id)
	fmt.Fprintf(w, "\n⚙︎ Request will continue running asynchronously.\n"+
		"├── View logs: %s\n"+
		"├── Or, visit: %s\n"+
		"└── To cancel the request, run: %s\n",
		s.Bold("sky api logs "+short), s.Bold(endpoint+"/api/stream?request_id="+short), s.Bold("sky api cancel "+short))
}

// shortID is the 8-character prefix SkyPilot's hints name requests by.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

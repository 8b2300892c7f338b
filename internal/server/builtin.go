package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/proc"
)

// builtinOps are registered on every server. debug.sleep runs a real child
// `sleep` so tests (and operators) can prove that cancelling a request
// kills the work it started.
func builtinOps() []op.Op {
	return []op.Op{{Name: "debug.sleep", Schedule: op.Long, Body: debugSleepBody{}, Result: debugSleepResult{}, Run: debugSleep}}
}

func debugSleep(ctx context.Context, r *op.Request) (any, error) {
	var b debugSleepBody
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	if b.Seconds < 0 || b.Seconds > 86400 {
		return nil, &op.Error{Type: "ValueError", Message: fmt.Sprintf("seconds=%v: want 0..86400", b.Seconds)}
	}
	cmd := proc.Command(ctx, "sleep", strconv.FormatFloat(b.Seconds, 'f', -1, 64))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sleep: %w", err)
	}
	fmt.Fprintf(r.Log, "sleeping for %gs (pid %d)\n", b.Seconds, cmd.Process.Pid)
	err := cmd.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("sleep: %w", err)
	}
	fmt.Fprintln(r.Log, "done sleeping")
	return debugSleepResult{Slept: b.Seconds}, nil
}

// debugSleepBody is the body of /debug/sleep (`sky api debug-sleep`).
type debugSleepBody struct {
	Seconds float64 `json:"seconds"`
}

// debugSleepResult is what /debug/sleep returns.
type debugSleepResult struct {
	Slept float64 `json:"slept_seconds"`
}

package server

import (
	"context"
	"fmt"
	"strconv"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/proc"
)

// builtinOps are registered on every server. debug.sleep runs a real child
// `sleep` so tests (and operators) can prove that cancelling a request
// kills the work it started.
func builtinOps() []op.Op {
	return []op.Op{op.Handle(apiop.DebugSleep, debugSleep)}
}

func debugSleep(ctx context.Context, r *op.Request, b api.DebugSleepBody) (api.DebugSleepResult, error) {
	var none api.DebugSleepResult
	if b.Seconds < 0 || b.Seconds > 86400 {
		return none, &op.Error{Type: "ValueError", Message: fmt.Sprintf("seconds=%v: want 0..86400", b.Seconds)}
	}
	cmd := proc.Command(ctx, "sleep", strconv.FormatFloat(b.Seconds, 'f', -1, 64))
	if err := cmd.Start(); err != nil {
		return none, fmt.Errorf("start sleep: %w", err)
	}
	fmt.Fprintf(r.Log, "sleeping for %gs (pid %d)\n", b.Seconds, cmd.Process.Pid)
	err := cmd.Wait()
	if ctx.Err() != nil {
		return none, ctx.Err()
	}
	if err != nil {
		return none, fmt.Errorf("sleep: %w", err)
	}
	fmt.Fprintln(r.Log, "done sleeping")
	return api.DebugSleepResult{Slept: b.Seconds}, nil
}

package jobs

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// A job group (execution: parallel) runs all its tasks at once, each on
// its own cluster, and lets them find each other: once every task runs,
// each node gets ~/.sky/jobgroup/<group>.hosts with a line
// "<ip> <task>-<node index>.<group>" per node of the group, then the
// marker <group>.ready, which each task's run waits for (up to 600 s)
// before it starts. SKYPILOT_JOBGROUP_HOSTS_FILE names the file. After a
// task recovers on a new cluster the file is written again everywhere.

// groupWait is the prefix of a group task's run.
func groupWait(group string) string {
	dir := `"$HOME/.sky/jobgroup"`
	q := provision.Quote(group)
	return fmt.Sprintf(`_sky_jg=0; while [ ! -f %s/%s.ready ] && [ $_sky_jg -lt 6000 ]; do sleep 0.1; _sky_jg=$((_sky_jg+1)); done
export SKYPILOT_JOBGROUP_HOSTS_FILE=%s/%s.hosts
`, dir, q, dir, q)
}

// stepGroup advances every task of a job group: launches (all at once,
// not gated by the scheduler once the group was claimed), looks at the
// running ones, wires the network, and ends the auxiliary tasks once the
// primary ones are done.
func (e *Env) stepGroup(ctx context.Context, j *state.ManagedJob, spec *api.JobsLaunchBody) (controller.Result, error) {
	if j.ScheduleState == api.ScheduleAliveWaiting || j.ScheduleState == api.ScheduleAliveBackoff {
		// A group claimed once launches its own recoveries.
		var err error
		if j, err = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			if n.ScheduleState != j.ScheduleState {
				return nil, state.ErrNoChange
			}
			n.ScheduleState = api.ScheduleAlive
			return nil, nil
		}); err != nil {
			return controller.Result{}, err
		}
	}
	next := e.timings().MonitorEvery
	var mu sync.Mutex
	soon := func(d time.Duration) {
		mu.Lock()
		if d < next {
			next = d
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	var errs []error
	t0 := e.now()
	for _, t := range j.Tasks {
		if !wantsLaunch(t) {
			continue
		}
		if t.NextTryAt > t0 {
			soon(time.Duration((t.NextTryAt - t0) * float64(time.Second)))
			continue
		}
		wg.Add(1)
		go func(tid int) {
			defer wg.Done()
			r, err := e.launchTask(ctx, j, spec, tid)
			mu.Lock()
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
			soon(r.RequeueAfter)
		}(t.TaskID)
	}
	wg.Wait()
	if len(errs) > 0 {
		return controller.Result{}, errs[0]
	}
	j, err := e.Store.GetManagedJob(ctx, j.JobID, false)
	if err != nil {
		return controller.Result{}, err
	}
	for _, t := range j.Tasks {
		if t.Status != api.ManagedRunning {
			continue
		}
		r, err := e.monitor(ctx, j, spec, t.TaskID)
		if err != nil {
			return controller.Result{}, err
		}
		soon(r.RequeueAfter)
		if j, err = e.Store.GetManagedJob(ctx, j.JobID, false); err != nil {
			return controller.Result{}, err
		}
	}
	if err := e.wireGroup(ctx, j); err != nil {
		e.note(j.JobID, "Writing the job group's hosts failed (retrying): %v", err)
		soon(time.Second)
	}
	if d, err := e.endAuxiliaries(ctx, j); err != nil {
		return controller.Result{}, err
	} else if d > 0 {
		soon(d)
	}
	return controller.Result{RequeueAfter: max(next, 10*time.Millisecond)}, nil
}

// wireGroup writes the hosts of a group whose tasks all run, once per
// set of clusters.
func (e *Env) wireGroup(ctx context.Context, j *state.ManagedJob) error {
	var lines []string
	var key []string
	for _, t := range j.Tasks {
		if t.Status != api.ManagedRunning {
			if api.ManagedTerminal(t.Status) {
				continue
			}
			return nil // not everyone is up yet
		}
		key = append(key, t.ClusterName+"#"+strconv.Itoa(t.Attempt))
		for i, ip := range t.IPs {
			addr := ip[0]
			if addr == "" {
				addr = ip[1]
			}
			lines = append(lines, fmt.Sprintf("%s %s-%d.%s", addr, t.Name, i, j.Name))
		}
	}
	k := strings.Join(key, ",")
	if k == "" || j.GroupNetwork == k {
		return nil
	}
	hosts := []byte(strings.Join(lines, "\n") + "\n")
	q := provision.Quote(j.Name)
	cmd := fmt.Sprintf(`mkdir -p "$HOME/.sky/jobgroup" && cat > "$HOME/.sky/jobgroup/"%s.hosts.tmp && mv "$HOME/.sky/jobgroup/"%s.hosts.tmp "$HOME/.sky/jobgroup/"%s.hosts && touch "$HOME/.sky/jobgroup/"%s.ready`, q, q, q, q)
	for _, t := range j.Tasks {
		if t.Status != api.ManagedRunning {
			continue
		}
		if err := e.Backend.RunOnNodes(ctx, t.ClusterName, e.actor(j), cmd, hosts); err != nil {
			return err
		}
	}
	_, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		n.GroupNetwork = k
		return nil, nil
	})
	if err == nil {
		e.note(j.JobID, "Job group %s: hosts written to %d task(s):\n%s", j.Name, len(key), strings.TrimSpace(string(hosts)))
	}
	return err
}

// endAuxiliaries cancels the auxiliary tasks of a group whose primary
// tasks have all ended: after termination_delay when they all
// succeeded, at once otherwise. It returns how long is left to wait.
func (e *Env) endAuxiliaries(ctx context.Context, j *state.ManagedJob) (time.Duration, error) {
	hasAux := false
	for _, t := range j.Tasks {
		if t.Primary == nil {
			return 0, nil
		}
		if !*t.Primary {
			hasAux = true
		} else if !api.ManagedTerminal(t.Status) {
			return 0, nil
		}
	}
	if !hasAux {
		return 0, nil
	}
	allOK := true
	for _, t := range j.Tasks {
		if *t.Primary && t.Status != api.ManagedSucceeded {
			allOK = false
		}
	}
	t0 := e.now()
	if j.PrimariesDoneAt == 0 {
		var err error
		if j, err = e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
			if n.PrimariesDoneAt != 0 {
				return nil, state.ErrNoChange
			}
			n.PrimariesDoneAt = t0
			return nil, nil
		}); err != nil {
			return 0, err
		}
	}
	_, err := e.Store.UpdateManagedJob(ctx, j.JobID, func(n *state.ManagedJob) ([]state.ManagedEventIn, error) {
		var ev []state.ManagedEventIn
		var wait time.Duration
		for _, t := range n.Tasks {
			if *t.Primary || api.ManagedTerminal(t.Status) {
				continue
			}
			delay := time.Duration(0)
			if allOK {
				delay = terminationDelay(n.TerminationDelay, t.Name)
			}
			if left := time.Duration((n.PrimariesDoneAt + delay.Seconds() - t0) * float64(time.Second)); left > 0 {
				wait = max(wait, left)
				continue
			}
			t.Status, t.EndAt = api.ManagedCancelled, t0
			if t.LastRecoveredAt > 0 && t.StartAt > 0 {
				t.JobDuration += t0 - t.LastRecoveredAt
			}
			ev = append(ev, state.TaskEvent(t.TaskID, api.ManagedCancelled, "Job has been cancelled: the primary tasks of its job group have ended"))
		}
		if len(ev) == 0 {
			if wait > 0 {
				return nil, &waitErr{wait}
			}
			return nil, state.ErrNoChange
		}
		return ev, nil
	})
	if we, ok := err.(*waitErr); ok {
		return we.d, nil
	}
	return 0, err
}

type waitErr struct{ d time.Duration }

func (w *waitErr) Error() string { return "wait " + w.d.String() }

// terminationDelay reads a job group's termination_delay for a task:
// its own entry, else "default", else none. Values are durations like
// 30s or 5m, or bare seconds.
func terminationDelay(m map[string]string, task string) time.Duration {
	v, ok := m[task]
	if !ok {
		v = m["default"]
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		return time.Duration(n * float64(time.Second))
	}
	d, _ := time.ParseDuration(v)
	return d
}

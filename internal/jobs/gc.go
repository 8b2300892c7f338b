package jobs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/state"
)

// The logs of jobs that ended are kept for a week (SkyPilot's
// jobs.controller.task_logs_gc_retention_hours and
// controller_logs_gc_retention_hours, 168 by default; negative keeps them
// forever), their events for 30 days; the rows themselves stay, as in
// SkyPilot, for `sky jobs queue -a`.
const (
	defaultLogRetention = 168 * time.Hour
	eventRetention      = 30 * 24 * time.Hour
)

const gcKey = "gc"

func (e *Env) retention(key string) time.Duration {
	cfg, err := config.Load(config.LoadOptions{Home: e.Home})
	if err != nil {
		return defaultLogRetention
	}
	h := cfg.GetInt("jobs.controller."+key, int(defaultLogRetention/time.Hour))
	if h < 0 {
		return -1
	}
	return time.Duration(h) * time.Hour
}

// gcEvery is how often the collector looks: the shorter retention, at
// most an hour, at least 30 s.
func (e *Env) gcEvery() time.Duration {
	d := time.Hour
	for _, r := range []time.Duration{e.retention("task_logs_gc_retention_hours"), e.retention("controller_logs_gc_retention_hours")} {
		if r >= 0 && r < d {
			d = r
		}
	}
	return max(d, 30*time.Second)
}

func (e *Env) gcController(m *controller.Metrics, log controllerLogger) *controller.Controller {
	return controller.New(controller.ReconcilerFunc(e.reconcileGC), controller.Options{
		Name: "managed-jobs-gc", Workers: 1, Logger: log, Metrics: m, Timeout: 10 * time.Minute,
		Resync: func(context.Context) ([]string, error) { return []string{gcKey}, nil }, ResyncEvery: e.gcEvery(),
	})
}

// reconcileGC removes the logs whose retention has passed.
func (e *Env) reconcileGC(ctx context.Context, _ string) (controller.Result, error) {
	task, ctl := e.retention("task_logs_gc_retention_hours"), e.retention("controller_logs_gc_retention_hours")
	t0 := e.clock()
	if task >= 0 || ctl >= 0 {
		jobs, err := e.Store.ListManagedJobs(ctx, state.ManagedFilter{ScheduleStates: []string{api.ScheduleDone}})
		if err != nil {
			return controller.Result{}, err
		}
		for _, j := range jobs {
			if j.EndAt == 0 {
				continue
			}
			ended := time.Unix(0, int64(j.EndAt*1e9))
			if task >= 0 && t0.Sub(ended) > task {
				if err := os.RemoveAll(filepath.Dir(TaskLogPath(e.Home, j.JobID, 0))); err != nil {
					return controller.Result{}, err
				}
			}
			if ctl >= 0 && t0.Sub(ended) > ctl {
				if err := os.Remove(ControllerLogPath(e.Home, j.JobID)); err != nil && !errors.Is(err, os.ErrNotExist) {
					return controller.Result{}, err
				}
			}
		}
	}
	return controller.Result{}, e.Store.DeleteManagedEventsBefore(ctx, float64(t0.Add(-eventRetention).UnixNano())/1e9)
}

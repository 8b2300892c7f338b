package jobs

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/resources"
)

func TestPlanRecovery(t *testing.T) {
	failover := resources.JobRecovery{Strategy: resources.RecoveryFailover}
	eager := resources.JobRecovery{Strategy: resources.RecoveryEagerNextRegion}
	none := resources.JobRecovery{Strategy: resources.RecoveryNone}
	for _, c := range []struct {
		name                 string
		kind                 recoverKind
		rec                  resources.JobRecovery
		cloud, region, infra string
		want                 recoveryPlan
	}{
		{"EAGER_NEXT_REGION blocks the lost region", recoverPreempted, eager, "AWS", "us-east-1", "aws",
			recoveryPlan{block: []string{"aws/us-east-1"}, saveLogs: true}},
		{"no strategy is EAGER_NEXT_REGION", recoverPreempted, resources.JobRecovery{}, "GCP", "us-central1", "gcp",
			recoveryPlan{block: []string{"gcp/us-central1"}, saveLogs: true}},
		{"FAILOVER pins the lost region first", recoverPreempted, failover, "AWS", "us-east-1", "aws",
			recoveryPlan{pin: "aws/us-east-1", saveLogs: true}},
		{"FAILOVER keeps an infra that names its region already", recoverPreempted, failover, "AWS", "us-east-1", "aws/us-east-1",
			recoveryPlan{pin: "aws/us-east-1", saveLogs: true}},
		{"FAILOVER on an infrastructure without regions pins it alone", recoverPreempted, failover, "Local", "local", "local",
			recoveryPlan{pin: "local", saveLogs: true}},
		{"an unreachable head: its log is not waited for", recoverUnreachable, eager, "AWS", "us-west-2", "aws",
			recoveryPlan{block: []string{"aws/us-west-2"}}},
		{"a lost place without a region blocks nothing", recoverPreempted, eager, "AWS", "", "aws",
			recoveryPlan{saveLogs: true}},
		{"a lost place unknown (no cloud) pins nothing", recoverPreempted, failover, "", "", "",
			recoveryPlan{saveLogs: true}},
		{"job_recovery none fails a preemption", recoverPreempted, none, "AWS", "us-east-1", "aws",
			recoveryPlan{fail: true}},
		{"job_recovery none fails an unreachable cluster", recoverUnreachable, none, "AWS", "us-east-1", "aws",
			recoveryPlan{fail: true}},
		{"a restart within max_restarts_on_errors counts and goes anywhere", recoverRestart, eager, "AWS", "us-east-1", "aws",
			recoveryPlan{restart: true, saveLogs: true}},
		{"an exit-code recovery does not count, and goes anywhere", recoverExitCode, failover, "AWS", "us-east-1", "aws",
			recoveryPlan{saveLogs: true}},
		{"job_recovery none still restarts user failures it was asked to", recoverRestart, none, "AWS", "us-east-1", "aws",
			recoveryPlan{restart: true, saveLogs: true}},
	} {
		if got := planRecovery(c.kind, c.rec, c.cloud, c.region, c.infra); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: planRecovery = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestAfterUserFailure(t *testing.T) {
	rec := resources.JobRecovery{MaxRestartsOnErrors: 2, RecoverOnExitCodes: []int{33, 77}}
	failed := func(codes ...int) *agentapi.Job {
		return &agentapi.Job{Status: agentapi.StatusFailed, ReturnCodes: codes}
	}
	for _, c := range []struct {
		name     string
		rec      resources.JobRecovery
		restarts int
		job      *agentapi.Job
		want     failureVerdict
	}{
		{"an exit code in recover_on_exit_codes restarts", rec, 0, failed(1, 77),
			failureVerdict{recover: true, kind: recoverExitCode, reason: "Job exited with code 77, which is in recover_on_exit_codes; restarting"}},
		{"an exit code in recover_on_exit_codes restarts past the budget", rec, 2, failed(33),
			failureVerdict{recover: true, kind: recoverExitCode, reason: "Job exited with code 33, which is in recover_on_exit_codes; restarting"}},
		{"the first restart", rec, 0, failed(1),
			failureVerdict{recover: true, kind: recoverRestart, reason: "Job failed (return codes [1]); restart 1 of max_restarts_on_errors 2"}},
		{"the last restart", rec, 1, failed(1),
			failureVerdict{recover: true, kind: recoverRestart, reason: "Job failed (return codes [1]); restart 2 of max_restarts_on_errors 2"}},
		{"the budget is used up", rec, 2, failed(1),
			failureVerdict{status: api.ManagedFailed, reason: "To see the details, run: sky jobs logs --controller 7"}},
		{"no budget: the first failure fails", resources.JobRecovery{}, 0, failed(1),
			failureVerdict{status: api.ManagedFailed, reason: "To see the details, run: sky jobs logs --controller 7"}},
		{"a failed setup is FAILED_SETUP", resources.JobRecovery{}, 0, &agentapi.Job{Status: agentapi.StatusFailedSetup, ReturnCodes: []int{2}},
			failureVerdict{status: api.ManagedFailedSetup, reason: "To see the details, run: sky jobs logs --controller 7"}},
		{"a failed setup within the budget restarts", rec, 0, &agentapi.Job{Status: agentapi.StatusFailedSetup, ReturnCodes: []int{2}},
			failureVerdict{recover: true, kind: recoverRestart, reason: "Job failed (return codes [2]); restart 1 of max_restarts_on_errors 2"}},
		{"a failed driver is FAILED_CONTROLLER", resources.JobRecovery{}, 0, &agentapi.Job{Status: agentapi.StatusFailedDriver},
			failureVerdict{status: api.ManagedFailedController, reason: "The job driver on the remote cluster failed. This can be caused by the job taking too much memory or other resources. Try adding more memory, CPU, or disk in your job definition. To see the details, run: sky jobs logs --controller 7"}},
		{"a failed driver within the budget restarts", rec, 0, &agentapi.Job{Status: agentapi.StatusFailedDriver},
			failureVerdict{recover: true, kind: recoverRestart, reason: "Job failed (return codes []); restart 1 of max_restarts_on_errors 2"}},
	} {
		if got := afterUserFailure(c.rec, c.restarts, c.job, 7); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: afterUserFailure = %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestUnanswered(t *testing.T) {
	const limit = 60 * time.Second
	noAnswer := errors.New("dial tcp 10.0.0.2:22: i/o timeout\nmore")
	for _, c := range []struct {
		name          string
		jobErr        error
		aliveErr      error
		alive         bool
		troubleSince  float64
		now           float64
		wantAct       silenceAct
		wantKind      recoverKind
		wantReasonHas string
	}{
		{"the cluster is gone and its head answered nothing", nil, nil, false, 0, 1000, silenceRecover, recoverPreempted, "Cluster c-1 was lost (preempted or failed)"},
		{"the cluster is gone and its head did not answer", noAnswer, nil, false, 0, 1000, silenceRecover, recoverUnreachable, "was lost (preempted or failed): dial tcp 10.0.0.2:22: i/o timeout"},
		{"the cluster is up but lost the job", nil, nil, true, 0, 1000, silenceRecover, recoverPreempted, "Job 4 is no longer on cluster c-1"},
		{"the head is silent: the silence begins", noAnswer, nil, true, 0, 1000, silenceBegins, 0, ""},
		{"liveness unknown: the silence begins", noAnswer, errors.New("db locked"), false, 0, 1000, silenceBegins, 0, ""},
		{"a silence within the limit is waited out", noAnswer, nil, true, 1000, 1060, silenceWait, 0, ""},
		{"a silence past the limit is a lost cluster", noAnswer, nil, true, 1000, 1060.5, silenceRecover, recoverUnreachable, "Cluster c-1 has not answered for 1m0s"},
		{"liveness unknown past the limit", nil, errors.New("db locked"), false, 1000, 1061, silenceRecover, recoverUnreachable, "has not answered"},
	} {
		act, kind, why := unanswered(c.jobErr, c.aliveErr, c.alive, c.troubleSince, c.now, limit, "c-1", 4)
		if act != c.wantAct || kind != c.wantKind || !strings.Contains(why, c.wantReasonHas) || (c.wantReasonHas == "") != (why == "") {
			t.Errorf("%s: unanswered = (%v, %v, %q), want (%v, %v, containing %q)", c.name, act, kind, why, c.wantAct, c.wantKind, c.wantReasonHas)
		}
		if strings.Contains(why, "\n") {
			t.Errorf("%s: reason %q has more than the error's first line", c.name, why)
		}
	}
}

func TestFailedGraceLeft(t *testing.T) {
	const grace = 1500 * time.Millisecond
	for _, c := range []struct {
		seen, now float64
		mark      bool
		wait      time.Duration
	}{
		{0, 100, true, grace},                          // first seen now: the whole grace
		{100, 100.5, false, time.Second},               // within it: the rest
		{100, 101.5, false, 0},                         // over: look at the cluster
		{100, 200, false, 0},                           // long over
		{100, 99, false, grace + 1*time.Second},        // the clock went back: wait, do not judge early
		{100, 101.25, false, 250 * time.Millisecond},   // the last quarter second
		{100.5, 101.75, false, 250 * time.Millisecond}, // fractions of seconds are kept
	} {
		mark, wait := failedGraceLeft(c.seen, c.now, grace)
		if mark != c.mark || (wait-c.wait).Abs() > time.Millisecond {
			t.Errorf("failedGraceLeft(seen %v, now %v) = (%v, %s), want (%v, %s)", c.seen, c.now, mark, wait, c.mark, c.wait)
		}
	}
}

func TestAfterLaunchFailure(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		pinned string
		want   launchVerdict
	}{
		{"no capacity is retried", fmt.Errorf("launch: %w", backend.ErrOutOfCapacity), "", launchRetry},
		{"a node that did not come up is retried", errors.New("node did not answer in 10m"), "", launchRetry},
		{"an OOM-killed setup fails the setup", errors.New("setup: container OOMKilled"), "", launchFailSetup},
		{"an out-of-memory setup fails the setup, pinned or not", errors.New("Out of memory: killed process 12"), "aws/us-east-1", launchFailSetup},
		{"FAILOVER's pinned relaunch failed: anywhere now", fmt.Errorf("launch: %w", backend.ErrOutOfCapacity), "aws/us-east-1", launchUnpin},
		{"FAILOVER's pin goes before a precheck", &op.Error{Type: "ResourcesUnavailableError", Message: "no region fits"}, "aws/us-east-1", launchUnpin},
		{"nothing feasible anywhere fails the prechecks", &op.Error{Type: "ResourcesUnavailableError", Message: "no infra fits"}, "", launchFailPrechecks},
		{"an invalid task fails the prechecks", &backend.ClusterError{Type: "ValueError", Msg: "bad"}, "", launchFailPrechecks},
		{"another user's cluster is refused", &backend.ClusterError{Type: backend.TypeNotOwner, Msg: "not yours"}, "", launchDenied},
	} {
		if got := afterLaunchFailure(c.err, c.pinned); got != c.want {
			t.Errorf("%s: afterLaunchFailure = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestWatchJob(t *testing.T) {
	for _, c := range []struct {
		status agentapi.Status
		want   watchAct
		why    string
	}{
		{agentapi.StatusSucceeded, watchSucceeded, ""},
		{agentapi.StatusFailed, watchFailed, ""},
		{agentapi.StatusFailedSetup, watchFailed, ""},
		{agentapi.StatusFailedDriver, watchFailed, ""},
		{agentapi.StatusCancelled, watchFailController, "Unknown job status CANCELLED"},
		{agentapi.StatusRunning, watchRunning, ""},
		{agentapi.StatusPending, watchRunning, ""},
		{agentapi.StatusSettingUp, watchRunning, ""},
	} {
		act, why := watchJob(&agentapi.Job{Status: c.status}, 9)
		if act != c.want || !strings.Contains(why, c.why) || (c.why == "") != (why == "") {
			t.Errorf("job %s: watchJob = (%v, %q), want (%v, containing %q)", c.status, act, why, c.want, c.why)
		}
		if why != "" && !strings.Contains(why, "sky jobs logs --controller 9") {
			t.Errorf("job %s: %q does not say where to look", c.status, why)
		}
	}
}

// TestAfterJobFailed: a failed job on a cluster that is gone is a
// preemption, recovered whatever the restart budget; on a live cluster
// it is the user's code, judged by job_recovery.
func TestAfterJobFailed(t *testing.T) {
	failed := &agentapi.Job{Status: agentapi.StatusFailed, ReturnCodes: []int{137}}
	noBudget := resources.JobRecovery{}
	if v := afterJobFailed(false, noBudget, 0, failed, 3, "c-3"); !v.recover || v.kind != recoverPreempted ||
		v.reason != "Cluster c-3 was lost (preempted or failed) while the job ran" {
		t.Errorf("cluster gone: %+v, want a preemption", v)
	}
	if v := afterJobFailed(false, resources.JobRecovery{MaxRestartsOnErrors: 1}, 1, failed, 3, "c-3"); !v.recover || v.kind != recoverPreempted {
		t.Errorf("cluster gone with the restart budget used: %+v, want a preemption all the same", v)
	}
	if v := afterJobFailed(true, noBudget, 0, failed, 3, "c-3"); v.recover || v.status != api.ManagedFailed {
		t.Errorf("cluster alive, no budget: %+v, want FAILED", v)
	}
	if v := afterJobFailed(true, resources.JobRecovery{RecoverOnExitCodes: []int{137}}, 0, failed, 3, "c-3"); !v.recover || v.kind != recoverExitCode {
		t.Errorf("cluster alive, exit code to recover on: %+v, want an exit-code restart", v)
	}
	// A driver that died as its node was taken away (an agent restarted
	// during the removal says FAILED_DRIVER) is a preemption.
	driver := &agentapi.Job{Status: agentapi.StatusFailedDriver}
	if v := afterJobFailed(false, noBudget, 0, driver, 3, "c-3"); !v.recover || v.kind != recoverPreempted {
		t.Errorf("driver failed, cluster gone: %+v, want a preemption", v)
	}
}

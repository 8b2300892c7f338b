package jobs

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/resources"
)

// The job controller's decisions, as pure functions of what a reconcile
// observed, the job's job_recovery and the time: the controller reads,
// calls one of these, and writes what it says (reconcile.go). Each is
// table-tested in decide_test.go, so every rule of spec/managed-jobs.md
// §Recovery is checked without a cluster.

type recoverKind int

const (
	recoverPreempted recoverKind = iota
	// recoverUnreachable is a preemption whose head did not answer: its
	// log is not waited for (a host cut off the network would hold the
	// recovery for the whole log timeout).
	recoverUnreachable
	recoverRestart  // a user failure within max_restarts_on_errors
	recoverExitCode // an exit code in recover_on_exit_codes
)

// preemption says whether the kind is the cluster's loss rather than
// the user's code failing.
func (k recoverKind) preemption() bool {
	return k == recoverPreempted || k == recoverUnreachable
}

// recoveryPlan is how a RUNNING task that must run again is recovered.
type recoveryPlan struct {
	// fail: the task is not recovered (a preemption with job_recovery
	// none); it ends FAILED.
	fail bool
	// pin is where FAILOVER relaunches first, as a task's infra names it
	// (cloud/region; "" : anywhere).
	pin string
	// block is what EAGER_NEXT_REGION avoids first, as the optimizer
	// names candidates (cloud/region).
	block []string
	// restart counts the recovery against max_restarts_on_errors.
	restart bool
	// saveLogs copies the attempt's log from its head first; an
	// unreachable head has nothing to give.
	saveLogs bool
}

// planRecovery decides how a task lost (kind) on the place it ran
// (cloud, region, infra as the launch recorded them) is recovered: a
// preemption goes back to the lost place first under FAILOVER and
// anywhere else first under EAGER_NEXT_REGION (the default); a user
// failure relaunches anywhere.
func planRecovery(kind recoverKind, rec resources.JobRecovery, cloud, region, infra string) recoveryPlan {
	if kind.preemption() && rec.Disabled() {
		return recoveryPlan{fail: true}
	}
	p := recoveryPlan{restart: kind == recoverRestart, saveLogs: kind != recoverUnreachable}
	if !kind.preemption() || cloud == "" || region == "" {
		return p
	}
	if rec.Strategy == resources.RecoveryFailover {
		p.pin = infra
		if p.pin != "" && !strings.Contains(p.pin, "/") && infrakind.HasRegions(p.pin) {
			p.pin += "/" + region
		}
		return p
	}
	p.block = []string{strings.ToLower(cloud) + "/" + region}
	return p
}

// failureVerdict is what becomes of a task whose job failed on a
// healthy cluster.
type failureVerdict struct {
	// recover: the task runs again, as kind; else it ends with status.
	recover bool
	kind    recoverKind
	status  string
	reason  string
}

// watchAct is what the job controller makes of a RUNNING task's job on
// its cluster.
type watchAct int

const (
	// watchRunning: keep watching.
	watchRunning watchAct = iota
	// watchSucceeded: the task SUCCEEDED.
	watchSucceeded
	// watchFailed: the job failed, by the user's code, with its driver,
	// or with a node taken away; the grace then the cluster tell which
	// (afterJobFailed).
	watchFailed
	// watchFailController: the job was cancelled on the cluster behind
	// the controller's back (a user's cancel goes through the job's own
	// cancel, which never gets here): FAILED_CONTROLLER, with why.
	watchFailController
)

// watchJob decides on a RUNNING task from its job's status on the
// cluster.
func watchJob(job *agentapi.Job, jobID int) (watchAct, string) {
	switch job.Status {
	case agentapi.StatusSucceeded:
		return watchSucceeded, ""
	case agentapi.StatusFailed, agentapi.StatusFailedSetup, agentapi.StatusFailedDriver:
		// A dead driver is what a node being taken away looks like too
		// (its processes die first, and an agent restarted meanwhile ends
		// the job FAILED_DRIVER): it waits and looks at the cluster like
		// a failed job does.
		return watchFailed, ""
	case agentapi.StatusCancelled:
		return watchFailController, fmt.Sprintf("Unknown job status %s. To see the details, run: sky jobs logs --controller %d", job.Status, jobID)
	}
	return watchRunning, ""
}

// afterJobFailed decides on a task whose job the cluster reported
// failed, once the grace is over: a cluster no longer alive was
// preempted (its processes died with it), which is recovered whatever
// the restart budget; on a live one the user's code failed
// (afterUserFailure).
func afterJobFailed(alive bool, rec resources.JobRecovery, restarts int, job *agentapi.Job, jobID int, cluster string) failureVerdict {
	if !alive {
		return failureVerdict{recover: true, kind: recoverPreempted,
			reason: fmt.Sprintf("Cluster %s was lost (preempted or failed) while the job ran", cluster)}
	}
	return afterUserFailure(rec, restarts, job, jobID)
}

// afterUserFailure decides on a task whose job failed on a healthy
// cluster: an exit code in recover_on_exit_codes restarts it without
// using the budget; otherwise it restarts while max_restarts_on_errors
// allows (restarts is how many it used), and fails after: FAILED_SETUP
// when the setup failed, FAILED_CONTROLLER when the driver did (an
// internal error rather than the user's code, as SkyPilot has it), else
// FAILED.
func afterUserFailure(rec resources.JobRecovery, restarts int, job *agentapi.Job, jobID int) failureVerdict {
	for _, c := range job.ReturnCodes {
		if slices.Contains(rec.RecoverOnExitCodes, c) {
			return failureVerdict{recover: true, kind: recoverExitCode,
				reason: fmt.Sprintf("Job exited with code %d, which is in recover_on_exit_codes; restarting", c)}
		}
	}
	if restarts < rec.MaxRestartsOnErrors {
		return failureVerdict{recover: true, kind: recoverRestart, reason: fmt.Sprintf(
			"Job failed (return codes %v); restart %d of max_restarts_on_errors %d", job.ReturnCodes, restarts+1, rec.MaxRestartsOnErrors)}
	}
	details := fmt.Sprintf("To see the details, run: sky jobs logs --controller %d", jobID)
	switch job.Status {
	case agentapi.StatusFailedSetup:
		return failureVerdict{status: api.ManagedFailedSetup, reason: details}
	case agentapi.StatusFailedDriver:
		return failureVerdict{status: api.ManagedFailedController, reason: "The job driver on the remote cluster failed. This can be caused by the job taking too much memory or other resources. Try adding more memory, CPU, or disk in your job definition. " + details}
	}
	return failureVerdict{status: api.ManagedFailed, reason: details}
}

// silenceAct is what a task whose job gave no plain answer gets.
type silenceAct int

const (
	// silenceWait: look again soon; the silence may be a network blip.
	silenceWait silenceAct = iota
	// silenceBegins: the silence starts now (record when).
	silenceBegins
	// silenceRecover: the cluster is lost; recover the task.
	silenceRecover
)

// unanswered decides on a RUNNING task whose job gave no plain answer:
// jobErr is the head's error (nil with gone: it answered that the job is
// not there); alive is the cluster's liveness unless aliveErr. A cluster
// that is not alive is lost; one that is alive without the job lost it;
// one that does not answer is waited for up to limit since the silence
// began (troubleSince; 0: it begins now).
func unanswered(jobErr error, aliveErr error, alive bool, troubleSince, now float64, limit time.Duration, cluster string, agentJob int) (silenceAct, recoverKind, string) {
	switch {
	case aliveErr == nil && !alive:
		why := fmt.Sprintf("Cluster %s was lost (preempted or failed)", cluster)
		if jobErr != nil {
			return silenceRecover, recoverUnreachable, why + ": " + firstLine(jobErr.Error())
		}
		return silenceRecover, recoverPreempted, why
	case aliveErr == nil && jobErr == nil:
		return silenceRecover, recoverPreempted, fmt.Sprintf("Job %d is no longer on cluster %s", agentJob, cluster)
	case troubleSince == 0:
		return silenceBegins, 0, ""
	case now-troubleSince > limit.Seconds():
		return silenceRecover, recoverUnreachable, fmt.Sprintf("Cluster %s has not answered for %s", cluster, limit)
	}
	return silenceWait, 0, ""
}

// failedGraceLeft is how much longer a task whose job the cluster
// reports failed waits before the cluster is looked at (a node being
// taken away kills its processes before it is gone): 0 once the grace
// since failedSeenAt is over. mark says the failure is first seen now.
func failedGraceLeft(failedSeenAt, now float64, grace time.Duration) (mark bool, wait time.Duration) {
	if failedSeenAt == 0 {
		return true, grace
	}
	left := grace.Seconds() - (now - failedSeenAt)
	if left <= 0 {
		return false, 0
	}
	return false, time.Duration(left * float64(time.Second))
}

// launchVerdict is what becomes of a task whose launch attempt failed.
type launchVerdict int

const (
	// launchRetry: tear the attempt's leftovers down and try again after
	// a backoff (no capacity now, a node that did not come up).
	launchRetry launchVerdict = iota
	// launchFailSetup: the setup ran out of memory; FAILED_SETUP.
	launchFailSetup
	// launchUnpin: FAILOVER's relaunch on the lost place failed; try
	// anywhere, at once.
	launchUnpin
	// launchFailPrechecks: no infrastructure can satisfy the request;
	// FAILED_PRECHECKS.
	launchFailPrechecks
	// launchDenied: the controller was refused on the cluster;
	// FAILED_PRECHECKS with why.
	launchDenied
)

// afterLaunchFailure decides on a failed launch attempt of a task (pinned:
// FAILOVER's pin, if the attempt had one).
func afterLaunchFailure(err error, pinned string) launchVerdict {
	low := strings.ToLower(err.Error())
	switch {
	case strings.Contains(low, "oomkilled") || strings.Contains(low, "out of memory") || strings.Contains(low, "out-of-memory"):
		return launchFailSetup
	case pinned != "":
		return launchUnpin
	case backend.Precheck(err):
		return launchFailPrechecks
	case classify(err) == faultDenied:
		return launchDenied
	}
	return launchRetry
}

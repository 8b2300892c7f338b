package replicaset

import (
	"context"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/controller"
)

// Watching a member that is up or coming up: its cluster is looked at
// through the job the member follows (a replica's run, a worker's setup
// job) and, when that does not settle it, through the infrastructure.
// What counts as lost is one rule for both sets (Judge); what a running
// or ended job means is the set's (a replica is probed, a worker's setup
// makes it READY or FAILED).

// Sight is what one look at a member's cluster saw.
type Sight struct {
	// Follows says the member has a job to follow; Job and JobErr are
	// the head's answer about it (Job nil: the head's job table has no
	// such job).
	Follows bool
	Job     *agentapi.Job
	JobErr  error
	// AliveKnown says the infrastructure was asked whether the cluster
	// is UP (Alive), with AliveErr when it could not tell.
	AliveKnown bool
	Alive      bool
	AliveErr   error
}

// Verdict is what a look at a member says.
type Verdict int

const (
	// AskAlive: ask the infrastructure whether the cluster is UP, then
	// judge again.
	AskAlive Verdict = iota
	// Unsure: nothing can be told now; look again later.
	Unsure
	// ClusterLost: the cluster is gone (preempted or failed).
	ClusterLost
	// JobGone: the cluster answers, but without the member's job (a
	// node whose disk went with it).
	JobGone
	// JobEnded: the member's job ended on a cluster that is still UP.
	JobEnded
	// Up: the job goes on (or, with no job to follow, the cluster is UP).
	Up
)

// Judge says what a sight means.
//
//   - A head that does not answer (or has no such job) settles nothing:
//     the infrastructure is asked. A cluster it reports gone is Lost; one
//     it reports UP whose head answered without the job lost the job;
//     with either side unsure, the member waits.
//   - A job that ended counts only once the cluster is known UP: an
//     ended job on a cluster that is gone, or that the infrastructure
//     cannot vouch for, is a lost member (replaced), not a failed one.
//   - With no job to follow the infrastructure alone decides.
func Judge(s Sight) Verdict {
	if s.Follows && s.JobErr == nil && s.Job != nil && !s.Job.Status.Terminal() {
		return Up
	}
	if !s.AliveKnown {
		return AskAlive
	}
	if s.Follows && s.JobErr == nil && s.Job != nil { // ended
		if s.AliveErr == nil && s.Alive {
			return JobEnded
		}
		return ClusterLost
	}
	switch {
	case s.AliveErr != nil:
		return Unsure
	case !s.Alive:
		return ClusterLost
	case !s.Follows:
		return Up
	case s.JobErr == nil: // the head answered: no such job
		return JobGone
	}
	return Unsure
}

// Look takes one look at cluster and the job it runs for the member
// (jobID; 0: none), asking the infrastructure only when the head's
// answer does not settle it.
func (c Cloud) Look(ctx context.Context, cluster string, jobID int) (Verdict, *agentapi.Job) {
	s := Sight{Follows: jobID > 0}
	if s.Follows {
		s.Job, s.JobErr = c.Backend.AgentJob(ctx, cluster, c.Owner, jobID)
	}
	v := Judge(s)
	if v == AskAlive {
		s.AliveKnown = true
		s.Alive, s.AliveErr = c.Backend.ClusterAlive(ctx, cluster)
		v = Judge(s)
	}
	return v, s.Job
}

// Watched is a member as its watch sees it.
type Watched struct {
	ID      int
	Status  string
	Cluster string
	// JobID is the job the member follows (0: none).
	JobID int
	// Every is how soon a watch that could tell nothing looks again.
	Every time.Duration
	// LostWhy is the member's reason when its cluster is lost (""
	// for "its cluster was lost (preempted or failed)").
	LostWhy string
}

// LostCluster is a lost member's reason.
const LostCluster = "its cluster was lost (preempted or failed)"

// Watch takes one look at member w (Look): a lost cluster or job makes
// it PREEMPTED (Lost), an unsure look comes back after w.Every, and a
// running or ended job is the set's to judge (next).
func Watch(ctx context.Context, s Set, c Cloud, w Watched,
	next func(v Verdict, job *agentapi.Job) (controller.Result, error)) (controller.Result, error) {
	v, job := c.Look(ctx, w.Cluster, w.JobID)
	switch v {
	case ClusterLost:
		why := w.LostWhy
		if why == "" {
			why = LostCluster
		}
		return Lost(ctx, s, w.ID, w.Status, why)
	case JobGone:
		return Lost(ctx, s, w.ID, w.Status, "its job is gone from its cluster")
	case Up, JobEnded:
		return next(v, job)
	}
	return controller.Result{RequeueAfter: w.Every}, nil
}

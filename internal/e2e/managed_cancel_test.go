package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestManagedCancel: `sky jobs cancel -a -y` reaches every queued job,
// and a job cancelled while it recovers leaves no cluster behind. The
// subtests run one after the other: cancel -a would cancel the others'
// jobs, and the lock one holds stops every launch.
func TestManagedCancel(t *testing.T) {
	parallel(t)
	e := managedEnv(t)
	e.must("check")

	// A job whose node is lost is RECOVERING; its relaunch is held in
	// flight (the test holds the local infrastructure's lock, which
	// provisioning takes), and the job is cancelled then. Once the lock
	// is released the launch may complete, and the controller must still
	// leave no cluster. It runs first, alone: the lock holds every launch
	// of this server.
	t.Run("during-recovery", func(t *testing.T) {
		e := e.as(t)
		id := e.jobsLaunch("-n", "rec", "--", "sleep 600")[0]
		q := e.waitManaged([]int{id}, 30*time.Second, "RUNNING", func(m mjob) bool { return m.Status == "RUNNING" })
		c := *q[mkey{id, 0}].Cluster
		lock, err := os.OpenFile(filepath.Join(e.clusterDir(".."), "lock"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		e.preemptNode(c)
		e.waitManaged([]int{id}, 15*time.Second, "RECOVERING", func(m mjob) bool { return m.Status == "RECOVERING" })
		// Granted a launch slot: the relaunch is in flight, and waits for the lock.
		e.waitManaged([]int{id}, 15*time.Second, "relaunching", func(m mjob) bool {
			return m.ScheduleState != nil && *m.ScheduleState == "LAUNCHING"
		})
		m := e.jobsQueue()[mkey{id, 0}]
		if m.Status != "RECOVERING" {
			t.Fatalf("the job left RECOVERING while its relaunch could not provision: %v", m)
		}
		// The job-investigation guide's reading of details.
		if m.Details == nil || !strings.HasPrefix(*m.Details, "Recovering: ") || !strings.Contains(*m.Details, c) {
			t.Errorf("a recovering job's details should say \"Recovering: \" and why: %v", m)
		}
		start := time.Now()
		r := e.must("jobs", "cancel", "-y", fmt.Sprint(id))
		if want := fmt.Sprintf("Job with ID %d is scheduled to be cancelled.", id); !strings.Contains(r.stdout, want) {
			t.Errorf("sky jobs cancel should say %q:\n%s", want, r)
		}
		e.waitManaged([]int{id}, 15*time.Second, "saying who asked for its cancellation (or ended)", func(m mjob) bool {
			return terminal(m.Status) || (m.Details != nil && strings.HasPrefix(*m.Details, "Cancellation requested by "))
		})
		_ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		q = e.waitManaged([]int{id}, 30*time.Second, "ended", ended)
		if m := q[mkey{id, 0}]; m.Status != "CANCELLED" {
			t.Errorf("cancelled while recovering: %v", m)
		}
		t.Logf("cancelled during its recovery's launch: DONE %s after the cancel", time.Since(start).Round(time.Millisecond))
		if _, ok := e.status(false)[c]; ok {
			t.Errorf("cluster %s is in sky status after its job was cancelled while recovering", c)
		}
		if _, err := os.Stat(e.clusterDir(c)); err == nil {
			t.Errorf("cluster %s is on the local infrastructure after its job was cancelled while recovering", c)
		}
	})

	// 50 jobs queued behind a long one (they depend on it), plus the
	// long one RUNNING: cancel -a ends all 51 and nothing is left.
	t.Run("all-queued", func(t *testing.T) {
		e := e.as(t)
		long := e.jobsLaunch("-n", "long", "--", "sleep 600")[0]
		dep := fmt.Sprint(long)
		queued := e.jobsLaunch("-n", "queued-array", "--num-jobs", "40", "--depends-on", dep, "--", "echo never")
		for i := range 10 {
			queued = append(queued, e.jobsLaunch("-n", fmt.Sprintf("queued%d", i), "--depends-on", dep, "--", "echo never")...)
		}
		if len(queued) != 50 {
			t.Fatalf("submitted %d queued jobs, want 50", len(queued))
		}
		e.waitManaged([]int{long}, 30*time.Second, "RUNNING", func(m mjob) bool { return m.Status == "RUNNING" })
		q := e.jobsQueue()
		for _, id := range queued {
			if m := q[mkey{id, 0}]; m.Status != "PENDING" || m.ScheduleState == nil || *m.ScheduleState != "WAITING" {
				t.Fatalf("job %d should be queued (PENDING, WAITING) behind job %d: %v", id, long, m)
			}
		}
		r := e.must("jobs", "cancel", "-a", "-y")
		if !strings.Contains(r.stdout, "scheduled to be cancelled") {
			t.Errorf("cancel -a should say the jobs are scheduled to be cancelled:\n%s", r)
		}
		all := append([]int{long}, queued...)
		q = e.waitManaged(all, 30*time.Second, "ended", ended)
		for _, id := range all {
			if m := q[mkey{id, 0}]; m.Status != "CANCELLED" {
				t.Errorf("after cancel -a: %v", m)
			}
		}
	})

	// Without the lock (the relaunch takes tens of milliseconds here, so
	// the job is rarely seen RECOVERING): cancelled at once after the node is
	// lost, or as soon as the queue shows it RECOVERING, whichever the
	// relaunch leaves time for.
	t.Run("racing-recovery", func(t *testing.T) {
		e := e.as(t)
		var ids []int
		for i := range 4 {
			ids = append(ids, e.jobsLaunch("-n", fmt.Sprintf("race%d", i), "--", "sleep 600")...)
		}
		q := e.waitManaged(ids, 30*time.Second, "RUNNING", func(m mjob) bool { return m.Status == "RUNNING" })
		caught := 0
		for i, id := range ids {
			start := time.Now()
			e.preemptNode(*q[mkey{id, 0}].Cluster)
			if i%2 == 1 {
				waitFor(10*time.Second, func() bool {
					m := e.jobsQueue()[mkey{id, 0}]
					return m.Status == "RECOVERING" || m.RecoveryCount > 0
				})
			}
			if e.jobsQueue()[mkey{id, 0}].Status == "RECOVERING" {
				caught++
			}
			e.must("jobs", "cancel", "-y", fmt.Sprint(id))
			t.Logf("job %d preempted and cancelled in %s", id, time.Since(start).Round(time.Millisecond))
		}
		t.Logf("%d of %d jobs were RECOVERING when cancelled", caught, len(ids))
		start := time.Now()
		q = e.waitManaged(ids, 30*time.Second, "ended", ended)
		t.Logf("all DONE %s later", time.Since(start).Round(time.Millisecond))
		for _, id := range ids {
			if m := q[mkey{id, 0}]; m.Status != "CANCELLED" {
				t.Errorf("cancelled around its recovery: %v", m)
			}
		}
	})

	t.Cleanup(func() {
		if !t.Failed() {
			e.requireNoClusters()
		}
	})
}

package state

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

// TestManagedCursorPaging: reading WAITING jobs a page at a time from a
// cursor, in claim order (priority high first, then oldest), or newest
// first below an id, yields every job once and in the order one
// unpaged listing gives, on both dialects.
func TestManagedCursorPaging(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		var jobs []*ManagedJob
		for i := range 23 {
			jobs = append(jobs, &ManagedJob{Name: fmt.Sprintf("j%d", i), UserHash: "u1", UserName: "alice",
				Priority: []int{500, 100, 900}[i%3], ScheduleState: api.ScheduleWaiting})
		}
		// One that is not waiting is left out of the claim-order pages.
		jobs = append(jobs, &ManagedJob{Name: "alive", UserHash: "u1", UserName: "alice", Priority: 900, ScheduleState: api.ScheduleAlive})
		if err := s.CreateManagedJobs(ctx, jobs, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		ids := func(js []*ManagedJob) []int {
			var out []int
			for _, j := range js {
				out = append(out, j.JobID)
			}
			return out
		}
		list := func(f ManagedFilter) []*ManagedJob {
			t.Helper()
			js, err := s.ListManagedJobs(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			return js
		}
		waiting := ManagedFilter{ScheduleStates: []string{api.ScheduleWaiting}, Order: "sched"}
		want := ids(list(waiting))
		if len(want) != 23 {
			t.Fatalf("%d waiting jobs listed, want 23", len(want))
		}
		for _, size := range []int{1, 5, 23, 50} {
			var got []int
			f := waiting
			f.Limit = size
			for {
				page := list(f)
				got = append(got, ids(page)...)
				if len(page) < size {
					break
				}
				f.ClaimAfter = ClaimCursorOf(page[len(page)-1])
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("claim order in pages of %d: %v, want %v", size, got, want)
			}
		}
		// Claim order is priority high first, then the older job.
		prev := list(waiting)
		for i := 1; i < len(prev); i++ {
			a, b := prev[i-1], prev[i]
			if a.Priority < b.Priority || (a.Priority == b.Priority && a.JobID > b.JobID) {
				t.Fatalf("claim order broken at %d: (%d,%d) before (%d,%d)", i, a.Priority, a.JobID, b.Priority, b.JobID)
			}
		}
		all := ids(list(ManagedFilter{}))
		var got []int
		f := ManagedFilter{Limit: 7}
		for {
			page := list(f)
			got = append(got, ids(page)...)
			if len(page) < f.Limit {
				break
			}
			f.BelowID = page[len(page)-1].JobID
		}
		if !reflect.DeepEqual(got, all) || len(all) != 24 {
			t.Errorf("newest first in pages of 7: %v, want %v", got, all)
		}
	})
}

// TestManagedFingerprintMovesWithEveryWrite: adding, changing and
// removing a job each change the fingerprint; reading does not.
func TestManagedFingerprintMovesWithEveryWrite(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		fp := func() ManagedFingerprint {
			t.Helper()
			f, err := s.ManagedFingerprint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		empty := fp()
		if empty != (ManagedFingerprint{}) {
			t.Fatalf("empty table: %+v", empty)
		}
		j := &ManagedJob{Name: "a", UserHash: "u1", UserName: "alice", ScheduleState: api.ScheduleWaiting}
		if err := s.CreateManagedJobs(ctx, []*ManagedJob{j, {Name: "b", UserHash: "u1", UserName: "alice", ScheduleState: api.ScheduleWaiting}}, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		added := fp()
		if added.Count != 2 || added == empty {
			t.Fatalf("after adding two jobs: %+v", added)
		}
		if _, err := s.ListManagedJobs(ctx, ManagedFilter{}); err != nil {
			t.Fatal(err)
		}
		if again := fp(); again != added {
			t.Fatalf("a read changed the fingerprint: %+v -> %+v", added, again)
		}
		if _, err := s.UpdateManagedJob(ctx, j.JobID, func(n *ManagedJob) ([]ManagedEventIn, error) {
			n.ScheduleState = api.ScheduleLaunching
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		changed := fp()
		if changed == added || changed.Count != 2 {
			t.Fatalf("after a job changed: %+v (before %+v)", changed, added)
		}
		if _, err := s.exec(ctx, "test delete", `DELETE FROM managed_jobs WHERE job_id = ?`, j.JobID); err != nil {
			t.Fatal(err)
		}
		if removed := fp(); removed == changed || removed.Count != 1 {
			t.Fatalf("after a job was removed: %+v (before %+v)", removed, changed)
		}
	})
}

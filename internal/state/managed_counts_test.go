package state

import (
	"context"
	"reflect"
	"regexp"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

// TestCountManagedProgress: one grouped query gives what a queue
// listing reports: how many jobs the filter selects (statuses and DONE
// included as the filter says), and the statuses of those not DONE,
// whatever statuses the filter asks for; on both dialects.
func TestCountManagedProgress(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		job := func(user, ws, sched, status string) *ManagedJob {
			return &ManagedJob{Name: "j", UserHash: user, Workspace: ws, ScheduleState: sched,
				Tasks: []*ManagedTask{{Name: "j", Status: status}}}
		}
		jobs := []*ManagedJob{
			job("u1", "default", api.ScheduleWaiting, api.ManagedPending),
			job("u1", "default", api.ScheduleWaiting, api.ManagedPending),
			job("u1", "default", api.ScheduleAlive, api.ManagedRunning),
			job("u1", "private", api.ScheduleAlive, api.ManagedRunning),
			// Ended, its controller not yet done with it.
			job("u1", "default", api.ScheduleAlive, api.ManagedSucceeded),
			job("u1", "default", api.ScheduleDone, api.ManagedSucceeded),
			job("u1", "default", api.ScheduleDone, api.ManagedFailed),
			job("u2", "default", api.ScheduleWaiting, api.ManagedPending),
			job("u2", "default", api.ScheduleDone, api.ManagedCancelled),
		}
		if err := s.CreateManagedJobs(ctx, jobs, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name string
			f    ManagedFilter
			want ManagedCounts
		}{
			{"everything", ManagedFilter{}, ManagedCounts{Total: 9, NotDone: map[string]int{
				api.ManagedPending: 3, api.ManagedRunning: 2, api.ManagedSucceeded: 1}}},
			{"one user", ManagedFilter{UserHash: "u1"}, ManagedCounts{Total: 7, NotDone: map[string]int{
				api.ManagedPending: 2, api.ManagedRunning: 2, api.ManagedSucceeded: 1}}},
			{"one user, not done (sky status)", ManagedFilter{UserHash: "u1", NotDone: true, Limit: 5},
				ManagedCounts{Total: 5, NotDone: map[string]int{api.ManagedPending: 2, api.ManagedRunning: 2, api.ManagedSucceeded: 1}}},
			{"statuses narrow the total only", ManagedFilter{UserHash: "u1", Statuses: []string{api.ManagedSucceeded, api.ManagedFailed}},
				ManagedCounts{Total: 3, NotDone: map[string]int{api.ManagedPending: 2, api.ManagedRunning: 2, api.ManagedSucceeded: 1}}},
			{"private workspace hidden", ManagedFilter{UserHash: "u1", NotDone: true, HiddenWorkspaces: []string{"private"}},
				ManagedCounts{Total: 4, NotDone: map[string]int{api.ManagedPending: 2, api.ManagedRunning: 1, api.ManagedSucceeded: 1}}},
			{"nobody's", ManagedFilter{UserHash: "u3"}, ManagedCounts{NotDone: map[string]int{}}},
		} {
			got, err := s.CountManagedProgress(ctx, c.f)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
			}
			// The total is what a listing of the same filter holds.
			f := c.f
			f.Limit = 0
			listed, err := s.ListManagedJobs(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			if len(listed) != got.Total {
				t.Errorf("%s: total %d, but the listing has %d jobs", c.name, got.Total, len(listed))
			}
		}
	})
}

// TestCountManagedProgressFromIndex: the counts of one user's jobs, and
// of everyone's, are read from an index alone, not from the jobs' rows
// (whose records and specs make a row large).
func TestCountManagedProgressFromIndex(t *testing.T) {
	s := mustOpen(t, "", t.TempDir()+"/state.db")
	for _, f := range []ManagedFilter{{UserHash: "u1", NotDone: true}, {UserHash: "u1"}, {NotDone: true}} {
		where, args := f.where()
		rows, err := s.query(context.Background(), "plan", `EXPLAIN QUERY PLAN SELECT schedule_state, status, COUNT(*) FROM managed_jobs`+where+` GROUP BY schedule_state, status`, args...)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if len(plan) != 1 || !regexpCovering.MatchString(plan[0]) {
			t.Errorf("%+v: plan %q, want one covering-index read and no sort", f, plan)
		}
	}
}

var regexpCovering = regexp.MustCompile(`USING COVERING INDEX managed_jobs_(user_)?progress`)

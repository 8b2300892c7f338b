package state

import (
	"context"
	"errors"
	"reflect"
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
			// Not a selection the kept counts answer: counted over the rows.
			{"some ids", ManagedFilter{IDs: []int{1, 3, 6, 8}}, ManagedCounts{Total: 4, NotDone: map[string]int{
				api.ManagedPending: 2, api.ManagedRunning: 1}}},
			{"one user since", ManagedFilter{UserHash: "u1", NotDone: true, After: 1}, ManagedCounts{Total: 5, NotDone: map[string]int{
				api.ManagedPending: 2, api.ManagedRunning: 2, api.ManagedSucceeded: 1}}},
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

// rowCounts is CountManagedProgress of f counted over the job rows (a
// filter the kept counts do not answer: since the epoch's first second).
func rowCounts(t *testing.T, s *Store, f ManagedFilter) ManagedCounts {
	t.Helper()
	f.After = 1
	c, err := s.CountManagedProgress(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestManagedCountsFollowMoves: the kept counts move with every job's
// state moves, including concurrent ones, and agree with counting the
// rows; a move that fails its condition (or changes nothing) moves no
// count. On both dialects.
func TestManagedCountsFollowMoves(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		var jobs []*ManagedJob
		for i := range 40 {
			jobs = append(jobs, &ManagedJob{Name: "j", UserHash: []string{"u1", "u2"}[i%2], Workspace: []string{"", "default", "ws"}[i%3],
				ScheduleState: api.ScheduleWaiting, Tasks: []*ManagedTask{{Name: "j", Status: api.ManagedPending}}})
		}
		if err := s.CreateManagedJobs(ctx, jobs, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
		filters := []ManagedFilter{{}, {UserHash: "u1"}, {UserHash: "u2", NotDone: true}, {NotDone: true, HiddenWorkspaces: []string{"default"}}}
		check := func(when string) {
			t.Helper()
			for _, f := range filters {
				got, err := s.CountManagedProgress(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				if want := rowCounts(t, s, f); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s, %+v: kept counts %+v, rows say %+v", when, f, got, want)
				}
			}
		}
		check("submitted")
		// Every job through its life, concurrently: each move of one
		// job moves two counts, in a transaction of its own.
		steps := []func(j *ManagedJob){
			func(j *ManagedJob) { j.ScheduleState = api.ScheduleLaunching; j.Tasks[0].Status = api.ManagedStarting },
			func(j *ManagedJob) { j.ScheduleState = api.ScheduleAlive; j.Tasks[0].Status = api.ManagedRunning },
			func(j *ManagedJob) { j.Tasks[0].Status = api.ManagedRecovering },
			func(j *ManagedJob) { j.Tasks[0].Status = api.ManagedRunning },
			func(j *ManagedJob) { j.Tasks[0].Status = api.ManagedSucceeded },
			func(j *ManagedJob) { j.ScheduleState = api.ScheduleDone },
		}
		errs := make(chan error, len(jobs))
		for i, j := range jobs {
			go func() {
				for _, step := range steps[:2+i%5] {
					if _, err := s.UpdateManagedJob(ctx, j.JobID, func(j *ManagedJob) ([]ManagedEventIn, error) {
						step(j)
						return nil, nil
					}); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range jobs {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		check("after concurrent moves")
		if _, err := s.UpdateManagedJob(ctx, jobs[0].JobID, func(j *ManagedJob) ([]ManagedEventIn, error) {
			j.Tasks[0].Status = api.ManagedFailed
			return nil, ErrNoChange
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateManagedJob(ctx, jobs[1].JobID, func(j *ManagedJob) ([]ManagedEventIn, error) {
			j.Tasks[0].Status = api.ManagedFailed
			return nil, errors.New("refused")
		}); err == nil {
			t.Fatal("a failing mutation was written")
		}
		check("after moves not made")
	})
}

// TestManagedCountsMigration: a database with jobs from before the kept
// counts gets them counted from its rows when it is opened.
func TestManagedCountsMigration(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/state.db"
	s, err := Open(ctx, "", path)
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*ManagedJob
	for i := range 9 {
		j := &ManagedJob{Name: "j", UserHash: []string{"u1", "u2", "u3"}[i%3], ScheduleState: api.ScheduleWaiting,
			Tasks: []*ManagedTask{{Name: "j", Status: api.ManagedPending}}}
		if i%4 == 0 {
			j.ScheduleState, j.Tasks[0].Status = api.ScheduleDone, api.ManagedCancelled
		}
		jobs = append(jobs, j)
	}
	if err := s.CreateManagedJobs(ctx, jobs, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	want := rowCounts(t, s, ManagedFilter{UserHash: "u1"})
	// As a database from before: no counts, no record of the step.
	for _, q := range []string{`DROP TABLE managed_job_counts`, `DELETE FROM schema_version WHERE version = 15`} {
		if _, err := s.exec(ctx, "undo", q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = mustOpen(t, "", path)
	for _, f := range []ManagedFilter{{UserHash: "u1"}, {}, {NotDone: true}} {
		got, err := s.CountManagedProgress(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if want := rowCounts(t, s, f); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v after the migration: %+v, rows say %+v", f, got, want)
		}
	}
	if got, _ := s.CountManagedProgress(ctx, ManagedFilter{UserHash: "u1"}); got.Total != 3 || !reflect.DeepEqual(got, want) {
		t.Errorf("u1 after the migration: %+v, want %+v (3 jobs)", got, want)
	}
}

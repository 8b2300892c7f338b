package jobs

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/state"
)

// TestQueueEachListsWhatQueueDoes: the streamed listing (QueueEach,
// reading the database a page of 1,000 jobs at a time) hands out the
// records one unpaged Queue returns for the same body, in the same
// order, for selections that span pages, stop inside one or exactly at
// its end, and filter in the database or after reading (infra).
func TestQueueEachListsWhatQueueDoes(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	var jobs []*state.ManagedJob
	for i := range 2345 {
		user, ws, sched, status := "h-alice", "default", api.ScheduleWaiting, api.ManagedPending
		if i%7 == 0 {
			user = "h-bob"
		}
		if i%11 == 0 {
			ws = "private"
		}
		if i%5 == 0 {
			sched, status = api.ScheduleDone, api.ManagedSucceeded
		}
		task := &state.ManagedTask{Name: "t", Status: status, Resources: "1x[CPU:1+]"}
		if i%3 == 0 {
			task.Infra, task.Cloud = "aws/us-east-1", "AWS"
		}
		jobs = append(jobs, &state.ManagedJob{Name: fmt.Sprintf("j%d", i), UserHash: user, UserName: user[2:], Workspace: ws,
			ScheduleState: sched, Entrypoint: "echo '<a & b>'", Tasks: []*state.ManagedTask{task}})
	}
	// A pipeline: one job, two records.
	jobs = append(jobs, &state.ManagedJob{Name: "pipe", UserHash: "h-alice", UserName: "alice", ScheduleState: api.ScheduleWaiting,
		Tasks: []*state.ManagedTask{{TaskID: 0, Name: "a", Status: api.ManagedPending}, {TaskID: 1, Name: "b", Status: api.ManagedPending}}})
	if err := st.CreateManagedJobs(ctx, jobs, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	e := &Env{Store: st}
	alice := api.User{ID: "h-alice", Name: "alice"}
	for _, b := range []api.JobsQueueBody{
		{AllUsers: true},
		{AllUsers: true, Limit: 1000},
		{AllUsers: true, Limit: 2000},
		{AllUsers: true, Limit: 1},
		{},
		{SkipFinished: true, HiddenWorkspaces: []string{"private"}},
		{AllUsers: true, Infra: "aws"},
		{AllUsers: true, Infra: "aws", Limit: 500},
		{AllUsers: true, Statuses: []string{api.ManagedSucceeded}},
		{AllUsers: true, Verbose: true},
		{AllUsers: true, BelowJobID: 1500},
	} {
		want, err := e.Queue(ctx, b, alice)
		if err != nil {
			t.Fatal(err)
		}
		var got []api.ManagedJobRecord
		if err := e.QueueEach(ctx, b, alice, func(r *api.ManagedJobRecord) error {
			got = append(got, *r)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(want.Jobs) == 0 {
			t.Fatalf("%+v: Queue lists nothing; the test selects no job", b)
		}
		if len(got) != len(want.Jobs) {
			t.Errorf("%+v: QueueEach gave %d records, Queue %d", b, len(got), len(want.Jobs))
			continue
		}
		for i := range got {
			// The durations run on from each listing's own clock.
			got[i].TotalDuration, want.Jobs[i].TotalDuration = 0, 0
			if !reflect.DeepEqual(got[i], want.Jobs[i]) {
				t.Errorf("%+v: record %d is\n  %+v\nwant\n  %+v", b, i, got[i], want.Jobs[i])
				break
			}
		}
	}
}

// TestQueueEachStopsOnEmitError: an error handing a record out (the
// client went away) ends the listing with it.
func TestQueueEachStopsOnEmitError(t *testing.T) {
	ctx := context.Background()
	st := testStore(t)
	var jobs []*state.ManagedJob
	for range 3 {
		jobs = append(jobs, &state.ManagedJob{Name: "j", UserHash: "h", ScheduleState: api.ScheduleWaiting,
			Tasks: []*state.ManagedTask{{Name: "j", Status: api.ManagedPending}}})
	}
	if err := st.CreateManagedJobs(ctx, jobs, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	gone := fmt.Errorf("client gone")
	n := 0
	err := (&Env{Store: st}).QueueEach(ctx, api.JobsQueueBody{}, api.User{ID: "h"}, func(*api.ManagedJobRecord) error {
		n++
		return gone
	})
	if err != gone || n != 1 {
		t.Errorf("QueueEach = %v after %d records, want the emit error after the first", err, n)
	}
}

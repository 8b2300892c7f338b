package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/ux"
)

// The `sky jobs queue` table (cli-output.md §sky jobs queue), also shown
// by `sky status` for in-progress jobs.

// managedTableOptions picks the optional columns.
type managedTableOptions struct {
	Verbose  bool // -v: worker, started, infra, resources, schedule state, details, git commit, events
	AllUsers bool // -u: USER (and USER_ID with -v)
}

// managedStatusStyle is the colour SkyPilot gives each managed status.
func managedStatusStyle(status string) string {
	switch status {
	case api.ManagedPending, api.ManagedSubmitted, api.ManagedStarting:
		return ux.Blue
	case api.ManagedRunning, api.ManagedSucceeded:
		return ux.Green
	case api.ManagedRecovering, api.ManagedWindingDown:
		return ux.Cyan
	case api.ManagedCancelling, api.ManagedCancelled:
		return ux.Yellow
	}
	if api.ManagedFailure(status) {
		return ux.Red
	}
	return ""
}

func (s *IOStreams) managedStatus(status string) string {
	if st := managedStatusStyle(status); st != "" {
		return s.style(st, status)
	}
	return status
}

// groupJobs splits the records (one per task, a job's tasks together)
// into jobs, keeping the server's order.
func groupJobs(recs []api.ManagedJobRecord) [][]api.ManagedJobRecord {
	var out [][]api.ManagedJobRecord
	for _, r := range recs {
		if n := len(out); n > 0 && out[n-1][0].JobID == r.JobID {
			out[n-1] = append(out[n-1], r)
			continue
		}
		out = append(out, []api.ManagedJobRecord{r})
	}
	return out
}

func countJobs(recs []api.ManagedJobRecord) int { return len(groupJobs(recs)) }

// humanDuration is an absolute duration as SkyPilot prints it: the
// non-zero units of days, hours, minutes and seconds ("1m 5s", "2h 3s"),
// "< 1s" below a second.
func humanDuration(d time.Duration) string {
	if d < time.Second {
		return "< 1s"
	}
	secs := int64(d / time.Second)
	parts := []string{}
	for _, u := range []struct {
		n    int64
		unit string
	}{{86400, "d"}, {3600, "h"}, {60, "m"}, {1, "s"}} {
		if v := secs / u.n; v > 0 {
			parts = append(parts, fmt.Sprintf("%d%s", v, u.unit))
			secs -= v * u.n
		}
	}
	return strings.Join(parts, " ")
}

// secondsCell is a duration in seconds, "-" when nothing ran yet.
func secondsCell(sec float64) string {
	if sec <= 0 {
		return "-"
	}
	return humanDuration(time.Duration(sec * float64(time.Second)))
}

func epochNow(now time.Time) float64 { return float64(now.Unix()) + float64(now.Nanosecond())/1e9 }

// spanCell is the time from start to end (now while not ended).
func spanCell(now time.Time, start float64, end *float64) string {
	if start <= 0 {
		return "-"
	}
	e := epochNow(now)
	if end != nil && *end > 0 {
		e = *end
	}
	return secondsCell(e - start)
}

func agoCell(now time.Time, epoch *float64) string {
	if epoch == nil || *epoch <= 0 {
		return "-"
	}
	return ago(now, *epoch)
}

func intCell(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

// progressCell is a batch job's progress, "-" for any other job.
func progressCell(r api.ManagedJobRecord) string {
	if !r.IsBatch || r.BatchTotalBatches == nil || *r.BatchTotalBatches <= 0 {
		return "-"
	}
	done := 0
	if r.BatchCompletedBatches != nil {
		done = *r.BatchCompletedBatches
	}
	return fmt.Sprintf("%d%% %d/%d", done*100 / *r.BatchTotalBatches, done, *r.BatchTotalBatches)
}

// eventsCell is the one-line summary of a job's timeline (beyond
// SkyPilot, whose timeline is not in its open CLI): how many events, the
// last one and when.
func eventsCell(now time.Time, ev *api.ManagedEventSummary) string {
	if ev == nil || ev.Count == 0 {
		return "-"
	}
	last := ev.Last.Status
	if r := strings.Join(strings.Fields(ev.Last.Reason), " "); r != "" {
		if last != "" {
			last += ": "
		}
		last += r
	}
	noun := "events"
	if ev.Count == 1 {
		noun = "event"
	}
	return fmt.Sprintf("%d %s, last %s (%s)", ev.Count, noun, last, ago(now, ev.Last.Timestamp))
}

// jobStatus is the status shown for a whole job: its first non-terminal
// task's, else its last task's; task is that task's id.
func jobStatus(tasks []api.ManagedJobRecord) (status string, taskID int) {
	for _, t := range tasks {
		if !api.ManagedTerminal(t.Status) {
			return t.Status, t.TaskID
		}
	}
	last := tasks[len(tasks)-1]
	return last.Status, last.TaskID
}

// inProgressLine is the summary above the table: the non-terminal tasks
// by status in enum order, from the server's count over every selected
// job (or from the rows when it gave none).
func inProgressLine(res api.JobsQueueResult) string {
	counts := res.InProgress
	if counts == nil {
		counts = map[string]int{}
		for _, r := range res.Jobs {
			if !api.ManagedTerminal(r.Status) {
				counts[r.Status]++
			}
		}
	}
	var parts []string
	for _, s := range api.ManagedStatuses {
		if n := counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(parts) == 0 {
		return "No in-progress managed jobs."
	}
	return "In progress tasks: " + strings.Join(parts, ", ")
}

// showWorkspace says whether the table needs a WORKSPACE column: only
// when some job is outside the default workspace.
func showWorkspace(recs []api.ManagedJobRecord) bool {
	for _, r := range recs {
		if r.Workspace != "" && r.Workspace != "default" {
			return true
		}
	}
	return false
}

// writeManagedJobs prints the summary line and, when there are rows, the
// table: a single-task job is one row; a pipeline or job group is a
// summary row followed by one row per task.
func writeManagedJobs(s *IOStreams, res api.JobsQueueResult, o managedTableOptions, now time.Time) error {
	fmt.Fprintln(s.Out, inProgressLine(res))
	if len(res.Jobs) == 0 {
		return nil
	}
	return managedTable(s, res.Jobs, o, now).render(s.Out)
}

func managedTable(s *IOStreams, recs []api.ManagedJobRecord, o managedTableOptions, now time.Time) *table {
	ws := showWorkspace(recs)
	headers := []string{"ID", "TASK"}
	if ws {
		headers = append(headers, "WORKSPACE")
	}
	headers = append(headers, "NAME")
	if o.AllUsers {
		headers = append(headers, "USER")
		if o.Verbose {
			headers = append(headers, "USER_ID")
		}
	}
	headers = append(headers, "REQUESTED", "SUBMITTED", "TOT. DURATION", "JOB DURATION", "#RECOVERIES", "STATUS", "PROGRESS", "POOL")
	if o.Verbose {
		headers = append(headers, "WORKER_CLUSTER", "WORKER_JOB_ID", "STARTED", "INFRA", "RESOURCES", "SCHED. STATE", "DETAILS", "GIT_COMMIT", "EVENTS")
	}
	tb := newTable(s.Bold, headers...)
	row := func(id, taskCell, workspace string, r api.ManagedJobRecord, name, requested, submitted, total, jobDur, recoveries, status, progress string, verbose []string) {
		cells := []string{id, taskCell}
		if ws {
			cells = append(cells, workspace)
		}
		cells = append(cells, name)
		if o.AllUsers {
			cells = append(cells, orDash(deref(r.UserName)))
			if o.Verbose {
				cells = append(cells, orDash(deref(r.UserHash)))
			}
		}
		cells = append(cells, requested, submitted, total, jobDur, recoveries, status, progress, orDash(deref(r.Pool)))
		if o.Verbose {
			cells = append(cells, verbose...)
		}
		tb.addRow(cells...)
	}
	for _, tasks := range groupJobs(recs) {
		first := tasks[0]
		multi := len(tasks) > 1
		if multi {
			submitted, end, ended := 0.0, 0.0, true
			jobDur, recoveries := 0.0, 0
			for _, t := range tasks {
				if t.SubmittedAt > 0 && (submitted == 0 || t.SubmittedAt < submitted) {
					submitted = t.SubmittedAt
				}
				if t.EndAt == nil || *t.EndAt <= 0 {
					ended = false
				} else if *t.EndAt > end {
					end = *t.EndAt
				}
				jobDur += t.JobDuration
				recoveries += t.RecoveryCount
			}
			var endp *float64
			if ended {
				endp = &end
			}
			st, cur := jobStatus(tasks)
			status := s.managedStatus(st)
			if !api.ManagedTerminal(st) {
				status += fmt.Sprintf(" (task: %d)", cur)
			}
			var verbose []string
			if o.Verbose {
				details := "-"
				for _, t := range tasks {
					if d := deref(t.Details); d != "" {
						details = d
						break
					}
				}
				verbose = []string{"-", "-", "-", "-", "-", orDash(deref(first.ScheduleState)), details, "-", eventsCell(now, first.Events)}
			}
			subCell := "-"
			if submitted > 0 {
				subCell = ago(now, submitted)
			}
			row(strconv.Itoa(first.JobID), "", first.Workspace, first, first.JobName, "-", subCell,
				spanCell(now, submitted, endp), secondsCell(jobDur), strconv.Itoa(recoveries), status, "-", verbose)
		}
		for _, t := range tasks {
			id, taskCell, workspace := strconv.Itoa(t.JobID), "-", t.Workspace
			name := t.TaskName
			if multi {
				id, taskCell, workspace = " ↳", strconv.Itoa(t.TaskID), "-"
			} else if name == "" {
				name = t.JobName
			}
			var verbose []string
			if o.Verbose {
				commit, _ := t.Metadata["git_commit"].(string)
				events := "-"
				if !multi {
					events = eventsCell(now, t.Events)
				}
				verbose = []string{orDash(deref(t.CurrentClusterName)), intCell(t.JobIDOnPoolCluster), agoCell(now, t.StartAt),
					orDash(deref(t.Infra)), orDash(deref(t.ClusterResources)), orDash(deref(t.ScheduleState)),
					orDash(deref(t.Details)), orDash(commit), events}
			}
			subCell := "-"
			if t.SubmittedAt > 0 {
				subCell = ago(now, t.SubmittedAt)
			}
			row(id, taskCell, workspace, t, orDash(name), orDash(t.Resources), subCell, spanCell(now, t.SubmittedAt, t.EndAt),
				secondsCell(t.JobDuration), strconv.Itoa(t.RecoveryCount), s.managedStatus(t.Status), progressCell(t), verbose)
		}
	}
	return tb
}

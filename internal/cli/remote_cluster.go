package cli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/check"
)

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func infraCell(r api.ClusterRecord) string {
	cloud := deref(r.Cloud)
	if cloud == "" {
		return "-"
	}
	if reg := strings.TrimPrefix(deref(r.Region), "ssh-"); reg != "" && !strings.EqualFold(reg, cloud) {
		return cloud + " (" + reg + ")"
	}
	return cloud
}

func autostopCell(min int, down bool) string {
	if min < 0 {
		return "-"
	}
	s := fmt.Sprintf("%dm", min)
	if min > 0 && min%60 == 0 {
		s = fmt.Sprintf("%dh", min/60)
	}
	if down {
		s += " (down)"
	}
	return s
}

func agoEpoch(now time.Time, epoch int64) string {
	if epoch == 0 {
		return "-"
	}
	return ago(now, float64(epoch))
}

func statusRunRemote(f *Factory, opts *StatusOptions) error {
	// SkyPilot lists in-progress managed jobs, then services, then pools
	// under the clusters, unless the command asked about particular
	// clusters. They are asked for at once, beside the clusters, as
	// SkyPilot's client does: one request after another, `sky status`
	// took four times as long as its slowest request on a busy server.
	var jobsSection, servicesSection, poolsSection func()
	if opts.Output != "json" && !opts.IP && !opts.Endpoints && opts.Endpoint == 0 && len(opts.Clusters) == 0 {
		if opts.ManagedJobs {
			jobsSection = inBackground(f, opts, statusManagedJobs)
		}
		if opts.Services {
			servicesSection = inBackground(f, opts, statusServices)
		}
		if opts.Pools {
			poolsSection = inBackground(f, opts, statusPools)
		}
	}
	var raw json.RawMessage
	body := api.ClustersBody{ClusterNames: opts.Clusters, AllUsers: opts.AllUsers, Refresh: opts.Refresh}
	if err := callOpJSON(f, apiop.Status, body, &raw, callOptions{}); err != nil {
		return err
	}
	var recs []json.RawMessage
	if err := json.Unmarshal(raw, &recs); err != nil {
		return err
	}
	rows := make([]api.ClusterRecord, len(recs))
	for i, raw := range recs {
		if err := json.Unmarshal(raw, &rows[i]); err != nil {
			return err
		}
	}
	if opts.IP || opts.Endpoints || opts.Endpoint != 0 {
		if len(rows) == 0 {
			return fmt.Errorf("cluster %s not found; run `sky status` to see your clusters", opts.Clusters[0])
		}
		if opts.IP {
			fmt.Fprintln(opts.IO.Out, rows[0].HeadIP)
			return nil
		}
		var eps map[string]string
		if err := callOp(f, apiop.Endpoints, api.EndpointsBody{Cluster: rows[0].Name, Port: opts.Endpoint}, &eps, callOptions{}); err != nil {
			return err
		}
		if opts.Endpoint != 0 {
			fmt.Fprintln(opts.IO.Out, eps[strconv.Itoa(opts.Endpoint)])
			return nil
		}
		ports := make([]int, 0, len(eps))
		for p := range eps {
			if n, err := strconv.Atoi(p); err == nil {
				ports = append(ports, n)
			}
		}
		sort.Ints(ports)
		for _, p := range ports {
			fmt.Fprintf(opts.IO.Out, "%d: %s\n", p, eps[strconv.Itoa(p)])
		}
		return nil
	}
	if opts.Output == "json" {
		if recs == nil {
			recs = []json.RawMessage{}
		}
		return printJSON(opts.IO.Out, recs)
	}
	if c, err := f.Client(); err == nil && c.Local {
		defer noteSkyPilotClusters(context.Background(), f)
	}
	for _, section := range []func(){poolsSection, servicesSection, jobsSection} { // deferred: printed last to first
		if section != nil {
			defer section()
		}
	}
	if len(rows) == 0 {
		fmt.Fprintln(opts.IO.Out, "No existing clusters.")
		return nil
	}
	headers := []string{"NAME"}
	if opts.AllUsers {
		headers = append(headers, "USER")
	}
	headers = append(headers, "INFRA", "RESOURCES", "STATUS", "AUTOSTOP", "LAUNCHED")
	if opts.Verbose {
		headers = append(headers, "HEAD_IP", "COMMAND", "LAST_EVENT")
	}
	tb := newTable(opts.IO.Bold, headers...)
	now := time.Now()
	for _, r := range rows {
		cells := []string{r.Name}
		if opts.AllUsers {
			cells = append(cells, r.UserName)
		}
		status := r.Status
		if r.Status == "INIT" && deref(r.LaunchStatusReason) != "" {
			status += " (" + deref(r.LaunchStatusReason) + ")"
		}
		cells = append(cells, infraCell(r), r.ResourcesStr, status, autostopCell(r.Autostop, r.ToDown), agoEpoch(now, r.LaunchedAt))
		if opts.Verbose {
			cells = append(cells, orDash(r.HeadIP), orDash(deref(r.LastUse)), orDash(deref(r.LastEvent)))
		}
		tb.addRow(cells...)
	}
	fmt.Fprintln(opts.IO.Out, opts.IO.Bold("Clusters"))
	return tb.render(opts.IO.Out)
}

// inBackground starts a section of `sky status` now, writing into a
// buffer, and returns a func that waits for it and prints what it wrote.
func inBackground(f *Factory, opts *StatusOptions, section func(*Factory, *StatusOptions)) func() {
	var buf bytes.Buffer
	io := *opts.IO
	io.Out = &buf
	o := *opts
	o.IO, o.background = &io, true
	done := make(chan struct{})
	go func() {
		defer close(done)
		section(f, &o)
	}()
	return func() {
		<-done
		_, _ = opts.IO.Out.Write(buf.Bytes())
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func costReportRunRemote(f *Factory, opts *CostReportOptions) error {
	recs := []api.CostRecord{}
	if err := callOp(f, apiop.CostReport, api.CostReportBody{Days: &opts.Days, All: opts.All}, &recs, callOptions{}); err != nil {
		return err
	}
	if opts.Output == "json" {
		if recs == nil {
			recs = []api.CostRecord{}
		}
		return printJSON(opts.IO.Out, recs)
	}
	tb := newTable(opts.IO.Bold, "NAME", "LAUNCHED", "DURATION", "RESOURCES", "STATUS", "COST/hr", "COST (est.)")
	total := 0.0
	now := time.Now()
	for i, r := range recs {
		total += r.TotalCost
		if i >= 5 && !opts.All {
			continue
		}
		tb.addRow(r.Name, agoEpoch(now, r.LaunchedAt), humanDuration(time.Duration(r.Duration)*time.Second), orDash(r.ResourcesStr),
			r.Status, fmt.Sprintf("$ %.2f", r.CostPerHour), fmt.Sprintf("$ %.2f", r.TotalCost))
	}
	if len(recs) == 0 {
		fmt.Fprintln(opts.IO.Out, "No clusters launched in the period.")
		return nil
	}
	if err := tb.render(opts.IO.Out); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "\nTotal cost: $%.2f\n", total)
	return nil
}

func queueRunRemote(f *Factory, opts *QueueOptions) error {
	var raw json.RawMessage
	b := api.ClustersBody{ClusterNames: opts.Clusters, AllUsers: opts.AllUsers, SkipFinished: opts.SkipFinished}
	if err := callOpJSON(f, apiop.Queue, b, &raw, callOptions{}); err != nil {
		return err
	}
	var out map[string][]json.RawMessage
	if err := json.Unmarshal(raw, &out); err != nil {
		return err
	}
	if opts.Output == "json" {
		if out == nil {
			out = map[string][]json.RawMessage{}
		}
		return printJSON(opts.IO.Out, out)
	}
	now := time.Now()
	for _, name := range sortedKeys(out) {
		who := "current user"
		if opts.AllUsers {
			who = "all users"
		}
		fmt.Fprintf(opts.IO.Out, "Job queue of %s on cluster %s\n", who, name)
		tb := newTable(opts.IO.Bold, "ID", "NAME", "USER", "SUBMITTED", "STARTED", "DURATION", "RESOURCES", "STATUS", "LOG", "GIT COMMIT")
		for _, raw := range out[name] {
			var j agentapi.Job
			if err := json.Unmarshal(raw, &j); err != nil {
				return err
			}
			started, dur := "-", "-"
			if j.StartAt != nil {
				started = ago(now, *j.StartAt)
				end := float64(now.UnixNano()) / 1e9
				if j.EndAt != nil {
					end = *j.EndAt
				}
				dur = humanDuration(time.Duration((end - *j.StartAt) * float64(time.Second)))
			}
			commit, _ := j.Metadata[agentapi.MetaGitCommit].(string)
			tb.addRow(fmt.Sprint(j.JobID), orDash(j.JobName), j.Username, ago(now, j.SubmittedAt), started, dur, j.Resources, string(j.Status), j.LogPath, orDash(commit))
		}
		if err := tb.render(opts.IO.Out); err != nil {
			return err
		}
		fmt.Fprintln(opts.IO.Out)
	}
	if len(out) == 0 {
		fmt.Fprintln(opts.IO.Out, "No UP clusters to show jobs of.")
	}
	return nil
}

func logsRunRemote(f *Factory, opts *LogsOptions) error {
	b := api.LogsBody{ClusterName: opts.Cluster, JobIDs: opts.JobIDs, Follow: opts.Follow, Tail: opts.Tail}
	if opts.Worker > 0 {
		w := opts.Worker
		b.Worker = &w
	}
	switch {
	case opts.Status:
		var st api.JobStatusResult
		if err := callOp(f, apiop.JobStatus, b, &st, callOptions{}); err != nil {
			return err
		}
		if st.Status == "" {
			if len(opts.JobIDs) > 0 {
				fmt.Fprintf(opts.IO.Out, "Job %d: None\n", opts.JobIDs[0])
				fmt.Fprintln(opts.IO.Out, opts.IO.Red(fmt.Sprintf("Job %d not found", opts.JobIDs[0])))
			} else {
				fmt.Fprintf(opts.IO.Out, "No job found on cluster '%s'.\n", opts.Cluster)
			}
			return &ExitError{Code: agentapi.ExitNotFound}
		}
		fmt.Fprintf(opts.IO.Out, "Job %d: %s\n", st.JobID, st.Status)
		return jobExit(st.Status)
	case opts.Hook != "":
		if opts.Hook != hookAuto {
			b.Hook = opts.Hook
		}
		return sendOp(f, apiop.HookLogs, b, callOptions{Stream: true, CancelOnStop: true})
	case opts.SyncDown:
		return syncDownLogs(f, opts)
	case opts.Provision:
		return provisionLog(f, opts)
	}
	var st api.JobStatusResult
	if err := callOp(f, apiop.Logs, b, &st, callOptions{Stream: true, CancelOnStop: true}); err != nil {
		return err
	}
	if st.Status == "" {
		return &ExitError{Code: agentapi.ExitNotFound} // the stream said which job
	}
	if !opts.Follow && !agentapi.Status(st.Status).Terminal() {
		return nil
	}
	return jobExit(st.Status)
}

// cancelWhat names what `sky cancel` cancels, in SkyPilot's words.
func cancelWhat(opts *CancelOptions) string {
	switch {
	case opts.AllUsers:
		return "all users' jobs"
	case opts.All:
		return "all your jobs"
	case len(opts.JobIDs) == 1:
		return fmt.Sprintf("job %d", opts.JobIDs[0])
	case len(opts.JobIDs) > 1:
		ids := make([]string, len(opts.JobIDs))
		for i, id := range opts.JobIDs {
			ids[i] = fmt.Sprint(id)
		}
		return "jobs " + strings.Join(ids, " ")
	}
	return "the latest running job"
}

func cancelRunRemote(f *Factory, opts *CancelOptions) error {
	b := api.CancelBody{ClusterName: opts.Cluster, JobIDs: opts.JobIDs, All: opts.All || opts.AllUsers, AllUsers: opts.AllUsers}
	latest := len(b.JobIDs) == 0 && !b.All
	if latest {
		fmt.Fprintln(opts.IO.Out, "No job IDs or --all/--all-users provided; cancelling the latest running job.")
	}
	if err := opts.IO.Confirm(fmt.Sprintf("Cancelling %s on cluster(s): %s. Proceed?", cancelWhat(opts), opts.Cluster), opts.Yes); err != nil {
		return err
	}
	// SkyPilot treats a cluster that is not there as a mistake in the
	// command line (exit 2), not as a failure of the cancel.
	missing := func(err error) error {
		if errorType(err) == "ClusterDoesNotExist" {
			return flagErrorf("Cluster '%s' does not exist.", opts.Cluster)
		}
		return err
	}
	if latest {
		var st api.JobStatusResult
		if err := callOp(f, apiop.JobStatus, api.LogsBody{ClusterName: opts.Cluster}, &st, callOptions{}); err != nil {
			return missing(err)
		}
		if st.JobID == 0 {
			fmt.Fprintln(opts.IO.Out, "No jobs cancelled. They may be in terminal states.")
			return nil
		}
		b.JobIDs = []int{st.JobID}
	}
	var res agentapi.CancelResult
	if err := callOp(f, apiop.Cancel, b, &res, callOptions{Async: opts.Async}); err != nil {
		return missing(err)
	}
	if opts.Async {
		return nil
	}
	if len(res.Cancelled) == 0 {
		fmt.Fprintln(opts.IO.Out, "No jobs cancelled. They may be in terminal states.")
		return nil
	}
	ids := make([]string, len(res.Cancelled))
	for i, id := range res.Cancelled {
		ids[i] = fmt.Sprint(id)
	}
	fmt.Fprintf(opts.IO.Out, "Cancelled job ID(s): %s\n", strings.Join(ids, ", "))
	return nil
}

func checkRunRemote(f *Factory, opts *CheckOptions) error {
	var res []check.Result
	if err := callOp(f, apiop.Check, api.CheckBody{Infras: opts.Infras, Verbose: opts.Verbose}, &res, callOptions{}); err != nil {
		return err
	}
	if opts.Output == "json" {
		return printJSON(opts.IO.Out, check.JSON(cmp.Or(opts.Workspace, "default"), res))
	}
	writeCheck(opts, res)
	if c, err := f.Client(); err == nil {
		fmt.Fprintf(opts.IO.Out, "\nUsing SkyPilot API server: %s\n", c.Endpoint)
	}
	return nil
}

// writeCheck prints `sky check` as SkyPilot does: one entry per infra with
// why (and with -v the account, project or hosts it uses),
// then the enabled-infra block and, when some are disabled, the hint.
func writeCheck(opts *CheckOptions, res []check.Result) {
	w := opts.IO.Out
	fmt.Fprintln(w, "Checking credentials to enable infra for SkyPilot.")
	var enabled []check.Result
	anyDisabled := false
	for _, r := range res {
		if r.Enabled {
			enabled = append(enabled, r)
			fmt.Fprintf(w, "  %s: %s\n", r.Infra, opts.IO.Green("enabled "+capList(r.Capabilities)))
			if r.Reason != "" {
				fmt.Fprintf(w, "    %s\n", r.Reason)
			}
		} else {
			anyDisabled = true
			fmt.Fprintf(w, "  %s: disabled\n", r.Infra)
			if r.Reason != "" {
				fmt.Fprintf(w, "    Reason: %s\n", r.Reason)
			}
		}
		for _, warn := range r.Warnings {
			fmt.Fprintf(w, "    %s %s\n", opts.IO.Yellow("Warning:"), warn)
		}
		if opts.Verbose {
			// -v: the account, project or hosts each infra would use.
			for _, d := range r.Details {
				fmt.Fprintf(w, "    %s\n", d)
			}
		}
	}
	if anyDisabled {
		fmt.Fprintln(w, "\nTo enable a cloud, follow the hints above and rerun: sky check")
		fmt.Fprintln(w, "If any problems remain, refer to detailed docs at: https://docs.skypilot.co/en/latest/getting-started/installation.html")
	}
	fmt.Fprintln(w)
	if len(enabled) == 0 {
		fmt.Fprintln(w, "No infra is enabled. SkyPilot will not be able to run any task. Run `sky check` for more info.")
		return
	}
	fmt.Fprintln(w, "🎉 Enabled infra 🎉")
	for _, r := range enabled {
		fmt.Fprintf(w, "  %s %s\n", r.Infra, capList(r.Capabilities))
	}
}

// capList is "[compute, storage]".
func capList(caps []string) string {
	if len(caps) == 0 {
		return "[compute]"
	}
	return "[" + strings.Join(caps, ", ") + "]"
}

func gpusListRunRemote(f *Factory, opts *GpusListOptions) error {
	name, count := opts.Accelerator, 0.0
	if name != "" {
		var n float64
		if i := strings.LastIndex(name, ":"); i > 0 {
			if _, err := fmt.Sscanf(name[i+1:], "%g", &n); err != nil || n <= 0 {
				return flagErrorf("invalid accelerator %q: want NAME or NAME:COUNT with a positive COUNT", name)
			}
			name, count = name[:i], n
		}
	}
	infra := opts.Infra
	if opts.Region != "" && opts.Cloud == "" {
		return flagErrorf("--region needs --cloud (or give both as --infra CLOUD/REGION)")
	}
	if infra == "" && opts.Cloud != "" {
		infra = opts.Cloud
		if opts.Region != "" {
			infra += "/" + opts.Region
		}
	}
	var res api.GPUsResult
	b := api.GPUsBody{Name: name, Count: count, All: opts.All, Infra: infra, AllRegions: opts.AllRegions,
		Verbose: opts.Verbose, EnvVars: api.ClientEnv()}
	if err := callOp(f, apiop.ListAccelerators, b, &res, callOptions{}); err != nil {
		return err
	}
	if opts.Output == "json" {
		// The result travels compacted; print it 2-space indented, as
		// SkyPilot's CLI does.
		var buf bytes.Buffer
		if err := json.Indent(&buf, res.JSON, "", "  "); err != nil {
			return fmt.Errorf("server sent invalid JSON for gpus list: %w", err)
		}
		buf.WriteByte('\n')
		_, err := opts.IO.Out.Write(buf.Bytes())
		return err
	}
	_, err := fmt.Fprint(opts.IO.Out, res.Table)
	return err
}

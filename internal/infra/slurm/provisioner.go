package slurm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/infra/ssh"
	"github.com/skygo/skygo/internal/provision"
)

// Provisioner implements provision.Provisioner for the Slurm clusters of
// ~/.slurm/config: a SkyGo cluster is one sbatch allocation named after
// it, holding its nodes with `sleep infinity` until `sky down` cancels it.
// Every step is idempotent: a Provision cut off after sbatch finds the job
// by name and waits for it instead of submitting another.
type Provisioner struct {
	in        *Infra
	cluster   string // Host alias of ~/.slurm/config ("" = from the spec)
	partition string
}

// Meta keys of a Slurm cluster's ClusterInfo.
const (
	metaJob     = "slurm_job"
	metaCluster = "slurm_cluster"
	metaBase    = "slurm_base"
	metaJobName = "slurm_job_name"
)

// pollEvery is how often a pending allocation is looked at (the spec's
// SkyPilot polls every 2 s; a launch waiting on a free partition then
// starts up to a second sooner).
const pollEvery = time.Second

// JobName is a cluster's Slurm job name: the cluster name and a hash of
// the server (its home and host), so that two SkyGo servers of one Slurm
// user never adopt each other's allocations.
func (in *Infra) JobName(cluster string) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(in.env.Home + "\x00" + host))
	name := cluster + "-" + hex.EncodeToString(sum[:])[:8]
	if len(name) > 120 {
		name = name[:120]
	}
	return name
}

func (p *Provisioner) where(cluster, partition string) string {
	w := Kind
	if cluster != "" {
		w += "/" + cluster
		if partition != "" {
			w += "/" + partition
		}
	}
	return w
}

// Provision implements provision.Provisioner.
func (p *Provisioner) Provision(ctx context.Context, spec provision.ClusterSpec) (*provision.ClusterInfo, error) {
	cluster, partition := p.cluster, p.partition
	if spec.Region != "" {
		cluster = spec.Region
	}
	if spec.Zone != "" {
		partition = spec.Zone
	}
	if cluster == "" {
		if partition != "" {
			return nil, &provision.ConfigError{Where: Kind, Msg: "Cannot specify partition (zone) without specifying cluster (region) for Slurm."}
		}
		return nil, &provision.ConfigError{Where: Kind, Msg: "no Slurm cluster named; use infra: slurm/<cluster> with a Host of ~/.slurm/config"}
	}
	log := spec.Log
	if log == nil {
		log = io.Discard
	}
	login, err := p.in.login(cluster)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(spec.ImageID, "docker:") {
		return nil, p.containerError(ctx, login, cluster, spec.ImageID)
	}
	parts, nodes, selectMem, err := p.in.inventoryOf(ctx, cluster, false)
	if err != nil {
		return nil, err
	}
	part, err := pickPartition(parts, partition, cluster)
	if err != nil {
		return nil, err
	}
	partition = part.Name
	where := p.where(cluster, partition)
	cfg, err := p.in.serverConfig()
	if err != nil {
		return nil, &provision.ConfigError{Where: where, Err: err}
	}
	settings, err := ResolveSettings(cfg, cluster, partition, spec.Config)
	if err != nil {
		return nil, &provision.ConfigError{Where: where, Err: err}
	}
	for _, w := range settings.Warnings {
		fmt.Fprintln(log, "Warning: "+w)
	}
	req := Request{CPUs: spec.Resources.CPUs, MemoryGB: spec.Resources.MemoryGB}
	for name, n := range spec.Resources.GPUs {
		req.GPU, req.GPUCount = name, int(math.Ceil(n))
	}
	req, warn := DefaultSizesOnCluster(req, selectMem, cluster)
	if warn != "" {
		fmt.Fprintln(log, "Warning: "+warn)
	}
	fitting, gres, reason := Fit(nodes, partition, req, settings)
	if len(fitting) < max(spec.NumNodes, 1) {
		if reason == "" {
			reason = fmt.Sprintf("%d node(s) of partition %s fit the request, %d needed", len(fitting), partition, spec.NumNodes)
		}
		p.in.forget(cluster)
		return nil, &provision.CapacityError{Where: where, Msg: reason}
	}

	jobName := p.in.JobName(spec.Name)
	jobID, state, err := p.findJob(ctx, login, jobName)
	if err != nil {
		return nil, err
	}
	if state == "COMPLETING" {
		if err := p.waitCompleting(ctx, login, jobName); err != nil {
			return nil, err
		}
		jobID = ""
	}
	base, err := p.baseDir(ctx, login, settings)
	if err != nil {
		return nil, err
	}
	rt := NodeRuntimeDir(settings.Tmpdir, jobName)
	script := Script{JobName: jobName, Partition: partition, Base: base, RuntimeDir: rt, NumNodes: max(spec.NumNodes, 1),
		CPUsPerTask: int(math.Ceil(req.CPUs)), MemMB: int(math.Round(req.MemoryGB * 1024)), Gres: gres, Options: settings.SbatchOptions,
		Sky: SkyPath(base)}
	if _, ok := settings.SbatchOptions["time"]; !ok {
		t, warn := PartitionTime(part)
		script.Time = t
		if warn != "" {
			fmt.Fprintln(log, "Warning: "+warn)
		}
	}
	if jobID == "" {
		jobID, err = p.submit(ctx, login, script)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "Submitted Slurm job %s (%s) to partition %s of %s.\n", jobID, jobName, partition, cluster)
	} else {
		fmt.Fprintf(log, "Reusing Slurm job %s (%s).\n", jobID, jobName)
	}
	timeout, forever := settings.ProvisionWait(spec.ZoneRequested)
	if forever {
		timeout = -1
	}
	hosts, err := p.waitNodes(ctx, login, jobID, partition, timeout, spec.Progress)
	if err != nil {
		var capErr *provision.CapacityError
		if errors.As(err, &capErr) {
			// Failover: the allocation must not linger in the queue.
			_, _ = loginCommand(context.WithoutCancel(ctx), login, "scancel "+provision.Quote(jobID))
			capErr.Where = where
		}
		return nil, err
	}
	if err := p.waitReady(ctx, login, jobID, script); err != nil {
		return nil, err
	}
	addrs, err := p.nodeAddrs(ctx, login, hosts)
	if err != nil {
		return nil, err
	}
	info := &provision.ClusterInfo{Name: spec.Name, Cloud: CloudName, Region: cluster, Zone: partition,
		Meta: map[string]string{metaJob: jobID, metaCluster: cluster, metaBase: base, metaJobName: jobName}}
	var gpus map[string]float64
	if req.GPU != "" {
		gpus = map[string]float64{req.GPU: float64(req.GPUCount)}
	}
	for i, h := range hosts {
		info.Nodes = append(info.Nodes, provision.NodeInfo{Index: i, ID: "job" + jobID + "-" + h, InternalIP: addrs[h],
			ExternalIP: login.Endpoint().Addr, Home: rt, CPUs: float64(script.CPUsPerTask), MemoryGB: req.MemoryGB, GPUs: gpus})
	}
	return info, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// pickPartition is the named partition, or the default (first) one.
func pickPartition(parts []Partition, name, cluster string) (Partition, error) {
	if len(parts) == 0 {
		return Partition{}, &provision.CapacityError{Where: Kind + "/" + cluster, Msg: "the cluster has no partitions"}
	}
	pick := func(p Partition) (Partition, error) {
		if msg := p.Unavailable(cluster); msg != "" {
			return Partition{}, &provision.CapacityError{Where: Kind + "/" + cluster + "/" + p.Name, Msg: msg}
		}
		return p, nil
	}
	if name == "" {
		return pick(parts[0])
	}
	var names []string
	for _, p := range parts {
		if p.Name == name {
			return pick(p)
		}
		names = append(names, p.Name)
	}
	return Partition{}, &provision.ConfigError{Where: Kind + "/" + cluster + "/" + name,
		Msg: fmt.Sprintf("Slurm cluster %s has no partition %q (partitions: %s)", cluster, name, strings.Join(names, ", "))}
}

// containerError explains why a docker image cannot run: Pyxis is what
// runs containers on Slurm, and SkyGo does not drive it yet.
func (p *Provisioner) containerError(ctx context.Context, login *ssh.Runner, cluster, image string) error {
	out, _ := loginCommand(ctx, login, "srun --help 2>&1 | grep -c -i pyxis || true")
	if strings.TrimSpace(out) == "0" || strings.TrimSpace(out) == "" {
		return &provision.ConfigError{Where: Kind + "/" + cluster, Msg: fmt.Sprintf(
			"image_id %s needs the Pyxis plugin on Slurm cluster %s, and srun there has none; install commands in setup instead of using a container image", image, cluster)}
	}
	return &provision.NotSupportedError{Where: Kind + "/" + cluster, Operation: "container images",
		Msg: "Slurm cluster " + cluster + " has Pyxis, but this build of SkyGo does not run Pyxis containers yet; install commands in setup instead"}
}

// findJob is the live job named name of the login user, if any.
func (p *Provisioner) findJob(ctx context.Context, login *ssh.Runner, name string) (id, state string, err error) {
	out, err := loginCommand(ctx, login, "squeue --me -h --name "+provision.Quote(name)+` -o "%i|%T"`)
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		i, st, ok := strings.Cut(strings.TrimSpace(line), "|")
		if !ok {
			continue
		}
		switch st {
		case "PENDING", "RUNNING", "CONFIGURING":
			return i, st, nil
		case "COMPLETING":
			state = st
		}
	}
	return "", state, nil
}

// waitCompleting waits (up to 60 s, as SkyPilot) for a previous
// allocation of the same name to finish completing.
func (p *Provisioner) waitCompleting(ctx context.Context, login *ssh.Runner, name string) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		_, st, err := p.findJob(ctx, login, name)
		if err != nil {
			return err
		}
		if st != "COMPLETING" {
			return nil
		}
		if err := sleepCtx(ctx, 2*time.Second); err != nil {
			return err
		}
	}
	return slurmError(fmt.Sprintf("the previous allocation %s is still in completing state after 60 s; try again later", name))
}

// baseDir is the shared directory holding the cluster's files: the
// configured workdir (variables expanded by the login node's shell) or
// the login user's home. It must be absolute.
func (p *Provisioner) baseDir(ctx context.Context, login *ssh.Runner, s Settings) (string, error) {
	if s.Workdir == "" {
		home, err := login.FetchHome(ctx)
		if err != nil {
			return "", err
		}
		return home, nil
	}
	out, err := loginCommand(ctx, login, `eval "printf '%s' \"`+strings.ReplaceAll(s.Workdir, `"`, `\"`)+`\""`)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(out)
	if !strings.HasPrefix(dir, "/") {
		return "", &provision.ConfigError{Where: Kind, Msg: fmt.Sprintf("slurm workdir %q is %q on the login node, which is not an absolute path", s.Workdir, dir)}
	}
	return strings.TrimSuffix(dir, "/"), nil
}

// submit writes the script to the shared filesystem and sbatches it.
func (p *Provisioner) submit(ctx context.Context, login *ssh.Runner, s Script) (string, error) {
	path := s.Base + "/.sky_provision/" + s.JobName + ".sh"
	if err := login.UploadReader(ctx, strings.NewReader(s.Render()), path, 0o700); err != nil {
		return "", err
	}
	out, err := loginCommand(ctx, login, "sbatch --partition="+provision.Quote(s.Partition)+" "+provision.Quote(path))
	if err != nil {
		return "", classifySbatch(err)
	}
	id, err := ParseJobID(out)
	if err != nil {
		return "", slurmError(err.Error())
	}
	return id, nil
}

// classifySbatch turns sbatch's refusals that mean "not here" into
// capacity errors the failover loop moves past.
func classifySbatch(err error) error {
	msg := err.Error()
	for _, s := range []string{"Requested node configuration is not available", "More processors requested than permitted",
		"Node count specification invalid", "Invalid generic resource", "Memory required by task is not available",
		"Requested partition configuration not available", "QOSMax", "AssocMax", "Job violates accounting/QOS policy"} {
		if strings.Contains(msg, s) {
			return &provision.CapacityError{Where: Kind, Msg: msg}
		}
	}
	return slurmError(msg)
}

// waitNodes waits until the job has its nodes and returns their names in
// the allocation's order (the first is the head). A pending job is
// reported through progress whenever its reason changes.
func (p *Provisioner) waitNodes(ctx context.Context, login *ssh.Runner, jobID, partition string, timeout time.Duration, progress func(string)) ([]string, error) {
	start := time.Now()
	last := ""
	report := func(s string) {
		if s != last && progress != nil {
			progress(s)
		}
		last = s
	}
	lastReason := "None"
	for {
		out, err := loginCommand(ctx, login, "squeue -h -j "+provision.Quote(jobID)+` -o "%T|%r|%N" 2>/dev/null || true`)
		if err != nil {
			return nil, err
		}
		st, reason, nodelist := "", "", ""
		if f := strings.SplitN(strings.TrimSpace(out), "|", 3); len(f) == 3 {
			st, reason, nodelist = f[0], f[1], f[2]
		}
		switch st {
		case "RUNNING", "CONFIGURING":
			if nodelist != "" && !strings.EqualFold(nodelist, "(null)") {
				report(fmt.Sprintf("Launching (nodes allocated; Slurm job %s)", jobID))
				return p.expandHosts(ctx, login, nodelist)
			}
		case "PENDING":
			lastReason = reason
			if reason == "" || reason == "None" {
				report(fmt.Sprintf("Launching (pending; partition: %s)", partition))
			} else {
				report(fmt.Sprintf("Launching (pending: %s; partition: %s)", reason, partition))
			}
		case "":
			return nil, slurmError(fmt.Sprintf("Slurm job %s vanished from the queue before it got nodes", jobID))
		default:
			return nil, slurmError(fmt.Sprintf("Slurm job %s ended (%s, reason %s) before it got nodes", jobID, st, reason))
		}
		if timeout >= 0 && time.Since(start) > timeout {
			return nil, &provision.CapacityError{Where: Kind, Msg: fmt.Sprintf(
				"Slurm job %s still pending after %s in partition %s (reason: %s)", jobID, timeout.Round(time.Second), partition, lastReason)}
		}
		if err := sleepCtx(ctx, pollEvery); err != nil {
			return nil, err
		}
	}
}

// expandHosts is `scontrol show hostnames` of a nodelist expression.
func (p *Provisioner) expandHosts(ctx context.Context, login *ssh.Runner, nodelist string) ([]string, error) {
	out, err := loginCommand(ctx, login, "scontrol show hostnames "+provision.Quote(nodelist))
	if err != nil {
		return nil, err
	}
	hosts := strings.Fields(out)
	if len(hosts) == 0 {
		return nil, slurmError("scontrol show hostnames " + nodelist + " printed nothing")
	}
	return hosts, nil
}

// waitReady waits for the script's ready marker. The job leaving the
// running states first is an error showing the end of its output.
func (p *Provisioner) waitReady(ctx context.Context, login *ssh.Runner, jobID string, s Script) error {
	ready := s.ReadyFile()
	logFile := s.Base + "/.sky_provision/slurm-" + jobID + ".out"
	cmd := fmt.Sprintf(`for i in $(seq 1 600); do [ "$(cat %s 2>/dev/null)" = %s ] && exit 0; st=$(squeue -h -j %s -o %%T 2>/dev/null); case "$st" in RUNNING|CONFIGURING|PENDING) ;; *) echo "state ${st:-gone}"; tail -n 20 %s 2>/dev/null; exit 3;; esac; sleep 0.2; done; exit 4`,
		provision.Quote(ready), provision.Quote(jobID), provision.Quote(jobID), provision.Quote(logFile))
	for {
		res, err := login.Run(ctx, cmd, provision.RunOptions{})
		if err != nil {
			return err
		}
		switch res.ExitCode {
		case 0:
			return nil
		case 4:
			continue // two minutes passed: look again
		default:
			return slurmError(fmt.Sprintf("Slurm job %s ended before its nodes were ready: %s", jobID, strings.TrimSpace(string(res.Stdout))))
		}
	}
}

// nodeAddrs maps each node to its NodeAddr, resolved on the login node
// when it is a host name.
func (p *Provisioner) nodeAddrs(ctx context.Context, login *ssh.Runner, hosts []string) (map[string]string, error) {
	out, err := loginCommand(ctx, login, "scontrol show node -o "+provision.Quote(strings.Join(hosts, ",")))
	if err != nil {
		return nil, err
	}
	addrs := ParseNodeAddrs(out)
	for _, h := range hosts {
		a := addrs[h]
		if a == "" {
			a = h
		}
		if !isIPv4(a) {
			res, err := loginCommand(ctx, login, "getent ahostsv4 "+provision.Quote(a)+" | head -n1")
			if err == nil {
				if f := strings.Fields(res); len(f) > 0 && isIPv4(f[0]) {
					a = f[0]
				}
			}
		}
		addrs[h] = a
	}
	return addrs, nil
}

func isIPv4(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 255 {
			return false
		}
	}
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Stop implements provision.Provisioner: an allocation cannot be stopped.
func (p *Provisioner) Stop(context.Context, string) error {
	return &provision.NotSupportedError{Where: Kind, Operation: "stop", Msg: p.in.CannotStop()}
}

// Start implements provision.Provisioner.
func (p *Provisioner) Start(context.Context, string) (*provision.ClusterInfo, error) {
	return nil, &provision.NotSupportedError{Where: Kind, Operation: "start", Msg: p.in.CannotStop()}
}

// loginFor is the login node of the Slurm cluster this provisioner (the
// cluster's recorded infra ID) serves.
func (p *Provisioner) loginFor(name string) (*ssh.Runner, error) {
	if p.cluster == "" {
		return nil, &provision.ConfigError{Where: Kind, Msg: "cluster " + name + ": no Slurm cluster recorded"}
	}
	return p.in.login(p.cluster)
}

// jobStates are the live jobs named name: id -> state, and node counts.
func (p *Provisioner) jobStates(ctx context.Context, login *ssh.Runner, jobName string) (map[string]string, map[string]int, error) {
	out, err := loginCommand(ctx, login, "squeue --me -h --name "+provision.Quote(jobName)+` -o "%i|%T|%D"`)
	if err != nil {
		return nil, nil, err
	}
	states, counts := map[string]string{}, map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 3 {
			continue
		}
		states[f[0]] = f[1]
		counts[f[0]], _ = strconv.Atoi(f[2])
	}
	return states, counts, nil
}

// Terminate implements provision.Provisioner: every process the
// allocation's steps left on its nodes is killed (processes that left
// their step are not tracked by every proctrack plugin), then the job is
// cancelled as the spec says: a pending one outright, a running one with
// TERM to the batch script, whose EXIT trap removes the nodes' files.
func (p *Provisioner) Terminate(ctx context.Context, name string) error {
	login, err := p.loginFor(name)
	if err != nil {
		return err
	}
	jobName := p.in.JobName(name)
	states, counts, err := p.jobStates(ctx, login, jobName)
	if err != nil {
		return err
	}
	ids := slices.Sorted(maps.Keys(states))
	cfg, err := p.in.serverConfig()
	if err != nil {
		return err
	}
	settings, err := ResolveSettings(cfg, p.cluster, p.partition, nil)
	if err != nil {
		return err
	}
	home := NodeRuntimeDir(settings.Tmpdir, jobName)
	for _, id := range ids {
		switch states[id] {
		case "PENDING", "CONFIGURING":
			if _, err := loginCommand(ctx, login, "scancel "+provision.Quote(id)); err != nil && !strings.Contains(err.Error(), "Invalid job id") {
				return err
			}
		case "RUNNING":
			p.killSteps(ctx, login, id, counts[id], home)
			if _, err := loginCommand(ctx, login, "scancel --signal=TERM --full "+provision.Quote(id)); err != nil && !strings.Contains(err.Error(), "Invalid job id") {
				return err
			}
		}
	}
	// Wait (bounded) for the jobs to leave the queue's running states, so
	// that a relaunch right after does not find them completing.
	deadline := time.Now().Add(30 * time.Second)
	for len(ids) > 0 && time.Now().Before(deadline) {
		states, _, err = p.jobStates(ctx, login, jobName)
		if err != nil {
			return err
		}
		live := false
		for _, st := range states {
			if st == "RUNNING" || st == "PENDING" || st == "CONFIGURING" {
				live = true
			}
		}
		if !live {
			break
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// killSteps kills, on every node of job, the processes SkyGo started
// there: every command reaches a node with HOME set to the node's runtime
// directory, so its agent, ranks and their children all carry that HOME.
// The batch script does not, and is left to end on the TERM that follows,
// running its cleanup.
func (p *Provisioner) killSteps(ctx context.Context, login *ssh.Runner, jobID string, nodes int, home string) {
	cmd := provision.Join("srun", "--overlap", "--jobid="+jobID, fmt.Sprintf("--nodes=%d", max(nodes, 1)), "--ntasks-per-node=1", "--quiet",
		"bash", "-c", KillHomeProcsScript(home)) + " 2>/dev/null || true"
	_, _ = loginCommand(ctx, login, cmd)
}

// KillHomeProcsScript is a bash snippet killing this user's processes
// whose environment has HOME=home, except the snippet's own ancestry.
func KillHomeProcsScript(home string) string {
	return `me=$$; anc=" $me "; p=$me; while [ "$p" -gt 1 ]; do p=$(awk '{print $4}' /proc/$p/stat 2>/dev/null || echo 1); anc="$anc$p "; done; ` +
		`for d in /proc/[0-9]*; do pid=${d#/proc/}; case "$anc" in *" $pid "*) continue;; esac; ` +
		`[ -O "$d" ] || continue; tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF ` + provision.Quote("HOME="+home) + ` && kill -9 "$pid" 2>/dev/null; done; true`
}

// Query implements provision.Provisioner: one state per node of the
// cluster's live allocation; none when it is gone (finished jobs leave
// squeue after MinJobAge, and are gone for SkyGo as soon as they finish).
func (p *Provisioner) Query(ctx context.Context, name string) ([]provision.NodeState, error) {
	login, err := p.loginFor(name)
	if err != nil {
		return nil, err
	}
	states, counts, err := p.jobStates(ctx, login, p.in.JobName(name))
	if err != nil {
		return nil, err
	}
	ids := slices.Sorted(maps.Keys(states))
	sort.Sort(sort.Reverse(sort.StringSlice(ids)))
	for _, id := range ids {
		var st provision.NodeStatus
		switch states[id] {
		case "PENDING", "CONFIGURING":
			st = provision.NodePending
		case "RUNNING", "COMPLETING":
			st = provision.NodeUp
		default:
			continue
		}
		n := max(counts[id], 1)
		out := make([]provision.NodeState, n)
		for i := range out {
			out[i] = provision.NodeState{Index: i, ID: "job" + id, Status: st}
		}
		return out, nil
	}
	return nil, nil
}

// Runners implements provision.Provisioner.
func (p *Provisioner) Runners(info *provision.ClusterInfo) ([]provision.CommandRunner, error) {
	if info == nil || len(info.Nodes) == 0 {
		return nil, &provision.ConfigError{Where: Kind, Msg: "cluster has no nodes"}
	}
	cluster := firstNonEmpty(info.Meta[metaCluster], info.Region, p.cluster)
	job, base, jobName := info.Meta[metaJob], info.Meta[metaBase], info.Meta[metaJobName]
	if job == "" || base == "" || jobName == "" {
		return nil, &provision.ConfigError{Where: Kind + "/" + cluster, Msg: "cluster " + info.Name + " has no Slurm allocation recorded"}
	}
	login, err := p.in.login(cluster)
	if err != nil {
		return nil, err
	}
	kh := p.in.sshDialer().KnownHosts
	sky := SkyPath(base)
	out := make([]provision.CommandRunner, len(info.Nodes))
	for i, n := range info.Nodes {
		node := strings.TrimPrefix(n.ID, "job"+job+"-")
		r := NewRunner(login, kh, job, node, n.InternalIP, n.Home, sky)
		r.jobEnv = ClusterHome(base, jobName) + "/" + JobEnvFileName
		out[i] = r
	}
	return out, nil
}

// slurmError is an error of the Slurm infrastructure that is neither a
// capacity nor a configuration problem.
func slurmError(msg string) error { return errors.New("slurm: " + msg) }

// SkyPath is where bootstrap puts the node runtime on the shared
// filesystem (the login node's architecture: a cluster's compute nodes
// are taken to share it).
func SkyPath(base string) string { return base + "/" + strings.TrimPrefix(infra.BinaryPath, "~/") }

// ClusterHome is the cluster's directory on the shared filesystem.
func ClusterHome(base, jobName string) string { return base + "/.sky_clusters/" + jobName }

// JobEnvFileName, in ClusterHome, is the batch script's job-scoped SLURM_*
// variables; bootstrap copies it into every node's home
// (slurmnode.JobEnvFile).
const JobEnvFileName = "slurm_job.env"

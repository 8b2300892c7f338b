package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// daemon is the head node's long-lived agent: it owns the job table,
// schedules, drives jobs and runs the autostop loop.
type daemon struct {
	p       paths
	cfg     *agentapi.Config
	st      *store
	log     *slog.Logger
	runners []NodeRunner // nil for this node
	started time.Time

	mu           sync.Mutex
	free         []NodeFree
	capacity     []NodeFree
	queue        []*jobRow
	running      map[int]*runningJob
	lastActivity time.Time
	lastTS       time.Time
	autostop     autostopState
	sshSessions  int // open SSH session channels (autostop's jobs_and_ssh)

	wake     chan struct{}
	ctx      context.Context
	stop     context.CancelFunc
	wg       sync.WaitGroup
	listener net.Listener
	ssh      sshServer
	// orphaned is set once the node's directory was removed under the
	// daemon (watchLock): its socket and pid file paths are no longer its.
	orphaned atomic.Bool
}

// runningJob is the in-memory handle of a job the daemon is driving.
type runningJob struct {
	row    *jobRow
	demand Demand
	place  Placement
	// startAt is taken when the scheduler decides, in queue order, so
	// start times follow submission order.
	startAt time.Time

	mu        sync.Mutex
	cancelled bool
	reason    agentapi.Status // CANCELLED or FAILED_DRIVER when stopped from outside
	killers   []func()
	done      chan struct{}
}

// runDaemon is `sky agent daemon`; it returns when the daemon stops.
func runDaemon() error {
	home, err := homeDir()
	if err != nil {
		return err
	}
	p := paths{home}
	// `sky agent start` makes the directory (and the config) before it
	// starts a daemon. A daemon that finds none was started for a node
	// torn down meanwhile, and must not make the node's files again.
	if fi, err := os.Stat(p.dir()); err != nil || !fi.IsDir() {
		return fmt.Errorf("no agent directory %s (the node was removed?); `sky agent start` makes it", p.dir())
	}
	lock, err := os.OpenFile(p.lockFile(), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("another agent daemon holds %s", p.lockFile())
	}
	cfg, err := loadConfig(p)
	if err != nil {
		return err
	}
	// Ranks and SSH sessions inherit the open-files limit a SkyPilot job
	// expects.
	proc.RaiseOpenFiles()
	st, err := openStore(p.db(), false)
	if err != nil {
		return err
	}
	defer st.close()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	d := &daemon{
		p: p, cfg: cfg, st: st, started: time.Now(),
		log:     slog.New(slog.NewTextHandler(os.Stderr, nil)).With("component", "agent"),
		running: map[int]*runningJob{}, wake: make(chan struct{}, 1),
		ctx: ctx, stop: stop, lastActivity: time.Now(),
		capacity: capacityOf(cfg), free: capacityOf(cfg),
	}
	d.runners = make([]NodeRunner, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		if i == cfg.NodeIndex {
			continue
		}
		if d.runners[i], err = newNodeRunner(n); err != nil {
			return err
		}
	}
	if err := d.recover(ctx); err != nil {
		return err
	}
	if err := d.loadAutostop(ctx); err != nil {
		return err
	}
	// SSH is for people; a node without it still runs jobs, so a port
	// taken meanwhile is logged (and `ssh <cluster>` reports the refusal).
	if err := d.startSSH(); err != nil {
		d.log.Error("ssh server", "err", err)
	}
	sock := p.socket()
	_ = os.MkdirAll(filepath.Dir(sock), 0o700)
	_ = os.Remove(sock) // we hold the lock, so any socket file is stale
	d.listener, err = net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", sock, err)
	}
	_ = os.Chmod(sock, 0o600)
	if err := writeFileAtomic(p.pidFile(), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	d.log.Info("agent daemon started", "pid", os.Getpid(), "socket", sock, "nodes", len(cfg.Nodes))

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		select {
		case s := <-sigs:
			d.log.Info("signal received, stopping", "signal", s.String())
			d.shutdown()
		case <-ctx.Done():
		}
	}()
	go d.watchLock(lock)
	d.wg.Add(2)
	go d.scheduleLoop()
	go d.autostopLoop()
	d.kick()
	d.serve()
	d.wg.Wait()
	return nil
}

// watchLock stops the daemon once its lock file is gone or replaced: the
// node's directory was removed (a teardown that killed the node's
// processes just before this daemon came up, or one cut off after
// removing the directory) and perhaps made again for a new cluster, whose
// own daemon must be the only one. An orphan must not run on beside it.
func (d *daemon) watchLock(lock *os.File) {
	watchReplaced(d.ctx, d.p.lockFile(), lock, func() {
		d.log.Info("the node's agent directory was removed or replaced; stopping", "lock", d.p.lockFile())
		d.orphaned.Store(true)
		d.shutdown()
	})
}

// watchReplaced calls gone, once, when path no longer names held (the
// file was removed, or another made in its place), or returns when ctx
// ends first.
func watchReplaced(ctx context.Context, path string, held *os.File, gone func()) {
	fi, err := held.Stat()
	if err != nil {
		return
	}
	t := time.NewTicker(100 * time.Millisecond) // a stat: cheap, and the overlap short
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := os.Stat(path)
		if err == nil && os.SameFile(cur, fi) {
			continue
		}
		gone()
		return
	}
}

// recover makes the table truthful after a restart: jobs that were being
// driven by a dead daemon lost their driver, so whatever is left of them
// is killed and they become FAILED_DRIVER; pending jobs are queued again.
func (d *daemon) recover(ctx context.Context) error {
	rows, err := d.st.list(ctx, true, agentapi.StatusInit, agentapi.StatusPending, agentapi.StatusSettingUp, agentapi.StatusRunning)
	if err != nil {
		return fmt.Errorf("reading job table: %w", err)
	}
	for _, r := range rows {
		switch r.Status {
		case agentapi.StatusInit, agentapi.StatusPending:
			if r.Status == agentapi.StatusInit {
				if _, err := d.st.transition(ctx, r.JobID, []agentapi.Status{agentapi.StatusInit}, update{to: agentapi.StatusPending}); err != nil {
					return err
				}
				r.Status = agentapi.StatusPending
			}
			d.queue = append(d.queue, r)
		default:
			rj := &runningJob{row: r, place: Placement{Nodes: r.Nodes}}
			d.killAllRanks(rj)
			now := time.Now()
			reason := "the agent daemon died while the job was running; its processes were cleaned up"
			if _, err := d.st.transition(ctx, r.JobID, []agentapi.Status{r.Status}, update{to: agentapi.StatusFailedDriver, endAt: &now, failureReason: &reason}); err != nil {
				return err
			}
			if lg, err := openJobLog(r.LogDir); err == nil {
				lg.driverLine("ERROR: Job %d: %s (status: FAILED_DRIVER).", r.JobID, reason)
				lg.close()
			}
		}
	}
	return nil
}

func (d *daemon) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// scheduleLoop starts queued jobs as soon as they fit; it wakes on every
// submit and every job end, so dispatch takes no polling delay.
func (d *daemon) scheduleLoop() {
	defer d.wg.Done()
	for {
		select {
		case <-d.ctx.Done():
			return
		case <-d.wake:
		}
		d.mu.Lock()
		demands := make([]Demand, len(d.queue))
		for i, r := range d.queue {
			demands[i] = DemandOf(r.Spec)
		}
		places := Schedule(d.free, demands)
		var start []*runningJob
		for i, pl := range places {
			rj := &runningJob{row: d.queue[i], demand: demands[i], place: pl, done: make(chan struct{}), startAt: time.Now()}
			d.running[rj.row.JobID] = rj
			start = append(start, rj)
		}
		d.queue = d.queue[len(places):]
		d.mu.Unlock()
		for _, rj := range start {
			d.wg.Add(1)
			go d.drive(rj)
		}
	}
}

// drive runs one job from PENDING to a terminal status.
func (d *daemon) drive(rj *runningJob) {
	defer d.wg.Done()
	defer close(rj.done)
	ctx := context.Background() // finishing the record must survive shutdown
	r := rj.row
	id := r.JobID
	defer func() {
		d.mu.Lock()
		Release(d.free, rj.demand, rj.place)
		delete(d.running, id)
		d.lastActivity = time.Now()
		d.mu.Unlock()
		d.kick()
	}()

	first := agentapi.StatusRunning
	if r.Spec.Setup != "" {
		first = agentapi.StatusSettingUp
	}
	ok, err := d.st.transition(ctx, id, []agentapi.Status{agentapi.StatusPending}, update{to: first, startAt: &rj.startAt, nodes: rj.place.Nodes, devices: rj.place.Devices})
	if err != nil || !ok {
		if err != nil {
			d.log.Error("starting job", "job", id, "err", err)
		}
		return
	}
	lg, err := openJobLog(r.LogDir)
	if err == nil {
		lg.withSecrets(r.Spec.Secrets)
	}
	if err != nil {
		d.finish(ctx, rj, agentapi.StatusFailedDriver, nil, fmt.Sprintf("cannot write logs in %s: %v", r.LogDir, err), first)
		return
	}
	defer lg.close()

	if r.Spec.Setup != "" {
		codes, pids := d.runPhase(rj, lg, "setup")
		if st, stopped := rj.stoppedStatus(); stopped {
			d.finish(ctx, rj, st, codes, "", agentapi.StatusSettingUp)
			lg.driverLine("Job %d was %s during setup.", id, strings.ToLower(string(st)))
			return
		}
		if firstNonZero(codes) != 0 {
			reason := SetupFailureReason(id, codes, pids, os.Getpid())
			lg.driverLine("ERROR: %s%s%s", ansiRed, reason, ansiReset)
			d.finish(ctx, rj, agentapi.StatusFailedSetup, codes, reason, agentapi.StatusSettingUp)
			return
		}
		if _, err := d.st.transition(ctx, id, []agentapi.Status{agentapi.StatusSettingUp}, update{to: agentapi.StatusRunning}); err != nil {
			d.log.Error("job to RUNNING", "job", id, "err", err)
		}
	}
	codes, _ := d.runPhase(rj, lg, "run")
	if st, stopped := rj.stoppedStatus(); stopped {
		lg.driverLine("Job %d was %s.", id, strings.ToLower(string(st)))
		d.finish(ctx, rj, st, codes, "", agentapi.StatusRunning)
		return
	}
	if firstNonZero(codes) == 0 {
		lg.driverLine("Job %d finished (status: SUCCEEDED).", id)
		d.finish(ctx, rj, agentapi.StatusSucceeded, codes, "", agentapi.StatusRunning)
		return
	}
	note := failureNote(codes)
	lg.driverLine("ERROR: %sJob %d failed with return code list:%s %s %s", ansiRed, id, ansiReset, codeList(codes), note)
	d.finish(ctx, rj, agentapi.StatusFailed, codes, FailureReason(id, codes), agentapi.StatusRunning)
}

// The driver's ERROR lines are colored the way SkyPilot prints them;
// scripts grep them with the escapes in place.
const (
	ansiRed   = "\x1b[31m"
	ansiReset = "\x1b[0m"
)

func (d *daemon) finish(ctx context.Context, rj *runningJob, to agentapi.Status, codes []int, reason string, from agentapi.Status) {
	now := time.Now()
	if codes == nil {
		codes = []int{}
	}
	u := update{to: to, endAt: &now, returnCodes: codes}
	if reason != "" {
		u.failureReason = &reason
	}
	if _, err := d.st.transition(ctx, rj.row.JobID, []agentapi.Status{from}, u); err != nil {
		d.log.Error("finishing job", "job", rj.row.JobID, "err", err)
	}
}

// FailureReason is SkyPilot's message for a failed multi-rank job, as
// the job record keeps it.
func FailureReason(job int, codes []int) string {
	s := fmt.Sprintf("Job %d failed with return code list: %s", job, codeList(codes))
	if note := failureNote(codes); note != "" {
		s += " " + note
	}
	return s
}

// failureNote explains a code list: a segfault, or the 137s of ranks the
// gang killed after another one failed (which says more, so it wins).
func failureNote(codes []int) string {
	if slices.Contains(codes, 137) {
		for _, c := range codes {
			if c != 0 && c != 137 {
				return fmt.Sprintf("(A Worker failed with return code %d, SkyPilot cleaned up the processes on other nodes with return code 137)", c)
			}
		}
	}
	if slices.Contains(codes, 139) {
		return "(likely due to Segmentation Fault)"
	}
	return ""
}

// SetupFailureReason is SkyPilot's message for a failed setup: the nodes
// whose setup failed by itself, by pid and code. The 137s of setups the
// gang killed are left out, unless nothing else failed (a setup killed
// from outside, say by the OOM killer). A node whose setup never started
// has no pid of its own; SkyPilot names the driver then (driverPid).
func SetupFailureReason(job int, codes, pids []int, driverPid int) string {
	var failed []string
	for pass := 0; pass < 2 && len(failed) == 0; pass++ {
		for i, c := range codes {
			if c == 0 || (pass == 0 && c == 137) {
				continue
			}
			pid := driverPid
			if i < len(pids) && pids[i] > 0 {
				pid = pids[i]
			}
			failed = append(failed, fmt.Sprintf("(pid=%d, returncode=%d)", pid, c))
		}
	}
	return fmt.Sprintf("Job %d's setup failed. Failed workers: %s. See error logs above for more details.", job, strings.Join(failed, ", "))
}

func codeList(codes []int) string {
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = strconv.Itoa(c)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func firstNonZero(codes []int) int {
	for _, c := range codes {
		if c != 0 {
			return c
		}
	}
	return 0
}

func (rj *runningJob) stoppedStatus() (agentapi.Status, bool) {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	return rj.reason, rj.cancelled
}

// stopJob kills a running job's processes everywhere and waits for its
// driver to record `as` (CANCELLED or FAILED_DRIVER).
func (rj *runningJob) stopJob(as agentapi.Status) {
	rj.mu.Lock()
	if !rj.cancelled {
		rj.cancelled, rj.reason = true, as
	}
	killers := append([]func(){}, rj.killers...)
	rj.mu.Unlock()
	var wg sync.WaitGroup
	for _, k := range killers {
		wg.Add(1)
		go func() { defer wg.Done(); k() }()
	}
	wg.Wait()
	<-rj.done
}

// runPhase runs one phase on every rank of the job and returns the exit
// codes and pids by rank (pid -1: the rank never started). When a rank
// fails, every other rank's processes are killed (they report 137), as
// SkyPilot does for setup and run alike.
func (d *daemon) runPhase(rj *runningJob, lg *jobLog, phase string) (codes, pids []int) {
	r := rj.row
	n := len(rj.place.Nodes)
	codes = make([]int, n)
	pids = make([]int, n)
	var pidMu sync.Mutex
	pidsLeft := n
	pidsDone := make(chan struct{})
	notePid := func(rank, pid int) {
		pidMu.Lock()
		defer pidMu.Unlock()
		if pids[rank] == 0 && pidsLeft > 0 {
			pids[rank] = pid
			if pidsLeft--; pidsLeft == 0 {
				close(pidsDone)
			}
		}
	}
	var failOnce sync.Once
	killOthers := func() {
		failOnce.Do(func() {
			rj.mu.Lock()
			killers := append([]func(){}, rj.killers...)
			rj.mu.Unlock()
			var wg sync.WaitGroup
			for _, k := range killers {
				wg.Add(1)
				go func() { defer wg.Done(); k() }()
			}
			wg.Wait()
		})
	}

	var wg sync.WaitGroup
	rj.mu.Lock()
	rj.killers = nil
	if rj.cancelled {
		rj.mu.Unlock()
		return codes, pids
	}
	for rank, node := range rj.place.Nodes {
		spec := d.rankSpec(rj, phase, rank, node)
		w := d.rankLogWriter(rj, lg, phase, rank, node)
		wg.Add(1)
		if node == d.cfg.NodeIndex {
			home := d.cfg.Nodes[node].Home
			rp, err := startRank(home, spec)
			if err != nil {
				lg.driverLine("ERROR: %v", err)
				codes[rank] = 1
				notePid(rank, -1)
				wg.Done()
				go killOthers()
				continue
			}
			w.setPid(rp.pid())
			notePid(rank, rp.pid())
			jobID := r.JobID
			rj.killers = append(rj.killers, func() { _ = killRank(home, jobID, rank) })
			go func() {
				defer wg.Done()
				codes[rank] = rp.wait(w)
				w.flush()
				if codes[rank] != 0 {
					killOthers()
				}
			}()
			continue
		}
		runner, n := d.runners[node], d.cfg.Nodes[node]
		w.expectHeader = true
		w.pidSeen = func(pid int) { notePid(rank, pid) }
		ctx, cancel := context.WithCancel(d.ctx)
		killCmd := provision.Join(skyPath(n), "agent", "kill-rank", "--job", strconv.Itoa(r.JobID), "--rank", strconv.Itoa(rank))
		kill := func() {
			kctx, kcancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer kcancel()
			if res, err := runner.Run(kctx, killCmd, provision.RunOptions{}); err != nil || res.ExitCode != 0 {
				d.log.Error("kill-rank failed", "job", r.JobID, "rank", rank, "err", err, "stderr", string(res.Stderr))
			}
		}
		rj.killers = append(rj.killers, kill)
		body, _ := json.Marshal(spec)
		go func() {
			defer wg.Done()
			defer cancel()
			res, err := runner.Run(ctx, provision.Join(skyPath(n), "agent", "exec-rank"), provision.RunOptions{
				Stdin: strings.NewReader(string(body)), Stdout: w, Stderr: w,
			})
			w.flush()
			notePid(rank, -1)
			code := res.ExitCode
			if err != nil {
				lg.driverLine("ERROR: reaching node %d (%s): %v", node, n.IP, err)
				code = 255
			}
			codes[rank] = code
			if code != 0 {
				killOthers()
				// A transport failure may have left the rank running.
				kill()
			}
		}()
	}
	rj.mu.Unlock()
	// The return below assigns the named result pids; the goroutine keeps
	// its own copy of the slice (filled before pidsDone closes).
	rankPids := pids
	go func() {
		select {
		case <-pidsDone:
			_ = d.st.setPids(context.Background(), r.JobID, rankPids)
		case <-d.ctx.Done():
		}
	}()
	wg.Wait()
	pidMu.Lock()
	defer pidMu.Unlock()
	return codes, append([]int(nil), pids...)
}

// rankLogWriter builds the writer of one rank's output.
func (d *daemon) rankLogWriter(rj *runningJob, lg *jobLog, phase string, rank, node int) *rankWriter {
	r := rj.row
	numNodes := len(rj.place.Nodes)
	var name string
	if phase == "setup" {
		name = filepath.Join(lg.dir, fmt.Sprintf("setup-%d.log", node))
	} else {
		name = filepath.Join(lg.dir, "tasks", rankFileName(numNodes, rank, node))
	}
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.log.Error("opening rank log", "path", name, "err", err)
		f = nil
	}
	label := func(pid int) string {
		if numNodes == 1 {
			task := "task"
			if r.JobName != "" {
				task = r.JobName
			}
			if phase == "setup" {
				task = "setup"
			}
			return fmt.Sprintf("(%s, pid=%d) ", task, pid)
		}
		return fmt.Sprintf("(%s, rank=%d, pid=%d) ", nodeName(node), rank, pid)
	}
	w := &rankWriter{log: lg, file: f, label: label, prefix: label(0)}
	return w
}

// rankSpec builds the environment of one rank (runtime.md §Environment).
func (d *daemon) rankSpec(rj *runningJob, phase string, rank, node int) RankSpec {
	r := rj.row
	s := r.Spec
	env := map[string]string{}
	for k, v := range s.Envs {
		env[k] = v
	}
	for k, v := range s.Secrets {
		env[k] = v
	}
	user := s.User
	env["SKYPILOT_CLUSTER_INFO"] = clusterInfoJSON(d.cfg)
	env["SKYPILOT_USER"] = user
	env["SKYPILOT_NUM_NODES"] = strconv.Itoa(len(rj.place.Nodes))
	gpus := strconv.Itoa(gpusPerNode(rj.demand))
	spec := RankSpec{JobID: r.JobID, Rank: rank, Phase: phase}
	if phase == "setup" {
		ips := make([]string, len(d.cfg.Nodes))
		for i, n := range d.cfg.Nodes {
			ips[i] = n.IP
		}
		env["SKYPILOT_SETUP_NODE_IPS"] = strings.Join(ips, "\n")
		env["SKYPILOT_SETUP_NODE_RANK"] = strconv.Itoa(node)
		env["SKYPILOT_SETUP_NUM_GPUS_PER_NODE"] = gpus
		spec.Script = s.Setup
		spec.Unset = []string{"CUDA_VISIBLE_DEVICES"}
	} else {
		ips := make([]string, len(rj.place.Nodes))
		for i, n := range rj.place.Nodes {
			ips[i] = d.cfg.Nodes[n].IP
		}
		env["SKYPILOT_NODE_IPS"] = strings.Join(ips, "\n")
		env["SKYPILOT_NODE_RANK"] = strconv.Itoa(rank)
		env["SKYPILOT_NUM_GPUS_PER_NODE"] = gpus
		env["SKYPILOT_INTERNAL_JOB_ID"] = strconv.Itoa(r.JobID)
		taskID := s.TaskID
		if taskID == "" {
			taskID = fmt.Sprintf("%s_%s_%d", r.RunTS, d.cfg.ClusterName, r.JobID)
		}
		env["SKYPILOT_TASK_ID"] = taskID
		if rank < len(rj.place.Devices) && len(rj.place.Devices[rank]) > 0 {
			devs := make([]string, len(rj.place.Devices[rank]))
			for i, dv := range rj.place.Devices[rank] {
				devs[i] = strconv.Itoa(dv)
			}
			env["CUDA_VISIBLE_DEVICES"] = strings.Join(devs, ",")
		}
		spec.Script = s.Run
	}
	spec.Env = env
	return spec
}

// killAllRanks kills whatever is left of a job on every node it ran on;
// used after a daemon restart, when only the table knows the job.
func (d *daemon) killAllRanks(rj *runningJob) {
	var wg sync.WaitGroup
	for rank, node := range rj.place.Nodes {
		if node < 0 || node >= len(d.cfg.Nodes) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if node == d.cfg.NodeIndex {
				_ = killRank(d.cfg.Nodes[node].Home, rj.row.JobID, rank)
				return
			}
			n := d.cfg.Nodes[node]
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := provision.Join(skyPath(n), "agent", "kill-rank", "--job", strconv.Itoa(rj.row.JobID), "--rank", strconv.Itoa(rank))
			if _, err := d.runners[node].Run(ctx, cmd, provision.RunOptions{}); err != nil {
				d.log.Error("kill-rank failed", "job", rj.row.JobID, "rank", rank, "err", err)
			}
		}()
	}
	wg.Wait()
}

// shutdown stops the daemon: running jobs are killed and marked
// FAILED_DRIVER (nothing would collect their output), pending jobs stay.
func (d *daemon) shutdown() {
	d.mu.Lock()
	jobs := make([]*runningJob, 0, len(d.running))
	for _, rj := range d.running {
		jobs = append(jobs, rj)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, rj := range jobs {
		wg.Add(1)
		go func() { defer wg.Done(); rj.stopJob(agentapi.StatusFailedDriver) }()
	}
	wg.Wait()
	d.stop()
	d.ssh.close()
	orphan := d.orphaned.Load()
	if d.listener != nil {
		if ul, ok := d.listener.(*net.UnixListener); ok && orphan {
			ul.SetUnlinkOnClose(false) // the path is the new daemon's now
		}
		d.listener.Close()
	}
	if !orphan {
		_ = os.Remove(d.p.socket())
		_ = os.Remove(d.p.pidFile())
	}
}

// ---- socket protocol ----

// request is one line a client sends; the daemon answers with one
// response line and closes the connection.
type request struct {
	Verb string          `json:"verb"`
	Body json.RawMessage `json:"body,omitempty"`
}

type response struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"`
}

// codedError carries a stable code to the client's JSON error.
type codedError struct {
	code string
	msg  string
}

func (e *codedError) Error() string { return e.msg }

func (d *daemon) serve() {
	for {
		conn, err := d.listener.Accept()
		if err != nil {
			if d.ctx.Err() != nil {
				return
			}
			d.log.Error("accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go d.handleConn(conn)
	}
}

func (d *daemon) handleConn(conn net.Conn) {
	defer conn.Close()
	var req request
	if err := json.NewDecoder(bufio.NewReader(conn)).Decode(&req); err != nil {
		_ = json.NewEncoder(conn).Encode(response{Error: "bad request: " + err.Error(), Code: "bad_request"})
		return
	}
	result, err := d.handle(req)
	resp := response{}
	if err != nil {
		resp.Error, resp.Code = err.Error(), "internal"
		var ce *codedError
		if errors.As(err, &ce) {
			resp.Code = ce.code
		}
	} else {
		resp.Result, _ = json.Marshal(result)
	}
	_ = json.NewEncoder(conn).Encode(resp)
	if req.Verb == "stop" && err == nil {
		go d.shutdown()
	}
}

func (d *daemon) handle(req request) (any, error) {
	ctx := d.ctx
	switch req.Verb {
	case "ping":
		return map[string]any{"pid": os.Getpid(), "started_at": unixSeconds(d.started)}, nil
	case "submit":
		var spec agentapi.JobSpec
		if err := json.Unmarshal(req.Body, &spec); err != nil {
			return nil, &codedError{"bad_request", "job spec: " + err.Error()}
		}
		id, err := d.submit(ctx, spec)
		if err != nil {
			return nil, err
		}
		return agentapi.SubmitResult{JobID: id}, nil
	case "cancel":
		var body cancelRequest
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return nil, &codedError{"bad_request", "cancel: " + err.Error()}
		}
		ids, err := d.cancel(ctx, body)
		if err != nil {
			return nil, err
		}
		return agentapi.CancelResult{Cancelled: ids}, nil
	case "set-autostop":
		var a agentapi.AutostopConfig
		if err := json.Unmarshal(req.Body, &a); err != nil {
			return nil, &codedError{"bad_request", "autostop: " + err.Error()}
		}
		return d.setAutostop(ctx, a)
	case "autostop-status":
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.autostopStatusLocked(), nil
	case "stop":
		return map[string]bool{"stopping": true}, nil
	}
	return nil, &codedError{"bad_request", fmt.Sprintf("unknown verb %q", req.Verb)}
}

func (d *daemon) submit(ctx context.Context, spec agentapi.JobSpec) (int, error) {
	if spec.NumNodes <= 0 {
		spec.NumNodes = 1
	}
	if spec.CPUs != nil && *spec.CPUs < 0 {
		return 0, &codedError{"bad_request", "cpus must not be negative"}
	}
	for name, n := range spec.GPUs {
		if n < 0 || (n > 1 && n != float64(int(n))) {
			return 0, &codedError{"bad_request", fmt.Sprintf("gpus %s:%g: use a fraction below 1 or a whole number", name, n)}
		}
	}
	for k := range spec.Envs {
		if !validEnvName(k) {
			return 0, &codedError{"bad_request", fmt.Sprintf("env name %q is not a valid shell variable name", k)}
		}
	}
	for k := range spec.Secrets {
		if !validEnvName(k) {
			return 0, &codedError{"bad_request", fmt.Sprintf("secret name %q is not a valid shell variable name", k)}
		}
	}
	demand := DemandOf(spec)
	if err := CanEverFit(d.capacity, demand); err != nil {
		return 0, &codedError{"unschedulable", err.Error() + "; ask for fewer resources or launch a bigger cluster"}
	}
	if spec.Metadata == nil {
		spec.Metadata = map[string]any{}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if spec.RunTimestamp == "" {
		// Strictly increasing, so two jobs never share a log dir.
		ts := now
		if !ts.After(d.lastTS) {
			ts = d.lastTS.Add(time.Microsecond)
		}
		d.lastTS = ts
		spec.RunTimestamp = runTimestamp(ts)
	}
	if strings.ContainsAny(spec.RunTimestamp, "/\x00") || spec.RunTimestamp == "." || spec.RunTimestamp == ".." {
		return 0, &codedError{"bad_request", fmt.Sprintf("run_timestamp %q must be a plain directory name", spec.RunTimestamp)}
	}
	row := &jobRow{Spec: spec, RunTS: spec.RunTimestamp, LogDir: d.p.logDir(spec.RunTimestamp)}
	row.JobName, row.Username, row.UserHash = spec.Name, spec.User, spec.UserHash
	row.SubmittedAt, row.Status, row.NumNodes = unixSeconds(now), agentapi.StatusPending, spec.NumNodes
	row.Resources = ResourcesString(spec.NumNodes, demand)
	row.Metadata = spec.Metadata
	id, existed, err := d.st.insert(ctx, row, spec.SubmitKey)
	if err != nil || existed {
		return id, err
	}
	row.JobID = id
	d.queue = append(d.queue, row)
	d.lastActivity = now
	d.kick()
	return id, nil
}

func validEnvName(k string) bool {
	if k == "" || (k[0] >= '0' && k[0] <= '9') {
		return false
	}
	for _, c := range k {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

type cancelRequest struct {
	JobIDs   []int  `json:"job_ids"`
	All      bool   `json:"all"`
	UserHash string `json:"user_hash,omitempty"`
}

// cancel cancels pending jobs at once and running ones by killing their
// processes on every node; it returns after every process is gone.
func (d *daemon) cancel(ctx context.Context, req cancelRequest) ([]int, error) {
	if !req.All && len(req.JobIDs) == 0 {
		return nil, &codedError{"bad_request", "name the jobs to cancel or pass --all"}
	}
	want := map[int]bool{}
	for _, id := range req.JobIDs {
		want[id] = true
	}
	match := func(r *jobRow) bool {
		if req.UserHash != "" && r.UserHash != req.UserHash {
			return false
		}
		return req.All || want[r.JobID]
	}
	var cancelled []int
	d.mu.Lock()
	var keep []*jobRow
	var pendingHit []*jobRow
	for _, r := range d.queue {
		if match(r) {
			pendingHit = append(pendingHit, r)
		} else {
			keep = append(keep, r)
		}
	}
	d.queue = keep
	var runningHit []*runningJob
	for _, rj := range d.running {
		if match(rj.row) {
			runningHit = append(runningHit, rj)
		}
	}
	d.mu.Unlock()
	now := time.Now()
	for _, r := range pendingHit {
		if ok, err := d.st.transition(ctx, r.JobID, []agentapi.Status{agentapi.StatusPending, agentapi.StatusInit}, update{to: agentapi.StatusCancelled, endAt: &now}); err != nil {
			return cancelled, err
		} else if ok {
			cancelled = append(cancelled, r.JobID)
		}
	}
	var wg sync.WaitGroup
	for _, rj := range runningHit {
		wg.Add(1)
		go func() { defer wg.Done(); rj.stopJob(agentapi.StatusCancelled) }()
		cancelled = append(cancelled, rj.row.JobID)
	}
	wg.Wait()
	sort.Ints(cancelled)
	if cancelled == nil {
		cancelled = []int{}
	}
	d.kick()
	return cancelled, nil
}

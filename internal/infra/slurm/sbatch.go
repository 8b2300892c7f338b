package slurm

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/provision"
)

// MaxJobNameLen bounds cluster_name_on_cloud, which is the Slurm job name.
const MaxJobNameLen = 120

// ReadyFileName is touched (holding the job id) by the sbatch script in the
// cluster home once every node is prepared.
const ReadyFileName = ".sky_sbatch_ready"

// Script is the sbatch script of one SkyGo cluster (spec §The sbatch
// script): the job holds the nodes with `sleep infinity` until it is
// cancelled, and cleans up after itself on the way out.
type Script struct {
	JobName   string // cluster_name_on_cloud
	Partition string // given to sbatch on the command line (SubmitCommand)
	// Base is the absolute shared directory holding .sky_provision and
	// .sky_clusters (cluster_configs.<c>.workdir, or the login node's $HOME).
	Base string
	// RuntimeDir is the node-local directory that is SkyGo's HOME on each
	// node (NodeRuntimeDir).
	RuntimeDir  string
	NumNodes    int
	CPUsPerTask int
	MemMB       int    // 0 = omit --mem
	Gres        string // "" = omit --gres
	Time        string // "" = omit --time; Options["time"] wins
	// Sky is the node runtime on the shared filesystem: the script runs the
	// head's node agent (see the body).
	Sky string
	// Options are Settings.SbatchOptions, written sorted by key after
	// SkyGo's own directives ("" value = a bare flag).
	Options map[string]string
}

// NodeRuntimeDir is the node-local HOME of a cluster's nodes:
// <tmpdir or /tmp>/<job name>.
func NodeRuntimeDir(tmpdir, jobName string) string {
	if tmpdir == "" {
		tmpdir = "/tmp"
	}
	return path.Join(tmpdir, jobName)
}

// ClusterHome is the cluster's shared directory: <base>/.sky_clusters/<job>.
func (s Script) ClusterHome() string { return path.Join(s.Base, ".sky_clusters", s.JobName) }

// ReadyFile is the file the script writes, in the cluster home, once the
// nodes are prepared; it holds the Slurm job id so that a file left by an
// earlier allocation of the same name is told apart.
func (s Script) ReadyFile() string { return path.Join(s.ClusterHome(), ReadyFileName) }

// ScriptPath is where the script is uploaded: <base>/.sky_provision/<job>.sh.
func (s Script) ScriptPath() string { return path.Join(s.Base, ".sky_provision", s.JobName+".sh") }

// LogPath is the job's output file (stdout and stderr) for a job id.
func (s Script) LogPath(jobID string) string {
	return path.Join(s.Base, ".sky_provision", "slurm-"+jobID+".out")
}

// SubmitCommand is the login-node command that submits the uploaded script.
func (s Script) SubmitCommand() string {
	return provision.Join("sbatch", "--partition="+s.Partition, s.ScriptPath())
}

var jobNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate checks what Render relies on.
func (s Script) Validate() error {
	switch {
	case !jobNameRE.MatchString(s.JobName) || len(s.JobName) > MaxJobNameLen:
		return fmt.Errorf("slurm job name %q must be 1-%d letters, digits, '.', '_' or '-'", s.JobName, MaxJobNameLen)
	case s.Partition == "":
		return fmt.Errorf("slurm job %s: no partition", s.JobName)
	case !path.IsAbs(s.Base):
		return fmt.Errorf("slurm workdir %q must be an absolute path on a shared filesystem", s.Base)
	case !path.IsAbs(s.RuntimeDir) || path.Base(path.Clean(s.RuntimeDir)) != s.JobName:
		// The script removes it on every node: it must be the cluster's own.
		return fmt.Errorf("slurm runtime directory %q must be an absolute <tmpdir>/%s", s.RuntimeDir, s.JobName)
	case strings.ContainsAny(s.Base+s.RuntimeDir+s.Gres+s.Time, "\n\r"):
		return fmt.Errorf("slurm job %s: paths and options must not contain newlines", s.JobName)
	case s.NumNodes < 1 || s.CPUsPerTask < 1 || s.MemMB < 0:
		return fmt.Errorf("slurm job %s: needs at least 1 node and 1 CPU per node (got %d nodes, %d CPUs, %d MB)", s.JobName, s.NumNodes, s.CPUsPerTask, s.MemMB)
	}
	for k, v := range s.Options {
		if k == "" || strings.ContainsAny(k, " \t\n\r=\"'#\\") || strings.ContainsAny(v, "\n\r") {
			return fmt.Errorf("slurm sbatch option %q=%q cannot be written as an #SBATCH line", k, v)
		}
	}
	return nil
}

// Render writes the script: SkyGo's directives in the spec's order, the
// user's options sorted by key, then the body.
func (s Script) Render() string {
	var b strings.Builder
	b.WriteString("#!/bin/bash\n")
	dir := func(opt, val string) {
		fmt.Fprintf(&b, "#SBATCH %s\n", sbatchOption(opt, val))
	}
	logFile := path.Join(s.Base, ".sky_provision", "slurm-%j.out")
	dir("job-name", s.JobName)
	dir("output", logFile)
	dir("error", logFile)
	dir("nodes", strconv.Itoa(s.NumNodes))
	dir("wait-all-nodes", "1")
	dir("no-requeue", "")
	dir("cpus-per-task", strconv.Itoa(s.CPUsPerTask))
	if s.MemMB > 0 {
		dir("mem", strconv.Itoa(s.MemMB)+"M")
	}
	if s.Gres != "" {
		dir("gres", s.Gres)
	}
	t := s.Time
	if v, ok := s.Options["time"]; ok {
		t = v
	}
	if t != "" {
		dir("time", t)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Options)) {
		if k != "time" {
			dir(k, s.Options[k])
		}
	}

	q := provision.Quote
	fmt.Fprintf(&b, `
# SkyGo cluster %[1]s: this job holds the nodes until it is cancelled.
CLUSTER_HOME=%[2]s
READY_FILE=%[3]s
export SKY_RUNTIME_DIR=%[4]s

# Runs a bash script once on every node of the allocation, next to the
# steps SkyGo starts later (--overlap), with this environment whatever
# export mode the user's sbatch options chose.
on_all_nodes() {
  srun --overlap --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" \
    --ntasks-per-node=1 --export=ALL --quiet --unbuffered --kill-on-bad-exit=1 bash -c "$1"
}

# A recorded pid is signalled only while it still names the recorded
# process: once that is gone its id may be another's (a shared PID
# namespace, a small pid_max). Exported for the scripts on_all_nodes runs.
%[6]s
export -f sky_owned

cleanup() {
  # A second TERM (scancel again, the time limit) must not cut the
  # cleanup short; Slurm's KillWait still bounds it.
  trap - EXIT
  trap '' TERM
  rm -f "$READY_FILE"
  [ -n "${HOLD_PID:-}" ] && kill "$HOLD_PID" 2>/dev/null
  # The agent's rank processes run in their own sessions and would outlive
  # the steps that started them, so they are signalled by process group.
  on_all_nodes '
    d="$SKY_RUNTIME_DIR/.sky/agent"
    for f in "$d"/ranks/*.pid; do
      [ -f "$f" ] && p=$(cut -d" " -f1 "$f") && sky_owned "$f" "$p" && kill -TERM -- "-$p" 2>/dev/null
    done
    [ -f "$d/daemon.pid" ] && p=$(cut -d" " -f1 "$d/daemon.pid") && sky_owned "$d/daemon.pid" "$p" && kill -TERM "$p" 2>/dev/null
    rm -rf "${SKY_RUNTIME_DIR:?}"
    true' || true
  rm -rf "$CLUSTER_HOME"
}
trap cleanup EXIT
trap 'exit 0' TERM

rm -f "$READY_FILE"
mkdir -p "$CLUSTER_HOME/sky_logs" "$CLUSTER_HOME/sky_workdir" "$CLUSTER_HOME/.sky" || exit 1
export SKY_PROCTRACK_TYPE="$(scontrol show config 2>/dev/null | awk '$1 == "ProctrackType" {print $3}')"
touch "$CLUSTER_HOME/.sky_slurm_cluster" "$CLUSTER_HOME/.hushlogin"
printf '%%s\n' "$SKY_PROCTRACK_TYPE" > "$CLUSTER_HOME/.sky_proctrack_type"

# A directory left by an earlier allocation of the same name (one killed
# before its cleanup ran) would hand its agent state to this cluster.
if ! on_all_nodes '
    rm -rf "${SKY_RUNTIME_DIR:?}" &&
    mkdir -p "$SKY_RUNTIME_DIR/sky_logs" "$SKY_RUNTIME_DIR/sky_workdir" "$SKY_RUNTIME_DIR/.sky" &&
    touch "$SKY_RUNTIME_DIR/.sky_slurm_cluster" "$SKY_RUNTIME_DIR/.hushlogin" &&
    printf "%%s\n" "$SKY_PROCTRACK_TYPE" > "$SKY_RUNTIME_DIR/.sky_proctrack_type"'; then
  echo "SkyGo: could not create $SKY_RUNTIME_DIR on every node of job $SLURM_JOB_ID" >&2
  exit 1
fi

# The allocation's job-scoped variables as the batch script sees them:
# steps pinned to one node see some of them rewritten to the step's.
env | grep '^SLURM_' > "$CLUSTER_HOME/slurm_job.env" || true
# The head's node agent lives in this batch step, which lasts as long as
# the allocation (this script runs on the allocation's first node, the
# head): a daemon started from a step of its own would end with that step
# where Slurm tracks processes by cgroup. `+"`sky agent start`"+` (run through
# srun) writes the agent's config and waits; this loop starts the daemon,
# and starts it again if it dies.
SKY=%[5]s
AGENT_DIR="$SKY_RUNTIME_DIR/.sky/agent"
mkdir -p "$AGENT_DIR" && touch "$AGENT_DIR/supervised" || exit 1
printf '%%s\n' "$SLURM_JOB_ID" > "$READY_FILE"
while :; do
  if [ -f "$AGENT_DIR/config.json" ] && [ -x "$SKY" ]; then
    pid=$(cat "$AGENT_DIR/daemon.pid" 2>/dev/null)
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null || ! sky_owned "$AGENT_DIR/daemon.pid" "$pid"; then
      (cd "$SKY_RUNTIME_DIR" && HOME="$SKY_RUNTIME_DIR" exec "$SKY" agent daemon >> "$AGENT_DIR/daemon.log" 2>&1 < /dev/null) &
      sleep 1 # the daemon writes its pid file once it holds its lock
    fi
  fi
  sleep 0.2 &
  HOLD_PID=$!
  wait "$HOLD_PID"
done
`, s.JobName, q(s.ClusterHome()), q(s.ReadyFile()), q(s.RuntimeDir), q(s.Sky), provision.OwnedPIDSh)
	return b.String()
}

// sbatchOption writes one option for an #SBATCH line: `--key=value`,
// `--key` for a bare flag, and `-k value` for one-letter keys (sbatch's
// short options, which take no `=`). Values sbatch would split or treat
// as a comment are double-quoted with `\` escapes, which sbatch's
// #SBATCH parser removes.
func sbatchOption(key, val string) string {
	flag := "--" + key
	if len(key) == 1 {
		flag = "-" + key
	}
	if val == "" {
		return flag
	}
	if strings.ContainsAny(val, " \t\"'\\#") {
		val = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(val) + `"`
	}
	if len(key) == 1 {
		return flag + " " + val
	}
	return flag + "=" + val
}

var timeRE = regexp.MustCompile(`^(\d+-\d+(:\d+(:\d+)?)?|\d+(:\d+(:\d+)?)?)$`)

// ValidTime reports whether v is a Slurm time: m, m:s, h:m:s, d-h, d-h:m
// or d-h:m:s.
func ValidTime(v string) bool { return timeRE.MatchString(v) }

// FormatTime turns a partition time (MaxTime, DefaultTime) into
// D-HH:MM:SS; UNLIMITED, INFINITE, NONE and "" give "".
func FormatTime(slurmTime string) (string, error) {
	t := strings.TrimSpace(slurmTime)
	switch strings.ToUpper(t) {
	case "", "UNLIMITED", "INFINITE", "NONE":
		return "", nil
	}
	secs, err := timeSeconds(t)
	if err != nil {
		return "", err
	}
	d, h, m, sec := secs/86400, secs%86400/3600, secs%3600/60, secs%60
	return fmt.Sprintf("%d-%02d:%02d:%02d", d, h, m, sec), nil
}

// timeSeconds reads one of the six Slurm time forms.
func timeSeconds(t string) (int64, error) {
	if !ValidTime(t) {
		return 0, fmt.Errorf("%q is not a Slurm time (m, m:s, h:m:s, d-h, d-h:m or d-h:m:s)", t)
	}
	var days int64
	rest := t
	if d, r, ok := strings.Cut(t, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: days: %v", t, err)
		}
		days, rest = n, r
	}
	var f []int64
	for _, p := range strings.Split(rest, ":") {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%q: %v", t, err)
		}
		f = append(f, n)
	}
	var h, m, s int64
	switch {
	case days > 0 || strings.Contains(t, "-"): // d-h, d-h:m, d-h:m:s
		h = f[0]
		if len(f) > 1 {
			m = f[1]
		}
		if len(f) > 2 {
			s = f[2]
		}
	case len(f) == 1: // m
		m = f[0]
	case len(f) == 2: // m:s
		m, s = f[0], f[1]
	default: // h:m:s
		h, m, s = f[0], f[1], f[2]
	}
	return days*86400 + h*3600 + m*60 + s, nil
}

// PartitionTime is the --time for a job in p when the user set none: the
// partition's MaxTime; else nothing (the partition's DefaultTime
// applies); else nothing, with a warning.
func PartitionTime(p Partition) (t string, warning string) {
	if t, err := FormatTime(p.MaxTime); err == nil && t != "" {
		return t, ""
	}
	if d := strings.TrimSpace(p.DefaultTime); d != "" && !strings.EqualFold(d, "NONE") {
		return "", ""
	}
	return "", fmt.Sprintf("Partition '%s' has no time limit (MaxTime %s, no DefaultTime); submitting without --time, so the cluster's default applies. Set slurm sbatch_options.time to choose one.", p.Name, orDash(p.MaxTime))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ParseJobID reads the job id from sbatch's output: "Submitted batch job
// <id>", or "<id>[;<cluster>]" with --parsable.
func ParseJobID(out string) (string, error) {
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "Submitted batch job "); ok {
			line = rest
		}
		id, _, _ := strings.Cut(line, ";")
		if id != "" && strings.Trim(id, "0123456789") == "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("sbatch printed no job id: %q", clip(strings.TrimSpace(out)))
}

#!/bin/bash
#SBATCH --job-name=h100-job
#SBATCH --output="/lustre/team x/.sky_provision/slurm-%j.out"
#SBATCH --error="/lustre/team x/.sky_provision/slurm-%j.out"
#SBATCH --nodes=4
#SBATCH --wait-all-nodes=1
#SBATCH --no-requeue
#SBATCH --cpus-per-task=32
#SBATCH --mem=262144M
#SBATCH --gres=gpu:nvidia_h100_80gb_hbm3:8
#SBATCH --time=1-00:00:00
#SBATCH -A "other acct"
#SBATCH --account=ai-research
#SBATCH --comment="run \"7\" # main"
#SBATCH --exclusive
#SBATCH --mail-type=END,FAIL

# SkyGo cluster h100-job: this job holds the nodes until it is cancelled.
CLUSTER_HOME='/lustre/team x/.sky_clusters/h100-job'
READY_FILE='/lustre/team x/.sky_clusters/h100-job/.sky_sbatch_ready'
export SKY_RUNTIME_DIR=/tmp/h100-job

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
sky_owned() { sky_s=$(cat /proc/"$2"/stat 2>/dev/null) || return 0; [ -n "$sky_s" ] || return 0; sky_s=${sky_s##*) }; sky_now=$(printf '%s\n' "$sky_s" | cut -d' ' -f20); sky_rec=$(cut -s -d' ' -f2 "$1" 2>/dev/null); if [ -n "$sky_rec" ]; then [ "$sky_now" = "$sky_rec" ]; return; fi; sky_bt=$(sed -n 's/^btime //p' /proc/stat); sky_hz=$(getconf CLK_TCK 2>/dev/null || echo 100); [ $(( sky_bt + sky_now / sky_hz )) -le $(( $(stat -c %Y "$1") + 1 )) ]; }
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
printf '%s\n' "$SKY_PROCTRACK_TYPE" > "$CLUSTER_HOME/.sky_proctrack_type"

# A directory left by an earlier allocation of the same name (one killed
# before its cleanup ran) would hand its agent state to this cluster.
if ! on_all_nodes '
    rm -rf "${SKY_RUNTIME_DIR:?}" &&
    mkdir -p "$SKY_RUNTIME_DIR/sky_logs" "$SKY_RUNTIME_DIR/sky_workdir" "$SKY_RUNTIME_DIR/.sky" &&
    touch "$SKY_RUNTIME_DIR/.sky_slurm_cluster" "$SKY_RUNTIME_DIR/.hushlogin" &&
    printf "%s\n" "$SKY_PROCTRACK_TYPE" > "$SKY_RUNTIME_DIR/.sky_proctrack_type"'; then
  echo "SkyGo: could not create $SKY_RUNTIME_DIR on every node of job $SLURM_JOB_ID" >&2
  exit 1
fi

# The allocation's job-scoped variables as the batch script sees them:
# steps pinned to one node see some of them rewritten to the step's.
env | grep '^SLURM_' > "$CLUSTER_HOME/slurm_job.env" || true
# The head's node agent lives in this batch step, which lasts as long as
# the allocation (this script runs on the allocation's first node, the
# head): a daemon started from a step of its own would end with that step
# where Slurm tracks processes by cgroup. `sky agent start` (run through
# srun) writes the agent's config and waits; this loop starts the daemon,
# and starts it again if it dies.
SKY='/lustre/team x/.sky/bin/sky-node'
AGENT_DIR="$SKY_RUNTIME_DIR/.sky/agent"
mkdir -p "$AGENT_DIR" && touch "$AGENT_DIR/supervised" || exit 1
printf '%s\n' "$SLURM_JOB_ID" > "$READY_FILE"
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

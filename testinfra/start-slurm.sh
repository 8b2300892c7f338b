#!/usr/bin/env bash
# Start a Slurm cluster on this machine: munged + slurmctld + slurmd(s), with
# partitions "cpu" (default) and "gpu", and fake GPUs (GRES gpu:fake:K, no
# device files) on every node. Adopted from the development environment's
# testinfra kit; the project's copy runs on a named set of ssh hosts, gives
# the hosts' ssh sessions SLURM_CONF, and has configurable ports.
#
# Usage: start-slurm.sh [NODES]     (default 1)
#   NODES=1 : one slurmd in the root namespace, node "node1" at 127.0.0.1.
#   NODES>1 : the nodes are the fake hosts of start-ssh-hosts.sh (named
#             ${SSH_HOSTS_NAME}1..N, default tihost1..N, at ${SSH_HOSTS_PREFIX}.11..,
#             default 10.200.0.11..), one slurmd inside each host's namespaces,
#             so `srun -N2 hostname` prints different host names and every
#             node is also reachable over ssh. slurmctld is at ${SSH_HOSTS_PREFIX}.1.
#             /home is shared by the hosts (SSH_HOSTS_SHARED_HOME=1 unless set
#             otherwise), and every ssh session on them has SLURM_CONF set
#             (sshd SetEnv), so host 1 serves as the login node.
# Env: SLURM_CPUS_PER_NODE (4) SLURM_MEM_PER_NODE_MB (4096) SLURM_GPUS_PER_NODE
#      (4; 0 = no GRES, gpu partition then has no GPUs) SLURM_GPU_TYPE (fake)
#      SLURM_ACCOUNTING (0; 1 = also MariaDB on 127.0.0.1:$SLURM_DB_PORT and
#      slurmdbd at the controller address, so sacct/sacctmgr work on every
#      node; adds ~10 s of apt on a fresh machine)
#      SLURM_KEEP_STATE (0; 1 = keep slurmctld state across restarts)
#      SLURM_CTLD_PORT (6817) SLURM_SLURMD_PORT (6818) SLURM_DBD_PORT (6819)
#      SLURM_DB_PORT (3307: MariaDB). munged is machine-wide (/run/munge) and
#      is shared with any other Slurm on the machine; with other ports and
#      another SSH_HOSTS_NAME/PREFIX a second cluster can run beside one that
#      uses the defaults.
# Writes $TESTINFRA_STATE/slurm/info.env and slurm.conf; export
#   SLURM_CONF=$TESTINFRA_STATE/slurm/slurm.conf   before using sinfo/sbatch/...
# Idempotent.
set -euo pipefail
source "$(dirname "$0")/common.sh"

NODES="${1:-${SLURM_NODES:-1}}"
[[ "$NODES" =~ ^[0-9]+$ ]] && [ "$NODES" -ge 1 ] || die "NODES must be >= 1"
CPUS="${SLURM_CPUS_PER_NODE:-4}"
MEM="${SLURM_MEM_PER_NODE_MB:-4096}"
GPUS="${SLURM_GPUS_PER_NODE:-4}"
GPU_TYPE="${SLURM_GPU_TYPE:-fake}"
CTLD_PORT="${SLURM_CTLD_PORT:-6817}"
SLURMD_PORT="${SLURM_SLURMD_PORT:-6818}"
DBD_PORT="${SLURM_DBD_PORT:-6819}"
DB_PORT="${SLURM_DB_PORT:-3307}"
for p in "$CTLD_PORT" "$SLURMD_PORT" "$DBD_PORT" "$DB_PORT"; do
  [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 65535 ] || die "bad port \"$p\""
done
[[ "$GPU_TYPE" =~ ^[A-Za-z0-9_.-]+$ ]] || die "SLURM_GPU_TYPE must be letters, digits, _ . -"
D="$TESTINFRA_STATE/slurm"
mkdir -p "$D/state" "$D/spool" "$D/jobs"
# users' sinfo/sbatch read slurm.conf from here
chmod 755 "$D"
chmod 1777 "$D/jobs"
t0=$(date +%s.%N)

ACCT="${SLURM_ACCOUNTING:-0}"
ensure_pkgs munge slurmctld slurmd slurm-client
[ "$ACCT" = 1 ] && ensure_pkgs slurmdbd mariadb-server

# If a previous start used a different set-up, restart.
SETUP="$NODES acct=$ACCT ports=$CTLD_PORT,$SLURMD_PORT,$DBD_PORT,$DB_PORT hosts=${SSH_HOSTS_NAME:-tihost}@${SSH_HOSTS_PREFIX:-10.200.0}"
if [ -f "$D/nodes" ] && [ "$(cat "$D/nodes")" != "$SETUP" ]; then
  log "set-up changed ($(cat "$D/nodes") -> $SETUP): restarting slurm"
  "$(dirname "$0")/stop-slurm.sh"
fi

# --- munge -----------------------------------------------------------------
if [ ! -s /etc/munge/munge.key ]; then
  mkdir -p /etc/munge
  mungekey -c -k /etc/munge/munge.key 2>/dev/null || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 2>/dev/null
fi
chown munge:munge /etc/munge /etc/munge/munge.key; chmod 700 /etc/munge; chmod 600 /etc/munge/munge.key
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge; chmod 755 /run/munge
if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "munged already answering on /run/munge/munge.socket.2"
else
  runuser -u munge -- /usr/sbin/munged --force --pid-file=/run/munge/munged.pid
  for i in $(seq 1 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || die "munged did not start (see /var/log/munge/munged.log)"
  cp /run/munge/munged.pid "$D/munged.pid"   # we started it, so we stop it
fi

# --- topology --------------------------------------------------------------
CTLNAME="$(hostname -s)"
if [ "$NODES" = 1 ]; then
  CTLADDR=127.0.0.1
  NODE_NAMES=(node1); NODE_ADDRS=(127.0.0.1)
else
  # Shared /home across nodes (as NFS homes on a real cluster) unless told
  # otherwise; every ssh session on a host finds this cluster's slurm.conf.
  SSH_HOSTS_SHARED_HOME="${SSH_HOSTS_SHARED_HOME:-1}" \
  SSH_HOSTS_SETENV="${SSH_HOSTS_SETENV:+$SSH_HOSTS_SETENV }SLURM_CONF=$D/slurm.conf" \
    "$(dirname "$0")/start-ssh-hosts.sh" "$NODES" >/dev/null
  source "$TESTINFRA_STATE/ssh-hosts/info.env"
  CTLADDR="${SSH_SUBNET%.0/24}.1"
  read -r -a NODE_NAMES <<< "$SSH_HOST_NAMES"
  read -r -a NODE_ADDRS <<< "$SSH_HOSTS"
  NODE_NAMES=("${NODE_NAMES[@]:0:$NODES}"); NODE_ADDRS=("${NODE_ADDRS[@]:0:$NODES}")
fi
echo "$SETUP" > "$D/nodes"

# --- accounting: MariaDB + slurmdbd (optional) -----------------------------
if [ "$ACCT" = 1 ]; then
  DB="$D/db"
  mkdir -p "$DB"; chown mysql:mysql "$DB"
  if [ ! -d "$DB/data/mysql" ]; then
    rm -rf "$DB/data"
    mariadb-install-db --user=mysql --datadir="$DB/data" --auth-root-authentication-method=socket \
      --skip-test-db > "$DB/install.log" 2>&1 || die "mariadb-install-db failed (see $DB/install.log)"
  fi
  if ! pid_alive "$DB/mariadbd.pid"; then
    (exec 3<>/dev/tcp/127.0.0.1/$DB_PORT) 2>/dev/null && die "127.0.0.1:$DB_PORT is in use by another program (SLURM_DB_PORT)"
    setsid runuser -u mysql -- /usr/sbin/mariadbd --no-defaults --datadir="$DB/data" \
      --socket="$DB/mysqld.sock" --port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$DB/mariadbd.pid" \
      --log-error="$DB/mariadbd.log" --innodb-flush-log-at-trx-commit=0 --skip-name-resolve \
      --innodb-buffer-pool-size=128M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
    for i in $(seq 1 300); do
      mariadb --socket="$DB/mysqld.sock" -u root -e 'select 1' >/dev/null 2>&1 && break; sleep 0.1
    done
  fi
  mariadb --socket="$DB/mysqld.sock" -u root -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db;
    CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmdbpw';
    ALTER USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmdbpw';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;" \
    || die "mariadb did not start (see $DB/mariadbd.log)"
  cat > "$D/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdAddr=$CTLADDR
DbdHost=$(hostname -s)
DbdPort=$DBD_PORT
SlurmUser=root
DebugLevel=info
LogFile=$D/slurmdbd.log
PidFile=$D/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=slurmdbpw
StorageLoc=slurm_acct_db
EOF
  chmod 600 "$D/slurmdbd.conf"
  if ! pid_alive "$D/slurmdbd.pid"; then
    (exec 3<>/dev/tcp/$CTLADDR/$DBD_PORT) 2>/dev/null && die "$CTLADDR:$DBD_PORT is in use by another program (SLURM_DBD_PORT)"
    SLURM_CONF="$D/slurm.conf" /usr/sbin/slurmdbd || die "slurmdbd failed (see $D/slurmdbd.log)"
  fi
  wait_port "$CTLADDR" "$DBD_PORT" 30 || die "slurmdbd did not listen on $DBD_PORT (see $D/slurmdbd.log)"
  ACCT_CONF="JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$CTLADDR
AccountingStoragePort=$DBD_PORT
AccountingStorageTRES=gres/gpu"
else
  rm -f "$D/slurmdbd.conf"
  ACCT_CONF="JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none"
fi

GRES_LINE=""; GRESTYPES=""
[ "$GPUS" -gt 0 ] && { GRES_LINE=" Gres=gpu:$GPU_TYPE:$GPUS"; GRESTYPES="GresTypes=gpu"; }

cat > "$D/slurm.conf" <<EOF
# generated by start-slurm.sh
ClusterName=testcluster
SlurmctldHost=$CTLNAME($CTLADDR)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd-%n.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
$ACCT_CONF
JobCompType=jobcomp/filetxt
JobCompLoc=$D/jobcomp.log
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=$((MEM / CPUS))
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
MpiDefault=none
$GRESTYPES
EOF
: > "$D/gres.conf"
echo "AutoDetect=off" >> "$D/gres.conf"
for idx in "${!NODE_NAMES[@]}"; do
  n="${NODE_NAMES[$idx]}"; a="${NODE_ADDRS[$idx]}"
  echo "NodeName=$n NodeAddr=$a NodeHostname=$n CPUs=$CPUS RealMemory=$MEM$GRES_LINE State=UNKNOWN" >> "$D/slurm.conf"
  if [ "$GPUS" -gt 0 ]; then
    # GPU GRES needs File= (file-less GPUs are dropped by slurmd); character
    # devices with /dev/null's numbers stand in for /dev/nvidiaN.
    mkdir -p "$D/dev/$n"
    for g in $(seq 0 $((GPUS - 1))); do
      [ -c "$D/dev/$n/fakegpu$g" ] || mknod "$D/dev/$n/fakegpu$g" c 1 3
      chmod 666 "$D/dev/$n/fakegpu$g"
    done
    echo "NodeName=$n Name=gpu Type=$GPU_TYPE File=$D/dev/$n/fakegpu[0-$((GPUS - 1))]" >> "$D/gres.conf"
  fi
  mkdir -p "$D/spool/$n"
done
ALL="$(IFS=,; echo "${NODE_NAMES[*]}")"
cat >> "$D/slurm.conf" <<EOF
PartitionName=cpu Nodes=$ALL Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$ALL Default=NO MaxTime=INFINITE State=UP
EOF
rm -f "$D/cgroup.conf"   # 22.05 has no CgroupPlugin=disabled; autodetect is used
export SLURM_CONF="$D/slurm.conf"

# --- daemons ---------------------------------------------------------------
if pid_alive "$D/slurmctld.pid"; then
  log "slurmctld already running (pid $(cat "$D/slurmctld.pid")); reconfiguring"
  scontrol reconfigure || true
else
  # -c: start from a clean state (job ids from 1, no stale drained nodes)
  # unless SLURM_KEEP_STATE=1.
  CLEAN=-c; [ "${SLURM_KEEP_STATE:-0}" = 1 ] && CLEAN=""
  (exec 3<>/dev/tcp/$CTLADDR/$CTLD_PORT) 2>/dev/null \
    && die "$CTLADDR:$CTLD_PORT is in use by another program (another Slurm? set SLURM_CTLD_PORT)"
  /usr/sbin/slurmctld -f "$SLURM_CONF" $CLEAN || die "slurmctld failed (see $D/slurmctld.log)"
fi
for idx in "${!NODE_NAMES[@]}"; do
  n="${NODE_NAMES[$idx]}"
  pid_alive "$D/slurmd-$n.pid" && continue
  if [ "$NODES" = 1 ]; then
    /usr/sbin/slurmd -f "$SLURM_CONF" -N "$n" || die "slurmd $n failed (see $D/slurmd-$n.log)"
  else
    # Enter the host's network, mount and UTS namespaces (those of its sshd),
    # so jobs on that node see the same /tmp, /root, hostname as ssh does.
    sp="$(cat "$TESTINFRA_STATE/ssh-hosts/$n/sshd.pid")"
    nsenter --target "$sp" --net --mount --uts -- /usr/sbin/slurmd -f "$SLURM_CONF" -N "$n" \
      || die "slurmd $n failed (see $D/slurmd-$n.log)"
  fi
done

# --- wait until every node is idle ----------------------------------------
ok=0
for i in $(seq 1 300); do
  st="$(sinfo -h -N -p cpu -o '%N %t' 2>/dev/null || true)"
  if [ -n "$st" ] && [ "$(echo "$st" | grep -cE ' (idle|mix|alloc)$')" -ge "$NODES" ]; then ok=1; break; fi
  sleep 0.2
done
[ $ok = 1 ] || { sinfo -N -l || true; die "nodes did not become idle (see $D/*.log)"; }

cat > "$D/info.env" <<EOF
SLURM_CONF=$D/slurm.conf
SLURM_CONTROLLER=$CTLNAME
SLURM_CONTROLLER_ADDR=$CTLADDR
SLURM_CONTROLLER_PORT=$CTLD_PORT
SLURM_SLURMD_PORT=$SLURMD_PORT
SLURM_DBD_PORT=$DBD_PORT
SLURM_DB_PORT=$DB_PORT
SLURM_NODE_ADDRS="${NODE_ADDRS[*]}"
SLURM_NODES="${NODE_NAMES[*]}"
SLURM_PARTITIONS="cpu gpu"
SLURM_DEFAULT_PARTITION=cpu
SLURM_CPUS_PER_NODE=$CPUS
SLURM_MEM_PER_NODE_MB=$MEM
SLURM_GPUS_PER_NODE=$GPUS
SLURM_GPU_TYPE=$GPU_TYPE
SLURM_JOB_DIR=$D/jobs
SLURM_ACCOUNTING=$ACCT
EOF
# host 1 serves as the login node (ssh, with SLURM_CONF set); a single-node
# cluster has no ssh host
[ "$NODES" -gt 1 ] && echo "SLURM_LOGIN_ADDR=${NODE_ADDRS[0]}" >> "$D/info.env"
t1=$(date +%s.%N)
log "slurm ready ($NODES node(s)) in $(awk "BEGIN{printf \"%.2f\", $t1-$t0}")s"
sinfo
echo "use: export SLURM_CONF=$D/slurm.conf   (info: $D/info.env; a shared job dir: $D/jobs)"

# Helpers for the testinfra scripts (start real servers for SkyGo's
# integration tests). Source it; do not execute it. Everything here is
# idempotent. Adopted from the development environment's testinfra kit.

TESTINFRA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Where state (configs, keys, pid files, logs, info files) lives.
TESTINFRA_STATE="${TESTINFRA_STATE:-/var/lib/testinfra}"
mkdir -p "$TESTINFRA_STATE"

log() { printf '[testinfra %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root"

# ensure_pkgs PKG...: apt-get install the packages that are not installed yet.
# apt-get update runs at most once per machine boot-ish (marker in /run), and
# only when something is missing. Services that the packages would start are
# blocked by policy-rc.d (the image ships one that exits 101; we add our own
# temporarily if it is absent) so no distro daemon grabs our ports.
ensure_pkgs() {
  local missing=() p
  for p in "$@"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing: ${missing[*]}"
  local added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    added_policy=1
  fi
  if [ ! -e /run/testinfra-apt-updated ]; then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null || die "apt-get update failed"
    touch /run/testinfra-apt-updated
  fi
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
  [ $added_policy = 1 ] && rm -f /usr/sbin/policy-rc.d
  return 0
}

# proc_alive PID: true if PID is a live process (a zombie counts as dead: on
# this machine PID 1 reaps orphans only now and then).
proc_alive() {
  kill -0 "$1" 2>/dev/null || return 1
  local st
  st="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null || true)"
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
# pid_started_by FILE PID: true if process PID started no later than FILE
# was written (one second of slack for the boot time's rounding). A pid file
# outlives its process when that is killed, and its pid soon names another
# (pid_max 32768 wraps in minutes under the tests, whose hosts share one PID
# namespace): that process started after the file was written, and is not
# the file's to signal.
pid_started_by() {
  local st bt hz
  st="$(cat "/proc/$2/stat" 2>/dev/null)" || return 1
  st="$(printf '%s\n' "${st##*) }" | cut -d' ' -f20)"
  bt="$(sed -n 's/^btime //p' /proc/stat)"
  hz="$(getconf CLK_TCK 2>/dev/null || echo 100)"
  [ -n "$st" ] && [ $(( bt + st / hz )) -le $(( $(stat -c %Y "$1") + 1 )) ]
}
# pid_alive FILE: true if FILE holds the pid of a live process that is the
# one that wrote it (pid_started_by).
pid_alive() { [ -s "$1" ] && proc_alive "$(cat "$1")" && pid_started_by "$1" "$(cat "$1")"; }

# stop_pidfile FILE [NAME]: TERM the pid in FILE, wait up to 10s, then KILL.
stop_pidfile() {
  local f="$1" name="${2:-$1}" pid i
  [ -s "$f" ] || return 0
  pid="$(cat "$f")"
  if proc_alive "$pid" && pid_started_by "$f" "$pid"; then
    kill "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do proc_alive "$pid" || break; sleep 0.1; done
    if proc_alive "$pid"; then log "$name ($pid) ignored TERM; KILL"; kill -9 "$pid" 2>/dev/null || true; fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$f"
}

# wait_port HOST PORT [TIMEOUT_S]: wait until a TCP connect succeeds.
wait_port() {
  local host="$1" port="$2" t="${3:-30}" i
  for i in $(seq 1 $((t * 10))); do
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# wait_port_in_ns NS HOST PORT [TIMEOUT_S]
wait_port_in_ns() {
  local ns="$1" host="$2" port="$3" t="${4:-30}" i
  for i in $(seq 1 $((t * 10))); do
    ip netns exec "$ns" bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

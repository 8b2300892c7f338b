#!/usr/bin/env bash
# Start a moto server (AWS API emulator; all services on one endpoint) on
# MOTO_HOST:PORT (default 127.0.0.1:5000), using the moto that the machine
# image ships for Python 3.11 (found by moto-python.sh; PyPI is not reachable
# here, so it is not installed by this script). Dummy credentials; state is
# in memory and lost on stop. MOTO_HOST may be a host set's bridge address
# (start-ssh-hosts.sh's PREFIX.1), so that the hosts reach it too.
# internal/testutil/mototest starts its own servers the same way.
#
# Usage: start-moto.sh [PORT]       (env MOTO_PORT, MOTO_HOST)
# Writes $TESTINFRA_STATE/moto/info.env (AWS_ENDPOINT_URL, dummy keys, region).
# Reset all state without a restart:  curl -X POST $AWS_ENDPOINT_URL/moto-api/reset
set -euo pipefail
source "$(dirname "$0")/common.sh"

PORT="${1:-${MOTO_PORT:-5000}}"
ensure_pkgs curl
D="$TESTINFRA_STATE/moto"
mkdir -p "$D"
t0=$(date +%s.%N)

HOST="${MOTO_HOST:-127.0.0.1}"
# the real interpreter, not a pyenv shim, so that $! is the server itself
PY="$("$(dirname "$0")/moto-python.sh")" || die "moto cannot run here (see above)"

if pid_alive "$D/moto.pid" && [ "$(cat "$D/port" 2>/dev/null)" != "$HOST:$PORT" ]; then
  log "address changed: restarting moto"; stop_pidfile "$D/moto.pid" moto
fi
if pid_alive "$D/moto.pid"; then
  log "moto already running (pid $(cat "$D/moto.pid"))"
else
  (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null \
    && die "$HOST:$PORT is already in use by another program (not ours); pick another port"
  # setsid: own session, so the server survives the calling shell
  # AWS managed IAM policies (e.g. AmazonEC2FullAccess) exist only with this
  MOTO_IAM_LOAD_MANAGED_POLICIES="${MOTO_IAM_LOAD_MANAGED_POLICIES:-true}" \
  setsid "$PY" -m moto.server -H "$HOST" -p "$PORT" > "$D/moto.log" 2>&1 < /dev/null &
  echo $! > "$D/moto.pid"
  echo "$HOST:$PORT" > "$D/port"
  for i in $(seq 1 300); do
    curl -sf "http://$HOST:$PORT/moto-api/" >/dev/null 2>&1 && break
    pid_alive "$D/moto.pid" || die "moto exited (see $D/moto.log)"
    sleep 0.1
  done
  curl -sf "http://$HOST:$PORT/moto-api/" >/dev/null || die "moto did not answer (see $D/moto.log)"
fi

cat > "$D/info.env" <<EOF
AWS_ENDPOINT_URL=http://$HOST:$PORT
AWS_ACCESS_KEY_ID=testing
AWS_SECRET_ACCESS_KEY=testing
AWS_SESSION_TOKEN=testing
AWS_DEFAULT_REGION=us-east-1
AWS_REGION=us-east-1
MOTO_PORT=$PORT
EOF
t1=$(date +%s.%N)
log "moto ready in $(awk "BEGIN{printf \"%.2f\", $t1-$t0}")s"
echo "endpoint: http://$HOST:$PORT   (set -a; source $D/info.env; set +a; aws ec2 describe-regions)"
echo "info: $D/info.env"

#!/usr/bin/env bash
# Stop the one host start-ssh-host.sh started at IP: its processes end (by
# pid), its namespace and veth go. Its dir (host key, /root, /home and /tmp
# upper layers) is kept, so SSH_HOSTS_KEEP_STATE=1 start-ssh-host.sh IP brings
# the same disk back (an EC2 stop); --purge drops it (a terminate).
# Idempotent. Env: SSH_HOSTS_NAME as for start-ssh-host.sh.
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/ssh-host-lib.sh"
IP="${1:-}"
[[ "$IP" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "usage: stop-ssh-host.sh IP [--purge]"
NAME="${SSH_HOSTS_NAME:-tihost}"
NS="$NAME-${IP##*.}"
D="$TESTINFRA_STATE/ssh-hosts"
if [ -e "/run/netns/$NS" ] || ip link show "$NS" >/dev/null 2>&1; then
  stop_ns_host "$NS" "$NS"
fi
rm -f "$D/$NS/info.env"
if [ "${2:-}" = "--purge" ]; then rm -rf "${D:?}/$NS"; fi
exit 0

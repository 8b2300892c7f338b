#!/usr/bin/env bash
# Start N fake "hosts", each a network namespace (own IP, own hostname, own
# /root, /home and /tmp views) running its own sshd on port 22, all joined by a
# bridge. The root namespace reaches them at 10.200.0.11 .. 10.200.0.(10+N);
# the hosts reach each other the same way. The namespaces have no default
# route, so nothing in them can reach anything but the bridge subnet.
#
# Usage: start-ssh-hosts.sh [N]            (default 2, max 200; 0 = only the
#        bridge, for hosts started one by one at given addresses with
#        start-ssh-host.sh)
# Env:   SSH_HOSTS_PREFIX (default 10.200.0) SSH_HOSTS_NAME (default tihost;
#        it names the namespaces, the bridge and the veths, so sets of hosts
#        with different names and prefixes can run side by side)
#        SSH_TEST_USER (default sky) SSH_HOSTS_SHARED_HOME (0) SSH_HOSTS_KEEP_STATE (0)
#        SSH_HOSTS_SETENV ("NAME=VALUE ..." set in every ssh session on the
#        hosts, through sshd's SetEnv; start-slurm.sh sets SLURM_CONF so)
# Writes $TESTINFRA_STATE/ssh-hosts/:
#   info.env            shell-sourceable summary (SSH_HOSTS="ip ip ...", key, ...)
#   hosts.txt           one "NAME IP" line per host
#   ssh_config          ssh -F ssh_config tihost1 ...
#   known_hosts         host keys of all hosts
#   ssh_node_pools.yaml SkyPilot-style SSH node pool ("testpool")
# Idempotent: hosts that are already up are kept; hosts beyond N are left alone.
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/ssh-host-lib.sh"

N="${1:-2}"
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 0 ] && [ "$N" -le 200 ] || die "N must be 0..200"
PFX="${SSH_HOSTS_PREFIX:-10.200.0}"
NAME="${SSH_HOSTS_NAME:-tihost}"
BR="${NAME}br0"
# Interface names (the bridge, and the veths "${NAME}v<i>") are capped at 15
# characters by the kernel.
[[ "$NAME" =~ ^[a-z][a-z0-9]*$ ]] && [ $(( ${#NAME} + 1 + ${#N} )) -le 15 ] && [ ${#BR} -le 15 ] \
  || die "SSH_HOSTS_NAME must be lower-case letters and digits, short enough for \"${NAME}v$N\" (15 characters)"
[[ "$PFX" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "SSH_HOSTS_PREFIX must be three octets, e.g. 10.200.0"
TEST_USER="${SSH_TEST_USER:-sky}"
# SSH_HOSTS_SHARED_HOME=1: every host mounts one /home, $D/home, like an NFS
# home on a real cluster (the Slurm set-up uses this); 0 (default): per-host
# copy-on-write views of the machine's /home. The shared one is the set's
# own, not the machine's /home: what another user of the machine puts in
# ~sky/.bashrc (an `export SLURM_CONF=` of another cluster, say) must not
# reach these hosts. It holds the test user's home with the set's key.
# It applies to hosts started after it is set: stop-ssh-hosts.sh to change it.
SHARED_HOME="${SSH_HOSTS_SHARED_HOME:-0}"
SETENV="${SSH_HOSTS_SETENV:-}"
KEEP_STATE="${SSH_HOSTS_KEEP_STATE:-0}"
for kv in $SETENV; do
  [[ "$kv" =~ ^[A-Za-z_][A-Za-z0-9_]*=[^\"\']*$ ]] || die "SSH_HOSTS_SETENV: \"$kv\" is not NAME=VALUE (no quotes, no spaces)"
done
D="$TESTINFRA_STATE/ssh-hosts"
mkdir -p "$D"; chmod 700 "$D"
t0=$(date +%s.%N)

# Re-use start-sshd.sh's user/key set-up without starting its server twice:
# it is cheap and idempotent, and a server on 127.0.0.1 is handy anyway.
"$(dirname "$0")/start-sshd.sh" >/dev/null
KEY="$TESTINFRA_STATE/ssh-client/id_ed25519"
ensure_pkgs iproute2
SHOME="$D/home"
if [ "$SHARED_HOME" = 1 ]; then
  TH="$SHOME/$TEST_USER"
  mkdir -p "$TH/.ssh"
  chmod 755 "$SHOME" "$TH"
  install -m 600 "$KEY.pub" "$TH/.ssh/authorized_keys"
  install -m 600 "$KEY" "$TH/.ssh/id_ed25519"
  install -m 644 "$KEY.pub" "$TH/.ssh/id_ed25519.pub"
  chmod 700 "$TH/.ssh"
  chown -R "$TEST_USER:$TEST_USER" "$TH"
fi

ensure_bridge "$BR" "$PFX"

: > "$D/hosts.txt.new"
: > "$D/known_hosts.new"
cat > "$D/ssh_config.new" <<EOF
Host ${NAME}*
  User root
  Port 22
  IdentityFile $KEY
  IdentitiesOnly yes
  UserKnownHostsFile $D/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
EOF

# /etc/hosts seen inside every host: the real one plus all host names. It is
# rewritten in place (same inode) so hosts already running see new entries.
write_etc_hosts() { # N
  local i tmp="$D/etc-hosts.tmp"
  grep -v "# testinfra-ssh-hosts" /etc/hosts > "$tmp" || true
  for i in $(seq 1 "$1"); do echo "$PFX.$((10 + i)) $NAME$i # testinfra-ssh-hosts"; done >> "$tmp"
  touch "$D/etc-hosts"; cat "$tmp" > "$D/etc-hosts"; rm -f "$tmp"
}
write_etc_hosts "$N"

start_host() { # i
  local i="$1" ns="$NAME$i" ip="$PFX.$((10 + i))"
  start_ns_host "$ns" "$ip" "${NAME}v$i" "$ns" "$D/etc-hosts"
  local H="$D/$ns"
  echo "$ns $ip" >> "$D/hosts.txt.new"
  echo "$ip,$ns $(cut -d' ' -f1,2 "$H/ssh_host_ed25519_key.pub")" >> "$D/known_hosts.new"
  printf 'Host %s\n  HostName %s\n' "$ns" "$ip" >> "$D/ssh_config.new"
}

for i in $(seq 1 "$N"); do start_host "$i"; done
mv "$D/hosts.txt.new" "$D/hosts.txt"
mv "$D/known_hosts.new" "$D/known_hosts"
mv "$D/ssh_config.new" "$D/ssh_config"

IPS="$(awk '{print $2}' "$D/hosts.txt" | xargs)"
for ip in $IPS; do
  wait_port "$ip" 22 15 || die "sshd on $ip did not come up (see $D/*/sshd.log)"
done
# smoke test: every host answers with its own hostname
for ip in $IPS; do
  ssh -F "$D/ssh_config" -o HostName="$ip" "${NAME}x" hostname >/dev/null || die "ssh to $ip failed"
done

{
  echo "SSH_HOSTS=\"$IPS\""
  echo "SSH_HOST_NAMES=\"$(awk '{print $1}' "$D/hosts.txt" | xargs)\""
  echo "SSH_PORT=22"
  echo "SSH_USER=root"
  echo "SSH_TEST_USER=$TEST_USER"
  echo "SSH_KEY=$KEY"
  echo "SSH_KNOWN_HOSTS=$D/known_hosts"
  echo "SSH_CONFIG=$D/ssh_config"
  echo "SSH_BRIDGE=$BR"
  echo "SSH_SUBNET=$PFX.0/24"
  echo "SSH_HOSTS_SHARED_HOME=$SHARED_HOME"
  [ "$SHARED_HOME" = 1 ] && echo "SSH_SHARED_HOME_DIR=$SHOME"
  echo "SSH_HOSTS_SETENV=\"$SETENV\""
} > "$D/info.env"
{
  echo "testpool:"
  echo "  user: root"
  echo "  identity_file: $KEY"
  echo "  hosts:"
  for ip in $IPS; do echo "    - $ip"; done
} > "$D/ssh_node_pools.yaml"

t1=$(date +%s.%N)
log "$N ssh hosts ready in $(awk "BEGIN{printf \"%.2f\", $t1-$t0}")s"
cat "$D/hosts.txt"
echo "connect: ssh -F $D/ssh_config ${NAME}1     (or ssh -i $KEY -o UserKnownHostsFile=$D/known_hosts root@$PFX.11)"
echo "info: $D/info.env"

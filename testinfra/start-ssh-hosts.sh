#!/usr/bin/env bash
# Start N fake "hosts", each a network namespace (own IP, own hostname, own
# /root, /home and /tmp views) running its own sshd on port 22, all joined by a
# bridge. The root namespace reaches them at 10.200.0.11 .. 10.200.0.(10+N);
# the hosts reach each other the same way. The namespaces have no default
# route, so nothing in them can reach anything but the bridge subnet.
#
# Usage: start-ssh-hosts.sh [N]            (default 2, max 200)
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

N="${1:-2}"
[[ "$N" =~ ^[0-9]+$ ]] && [ "$N" -ge 1 ] && [ "$N" -le 200 ] || die "N must be 1..200"
PFX="${SSH_HOSTS_PREFIX:-10.200.0}"
NAME="${SSH_HOSTS_NAME:-tihost}"
BR="${NAME}br0"
# Interface names (the bridge, and the veths "${NAME}v<i>") are capped at 15
# characters by the kernel.
[[ "$NAME" =~ ^[a-z][a-z0-9]*$ ]] && [ $(( ${#NAME} + 1 + ${#N} )) -le 15 ] && [ ${#BR} -le 15 ] \
  || die "SSH_HOSTS_NAME must be lower-case letters and digits, short enough for \"${NAME}v$N\" (15 characters)"
[[ "$PFX" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "SSH_HOSTS_PREFIX must be three octets, e.g. 10.200.0"
# Another set of hosts (another SSH_HOSTS_NAME) on the same subnet would make
# the routes ambiguous: refuse rather than break both.
if other="$(ip -4 -o addr show 2>/dev/null | awk -v p="$PFX.1/24" -v br="$BR" '$4 == p && $2 != br {print $2}')" && [ -n "$other" ]; then
  die "$PFX.0/24 is already used by interface $other: pick another SSH_HOSTS_PREFIX"
fi
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

# --- bridge in the root namespace ------------------------------------------
if ! ip link show "$BR" >/dev/null 2>&1; then
  ip link add "$BR" type bridge
fi
# (no `cmd | grep -q` under pipefail: grep -q's early exit can SIGPIPE cmd)
[[ "$(ip -4 -o addr show dev "$BR")" == *" $PFX.1/24 "* ]] || ip addr add "$PFX.1/24" dev "$BR"
ip link set "$BR" up
# bridged frames must not be dropped by a host firewall via br_netfilter
for f in /proc/sys/net/bridge/bridge-nf-call-iptables /proc/sys/net/bridge/bridge-nf-call-ip6tables; do
  [ -w "$f" ] && echo 0 > "$f" 2>/dev/null || true
done

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
  local i="$1" ns="$NAME$i" ip="$PFX.$((10 + i))" veth="${NAME}v$i"
  local H="$D/$ns"
  mkdir -p "$H"/{up-root,work-root,up-home,work-home,tmp}
  chmod 1777 "$H/tmp"
  [ -e "/run/netns/$ns" ] || ip netns add "$ns"
  if ! ip link show "$veth" >/dev/null 2>&1; then
    ip link add "$veth" type veth peer name eth0 netns "$ns"
  fi
  ip link set "$veth" master "$BR"
  ip link set "$veth" up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip link set eth0 up
  [[ "$(ip netns exec "$ns" ip -4 -o addr show dev eth0)" == *" $ip/24 "* ]] \
    || ip netns exec "$ns" ip addr add "$ip/24" dev eth0
  [ -f "$H/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$H/ssh_host_ed25519_key"
  local old=""
  [ -f "$H/sshd_config" ] && old="$(cat "$H/sshd_config")"
  cat > "$H/sshd_config" <<EOF
Port 22
ListenAddress $ip
# also the host's own loopback: tools that tunnel to "localhost:22" on a login
# node (SkyPilot's Slurm client does) need it
ListenAddress 127.0.0.1
HostKey $H/ssh_host_ed25519_key
PidFile $H/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
MaxStartups 100:30:200
MaxSessions 100
AcceptEnv LANG LC_*
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
  # sessions get these whatever the client sends (a login node's SLURM_CONF)
  [ -n "$SETENV" ] && echo "SetEnv $SETENV" >> "$H/sshd_config"
  /usr/sbin/sshd -t -f "$H/sshd_config" || die "bad sshd_config for $ns"
  if pid_alive "$H/sshd.pid" && [ "$old" != "$(cat "$H/sshd_config")" ]; then
    # sshd re-executes itself on HUP (same pid) and so rereads its config
    kill -HUP "$(cat "$H/sshd.pid")"
  fi
  if ! pid_alive "$H/sshd.pid"; then
    # a host that (re)starts gets fresh /root, /home and /tmp views, unless
    # SSH_HOSTS_KEEP_STATE=1; its host key is kept.
    if [ "${SSH_HOSTS_KEEP_STATE:-0}" != 1 ]; then
      rm -rf "$H"/{up-root,work-root,up-home,work-home,tmp}
      mkdir -p "$H"/{up-root,work-root,up-home,work-home,tmp}
      chmod 1777 "$H/tmp"
    fi
    # Own mount + UTS namespace: hostname = ns name; /root and /home are
    # copy-on-write overlays (tools under /root stay usable, writes stay per
    # host); /tmp is a private empty dir. Everything else is shared with the
    # real machine (same /usr, same /var/lib/testinfra).
    # (Not `ip netns exec`: it remounts /sys and so hides /sys/fs/cgroup,
    # which slurmd needs; here the cgroup mounts are carried over.)
    mkdir -p "$H/cgmnt"
    nsenter --net="/run/netns/$ns" unshare --mount --uts --propagation private bash -c "
      set -e
      hostname $ns
      mount --rbind /sys/fs/cgroup $H/cgmnt
      umount -l /sys
      mount -t sysfs sysfs /sys
      mount --move $H/cgmnt /sys/fs/cgroup
      mount -t overlay overlay -o lowerdir=/root,upperdir=$H/up-root,workdir=$H/work-root /root
      if [ $SHARED_HOME = 0 ]; then
        mount -t overlay overlay -o lowerdir=/home,upperdir=$H/up-home,workdir=$H/work-home /home
      else
        mount --bind $SHOME /home
      fi
      mount --bind $H/tmp /tmp
      mount --bind $D/etc-hosts /etc/hosts
      exec /usr/sbin/sshd -f $H/sshd_config -E $H/sshd.log
    "
  fi
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

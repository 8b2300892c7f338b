# One fake host (a network namespace with its own sshd) and the bridge the
# hosts of a set share; sourced by start-ssh-hosts.sh (hosts NAME1..N at
# PREFIX.11..) and start-ssh-host.sh / stop-ssh-host.sh (one host at an
# exact address, as a cloud emulator assigns it). Source common.sh first.

# ensure_bridge BR PREFIX: the set's bridge with PREFIX.1/24 in the root
# namespace. Another interface on the same subnet would make the routes
# ambiguous: refuse rather than break both.
ensure_bridge() {
  local br="$1" pfx="$2" other f
  if other="$(ip -4 -o addr show 2>/dev/null | awk -v p="$pfx.1/24" -v br="$br" '$4 == p && $2 != br {print $2}')" && [ -n "$other" ]; then
    die "$pfx.0/24 is already used by interface $other: pick another SSH_HOSTS_PREFIX"
  fi
  ip link show "$br" >/dev/null 2>&1 || ip link add "$br" type bridge
  # (no `cmd | grep -q` under pipefail: grep -q's early exit can SIGPIPE cmd)
  [[ "$(ip -4 -o addr show dev "$br")" == *" $pfx.1/24 "* ]] || ip addr add "$pfx.1/24" dev "$br"
  ip link set "$br" up
  # bridged frames must not be dropped by a host firewall via br_netfilter
  for f in /proc/sys/net/bridge/bridge-nf-call-iptables /proc/sys/net/bridge/bridge-nf-call-ip6tables; do
    [ -w "$f" ] && echo 0 > "$f" 2>/dev/null || true
  done
}

# start_ns_host NS IP VETH HOSTNAME ETC_HOSTS: namespace NS with eth0 at
# IP/24 on bridge $BR (VETH is its root-side end), sshd on IP:22 and on the
# host's own 127.0.0.1:22. State is in $D/NS. Uses $BR, $D, $SHARED_HOME,
# $SHOME, $SETENV and $KEEP_STATE (1: a host that starts again keeps its
# /root, /home and /tmp; else they are fresh; the host key is kept either
# way). ETC_HOSTS is bind-mounted on the host's /etc/hosts.
# HOST_PREPARE, when set, is a command run (with the host's dir) after the
# overlay dirs exist and before sshd starts, e.g. to put a user's
# authorized_keys into the host's /home.
start_ns_host() {
  local ns="$1" ip="$2" veth="$3" hname="$4" etchosts="$5"
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
  cat > "$H/sshd_config" <<EOC
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
EOC
  # sessions get these whatever the client sends (a login node's SLURM_CONF)
  [ -n "$SETENV" ] && echo "SetEnv $SETENV" >> "$H/sshd_config"
  /usr/sbin/sshd -t -f "$H/sshd_config" || die "bad sshd_config for $ns"
  if pid_alive "$H/sshd.pid" && [ "$old" != "$(cat "$H/sshd_config")" ]; then
    # sshd re-executes itself on HUP (same pid) and so rereads its config
    kill -HUP "$(cat "$H/sshd.pid")"
  fi
  if ! pid_alive "$H/sshd.pid"; then
    if [ "$KEEP_STATE" != 1 ]; then
      rm -rf "$H"/{up-root,work-root,up-home,work-home,tmp}
      mkdir -p "$H"/{up-root,work-root,up-home,work-home,tmp}
      chmod 1777 "$H/tmp"
    fi
    [ -n "${HOST_PREPARE:-}" ] && $HOST_PREPARE "$H"
    # Own mount + UTS namespace: hostname = HOSTNAME; /root and /home are
    # copy-on-write overlays (tools under /root stay usable, writes stay per
    # host); /tmp is a private dir. Everything else is shared with the
    # real machine (same /usr, same /var/lib/testinfra).
    # (Not `ip netns exec`: it remounts /sys and so hides /sys/fs/cgroup,
    # which slurmd needs; here the cgroup mounts are carried over.)
    mkdir -p "$H/cgmnt"
    nsenter --net="/run/netns/$ns" unshare --mount --uts --propagation private bash -c "
      set -e
      hostname $hname
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
      mount --bind $etchosts /etc/hosts
      exec /usr/sbin/sshd -f $H/sshd_config -E $H/sshd.log
    "
  fi
}

# stop_ns_host NS VETH: end every process in namespace NS (its sshd by pid
# file, the rest as `ip netns pids` lists them), delete it and its veth.
stop_ns_host() {
  local ns="$1" veth="$2" pids
  [ -f "$D/$ns/sshd.pid" ] && stop_pidfile "$D/$ns/sshd.pid" "sshd[$ns]"
  pids="$(ip netns pids "$ns" 2>/dev/null || true)"
  if [ -n "$pids" ]; then
    kill $pids 2>/dev/null || true
    sleep 0.5
    pids="$(ip netns pids "$ns" 2>/dev/null || true)"
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
  fi
  ip netns del "$ns" 2>/dev/null || true
  ip link del "$veth" 2>/dev/null || true
  log "removed host $ns"
}

#!/usr/bin/env bash
# Start one fake host at an exact address of a set's subnet, as a cloud
# emulator (moto) hands private IPs out of a subnet: namespace
# ${SSH_HOSTS_NAME}-<last octet> with eth0 at IP/24 on the set's bridge
# (made if missing, with ${SSH_HOSTS_PREFIX}.1), sshd on IP:22, hostname
# ip-a-b-c-d as on EC2. The user of a cloud image is made the way cloud-init
# does it: SSH_HOST_USER is created on the machine if missing (bash,
# passwordless sudo; users are machine-wide, their homes are per host) and
# the keys of SSH_HOST_AUTHORIZED_KEYS go to ~/.ssh/authorized_keys in this
# host's own /home (or /root).
#
# Usage: start-ssh-host.sh IP
# Env:   SSH_HOSTS_NAME (default tihost) SSH_HOSTS_PREFIX (default 10.200.0;
#        IP must be PREFIX.2 .. PREFIX.254) SSH_HOST_USER (default root)
#        SSH_HOST_AUTHORIZED_KEYS (a file of public keys; default none)
#        SSH_HOST_HOSTNAME (default ip-a-b-c-d) SSH_HOSTS_KEEP_STATE (1: a host
#        started again keeps its /root, /home and /tmp, as an EC2 instance
#        keeps its disk across stop and start; default 0)
# Writes $TESTINFRA_STATE/ssh-hosts/<ns>/info.env (SSH_HOST_IP, SSH_HOST_NS,
# SSH_HOST_USER, SSH_HOST_PUBKEY = the host's public key line).
# Idempotent: a host that is up is kept (its authorized keys are topped up).
set -euo pipefail
source "$(dirname "$0")/common.sh"
source "$(dirname "$0")/ssh-host-lib.sh"

IP="${1:-}"
PFX="${SSH_HOSTS_PREFIX:-10.200.0}"
NAME="${SSH_HOSTS_NAME:-tihost}"
BR="${NAME}br0"
[[ "$PFX" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "SSH_HOSTS_PREFIX must be three octets, e.g. 10.200.0"
OCT="${IP##*.}"
[[ "$IP" == "$PFX."* && "$OCT" =~ ^[0-9]+$ && "${IP%.*}" == "$PFX" ]] && [ "$OCT" -ge 2 ] && [ "$OCT" -le 254 ] \
  || die "usage: start-ssh-host.sh IP, with IP in $PFX.2 .. $PFX.254 (got \"$IP\")"
NS="$NAME-$OCT"
[[ "$NAME" =~ ^[a-z][a-z0-9]*$ ]] && [ ${#NS} -le 15 ] && [ ${#BR} -le 15 ] \
  || die "SSH_HOSTS_NAME must be lower-case letters and digits, short enough for \"$NS\" (15 characters)"
HUSER="${SSH_HOST_USER:-root}"
[[ "$HUSER" =~ ^[a-z_][a-z0-9_-]*$ ]] || die "SSH_HOST_USER \"$HUSER\" is not a user name"
KEYS="${SSH_HOST_AUTHORIZED_KEYS:-}"
[ -z "$KEYS" ] || [ -r "$KEYS" ] || die "SSH_HOST_AUTHORIZED_KEYS: cannot read $KEYS"
HNAME="${SSH_HOST_HOSTNAME:-ip-${IP//./-}}"
SHARED_HOME=0 SHOME="" SETENV=""
KEEP_STATE="${SSH_HOSTS_KEEP_STATE:-0}"
D="$TESTINFRA_STATE/ssh-hosts"
mkdir -p "$D"; chmod 700 "$D"
ensure_pkgs openssh-server openssh-client rsync sudo iproute2
mkdir -p /run/sshd; chmod 755 /run/sshd

if [ "$HUSER" != root ]; then
  # `id || useradd || id`: another host of the set may make it meanwhile
  id "$HUSER" >/dev/null 2>&1 || useradd -M -d "/home/$HUSER" -s /bin/bash -U "$HUSER" 2>/dev/null || id "$HUSER" >/dev/null
  # '!' (locked) makes sshd refuse the user when UsePAM=no; '*' = no password, not locked.
  usermod -p '*' "$HUSER"
  echo "$HUSER ALL=(ALL) NOPASSWD:ALL" > "/etc/sudoers.d/90-testinfra-$HUSER"
  chmod 440 "/etc/sudoers.d/90-testinfra-$HUSER"
fi
UHOME="$(getent passwd "$HUSER" | cut -d: -f6)"
case "$UHOME" in
  /root) UPPER_SUB="up-root" UREL="" ;;
  /home/*) UPPER_SUB="up-home" UREL="${UHOME#/home/}" ;;
  *) die "$HUSER's home $UHOME is neither /root nor under /home: this host cannot give it its own copy" ;;
esac

# install_keys H: the user's ~/.ssh/authorized_keys in the host's own
# /home (or /root) upper dir, before its sshd starts; the keys already
# there (a kept disk) stay.
install_keys() {
  local h="$1/$UPPER_SUB${UREL:+/$UREL}" k
  [ -n "$KEYS" ] || return 0
  mkdir -p "$h/.ssh"
  touch "$h/.ssh/authorized_keys"
  while IFS= read -r k; do
    [ -n "$k" ] || continue
    grep -qxF "$k" "$h/.ssh/authorized_keys" || echo "$k" >> "$h/.ssh/authorized_keys"
  done < "$KEYS"
  chmod 700 "$h/.ssh"; chmod 600 "$h/.ssh/authorized_keys"
  chown "$HUSER:" "$h" 2>/dev/null || true
  chown -R "$HUSER:" "$h/.ssh"
  [ -n "$UREL" ] && chmod 755 "$h"
  return 0
}

ensure_bridge "$BR" "$PFX"
H="$D/$NS"
mkdir -p "$H"
# /etc/hosts of this host: the machine's plus its own name (sudo looks it up)
{ grep -v "# testinfra-ssh-hosts" /etc/hosts || true; echo "$IP $HNAME # testinfra-ssh-hosts"; } > "$H/etc-hosts"
if pid_alive "$H/sshd.pid"; then
  install_keys "$H" # the upper dir is the live view's top layer
else
  HOST_PREPARE=install_keys
fi
start_ns_host "$NS" "$IP" "$NS" "$HNAME" "$H/etc-hosts"
wait_port "$IP" 22 15 || die "sshd on $IP did not come up (see $H/sshd.log)"
{
  echo "SSH_HOST_IP=$IP"
  echo "SSH_HOST_NS=$NS"
  echo "SSH_HOST_USER=$HUSER"
  echo "SSH_HOST_PUBKEY=\"$(cut -d' ' -f1,2 "$H/ssh_host_ed25519_key.pub")\""
} > "$H/info.env"
log "host $NS up at $IP (user $HUSER, hostname $HNAME)"

// Package ssh is SkyGo's SSH node pool infrastructure (`infra: ssh/<pool>`):
// the user's own machines, listed in ~/.sky/ssh_node_pools.yaml, reached
// with golang.org/x/crypto/ssh.
//
// The pieces, bottom up:
//   - pools.go: the pools file (LoadPools) and ssh.allowed_node_pools
//     (FilterAllowed);
//   - sshconfig.go, endpoint.go: the user's ~/.ssh/config (HostName, User,
//     Port, IdentityFile, ProxyJump) and Resolve, which turns a pool host
//     into an Endpoint;
//   - knownhosts.go: accept-new host key checking, recorded in
//     ~/.sky/known_hosts;
//   - dialer.go: one cached, multiplexed connection per host, with
//     keepalives and redial, and DialError naming host and cause;
//   - runner.go: Runner, a provision.CommandRunner whose commands run in
//     their own session so cancel kills the whole remote tree;
//   - probe.go: Probe (OS, arch, CPUs, memory, GPUs) (the node runtime for the host's arch is installed by infra.EnsureBinary);
//   - provisioner.go: Provisioner, claiming whole hosts per cluster;
//   - genconfig.go: the hosts of ~/.sky/skygo/generated/ssh/<cluster> for
//     `ssh <cluster>` (written by internal/infra's WriteSSHConfigHosts).
package ssh

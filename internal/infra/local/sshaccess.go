package local

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/skygo/skygo/internal/agent"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
)

// `ssh <cluster>` on the local infrastructure: the head's agent serves
// SSH for every node on the node's own address, at one port per cluster
// recorded in cluster.json (NodeInfo.AgentSSHPort). The user logs in with
// SkyGo's key (infra.ClientKey), which every node's ~/.ssh/authorized_keys
// lists, and the agent's host key is written to the cluster's generated
// known_hosts, so ssh asks nothing.

var _ infra.SSHAccess = (*Infra)(nil)

// ensureSSHPort keeps the cluster's recorded port when it is free or
// already served by the cluster's own agent, and picks a new free one
// otherwise (a cluster made before SSH, or a port some other program took
// while the cluster was stopped).
func ensureSSHPort(rec *record) error {
	if len(rec.Nodes) == 0 {
		return nil
	}
	if port := rec.Nodes[0].AgentSSHPort; port > 0 && portUsable(rec.Nodes, port) {
		return nil
	}
	port, err := freePort(rec.Nodes)
	if err != nil {
		return err
	}
	for i := range rec.Nodes {
		rec.Nodes[i].AgentSSHPort = port
	}
	return nil
}

func portUsable(nodes []provision.NodeInfo, port int) bool {
	hostKey, _ := agent.HostPublicKey(nodes[0].Home)
	for _, n := range nodes {
		addr := net.JoinHostPort(n.InternalIP, strconv.Itoa(port))
		l, err := listenOn(n, addr)
		if err == nil {
			l.Close()
			continue
		}
		if hostKey == "" || !servedByAgent(addr, hostKey, 300*time.Millisecond) {
			return false
		}
	}
	return true
}

// servedByAgent reports whether an SSH server with the cluster's host key
// (authorized_keys form) answers at addr: another cluster's agent, or
// anything else, is not ours even on our address. Only the key exchange
// runs; no login is tried.
func servedByAgent(addr, hostKey string, timeout time.Duration) bool {
	want, _, _, _, err := gossh.ParseAuthorizedKey([]byte(hostKey))
	if err != nil {
		return false
	}
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	matched := false
	errStop := errors.New("host key seen")
	_, _, _, err = gossh.NewClientConn(c, addr, &gossh.ClientConfig{
		HostKeyCallback: func(_ string, _ net.Addr, k gossh.PublicKey) error {
			matched = bytes.Equal(k.Marshal(), want.Marshal())
			return errStop
		},
		HostKeyAlgorithms: []string{want.Type()},
		// The cheapest exchange both ends have: only the host key's
		// signature matters here, and this runs on every launch.
		Config: gossh.Config{KeyExchanges: []string{"curve25519-sha256"}},
	})
	return matched && errors.Is(err, errStop)
}

// listenOn listens on addr where node n has it: in its network namespace
// when it has one.
func listenOn(n provision.NodeInfo, addr string) (l net.Listener, err error) {
	err = proc.InNetNS(proc.NetNSPath(n.NetNS), func() error {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// freePort is a port free on every node's address: the kernel's pick on
// the head's, checked on the others.
func freePort(nodes []provision.NodeInfo) (int, error) {
	var lastErr error
	for range 20 {
		l, err := listenOn(nodes[0], net.JoinHostPort(nodes[0].InternalIP, "0"))
		if err != nil {
			return 0, fmt.Errorf("finding a free port for ssh on %s: %w", nodes[0].InternalIP, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		held := []net.Listener{l}
		ok := true
		for _, n := range nodes[1:] {
			l, err := listenOn(n, net.JoinHostPort(n.InternalIP, strconv.Itoa(port)))
			if err != nil {
				ok, lastErr = false, err
				break
			}
			held = append(held, l)
		}
		for _, l := range held {
			l.Close()
		}
		if ok {
			return port, nil
		}
	}
	return 0, fmt.Errorf("finding a port for ssh free on every node's address: %w", lastErr)
}

// WriteSSHConfig implements infra.SSHAccess: `ssh <cluster>` and `ssh
// <cluster>-worker<N>` reach the nodes through their agent. It runs once
// the agents are up (the head's has made the host key) and reports a
// head that does not answer on its port.
func (in *Infra) WriteSSHConfig(info *provision.ClusterInfo) error {
	name := info.Name
	cur, err := in.P.Info(name)
	if err != nil {
		return err
	}
	if cur == nil {
		return fmt.Errorf("local cluster %q does not exist", name)
	}
	nodes := cur.Nodes
	if len(nodes) == 0 || nodes[0].AgentSSHPort == 0 {
		return fmt.Errorf("local cluster %q was made before SkyGo served ssh; restart its agents with `sky start -f %s`", name, name)
	}
	key, pub, err := infra.ClientKey(in.env.Home)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if err := authorizeKey(n.Home, pub); err != nil {
			return fmt.Errorf("authorizing SkyGo's key on node %d: %w", n.Index, err)
		}
	}
	hostKey, err := agent.HostPublicKey(nodes[0].Home)
	if err != nil {
		return err
	}
	u, err := user.Current()
	if err != nil {
		return err
	}
	lines := make([]string, len(nodes))
	for i, n := range nodes {
		lines[i] = fmt.Sprintf("[%s]:%d %s", n.InternalIP, n.AgentSSHPort, hostKey)
	}
	kh, err := infra.WriteKnownHosts(in.env.Home, name, lines)
	if err != nil {
		return err
	}
	hosts := make([]infra.GeneratedHost, len(nodes))
	for i, n := range nodes {
		hosts[i] = infra.GeneratedHost{
			Alias: infra.NodeAlias(name, i), HostName: n.InternalIP, Port: n.AgentSSHPort, User: u.Username,
			IdentityFile: key, KnownHosts: []string{kh}, StrictHostKeyChecking: "yes",
		}
	}
	if err := infra.WriteSSHConfigHosts(in.env.Home, name, hosts); err != nil {
		return err
	}
	addr := net.JoinHostPort(nodes[0].InternalIP, strconv.Itoa(nodes[0].AgentSSHPort))
	if !servedByAgent(addr, hostKey, time.Second) {
		return fmt.Errorf("the head's agent does not serve ssh on %s (see %s); restart it with `sky start -f %s`",
			addr, filepath.Join(nodes[0].Home, ".sky", "agent", "daemon.log"), name)
	}
	return nil
}

// RemoveSSHConfig implements infra.SSHAccess.
func (in *Infra) RemoveSSHConfig(cluster string) error {
	return infra.RemoveSSHConfig(in.env.Home, cluster)
}

// authorizeKey adds pub to the node's ~/.ssh/authorized_keys unless it
// is there, keeping whatever else the user put in.
func authorizeKey(home, pub string) error {
	dir := filepath.Join(home, ".ssh")
	path := filepath.Join(dir, "authorized_keys")
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, l := range strings.Split(string(old), "\n") {
		if strings.TrimSpace(l) == pub {
			return nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b := string(old)
	if b != "" && !strings.HasSuffix(b, "\n") {
		b += "\n"
	}
	return infra.WriteFileAtomic(path, []byte(b+pub+"\n"), 0o600)
}

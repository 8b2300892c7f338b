package agent

import (
	"fmt"
	"net"
	"os/user"

	gossh "golang.org/x/crypto/ssh"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

// homeSSH serves SSH for the node whose HOME this process has: what
// ssh-stdio (one connection on stdin/stdout) and ssh-serve (a listener)
// share. The sessions run as the node's jobs do (see sshd.go).
type homeSSH struct {
	p      paths
	user   string
	signer gossh.Signer
}

// newHomeSSH is the server of the node whose HOME is home ("": this
// process's). The node's host key is made on first use.
func newHomeSSH(home string) (*homeSSH, error) {
	home, err := homeOr(home)
	if err != nil {
		return nil, err
	}
	p := paths{home}
	signer, err := loadHostKey(p, true)
	if err != nil {
		return nil, fmt.Errorf("host key: %w", err)
	}
	return &homeSSH{p: p, signer: signer}, nil
}

// lookUpUser finds the user logins must name: the one running this
// process. Printing the host key does not need it.
func (h *homeSSH) lookUpUser() error {
	u, err := user.Current()
	if err != nil {
		return fmt.Errorf("who runs this node: %w", err)
	}
	h.user = u.Username
	return nil
}

// sessionNode is the node as its config describes it now. The config
// is read for every session: a server started with the node, before `sky
// agent start` wrote the config, serves sessions once it is there (on a
// connection made before, too), and a config written again for a new
// cluster is the one sessions see. Without a config, why says so.
func (h *homeSSH) sessionNode() (sn *sshNode, why string) {
	cfg, err := loadConfig(h.p)
	if err != nil {
		return nil, fmt.Sprintf("%v (the node's SSH server runs, but sessions need the config: is the cluster still being launched?)", err)
	}
	// The sessions need the cluster's config (their SKYPILOT_* variables);
	// their autostop accounting stays in this process.
	d := &daemon{p: h.p, cfg: cfg}
	return newSSHNode(d, cfg.NodeIndex, cfg.Nodes[cfg.NodeIndex], h.user, h.signer), ""
}

// serveConn serves one connection until it ends and its sessions have
// hung up their programs. Logins need only the home's authorized_keys,
// so they work before the config is there.
func (h *homeSSH) serveConn(c net.Conn) {
	sn := newSSHNode(&daemon{p: h.p}, 0, agentapi.Node{Home: h.p.home}, h.user, h.signer)
	sn.forSession = h.sessionNode
	sn.serveConn(c)
	sn.sessions.Wait()
}

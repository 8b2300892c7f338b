package ssh

import (
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// Endpoint is everything needed to reach one host: where to dial, as
// whom, with which credentials, through which jump hosts.
type Endpoint struct {
	// Name is the host as the user wrote it (pool entry or alias); errors
	// and claims use it.
	Name          string
	Addr          string // host to dial (HostName)
	Port          int
	User          string
	IdentityFiles []string
	// Password, when set, is offered for password and keyboard-interactive
	// auth. It is never logged or printed (String omits it).
	Password string
	// Jumps are ProxyJump hosts, dialled in order.
	Jumps []Endpoint
	// ProxyCommand, when set (and there are no Jumps), is run with sh and
	// its stdin/stdout carry the connection, as OpenSSH's ProxyCommand.
	ProxyCommand string
}

// HostPort is Addr:Port, the address the host key is recorded under.
func (e Endpoint) HostPort() string {
	return net.JoinHostPort(e.Addr, strconv.Itoa(e.Port))
}

// String names the endpoint for messages: "alias (user@addr:port)".
func (e Endpoint) String() string {
	s := fmt.Sprintf("%s@%s", e.User, e.HostPort())
	if e.Name != "" && e.Name != e.Addr {
		s = e.Name + " (" + s + ")"
	}
	for _, j := range e.Jumps {
		s += " via " + j.HostPort()
	}
	return s
}

// key identifies a cached connection: same target and identity, same path.
func (e Endpoint) key() string {
	k := e.User + "@" + e.HostPort()
	for _, j := range e.Jumps {
		k += "<" + j.key()
	}
	if e.ProxyCommand != "" {
		k += "<|" + e.ProxyCommand
	}
	return k
}

// Resolver turns pool hosts into Endpoints using ~/.ssh/config.
type Resolver struct {
	Home   string
	Config *Config
	// LocalUser is the default remote user (the current user's name).
	LocalUser string
}

// NewResolver reads home/.ssh/config.
func NewResolver(home string) (*Resolver, error) {
	cfg, err := LoadConfig(filepath.Join(home, ".ssh", "config"), home)
	if err != nil {
		return nil, err
	}
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
	}
	return &Resolver{Home: home, Config: cfg, LocalUser: name}, nil
}

// Resolve applies, per setting, the first that is set: the host's own
// fields; then, for hosts written as a plain string or with
// use_ssh_config, ~/.ssh/config before the pool defaults (the config knows
// that alias best); otherwise the pool defaults before ~/.ssh/config;
// then the built-in defaults (current user, port 22, ~/.ssh/id_*).
func (r *Resolver) Resolve(pool *Pool, h Host) (Endpoint, error) {
	hc := r.Config.Lookup(h.Name, r.Home)
	poolUser, poolKey, poolPass := "", "", ""
	if pool != nil {
		poolUser, poolKey, poolPass = pool.User, pool.IdentityFile, pool.Password
	}
	var cfgKey string
	if len(hc.IdentityFiles) > 0 {
		cfgKey = hc.IdentityFiles[0]
	}
	ep := Endpoint{Name: h.Name, Addr: h.Name, Port: 22}
	if hc.HostName != "" {
		ep.Addr = hc.HostName
	}
	if hc.Port != "" {
		p, err := strconv.Atoi(hc.Port)
		if err != nil || p <= 0 || p > 65535 {
			return Endpoint{}, fmt.Errorf("host %s: Port %q in ~/.ssh/config is not a port number", h.Name, hc.Port)
		}
		ep.Port = p
	}
	if h.UseSSHConfig {
		ep.User = first(h.User, hc.User, poolUser, r.LocalUser)
		ep.IdentityFiles = nonEmpty(h.IdentityFile, cfgKey, poolKey)
	} else {
		ep.User = first(h.User, poolUser, hc.User, r.LocalUser)
		ep.IdentityFiles = nonEmpty(h.IdentityFile, poolKey, cfgKey)
	}
	ep.Password = first(h.Password, poolPass)
	for i, f := range ep.IdentityFiles {
		ep.IdentityFiles[i] = expandTilde(f, r.Home)
	}
	if len(ep.IdentityFiles) > 0 {
		ep.IdentityFiles = ep.IdentityFiles[:1]
	} else if ep.Password == "" {
		ep.IdentityFiles = r.defaultKeys()
	}
	if hc.ProxyJump != "" && !strings.EqualFold(hc.ProxyJump, "none") {
		jumps, err := r.jumps(hc.ProxyJump, 0)
		if err != nil {
			return Endpoint{}, fmt.Errorf("host %s: ProxyJump %q: %w", h.Name, hc.ProxyJump, err)
		}
		ep.Jumps = jumps
	}
	if len(ep.Jumps) == 0 && hc.ProxyCommand != "" && !strings.EqualFold(hc.ProxyCommand, "none") {
		ep.ProxyCommand = hc.ProxyCommand
	}
	return ep, nil
}

// jumps parses a ProxyJump value, "[user@]host[:port][,...]", resolving
// each hop through ~/.ssh/config as ssh does.
func (r *Resolver) jumps(spec string, depth int) ([]Endpoint, error) {
	if depth > 4 {
		return nil, fmt.Errorf("ProxyJump chain nested too deep (a loop?)")
	}
	var out []Endpoint
	for _, hop := range strings.Split(spec, ",") {
		hop = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(hop), "ssh://"))
		if hop == "" {
			return nil, fmt.Errorf("empty hop")
		}
		u, hostport := "", hop
		if i := strings.LastIndex(hop, "@"); i >= 0 {
			u, hostport = hop[:i], hop[i+1:]
		}
		host, port := hostport, ""
		if h, p, err := net.SplitHostPort(hostport); err == nil {
			host, port = h, p
		}
		hc := r.Config.Lookup(host, r.Home)
		ep := Endpoint{Name: host, Addr: first(hc.HostName, host), Port: 22, User: first(u, hc.User, r.LocalUser)}
		if p := first(port, hc.Port); p != "" {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 || n > 65535 {
				return nil, fmt.Errorf("hop %s: bad port %q", hop, p)
			}
			ep.Port = n
		}
		ep.IdentityFiles = hc.IdentityFiles
		if len(ep.IdentityFiles) == 0 {
			ep.IdentityFiles = r.defaultKeys()
		}
		if hc.ProxyJump != "" && !strings.EqualFold(hc.ProxyJump, "none") && len(out) == 0 {
			inner, err := r.jumps(hc.ProxyJump, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
		}
		out = append(out, ep)
	}
	return out, nil
}

func (r *Resolver) defaultKeys() []string {
	var out []string
	for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
		p := filepath.Join(r.Home, ".ssh", n)
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func nonEmpty(vals ...string) []string {
	var out []string
	for _, v := range vals {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

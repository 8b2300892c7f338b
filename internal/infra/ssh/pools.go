package ssh

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/paths"
)

// Pool is one entry of ~/.sky/ssh_node_pools.yaml: a named set of hosts
// that clusters on `infra: ssh/<name>` are placed on.
type Pool struct {
	Name string
	// Pool-level defaults, used by hosts that do not set their own.
	User         string
	IdentityFile string
	Password     string
	Hosts        []Host
}

// Host is one entry of a pool's hosts list, as written. Resolve turns it
// into an Endpoint that can be dialled.
type Host struct {
	// Name is the host as written: an IP, a hostname or a Host alias of
	// ~/.ssh/config. It identifies the host in errors, claims and status.
	Name         string
	User         string
	IdentityFile string
	Password     string
	// UseSSHConfig makes ~/.ssh/config settings win over the pool-level
	// defaults. It is implied for hosts written as a plain string.
	UseSSHConfig bool
	// Line is where the host is written in the pools file (for errors).
	Line int
}

// PoolError is one problem in the pools file; it names the file position,
// the pool, the host (when the problem is inside one) and the field.
type PoolError struct {
	File      string
	Line, Col int
	Pool      string
	Host      string // "" when the problem is at pool level
	Field     string // "" when the problem is the entry itself
	Msg       string
}

func (e *PoolError) Error() string {
	var b strings.Builder
	if e.File != "" {
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Col)
	}
	if e.Pool != "" {
		fmt.Fprintf(&b, "pool %q", e.Pool)
	}
	if e.Host != "" {
		fmt.Fprintf(&b, ", host %s", e.Host)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ", field %s", e.Field)
	}
	if b.Len() > 0 && e.Pool != "" {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// DefaultPoolsPath is ~/.sky/ssh_node_pools.yaml under home.
func DefaultPoolsPath(home string) string {
	return paths.SSHNodePools(home)
}

// LoadPools reads and validates a pools file. Every problem found is
// reported (joined), each as a *PoolError naming file:line, pool, host and
// field, so the user can fix them all at once. A missing file is an error
// that wraps os.ErrNotExist.
func LoadPools(path string) (map[string]*Pool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no SSH node pools: %s does not exist; define pools there (name -> hosts, user, identity_file): %w", path, err)
		}
		return nil, fmt.Errorf("reading SSH node pools: %w", err)
	}
	return ParsePools(path, data)
}

// ParsePools is LoadPools on bytes already read; file is used in errors.
func ParsePools(file string, data []byte) (map[string]*Pool, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s is not valid YAML: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	pools := map[string]*Pool{}
	if len(doc.Content) == 0 {
		return pools, nil // empty file: no pools
	}
	p := &poolParser{file: file}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		p.fail(root, "", "", "", "must be a mapping of pool name to {hosts, user, identity_file, password}")
		return nil, errors.Join(p.errs...)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if pool := p.pool(k, v); pool != nil {
			if _, dup := pools[pool.Name]; dup {
				p.fail(k, pool.Name, "", "", "pool is defined twice; keep one")
				continue
			}
			pools[pool.Name] = pool
		}
	}
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return pools, nil
}

type poolParser struct {
	file string
	errs []error
}

func (p *poolParser) fail(n *yaml.Node, pool, host, field, msg string) {
	p.errs = append(p.errs, &PoolError{File: p.file, Line: n.Line, Col: n.Column, Pool: pool, Host: host, Field: field, Msg: msg})
}

// scalar returns the string value of a scalar node, or false after
// recording an error when the node is not a scalar.
func (p *poolParser) scalar(n *yaml.Node, pool, host, field string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.fail(n, pool, host, field, "must be a string")
		return "", false
	}
	return n.Value, true
}

func (p *poolParser) pool(k, v *yaml.Node) *Pool {
	name := k.Value
	if k.Kind != yaml.ScalarNode || name == "" {
		p.fail(k, "", "", "", "pool names must be non-empty strings")
		return nil
	}
	if strings.ContainsAny(name, "/ \t") {
		p.fail(k, name, "", "", "pool names may not contain '/' or spaces (they are used as infra: ssh/<pool>)")
		return nil
	}
	if v.Kind != yaml.MappingNode {
		p.fail(v, name, "", "", "must be a mapping with a hosts list (and optional user, identity_file, password)")
		return nil
	}
	pool := &Pool{Name: name}
	var hostsNode *yaml.Node
	for i := 0; i+1 < len(v.Content); i += 2 {
		fk, fv := v.Content[i], v.Content[i+1]
		switch fk.Value {
		case "hosts":
			hostsNode = fv
		case "user":
			pool.User, _ = p.scalar(fv, name, "", "user")
		case "identity_file":
			pool.IdentityFile, _ = p.scalar(fv, name, "", "identity_file")
		case "password":
			pool.Password, _ = p.scalar(fv, name, "", "password")
		default:
			p.fail(fk, name, "", fk.Value, "unknown field; allowed: hosts, user, identity_file, password")
		}
	}
	if hostsNode == nil {
		p.fail(v, name, "", "hosts", "missing; list the pool's hosts (IP, hostname or ~/.ssh/config alias)")
		return pool
	}
	if hostsNode.Kind != yaml.SequenceNode || len(hostsNode.Content) == 0 {
		p.fail(hostsNode, name, "", "hosts", "must be a non-empty list of hosts")
		return pool
	}
	seen := map[string]bool{}
	for i, hn := range hostsNode.Content {
		h, ok := p.host(name, i, hn)
		if !ok {
			continue
		}
		if seen[h.Name] {
			p.fail(hn, name, h.Name, "", "host is listed twice in the pool; keep one")
			continue
		}
		seen[h.Name] = true
		pool.Hosts = append(pool.Hosts, h)
	}
	return pool
}

func (p *poolParser) host(pool string, idx int, n *yaml.Node) (Host, bool) {
	label := fmt.Sprintf("#%d", idx+1)
	switch n.Kind {
	case yaml.ScalarNode:
		if strings.TrimSpace(n.Value) == "" || n.Tag == "!!null" {
			p.fail(n, pool, label, "", "empty host; write an IP, a hostname or a ~/.ssh/config alias")
			return Host{}, false
		}
		return Host{Name: strings.TrimSpace(n.Value), UseSSHConfig: true, Line: n.Line}, true
	case yaml.MappingNode:
	default:
		p.fail(n, pool, label, "", "must be a string (IP, hostname or alias) or a mapping with ip, user, identity_file, password, use_ssh_config")
		return Host{}, false
	}
	h := Host{Line: n.Line}
	// Find the ip first so that errors about other fields name the host.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "ip" && n.Content[i+1].Kind == yaml.ScalarNode {
			h.Name = strings.TrimSpace(n.Content[i+1].Value)
			label = h.Name
		}
	}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		fk, fv := n.Content[i], n.Content[i+1]
		var good bool
		switch fk.Value {
		case "ip":
			_, good = p.scalar(fv, pool, label, "ip")
		case "user":
			h.User, good = p.scalar(fv, pool, label, "user")
		case "identity_file":
			h.IdentityFile, good = p.scalar(fv, pool, label, "identity_file")
		case "password":
			h.Password, good = p.scalar(fv, pool, label, "password")
		case "use_ssh_config":
			if fv.Kind == yaml.ScalarNode && fv.Tag == "!!bool" {
				h.UseSSHConfig = fv.Value == "true" || fv.Value == "True" || fv.Value == "TRUE"
				good = true
			} else {
				p.fail(fv, pool, label, "use_ssh_config", "must be true or false")
			}
		default:
			p.fail(fk, pool, label, fk.Value, "unknown field; allowed: ip, user, identity_file, password, use_ssh_config")
		}
		ok = ok && good
	}
	if h.Name == "" {
		p.fail(n, pool, label, "ip", "missing; give the host's IP, hostname or ~/.ssh/config alias")
		return Host{}, false
	}
	return h, ok
}

// FilterAllowed applies config `ssh.allowed_node_pools`: with allowed nil
// (unset) every pool is kept; otherwise only the pools listed. It returns
// the kept pools and the allowed names that are not defined (for a
// warning), both sorted.
func FilterAllowed(pools map[string]*Pool, allowed []string) (kept map[string]*Pool, missing []string) {
	if allowed == nil {
		return pools, nil
	}
	kept = map[string]*Pool{}
	for _, name := range allowed {
		if p, ok := pools[name]; ok {
			kept[name] = p
		} else {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	return kept, missing
}

// PoolNames returns the pool names, sorted.
func PoolNames(pools map[string]*Pool) []string {
	names := make([]string, 0, len(pools))
	for n := range pools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Package kubernetes runs clusters as pods, through client-go's REST client: one pod per
// node in one namespace of one kubeconfig context (the infra's region),
// created with SkyPilot's names, labels and scheduling rules. The backend
// reaches the pods through the exec API (no SSH, no Ray); the head pod's
// agent reaches the workers' agents over their own SSH server on the pod
// network, because pods can neither dial the API server nor run ssh.
//
//   - plugin.go: the infrastructure (contexts, clients, settings);
//   - kclient.go: the typed API calls, without client-go's clientset;
//   - provisioner.go: create, wait, query and delete the pods;
//   - runner.go: commands and files in a pod over the exec API;
//   - bootstrap.go: the node runtime in the pods, the head's key to the workers;
//   - sshaccess.go: `ssh <cluster>` through a ProxyCommand over exec;
//   - pod.go, podconfig.go: the objects, and pod_config merging;
//   - gpus.go, capacity.go, label.go: accelerators on nodes, feasibility,
//     `sky gpus list` and `sky gpus label`.
package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/infra"
	k8skind "github.com/skygo/skygo/internal/infra/kubernetes/kind"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
)

// Kind is the infra kind: `infra: k8s[/<context>]` (k8s is read as
// kubernetes).
const Kind = "kubernetes"

func init() {
	infra.Register(Kind, Open)
	infra.RegisterVerb(ExecCommand, ExecMain)
}

// Infra is Kubernetes for one server.
type Infra struct {
	env infra.Env

	mu      sync.Mutex
	clients map[string]*client // by context
	nodes   map[string]nodesSnapshot
}

// Open opens Kubernetes for a server.
func Open(env infra.Env) (infra.Infra, error) {
	return &Infra{env: env, clients: map[string]*client{}, nodes: map[string]nodesSnapshot{}}, nil
}

var (
	_ infra.Capacity       = (*Infra)(nil)
	_ infra.Placer         = (*Infra)(nil)
	_ infra.Bootstrapper   = (*Infra)(nil)
	_ infra.NoCallback     = (*Infra)(nil)
	_ infra.NoStop         = (*Infra)(nil)
	_ infra.SSHAccess      = (*Infra)(nil)
	_ infra.CheckDescriber = (*Infra)(nil)
	_ infra.GPULister      = (*Infra)(nil)
)

// Kind implements infra.Infra.
func (in *Infra) Kind() string { return Kind }

// Provisioner implements infra.Infra: the provisioner of one context. A
// context's name may hold "/" and ":", so every part of the ID is the
// context.
func (in *Infra) Provisioner(id infra.ID) (provision.Provisioner, error) {
	ctxName := strings.Join(id.Parts, "/")
	if ctxName == "" {
		kc := in.contexts()
		if kc.Reason != "" {
			return nil, &provision.ConfigError{Where: Kind, Msg: kc.Reason}
		}
		ctxName = kc.Allowed[0].Name
	}
	return &Provisioner{in: in, context: ctxName}, nil
}

// Place implements infra.Placer: the region is the whole context name.
func (in *Infra) Place(region, _ string) infra.ID {
	if region == "" {
		return infra.ID{Kind: Kind}
	}
	return infra.ID{Kind: Kind, Parts: []string{region}}
}

// NoAutostopCallback implements infra.NoCallback: a pod cannot call this
// server back (it may not even reach it), so the server's autostop
// controller acts for it.
func (in *Infra) NoAutostopCallback() {}

// CannotStop implements infra.NoStop.
func (in *Infra) CannotStop() string {
	return "Kubernetes pods cannot be stopped, only torn down: use `sky down` (or `sky autostop --down`)"
}

// serverConfig is the server's ~/.sky/config.yaml.
func (in *Infra) serverConfig() (*config.Config, error) {
	return config.Load(config.LoadOptions{Home: in.env.Home})
}

// contexts are the contexts `sky check kubernetes` allows.
func (in *Infra) contexts() k8skind.KubeContexts {
	cfg, err := in.serverConfig()
	if err != nil {
		return k8skind.KubeContexts{Reason: err.Error()}
	}
	return k8skind.AllowedKubeContexts(in.env.Home, cfg.Lookup)
}

// client is one context's API connection.
type client struct {
	context   string
	namespace string
	rest      *rest.Config
	kc        *kubeAPI
	stamp     string // kubeconfig files' sizes and times when it was made
}

// kubeconfigStamp changes when a kubeconfig file does, so a client is
// rebuilt after `kubectl config` or a credential refresh.
func (in *Infra) kubeconfigStamp() string {
	var b strings.Builder
	for _, f := range k8skind.KubeconfigFiles(in.env.Home) {
		if fi, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	return b.String()
}

// client returns the API client of a context, made on first use.
func (in *Infra) client(ctxName string) (*client, error) {
	stamp := in.kubeconfigStamp()
	in.mu.Lock()
	c := in.clients[ctxName]
	in.mu.Unlock()
	if c != nil && c.stamp == stamp {
		return c, nil
	}
	kc := in.contexts()
	if kc.Reason != "" {
		return nil, &provision.ConfigError{Where: where(ctxName), Msg: kc.Reason}
	}
	var found *k8skind.KubeContext
	var names []string
	for i := range kc.Allowed {
		names = append(names, kc.Allowed[i].Name)
		if kc.Allowed[i].Name == ctxName {
			found = &kc.Allowed[i]
		}
	}
	if found == nil {
		return nil, &provision.ConfigError{Where: where(ctxName),
			Msg: fmt.Sprintf("context %q is not one SkyGo may use (allowed: %s); add it to kubernetes.allowed_contexts in ~/.sky/config.yaml or switch with `kubectl config use-context`", ctxName, strings.Join(names, ", "))}
	}
	rc, err := restConfig(in.env.Home, ctxName)
	if err != nil {
		return nil, &provision.ConfigError{Where: where(ctxName), Err: err}
	}
	api, err := newKubeAPI(rc)
	if err != nil {
		return nil, &provision.ConfigError{Where: where(ctxName), Err: err}
	}
	cfg, err := in.serverConfig()
	if err != nil {
		return nil, err
	}
	c = &client{context: ctxName, namespace: k8skind.KubeNamespace(cfg.Lookup, *found), rest: rc, kc: api, stamp: stamp}
	in.mu.Lock()
	in.clients[ctxName] = c
	in.mu.Unlock()
	return c, nil
}

// restConfig is the client configuration of a context: the kubeconfig
// files merged as kubectl does, or the pod's own service account.
func restConfig(home, ctxName string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if ctxName == k8skind.InClusterContext {
		rc, err = rest.InClusterConfig()
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: k8skind.KubeconfigFiles(home)}
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
			&clientcmd.ConfigOverrides{CurrentContext: ctxName}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig context %s: %w", ctxName, err)
	}
	// A 100-node launch makes a few hundred calls at once; client-go's
	// default of 5 per second would spread them over a minute.
	rc.QPS, rc.Burst = 200, 400
	rc.Timeout = 0 // per call, through contexts
	rc.UserAgent = "skygo"
	return rc, nil
}

// where is the infra ID of a context, for error messages.
func where(ctxName string) string { return Kind + "/" + ctxName }

// nameOnCloud is a cluster's name in Kubernetes: DNS-1123 (lower case,
// digits, '-'), at most 42 characters as SkyPilot's, ending in a hash of
// this server so that two servers sharing a namespace never adopt each
// other's pods.
func (in *Infra) nameOnCloud(cluster string) string {
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(in.env.Home + "\x00" + host))
	suffix := "-" + hex.EncodeToString(sum[:])[:4]
	var b strings.Builder
	for _, r := range strings.ToLower(cluster) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if name == "" || name[0] < 'a' || name[0] > 'z' {
		name = "c" + name
	}
	if max := 42 - len(suffix); len(name) > max {
		name = strings.TrimRight(name[:max], "-")
	}
	return name + suffix
}

// userName is the server's user, for the skypilot-user label.
func (in *Infra) userName() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return filepath.Base(in.env.Home)
}

// Capacity implements infra.Capacity.
func (in *Infra) Capacity() optimizer.CapacityInfra { return capacitySource{in} }

// nodesSnapshot is one context's nodes and pods, briefly cached: the
// optimizer asks once per candidate option, and a launch should not list
// a large cluster's pods a dozen times.
type nodesSnapshot struct {
	at    time.Time
	nodes []nodeFree
	raw   *clusterNodes
	err   error
}

const snapshotTTL = 3 * time.Second

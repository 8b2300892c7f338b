// Package infra is where infrastructures plug in. Each internal/infra/<name>
// package registers a Factory for its kind; the server opens every
// registered kind once, and the backend and the operations reach an
// infrastructure only through this package: its Provisioner, plus the
// optional capabilities below, which a kind implements only when it has
// them. What a kind is (names, features, config section, credential
// check, volume types) it registers in internal/infrakind from its
// descriptor, internal/infra/<name>/kind. Nothing above this package
// names a kind, so a new infrastructure is one new package with its
// descriptor, one line in internal/infra/all and one in
// internal/infrakind/all.
package infra

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/optimizer"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/state"
)

// Env is what the server gives each infrastructure.
type Env struct {
	// Home is the server user's home (where ~/.sky lives).
	Home string
	// Settings is where an infrastructure keeps its own records (pools,
	// host claims, whether it is turned off) in the server's database;
	// the rest of the database is the lifecycle's, not a plug-in's.
	Settings Settings
	// Sky is the path of the sky binary on this machine.
	Sky string
	// Node finds the node runtime builds the infrastructures copy to
	// their nodes (nil: NodeBinariesBeside(Sky)).
	Node NodeBinaries
	// Down tears a cluster down through the backend (for operations such
	// as `sky local down` that remove an infrastructure's clusters).
	Down func(ctx context.Context, cluster string, log io.Writer) error
	// Recheck re-runs `sky check` so the enabled infras follow a change
	// an operation made (a pool set up, the local infra disabled).
	Recheck func(ctx context.Context) error
	// Catalog is the server's price catalog (clouds read their images
	// from it); nil in tests that need none.
	Catalog func() *catalog.Catalog
}

// Settings are named records of the server's database. The API server's
// *state.Store implements it.
type Settings interface {
	// GetSetting returns the value of key; an error wrapping
	// state.ErrNotFound when it is not set.
	GetSetting(ctx context.Context, key string) (string, error)
	SetSetting(ctx context.Context, key, value string) error
	DeleteSetting(ctx context.Context, key string) error
	// UpdateDocument replaces the document key with what fn makes of its
	// current value (nil: none), conditional on the version read; fn's
	// false leaves it as it is.
	UpdateDocument(ctx context.Context, key string, fn func(cur []byte) ([]byte, bool, error)) error
}

var _ Settings = (*state.Store)(nil)

// NodeBinaries is e.Node, or the builds beside e.Sky.
func (e Env) NodeBinaries() NodeBinaries {
	if e.Node != nil {
		return e.Node
	}
	return NodeBinariesBeside(e.Sky)
}

// Infra is one kind of infrastructure, opened for one server.
type Infra interface {
	// Kind is the first part of the infra IDs it serves ("ssh").
	Kind() string
	// Provisioner returns the provisioner for one place of this kind.
	Provisioner(id ID) (provision.Provisioner, error)
}

// Capacity is implemented by infrastructures priced by what they have
// rather than by a catalog (this machine, node pools, Kubernetes, Slurm):
// the optimizer asks them for candidates, and a node gets what was asked
// for, not an instance type's size.
type Capacity interface {
	Capacity() optimizer.CapacityInfra
}

// Placer maps an optimizer candidate's region and zone to the ID's parts
// when they are not simply [region, zone].
type Placer interface {
	Place(region, zone string) ID
}

// Bootstrapper prepares the nodes before their agents start (install the
// node runtime, give the head the keys to reach its workers) and says how
// the head reaches each node. Without it nodes share this machine's
// binary and the head reaches them locally.
type Bootstrapper interface {
	Bootstrap(ctx context.Context, info *provision.ClusterInfo, runners []provision.CommandRunner, log io.Writer) ([]agentapi.Node, error)
}

// NoCallback is implemented by infrastructures whose head node cannot call
// this server back when autostop fires (the head is another machine): the
// server's autostop controller watches their clusters instead.
type NoCallback interface {
	NoAutostopCallback()
}

// NoStop is implemented by infrastructures whose clusters cannot be
// stopped, only torn down; Why says so to the user.
type NoStop interface {
	CannotStop() (why string)
}

// SSHAccess is implemented by infrastructures whose nodes the user can
// `ssh <cluster>` into: the entries are written on launch and removed on
// down.
type SSHAccess interface {
	WriteSSHConfig(info *provision.ClusterInfo) error
	RemoveSSHConfig(cluster string) error
}

// Remnants is implemented by infrastructures whose clusters live on this
// machine (the local one): they can list, by cluster name, whatever of a
// cluster is still here (processes, network namespaces, leases,
// directories), record or not, and reap it. The server's sweeper reaps
// the names no cluster record holds.
type Remnants interface {
	// Remnants lists the names of the clusters with anything left here.
	Remnants() ([]string, error)
	// Reap removes everything of cluster name; nil only once all is gone.
	Reap(ctx context.Context, cluster string) error
}

// Operations is implemented by infrastructures with commands of their own
// (`sky ssh up`, `sky local down`).
type Operations interface {
	Ops() []op.Op
}

// CheckDescriber adds what an infrastructure knows to its `sky check`
// result (a pool's hosts and their state).
type CheckDescriber interface {
	DescribeCheck(ctx context.Context, r *check.Result)
}

// GPULister is implemented by infrastructures that report their GPUs
// live rather than from a price catalog (Slurm's GRES, Kubernetes' node
// labels): `sky gpus list --infra <kind>` shows what they return.
type GPULister interface {
	// GPUs returns one row per place (Zone set: a partition) and GPU type,
	// then one per node (Node set); region narrows to one cluster/context.
	GPUs(ctx context.Context, region string) ([]GPUUsage, error)
}

// GPUUsage is how many GPUs of one type a place or a node has, and how
// many of them are free now.
type GPUUsage struct {
	Region string `json:"region"`
	Zone   string `json:"zone,omitempty"`
	Node   string `json:"node,omitempty"`
	GPU    string `json:"gpu"`
	Total  int    `json:"total"`
	Free   int    `json:"free"`
	// Requestable are the per-node counts found (the most one node has).
	Requestable []int `json:"requestable_qty_per_node,omitempty"`
	// CPUs, MemoryGB and Status describe a node row of an infrastructure
	// that reports them (Kubernetes: capacity and Ready/NotReady).
	CPUs     float64 `json:"cpus,omitempty"`
	MemoryGB float64 `json:"memory_gb,omitempty"`
	Status   string  `json:"status,omitempty"`
}

// Factory opens one kind for a server.
type Factory func(env Env) (Infra, error)

var (
	regMu     sync.Mutex
	factories = map[string]Factory{}
)

// Register makes a kind available; each infrastructure package calls it
// from init, and internal/infra/all imports them all.
func Register(kind string, f Factory) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := factories[kind]; dup {
		panic("infra: kind " + kind + " registered twice")
	}
	factories[kind] = f
}

// VerbMain runs a hidden verb of the server program (args without the
// verb) and returns the exit code.
type VerbMain func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

var verbs = map[string]VerbMain{}

// RegisterVerb makes a verb the kind declared (infrakind.Kind.Verbs) run
// in the server program; called from the plug-in's init.
func RegisterVerb(verb string, main VerbMain) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := verbs[verb]; dup {
		panic("infra: verb " + verb + " registered twice")
	}
	verbs[verb] = main
}

// Verb is the registered verb, or a VerbMain saying why this build cannot
// run it; false when no kind declares verb.
func Verb(verb string) (VerbMain, bool) {
	regMu.Lock()
	main, ok := verbs[verb]
	regMu.Unlock()
	if ok {
		return main, true
	}
	k, ok := infrakind.Verb(verb)
	if !ok {
		return nil, false
	}
	why := fmt.Sprintf("sky %s: this build of SkyGo cannot run %s's commands", verb, k.Display)
	if tag := infrakind.OmittedBy(k.Name); tag != "" {
		why = fmt.Sprintf("sky %s: this build of SkyGo leaves %s out (built with -tags %s); use a build without that tag", verb, k.Display, tag)
	}
	return func(_ []string, _ io.Reader, _, stderr io.Writer) int {
		fmt.Fprintln(stderr, why)
		return 1
	}, true
}

// Set is every registered kind, opened for one server.
type Set struct {
	byKind map[string]Infra
	kinds  []string // sorted
}

// Open opens every registered kind.
func Open(env Env) (*Set, error) {
	regMu.Lock()
	defer regMu.Unlock()
	s := &Set{byKind: map[string]Infra{}}
	for kind, f := range factories {
		in, err := f(env)
		if err != nil {
			return nil, fmt.Errorf("infrastructure %s: %w", kind, err)
		}
		s.byKind[kind] = in
		s.kinds = append(s.kinds, kind)
	}
	sort.Strings(s.kinds)
	return s, nil
}

// NewSet is a Set of the given infrastructures (tests, embedding).
func NewSet(ins ...Infra) *Set {
	s := &Set{byKind: map[string]Infra{}}
	for _, in := range ins {
		s.byKind[in.Kind()] = in
		s.kinds = append(s.kinds, in.Kind())
	}
	sort.Strings(s.kinds)
	return s
}

// Get returns the infrastructure of an ID's kind, or a NotSupportedError
// saying this build cannot provision there.
func (s *Set) Get(id ID) (Infra, error) {
	if in, ok := s.byKind[id.Kind]; ok {
		return in, nil
	}
	if tag := infrakind.OmittedBy(id.Kind); tag != "" {
		return nil, &provision.NotSupportedError{Where: id.String(), Operation: "provisioning",
			Msg: fmt.Sprintf("this build of SkyGo leaves %s out (built with -tags %s); use a build without that tag", id.Kind, tag)}
	}
	return nil, &provision.NotSupportedError{Where: id.String(), Operation: "provisioning",
		Msg: fmt.Sprintf("this build of SkyGo cannot provision on %s yet (it can on: %s)", id.Kind, strings.Join(s.kinds, ", "))}
}

// Provisions reports whether this build can provision on a kind ("aws",
// "local"); the optimizer only prices the others.
func (s *Set) Provisions(kind string) bool {
	_, ok := s.byKind[strings.ToLower(kind)]
	return ok
}

// Provisioner is Get(id) then its Provisioner(id).
func (s *Set) Provisioner(id ID) (provision.Provisioner, error) {
	in, err := s.Get(id)
	if err != nil {
		return nil, err
	}
	return in.Provisioner(id)
}

// All returns every infrastructure, by kind.
func (s *Set) All() []Infra {
	out := make([]Infra, len(s.kinds))
	for i, k := range s.kinds {
		out[i] = s.byKind[k]
	}
	return out
}

// Capacities are the optimizer's capacity sources of every kind that has one.
func (s *Set) Capacities() []optimizer.CapacityInfra {
	var out []optimizer.CapacityInfra
	for _, in := range s.All() {
		if c, ok := in.(Capacity); ok {
			out = append(out, c.Capacity())
		}
	}
	return out
}

// Ops are the operations of every kind that has some.
func (s *Set) Ops() []op.Op {
	var out []op.Op
	for _, in := range s.All() {
		if o, ok := in.(Operations); ok {
			out = append(out, o.Ops()...)
		}
	}
	return out
}

// FromCandidate is the ID of where an optimizer candidate runs.
func (s *Set) FromCandidate(cloud, region, zone string) ID {
	kind := strings.ToLower(cloud)
	if in, ok := s.byKind[kind]; ok {
		if p, ok := in.(Placer); ok {
			return p.Place(region, zone)
		}
	}
	id := ID{Kind: kind}
	if region != "" || zone != "" {
		id.Parts = append(id.Parts, region)
	}
	if zone != "" {
		id.Parts = append(id.Parts, zone)
	}
	return id
}

// Package infrakind is where every infrastructure describes itself: its
// name and aliases, how it is printed, what the optimizer may ask of it,
// the config keys a task may override and the schema of its config
// section, how `sky check` finds its credentials and what it picks when a
// task gives no size. The optimizer, `sky check`, the config loader and
// the resources parser read this registry instead of naming kinds.
//
// It sits at the bottom of the stack and links no SDK, because the
// command line needs it too (it parses `infra: k8s/ctx` locally) and must
// stay slim; the build's plug-ins (internal/infra/<name>) register how to
// provision in internal/infra, keyed by the same names.
package infrakind

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Group orders `sky check`'s report: clouds first, then the kinds that run
// on machines the user brings, then the fallback.
type Group int

const (
	Cloud    Group = iota // priced from a catalog
	OnPrem                // Kubernetes, Slurm, node pools: capacity they report
	Fallback              // this machine: enabled when nothing else is
)

// Place is how an infra string names a place of a kind.
type Place int

const (
	RegionZone Place = iota // <kind>/<region>/<zone>
	Context                 // <kind>/<context>: one region, taken whole (it may hold slashes); no zones
	Pool                    // <kind>/<pool>: one region, stored with RegionPrefix; no zones
	Here                    // <kind> alone: no regions or zones
)

// Features is what a kind can do beyond picking an instance. Spot
// availability on catalog clouds comes from the catalog's spot prices;
// Spot=false rules spot out before asking.
type Features struct {
	Spot      bool
	DiskTiers []string // tiers other than "best" (best always means "the best you have")
	Ports     bool
	VMImage   bool // a custom machine image id (not docker:)
	Docker    bool // image_id: docker:<image>
	// FixedDisk: the nodes' disks are what they are (this machine, a node
	// pool's hosts, a Slurm node), so disk_size and local_disk cannot be
	// honoured; neither can network_tier: best, which picks faster NICs.
	FixedDisk bool
}

// DefaultFeatures are a kind's that declares none.
var DefaultFeatures = Features{Spot: true, Ports: true, Docker: true}

// AllTiers are every disk tier but "best".
var AllTiers = []string{"low", "medium", "high", "ultra"}

// Sizes is what a kind picks when a task gives neither cpus nor memory.
type Sizes struct {
	CPUs      float64 // at least this many vCPUs ...
	MemPerCPU float64 // ... with this many GB each
}

// DefaultSizes are a catalog cloud's that declares none.
var DefaultSizes = Sizes{CPUs: 8, MemPerCPU: 4}

// CheckEnv is what a credential check may read: the home directory and
// the workspace's view of the config.
type CheckEnv struct {
	Home      string
	Workspace string // the workspace checked, as named in messages
	Verbose   bool   // add where each credential came from to the details
	// Lookup reads the workspace's config under keys, one per level (a
	// Kubernetes context's name may hold dots).
	Lookup func(keys ...string) (any, bool)
}

// Setting reads a dotted config path of the active workspace.
func (e CheckEnv) Setting(path string) (any, bool) {
	if e.Lookup == nil || path == "" {
		return nil, false
	}
	return e.Lookup(strings.Split(path, ".")...)
}

// String is the string at a dotted path, or def.
func (e CheckEnv) String(path, def string) string {
	if s, ok := StringValue(e.Setting(path)); ok {
		return s
	}
	return def
}

// Strings is the list at a dotted path (a lone string is a list of one),
// as the config loader reads lists; nil when unset.
func (e CheckEnv) Strings(path string) []string {
	return StringList(e.Setting(path))
}

// StringValue is v when it is a string that was set.
func StringValue(v any, ok bool) (string, bool) {
	s, isStr := v.(string)
	return s, ok && isStr
}

// StringList reads a config value as a list of strings the way the config
// loader does: a string is a list of one, nested values are skipped.
func StringList(v any, ok bool) []string {
	if !ok {
		return nil
	}
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			switch e.(type) {
			case map[string]any, []any, nil:
				continue
			}
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// InHome joins parts under the home directory.
func (e CheckEnv) InHome(parts ...string) string {
	return filepath.Join(append([]string{e.Home}, parts...)...)
}

// Pretty shows a path with the home directory as ~, as users write it.
func (e CheckEnv) Pretty(path string) string {
	if rel, err := filepath.Rel(e.Home, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join("~", rel)
	}
	return path
}

// CheckResult is a credential check's verdict; Reason says what was found
// or what to do.
type CheckResult struct {
	Enabled  bool
	Reason   string
	Details  []string
	Warnings []string
}

// VolumeType is a kind of volume an infrastructure makes (`type:` of a
// volume YAML).
type VolumeType struct {
	Type string // k8s-pvc, host-dir, ...
	// Where says, for the message when a volume names another kind's
	// infra, where volumes of the type live on this kind and how infra
	// names it: "on this machine (infra: local)".
	Where string
	// HostPath: a volume of the type is the node directory its
	// config.host_path names, which it must.
	HostPath bool
	// Ephemeral: a task's volume with a size and no type (made with its
	// cluster, gone with it) is of this type.
	Ephemeral bool
	// Table heads the type's table in `sky volumes ls` ("Host directory
	// volumes:"); Columns follow the columns every table has. Of the
	// kinds that make a type, the first (in report order) that gives a
	// Table gives both.
	Table   string
	Columns []VolumeColumn
}

// VolumeColumn is a column of a volume type's `sky volumes ls` table.
type VolumeColumn struct {
	Header string
	// Field is the volume record's field the cells show, by its JSON name
	// ("host_path"), or "config.<key>" for a key of the volume's config.
	Field string
	// Verbose: only with -v.
	Verbose bool
}

// VolumeTables are the volume types that have a `sky volumes ls` table,
// in the order the tables are printed (report order of the kinds that
// make them), each with the Table and Columns its first kind gives.
func VolumeTables() []VolumeType {
	var out []VolumeType
	for _, k := range All() {
		for _, v := range k.Volumes {
			if v.Table == "" || slices.ContainsFunc(out, func(o VolumeType) bool { return o.Type == v.Type }) {
				continue
			}
			out = append(out, v)
		}
	}
	return out
}

// Kind describes one infrastructure.
type Kind struct {
	Name    string   // canonical, lower case: "kubernetes"; as in allowed_clouds
	Display string   // as printed: "Kubernetes"
	Aliases []string // other spellings accepted as input: "k8s"
	Group   Group
	// Features, when nil, are DefaultFeatures.
	Features *Features
	// Sized: no instance types; a node is sized to the request (exact
	// CPUs, "-" in the INSTANCE column, 2 CPUs / 1 GB each by default).
	Sized bool
	// Sizes, when zero, are DefaultSizes (ignored when Sized).
	Sizes Sizes
	// Place is how its infra strings name a place; RegionNoun is what a
	// region is called in messages ("context", "node pool").
	Place      Place
	RegionNoun string
	// RegionPrefix is put before the region the user names (`ssh/gpus` is
	// region ssh-gpus, as SkyPilot names a node pool's context) and left
	// out where regions are printed.
	RegionPrefix string
	// TPUs: it offers TPUs (accelerators: tpu-*).
	TPUs bool
	// ZeroMemory: memory: 0 asks for a whole node's memory (Slurm's
	// --mem=0) rather than being a mistake.
	ZeroMemory bool
	// Storage: the kind also offers object storage.
	Storage bool
	// TaskKeys are the keys of its config section a task's `config:` may
	// set (settings that can differ per cluster).
	TaskKeys []string
	// RegionSection names the mapping of per-region settings in its config
	// section ("context_configs"), if it has one.
	RegionSection string
	// ServerKeys are the keys of its config section only the server's
	// config may set (what the server reaches, not how a cluster runs).
	ServerKeys []string
	// PodKeys are the keys of its config section (and of its per-region
	// ones) whose values are pod specs: layered config merges them the way
	// Kubernetes strategic merge does.
	PodKeys []string
	// Schema is the JSON Schema of its config section, for kinds the
	// embedded config schema does not already describe. Its "$defs", if
	// any, join the config schema's (a name taken twice is an error), so
	// the section and its workspace schema can share them.
	Schema json.RawMessage
	// Verbs are hidden commands of the server program that the kind's
	// nodes or tools run as `sky VERB ...` (Kubernetes' k8s-exec, rsync's
	// remote shell): the command line hands them over to sky-server, where
	// the plug-in registered them (infra.RegisterVerb).
	Verbs []string
	// WorkspaceSchema is the JSON Schema of its section inside a
	// workspace (workspaces.<name>.<kind>); nil: the section may only
	// say disabled.
	WorkspaceSchema json.RawMessage
	// Volumes are the volume types it makes.
	Volumes []VolumeType
	// Check finds its credentials; nil: `sky check` uses its own checker
	// for the kind, if it has one.
	Check func(CheckEnv) CheckResult
}

// Short is the shortest spelling of k users write: its first alias
// ("k8s"), or its name.
func (k Kind) Short() string {
	if len(k.Aliases) > 0 {
		return k.Aliases[0]
	}
	return k.Name
}

// Feats are k's features, or DefaultFeatures.
func (k Kind) Feats() Features {
	if k.Features == nil {
		return DefaultFeatures
	}
	return *k.Features
}

// DefaultSizes are k's sizes, or DefaultSizes.
func (k Kind) DefaultSizes() Sizes {
	if k.Sizes == (Sizes{}) {
		return DefaultSizes
	}
	return k.Sizes
}

var (
	mu      sync.RWMutex
	kinds   = map[string]Kind{}
	alias   = map[string]string{}
	omitted = map[string]string{}
)

// Omit records that this build leaves the kind name out (its plug-in's
// skygo_omit_* build tag): it stays known by name, so asking for it says
// which tag took it out, and `sky check` never calls it enabled, since
// nothing could provision there. Called from init; an empty tag takes the
// mark away (for tests).
func Omit(name, tag string) {
	mu.Lock()
	defer mu.Unlock()
	if tag == "" {
		delete(omitted, strings.ToLower(name))
		return
	}
	omitted[strings.ToLower(name)] = tag
}

// OmittedBy is the build tag that left the kind name out, or "".
func OmittedBy(name string) string {
	c := Canonical(name)
	mu.RLock()
	defer mu.RUnlock()
	return omitted[c]
}

// Register adds a kind; called from init. A name or alias taken twice is
// a programming error.
func Register(k Kind) {
	mu.Lock()
	defer mu.Unlock()
	k.Name = strings.ToLower(k.Name)
	taken := func(n string) bool { _, kind := kinds[n]; _, al := alias[n]; return kind || al }
	if taken(k.Name) {
		panic("infrakind: " + k.Name + " registered twice")
	}
	for i, a := range k.Aliases {
		a = strings.ToLower(a)
		if taken(a) || a == k.Name || slices.Contains(k.Aliases[:i], a) {
			panic("infrakind: alias " + a + " of " + k.Name + " is taken")
		}
	}
	for _, a := range k.Aliases {
		alias[strings.ToLower(a)] = k.Name
	}
	kinds[k.Name] = k
}

// Canonical is the kind name for name or one of its aliases (any case),
// or "" when no kind answers to it.
func Canonical(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	mu.RLock()
	defer mu.RUnlock()
	if _, ok := kinds[n]; ok {
		return n
	}
	return alias[n]
}

// Lookup is the kind named name (or an alias of it).
func Lookup(name string) (Kind, bool) {
	c := Canonical(name)
	mu.RLock()
	defer mu.RUnlock()
	k, ok := kinds[c]
	return k, ok
}

// All are every kind in report order: by group, then by name.
func All() []Kind {
	mu.RLock()
	out := make([]Kind, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k)
	}
	mu.RUnlock()
	slices.SortFunc(out, func(a, b Kind) int {
		if a.Group != b.Group {
			return int(a.Group - b.Group)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Names are every kind's name, sorted.
func Names() []string {
	var out []string
	for _, k := range All() {
		out = append(out, k.Name)
	}
	slices.Sort(out)
	return out
}

// OnThisMachine reports whether the kind runs clusters on the server's own
// machine (the fallback, local): it is used when nothing else is enabled,
// and on a server with users only admins may launch there.
func OnThisMachine(name string) bool {
	k, ok := Lookup(name)
	return ok && k.Group == Fallback
}

// HasRegions reports whether the kind's places have regions (the local
// one has none).
func HasRegions(name string) bool {
	k, _ := Lookup(name)
	return k.Place != Here
}

// Verb is the kind that declares verb, if any.
func Verb(verb string) (Kind, bool) {
	for _, k := range All() {
		if slices.Contains(k.Verbs, verb) {
			return k, true
		}
	}
	return Kind{}, false
}

// Aliases maps every alias to its kind.
func Aliases() map[string]string {
	mu.RLock()
	defer mu.RUnlock()
	out := make(map[string]string, len(alias))
	for a, k := range alias {
		out[a] = k
	}
	return out
}

// VolumeKinds are the kinds that make volumes of type typ, this machine
// first, then in report order, with what each says of the type.
func VolumeKinds(typ string) ([]Kind, []VolumeType) {
	var kinds []Kind
	var types []VolumeType
	all := All()
	slices.SortStableFunc(all, func(a, b Kind) int { return cmpBool(b.Group == Fallback, a.Group == Fallback) })
	for _, k := range all {
		for _, v := range k.Volumes {
			if v.Type == typ {
				kinds, types = append(kinds, k), append(types, v)
			}
		}
	}
	return kinds, types
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// EphemeralVolumeType is the type of a task's volume made with its
// cluster when the task names none: the first a kind marks Ephemeral, in
// report order; "" when no kind makes them.
func EphemeralVolumeType() string {
	for _, k := range All() {
		for _, v := range k.Volumes {
			if v.Ephemeral {
				return v.Type
			}
		}
	}
	return ""
}

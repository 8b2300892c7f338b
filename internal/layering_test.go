package internal_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"
	"testing"
)

// The layer order of DESIGN.md ("lower never imports higher"), top
// first, as the code really is. A package may import only packages of
// lower layers; the packages of one layer are peers and do not import
// each other. "x/*" stands for every package below x. A new package must
// be placed here before its first test run.
//
// Where this departs from DESIGN.md's list: the agent sits above
// provision, because its NodeRunner is provision's CommandRunner seen
// from a node; the infrastructures sit above the optimizer and the
// credential checks, whose interfaces they implement (a capacity source,
// check details), with their registry (internal/infra) below them and the
// build's list of them (internal/infra/all) above; agentapi, proc, op and
// the small helpers are added at the bottom, where the vocabulary lives.
// The API's records sit just above the resources they carry typed (a
// task's resources are checked as a record is decoded), and resources
// just above the vocabulary (the infrastructure registry) it reads.
// Each infrastructure describes itself in a light package beside its
// plug-in (internal/infra/<name>/kind: names, features, config section,
// credential check), near the bottom, because the command line and every
// reader of the registry (internal/infrakind) link it; the list of them
// (internal/infrakind/all) sits just above. A plug-in's commands
// (internal/infra/<name>/cliext, listed by internal/cliext/all) sit just
// below the command line, above the seam they register with
// (internal/cliext); its node side (internal/infra/<name>/node, listed by
// internal/agent/all, which sky-node links) sits just above the agent it
// registers into.
// Slurm and EC2 sit above the other infrastructures: a login node or an
// instance is reached with the SSH node pools' client (config, dialer,
// runner, bootstrap), not a copy. The operations' descriptors
// (internal/apiop) sit just above the credential checks and the agent
// protocol, whose records some operations return, and below everything
// that serves or sends operations: the infrastructures with operations
// of their own, core, the server, the client and the command line.
var layers = []layer{
	{"entry points", []string{"cmd/sky", "cmd/sky-server", "cmd/sky-node", "cmd/sky-lb", "cmd/openapigen", "internal/e2e"}},
	{"programs: the command line, the server program", []string{"internal/cli", "internal/servermain"}},
	{"the list of the infrastructures' command-line extras", []string{"internal/cliext/all"}},
	{"infrastructures' command-line extras: the commands a plug-in adds to sky", []string{"internal/infra/*/cliext"}},
	{"the command line's seam for an infrastructure's commands", []string{"internal/cliext"}},
	{"API client and server", []string{"internal/client", "internal/server"}},
	{"operations", []string{"internal/core"}},
	{"managed jobs, serving", []string{"internal/jobs", "internal/serve"}},
	{"replica sets: what services and pools share", []string{"internal/replicaset"}},
	{"reconcile runner", []string{"internal/controller"}},
	{"cluster lifecycle", []string{"internal/backend"}},
	{"the build's infrastructures", []string{"internal/infra/all"}},
	{"infrastructures reached through another's transport", []string{"internal/infra/slurm", "internal/infra/aws"}},
	{"infrastructures", []string{"internal/infra/*"}},
	{"infrastructure seams and registry", []string{"internal/infra"}},
	{"optimizer", []string{"internal/optimizer"}},
	{"the API's operation descriptors", []string{"internal/apiop"}},
	{"catalogs, credential checks", []string{"internal/catalog", "internal/check"}},
	{"the list of the infrastructures' node sides", []string{"internal/agent/all"}},
	{"infrastructures' node sides: what sky-node links of a plug-in", []string{"internal/infra/*/node"}},
	{"node agent", []string{"internal/agent"}},
	{"agent protocol, local processes, load balancer", []string{"internal/agent/agentapi", "internal/proc", "internal/serve/lb"}},
	{"provisioning interfaces", []string{"internal/provision"}},
	{"tasks", []string{"internal/task"}},
	{"schema checks the operations plug into the loaders", []string{"internal/task/taskschema", "internal/config/configschema"}},
	{"config", []string{"internal/config"}},
	{"operation contract", []string{"internal/op"}},
	{"state", []string{"internal/state"}},
	{"S3 operations through the SDK", []string{"internal/storage/s3bucket"}},
	{"storage: bucket names, stores, copy and mount scripts", []string{"internal/storage"}},
	{"the runtime files sky carries", []string{"internal/bundle"}},
	{"uploads: manifest, ignore rules, blob store", []string{"internal/upload"}},
	{"the loaders' seams to their schema checks", []string{"internal/task/taskdoc", "internal/config/configdoc"}},
	{"the API's records", []string{"internal/api"}},
	{"resources", []string{"internal/resources"}},
	{"the list of every infrastructure's descriptor", []string{"internal/infrakind/all"}},
	{"infrastructures' descriptors and command-line extras: what the command line links of a plug-in", []string{"internal/infra/*/kind", "internal/infra/slurm/convert"}},
	{"vocabulary, one-job helpers", []string{"internal/infrakind", "internal/awsx", "internal/redact", "internal/catalog/embedded", "internal/version", "internal/editdist", "internal/fielderr", "internal/paths", "internal/ux", "internal/sshconfig"}},
}

// rules guard the seams that the order alone leaves open. notOn also
// counts indirect imports, so a slim package cannot grow fat through a
// helper.
var rules = []rule{
	{pkg: "internal/cli", onlyFrom: []string{"cmd/sky"},
		why: "the commands are the top of the program; only main wires them"},
	{pkg: "internal/servermain", onlyFrom: []string{"cmd/sky-server"},
		why: "the server program is the top of its binary; only its main wires it"},
	{pkg: "internal/bundle", onlyFrom: []string{"cmd/sky"},
		why: "the runtime files travel inside sky alone; the server and the tests do not carry them"},
	{pkg: "internal/core", onlyFrom: []string{"internal/servermain", "cmd/openapigen"},
		why: "the server program hands the operations to the server; nothing else runs them (openapigen only describes them)"},
	{pkg: "internal/task/taskschema", onlyFrom: []string{"internal/core"},
		why: "the operations install the schema check into the loader; a binary without them starts without the JSON-Schema library"},
	{pkg: "internal/config/configschema", onlyFrom: []string{"internal/core"},
		why: "the operations install the schema check into the loader; a binary without them starts without the JSON-Schema library"},
	{pkg: "internal/cli", notOn: []string{"internal/core", "internal/server", "internal/state", "internal/agent", "internal/serve/*",
		"internal/infra", "internal/infra/*", "internal/backend", "internal/storage/s3bucket", "internal/awsx", "internal/task/taskschema", "internal/config/configschema",
		"github.com/aws/*", "k8s.io/*", "sigs.k8s.io/*", "github.com/jackc/*", "modernc.org/*", "github.com/prometheus/*", "github.com/santhosh-tekuri/*"},
		allowDeps: []string{"internal/infra/*/kind", "internal/infra/*/cliext", "internal/infra/slurm/convert"},
		why:       "the command line starts in milliseconds: it speaks HTTP to the server and hands server-side verbs to sky-server; of a plug-in it links the descriptor and the command-line extras alone (see also cmd/sky's deps test)"},
	{pkg: "internal/infra/*/cliext", notOn: []string{"internal/core", "internal/server", "internal/state", "internal/agent", "internal/serve/*",
		"internal/infra", "internal/infra/*", "internal/backend", "internal/storage/s3bucket", "internal/awsx", "internal/task/taskschema", "internal/config/configschema",
		"github.com/aws/*", "k8s.io/*", "sigs.k8s.io/*", "github.com/jackc/*", "modernc.org/*", "github.com/prometheus/*", "github.com/santhosh-tekuri/*"},
		allowDeps: []string{"internal/infra/*/kind", "internal/infra/slurm/convert"},
		why:       "an infrastructure's commands run in the command line: they link what it may (see internal/cli), nothing of the plug-in's provisioning side"},
	{pkg: "internal/infra/*/cliext", onlyFrom: []string{"internal/cliext/all"},
		why: "a plug-in's commands reach the command line through the list of them (internal/cliext/all) and the seam (internal/cliext)"},
	{pkg: "internal/cliext/all", onlyFrom: []string{"internal/cli"},
		why: "the command line is the one program with commands"},
	{pkg: "internal/core", notOn: []string{"internal/infra/*", "internal/infrakind/all"},
		why: "the operations reach infrastructures through the registries (internal/infra, internal/infrakind); only the server program links the build's list of them (internal/infra/all, internal/infrakind/all)"},
	{pkg: "internal/infra/*/kind", onlyOn: []string{"internal/infrakind", "gopkg.in/yaml.v3"},
		why: "the command line links every infrastructure's descriptor: the standard library, the registry and a YAML reader (kubeconfig, node pools), no SDK and nothing of the plug-in"},
	{pkg: "internal/infra/*/kind", onlyFrom: []string{"internal/infrakind/all", "internal/infra/*"},
		why: "a descriptor reaches the programs through the list of them (internal/infrakind/all); its plug-in imports it so that linking the plug-in registers the kind"},
	{pkg: "internal/infra/slurm/convert", onlyOn: []string{"gopkg.in/yaml.v3"},
		why: "`sky slurm convert` runs in the command line: sbatch scripts to task YAML, with the standard library and a YAML writer"},
	{pkg: "internal/infra/slurm/convert", onlyFrom: []string{"internal/infra/slurm/cliext"},
		why: "a command-line extra of a plug-in: the command line's `sky slurm convert` is its one user"},
	{pkg: "internal/infra/*/node", onlyFrom: []string{"internal/agent/all", "internal/infra/*"},
		why: "an infrastructure's node side reaches sky-node through the list of them (internal/agent/all); its plug-in imports it for what both ends share"},
	{pkg: "internal/infra/*/node", notOn: []string{"internal/infra", "internal/infra/*", "internal/infrakind", "internal/backend", "internal/core", "internal/server",
		"internal/client", "internal/state", "internal/task", "internal/config", "internal/awsx", "internal/storage/s3bucket", "github.com/spf13/cobra", "github.com/prometheus/*",
		"github.com/jackc/pgx/*", "github.com/aws/*", "k8s.io/*", "sigs.k8s.io/*"},
		why: "sky-node links every infrastructure's node side: the agent and the standard library, nothing of the plug-in or the server side"},
	{pkg: "internal/agent/all", onlyFrom: []string{"cmd/sky-node"},
		why: "which node sides the node runtime has is its main's choice"},
	{pkg: "internal/infra/*", exceptPkg: []string{"internal/infra/*/kind", "internal/infra/*/node", "internal/infra/*/cliext", "internal/infra/slurm/convert", "internal/infra/all"}, onlyFrom: []string{"internal/infra/all", "internal/infra/*", "internal/testutil/*"},
		why: "an infrastructure plugs in through the registries (internal/infra, internal/infrakind): its verbs, operations and settings reach the server from there; Slurm and EC2 reach their machines with the node pools' SSH client"},
	{pkg: "internal/infrakind", notOn: []string{"github.com/*", "golang.org/*", "k8s.io/*", "sigs.k8s.io/*", "modernc.org/*"},
		why: "what the infrastructures are is read by the command line and by builds that leave a plug-in out: the registry is the standard library alone"},
	{pkg: "internal/infra/all", onlyFrom: []string{"internal/servermain", "cmd/openapigen"},
		why: "which infrastructures a build has is the server program's choice (openapigen describes their operations)"},
	{pkg: "internal/server", notOn: []string{"internal/core", "internal/backend"},
		why: "the server runs the op.Op values it is given and knows none of them"},
	{pkg: "internal/client", notOn: []string{"internal/server", "internal/core", "internal/state"},
		why: "the SDK speaks HTTP and api records, nothing of the server's insides"},
	{pkg: "internal/infra/*", notOn: []string{"internal/backend", "internal/core", "internal/server"},
		why: "an infrastructure implements provision's interfaces; the lifecycle drives it"},
	{pkg: "internal/agent", onlyFrom: []string{"cmd/sky-node", "internal/infra/local", "internal/infra/*/node"},
		why: "the agent runs as `sky-node agent` on nodes; only the local infrastructure, whose nodes are this machine, also runs its verbs in-process, and the infrastructures' node sides register into it"},
	{pkg: "internal/agent", notOn: []string{"internal/infra/*", "internal/backend", "internal/core", "internal/server",
		"internal/client", "internal/state", "internal/task", "internal/config", "internal/awsx", "internal/storage/s3bucket", "github.com/spf13/cobra", "github.com/prometheus/*",
		"github.com/jackc/pgx/*", "github.com/aws/*", "k8s.io/*", "sigs.k8s.io/*"},
		why: "the agent runs on every node: it stays slim and knows nothing of the server side"},
	{pkg: "internal/replicaset", notOn: []string{"internal/jobs", "internal/serve", "internal/serve/*"},
		why: "services and pools build on the replica set; it knows neither"},
	{pkg: "internal/serve/lb", notOn: []string{"internal/awsx", "github.com/spf13/cobra", "github.com/prometheus/*",
		"github.com/jackc/pgx/*", "github.com/aws/*", "k8s.io/*", "sigs.k8s.io/*"},
		why: "the load balancer runs as `sky-lb serve-lb`, a small process of its own per service"},
	{pkg: "internal/storage", notOn: []string{"internal/awsx", "github.com/aws/*"},
		why: "the task loader and the agent use bucket names and node scripts; the SDK operations are s3bucket's"},
	{pkg: "cmd/sky-node", notOn: []string{"internal/cli", "internal/core", "internal/server", "internal/infra/*", "internal/awsx",
		"github.com/spf13/cobra", "github.com/aws/*", "k8s.io/*", "sigs.k8s.io/*", "github.com/jackc/pgx/*", "github.com/prometheus/*"},
		allowDeps: []string{"internal/infra/*/node"},
		why:       "the node runtime is copied to every node and must stay small: of a plug-in it links the node side alone"},
	{pkg: "cmd/sky-server", notOn: []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes/*"},
		why: "client-go's generated clientset registers every API group's types at init (13.5 MiB of the idle server's RSS); internal/infra/kubernetes calls the few kinds it uses over client-go's REST client (kclient.go)"},
	{pkg: "cmd/sky-lb", notOn: []string{"internal/agent", "internal/state", "internal/core", "internal/server", "internal/infra/*",
		"github.com/spf13/cobra", "github.com/aws/*", "k8s.io/*", "sigs.k8s.io/*", "github.com/jackc/pgx/*", "github.com/prometheus/*", "modernc.org/*"},
		why: "one load balancer runs per service: it is the proxy and nothing else"},
}

// Test helpers (internal/testutil/..., or a package named <pkg>test) are
// linked into tests only; production code must not import them.
func isTestHelper(p string) bool {
	last := p[strings.LastIndex(p, "/")+1:]
	return matches("internal/testutil/*", p) || p == "internal/testutil" || strings.HasSuffix(last, "test")
}

type layer struct {
	name string
	pkgs []string
}

type rule struct {
	pkg       string
	exceptPkg []string // packages pkg's pattern does not cover
	onlyFrom  []string // the only packages that may import pkg
	notOn     []string // what pkg must not depend on, even indirectly
	allowDeps []string // exceptions to notOn
	// onlyOn, when set, is all pkg may depend on beyond the standard
	// library, even indirectly.
	onlyOn []string
	why    string
}

// covers reports whether the rule is about package p.
func (r rule) covers(p string) bool {
	return matches(r.pkg, p) && !slices.ContainsFunc(r.exceptPkg, func(e string) bool { return matches(e, p) })
}

// stdlib reports whether an import path is the standard library's: its
// first element has no dot, and it is not one of this module's packages
// (ours), whose paths are shortened to "internal/..." as the standard
// library's own internal packages are named.
func stdlib(p string, ours map[string]bool) bool {
	first, _, _ := strings.Cut(p, "/")
	return !strings.Contains(first, ".") && !ours[p]
}

// pkg is what the check needs of `go list -json`, with this module's
// import paths made relative ("internal/core").
type pkg struct {
	ImportPath string
	Imports    []string // of the non-test files
	Deps       []string // every package those import, indirectly too
	GoFiles    []string
}

const module = "github.com/skygo/skygo/"

func TestLayering(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps,GoFiles", "./...")
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs, err := decodePackages(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range check(pkgs) {
		t.Error(v)
	}
}

func decodePackages(out []byte) ([]pkg, error) {
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decoding go list output: %w", err)
		}
		p.ImportPath = strings.TrimPrefix(p.ImportPath, module)
		for i := range p.Imports {
			p.Imports[i] = strings.TrimPrefix(p.Imports[i], module)
		}
		for i := range p.Deps {
			p.Deps[i] = strings.TrimPrefix(p.Deps[i], module)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

// check returns one message per broken rule.
func check(pkgs []pkg) []string {
	var out []string
	ours := map[string]bool{}
	for _, p := range pkgs {
		ours[p.ImportPath] = true
	}
	for _, p := range pkgs {
		if len(p.GoFiles) == 0 {
			continue // tests only (like this one): nothing links it
		}
		helper := isTestHelper(p.ImportPath)
		from, fromOK := layerOf(p.ImportPath)
		if !fromOK && !helper {
			out = append(out, fmt.Sprintf("%s is in no layer; add it to the layers table of internal/layering_test.go", p.ImportPath))
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, "internal/") && !strings.HasPrefix(imp, "cmd/") {
				continue // the standard library and other modules
			}
			if isTestHelper(imp) {
				if !helper {
					out = append(out, fmt.Sprintf("%s imports %s: a test helper, which only _test.go files may import", p.ImportPath, imp))
				}
				continue
			}
			to, toOK := layerOf(imp)
			switch {
			case helper || !fromOK || !toOK:
				// A helper may use any layer; unplaced packages are reported above.
			case to == from:
				out = append(out, fmt.Sprintf("%s imports %s: both are in layer %d (%s), whose packages do not import each other",
					p.ImportPath, imp, from+1, layers[from].name))
			case to < from:
				out = append(out, fmt.Sprintf("%s imports %s: layer %d (%s) may import only lower layers, and %s is in layer %d (%s)",
					p.ImportPath, imp, from+1, layers[from].name, imp, to+1, layers[to].name))
			}
		}
		for _, r := range rules {
			if len(r.onlyFrom) > 0 && slices.ContainsFunc(p.Imports, r.covers) &&
				!slices.ContainsFunc(r.onlyFrom, func(f string) bool { return matches(f, p.ImportPath) }) {
				out = append(out, fmt.Sprintf("%s imports %s, which only %s may import: %s",
					p.ImportPath, r.pkg, strings.Join(r.onlyFrom, " and "), r.why))
			}
			if !r.covers(p.ImportPath) {
				continue
			}
			if r.onlyOn != nil {
				for _, d := range p.Deps {
					if !stdlib(d, ours) && !slices.ContainsFunc(r.onlyOn, func(o string) bool { return matches(o, d) }) {
						out = append(out, fmt.Sprintf("%s depends on %s (rule: %s may depend only on the standard library and %s): %s%s",
							p.ImportPath, d, r.pkg, strings.Join(r.onlyOn, ", "), r.why, via(p, d, pkgs)))
					}
				}
			}
			for _, n := range r.notOn {
				// One message per pattern: the first package it catches.
				if i := slices.IndexFunc(p.Deps, func(d string) bool {
					return matches(n, d) && !slices.ContainsFunc(r.allowDeps, func(a string) bool { return matches(a, d) })
				}); i >= 0 {
					out = append(out, fmt.Sprintf("%s depends on %s (rule: %s must not depend on %s): %s%s",
						p.ImportPath, p.Deps[i], r.pkg, n, r.why, via(p, p.Deps[i], pkgs)))
				}
			}
		}
	}
	return out
}

// via names the direct import that brings in an indirect dependency.
func via(p pkg, dep string, pkgs []pkg) string {
	if slices.Contains(p.Imports, dep) {
		return ""
	}
	for _, imp := range p.Imports {
		for _, q := range pkgs {
			if q.ImportPath == imp && slices.Contains(q.Deps, dep) {
				return " (through " + imp + ")"
			}
		}
	}
	return ""
}

// layerOf is the layer of p: the one naming it by path or element
// pattern ("internal/infra/*/kind") before one naming a tree above it.
func layerOf(p string) (int, bool) {
	for _, tree := range []bool{false, true} {
		for i, l := range layers {
			if slices.ContainsFunc(l.pkgs, func(pat string) bool { return strings.HasSuffix(pat, "/*") == tree && matches(pat, p) }) {
				return i, true
			}
		}
	}
	return 0, false
}

// matches reports whether import path p is pattern pat: the same path,
// for "x/*" any path below x, and elsewhere a * stands for one path
// element ("internal/infra/*/kind").
func matches(pat, p string) bool {
	if prefix, ok := strings.CutSuffix(pat, "/*"); ok {
		return strings.HasPrefix(p, prefix+"/")
	}
	ok, _ := path.Match(pat, p)
	return ok
}

// The checker itself, on made-up graphs: each broken rule is reported,
// with the import and the rule named.
func TestCheckReportsBrokenRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkgs []pkg
		want []string
	}{
		{"downward imports pass", []pkg{
			{ImportPath: "internal/core", Imports: []string{"internal/op", "fmt"}, Deps: []string{"internal/op", "internal/api"}},
			{ImportPath: "internal/op", Imports: []string{"internal/api"}, Deps: []string{"internal/api"}},
		}, nil},
		{"upward import", []pkg{
			{ImportPath: "internal/core", Imports: []string{"internal/server"}},
		}, []string{"internal/core imports internal/server: layer 7 (operations) may import only lower layers, and internal/server is in layer 6 (API client and server)"}},
		{"a seam the order leaves open", []pkg{
			{ImportPath: "internal/server", Imports: []string{"internal/core"}},
		}, []string{"internal/server imports internal/core, which only internal/servermain and cmd/openapigen may import",
			"internal/server depends on internal/core (rule: internal/server must not depend on internal/core): the server runs the op.Op values"}},
		{"peers", []pkg{
			{ImportPath: "internal/infra/ssh", Imports: []string{"internal/infra/local"}},
		}, []string{"internal/infra/ssh imports internal/infra/local: both are in layer 14 (infrastructures)"}},
		{"a plug-in from outside the registry", []pkg{
			{ImportPath: "internal/jobs", Imports: []string{"internal/infra/slurm"}},
		}, []string{"internal/jobs imports internal/infra/*, which only internal/infra/all and internal/infra/* and internal/testutil/* may import"}},
		{"a descriptor that grows", []pkg{
			{ImportPath: "internal/infra/ssh/kind", Imports: []string{"internal/infrakind", "internal/config", "strings"},
				Deps: []string{"internal/infrakind", "internal/config", "strings", "gopkg.in/yaml.v3"}},
			{ImportPath: "internal/config"},
		}, []string{"internal/infra/ssh/kind imports internal/config: layer",
			"internal/infra/ssh/kind depends on internal/config (rule: internal/infra/*/kind may depend only on the standard library and internal/infrakind, gopkg.in/yaml.v3)"}},
		{"the command line links a descriptor, not its plug-in", []pkg{
			{ImportPath: "internal/cli", Imports: []string{"internal/infrakind/all"}, Deps: []string{"internal/infrakind/all", "internal/infra/ssh/kind", "internal/infra/ssh"}},
		}, []string{"internal/cli depends on internal/infra/ssh (rule: internal/cli must not depend on internal/infra/*)"}},
		{"only main imports the commands", []pkg{
			{ImportPath: "internal/e2e", Imports: []string{"internal/cli"}},
		}, []string{"internal/e2e imports internal/cli, which only cmd/sky may import"}},
		{"indirect dependency of the agent", []pkg{
			{ImportPath: "internal/agent", Imports: []string{"internal/proc"}, Deps: []string{"internal/proc", "github.com/spf13/cobra"}},
			{ImportPath: "internal/proc", Imports: []string{"github.com/spf13/cobra"}, Deps: []string{"github.com/spf13/cobra"}},
		}, []string{"internal/agent depends on github.com/spf13/cobra (rule: internal/agent must not depend on github.com/spf13/cobra): the agent runs on every node: it stays slim and knows nothing of the server side (through internal/proc)"}},
		{"test helper in production code", []pkg{
			{ImportPath: "internal/state", Imports: []string{"internal/testutil"}},
			{ImportPath: "internal/testutil/sshhosts", Imports: []string{"internal/testutil", "internal/infra/ssh"}},
		}, []string{"internal/state imports internal/testutil: a test helper, which only _test.go files may import"}},
		{"unplaced package", []pkg{
			{ImportPath: "internal/newthing", Imports: []string{"internal/api"}},
		}, []string{"internal/newthing is in no layer"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.pkgs {
				tc.pkgs[i].GoFiles = []string{"x.go"}
				if tc.pkgs[i].Deps == nil {
					tc.pkgs[i].Deps = tc.pkgs[i].Imports
				}
			}
			got := check(tc.pkgs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d messages, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("message %d:\n got %s\nwant %s...", i, got[i], tc.want[i])
				}
			}
		})
	}
}

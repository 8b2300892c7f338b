// Package check is `sky check`: it finds out, from local files and
// environment variables only (no network calls), which infrastructures
// this machine has credentials for, and says what to do for the others.
// Messages name the file or variable that was found, never its contents.
package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/proc"
)

// Options says what to check and with which settings.
type Options struct {
	Home          string         // "" = the user's home directory
	Config        *config.Config // merged config; nil = empty
	Workspace     string         // "" = the config's active workspace
	Infras        []string       // names to check (aws, k8s, ...); empty = all
	Verbose       bool           // add where each credential came from
	LocalDisabled bool           // the user turned the embedded local infra off (SettingLocalDisabled)
}

// Result is the outcome for one infrastructure.
type Result struct {
	// Key is the infra's canonical name (as in allowed_clouds and the
	// optimizer: "aws", "ssh"); not part of the JSON output.
	Key          string   `json:"-"`
	Infra        string   `json:"infra"`   // display name: AWS, GCP, Kubernetes, ...
	Enabled      bool     `json:"enabled"` // usable for launching
	Reason       string   `json:"reason"`  // what was found, or why not and what to do
	Details      []string `json:"details,omitempty"`
	Capabilities []string `json:"capabilities,omitempty"` // compute, storage (enabled only)
	Warnings     []string `json:"warnings,omitempty"`
}

// SettingLocalDisabled is the settings key `sky local down` sets (to "1")
// and `sky local up` removes; the server passes it as LocalDisabled.
const SettingLocalDisabled = "local_disabled"

// infra is one checker, by canonical lower-case name.
type infra struct {
	name    string // as in allowed_clouds and `sky check NAME`
	display string // as printed and in -o json
	storage bool   // also offers object storage
	check   func(e *env) Result
}

// infras is the fixed order of the report: clouds alphabetically, then the
// on-premises kinds, local last because it is the fallback.
// Every cloud of SkyPilot's catalog is here, whether or not this build can
// provision on it: an enabled one is priced by the optimizer.
var infras = []infra{
	{"aws", "AWS", true, checkAWS},
	{"azure", "Azure", true, checkAzure},
	{"cudo", "Cudo", false, keyCheck("cudo", "Cudo")},
	{"daytona", "Daytona", false, keyCheck("daytona", "Daytona")},
	{"do", "DO", false, keyCheck("do", "DO")},
	{"fluidstack", "Fluidstack", false, keyCheck("fluidstack", "Fluidstack")},
	{"gcp", "GCP", true, checkGCP},
	{"hyperbolic", "Hyperbolic", false, keyCheck("hyperbolic", "Hyperbolic")},
	{"hyperstack", "Hyperstack", false, keyCheck("hyperstack", "Hyperstack")},
	{"ibm", "IBM", false, keyCheck("ibm", "IBM")},
	{"jarvislabs", "JarvisLabs", false, keyCheck("jarvislabs", "JarvisLabs")},
	{"lambda", "Lambda", false, checkLambda},
	{"lium", "Lium", false, keyCheck("lium", "Lium")},
	{"mithril", "Mithril", false, keyCheck("mithril", "Mithril")},
	{"nebius", "Nebius", true, keyCheck("nebius", "Nebius")},
	{"oci", "OCI", true, keyCheck("oci", "OCI")},
	{"paperspace", "Paperspace", false, keyCheck("paperspace", "Paperspace")},
	{"primeintellect", "PrimeIntellect", false, keyCheck("primeintellect", "PrimeIntellect")},
	{"runpod", "RunPod", false, checkRunPod},
	{"scp", "SCP", false, keyCheck("scp", "SCP")},
	{"seeweb", "Seeweb", false, keyCheck("seeweb", "Seeweb")},
	{"shadeform", "Shadeform", false, keyCheck("shadeform", "Shadeform")},
	{"spheron", "Spheron", false, keyCheck("spheron", "Spheron")},
	{"vast", "Vast", false, keyCheck("vast", "Vast")},
	{"verda", "Verda", false, keyCheck("verda", "Verda")},
	{"vsphere", "vSphere", false, keyCheck("vsphere", "vSphere")},
	{"yotta", "Yotta", false, keyCheck("yotta", "Yotta")},
	{"kubernetes", "Kubernetes", false, checkKubernetes},
	{"slurm", "Slurm", false, checkSlurm},
	{"ssh", "SSH", false, checkSSH},
	{"local", "Local", false, nil}, // decided in Run, after the others
}

var aliases = map[string]string{"k8s": "kubernetes", "digitalocean": "do", "datacrunch": "verda", "lambdalabs": "lambda"}

// Names lists the infra names Run understands, in report order.
func Names() []string {
	out := make([]string, len(infras))
	for i, in := range infras {
		out[i] = in.name
	}
	return out
}

// env is what every checker needs: where home is and the workspace's view
// of the config.
type env struct {
	home    string
	cfg     *config.Config
	ws      string
	verbose bool
}

// Run checks the requested infrastructures and returns one Result each,
// in report order. Only unknown names in opts.Infras are an error; a
// missing or broken credential is a disabled Result with a reason.
func Run(ctx context.Context, opts Options) ([]Result, error) {
	want, err := selected(opts.Infras)
	if err != nil {
		return nil, err
	}
	home := opts.Home
	if home == "" {
		if home, err = os.UserHomeDir(); err != nil {
			return nil, fmt.Errorf("finding the home directory to look for credentials: %w", err)
		}
	}
	cfg := opts.Config
	if cfg == nil {
		cfg = config.New(nil)
	}
	ws := opts.Workspace
	if ws == "" {
		ws = cfg.ActiveWorkspace()
	}
	e := &env{home: home, cfg: cfg.ForWorkspace(ws), ws: ws, verbose: opts.Verbose}
	allowed := cfg.GetStringSlice("allowed_clouds", nil)

	var out []Result
	othersEnabled := false
	for _, in := range infras {
		if !want[in.name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var r Result
		switch {
		case OmittedBy(in.name) != "":
			r = Result{Reason: fmt.Sprintf("left out of this build of SkyGo (built with -tags %s); use a build without that tag", OmittedBy(in.name))}
		case allowed != nil && !inAllowed(in.name, allowed):
			r = Result{Reason: fmt.Sprintf("not in allowed_clouds (%s) of the config; add %s there to use it", strings.Join(allowed, ", "), in.name)}
		case e.cfg.GetBool(in.name+".disabled", false):
			r = Result{Reason: fmt.Sprintf("disabled in workspace %q (workspaces.%s.%s.disabled)", ws, ws, in.name)}
		case in.name == "local":
			r = checkLocal(opts.LocalDisabled, othersEnabled)
			if r.Enabled {
				if err := sandboxCheck(); err != nil {
					r.Warnings = append(r.Warnings, "jobs on this machine can read the API server's ~/.sky (state database, tokens, config): "+
						"it allows neither a mount namespace as root nor unprivileged user namespaces ("+err.Error()+")")
				}
			}
		default:
			r = in.check(e)
		}
		r.Infra, r.Key = in.display, in.name
		if r.Enabled {
			r.Capabilities = capabilities(e.cfg, in)
			if in.name != "local" {
				othersEnabled = true
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func selected(names []string) (map[string]bool, error) {
	want := map[string]bool{}
	if len(names) == 0 {
		for _, in := range infras {
			want[in.name] = true
		}
		return want, nil
	}
	for _, n := range names {
		key := strings.ToLower(strings.TrimSpace(n))
		if a, ok := aliases[key]; ok {
			key = a
		}
		found := false
		for _, in := range infras {
			if in.name == key {
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown infra %q for sky check; known: %s", n, strings.Join(Names(), ", "))
		}
		want[key] = true
	}
	return want, nil
}

func inAllowed(name string, allowed []string) bool {
	for _, a := range allowed {
		a = strings.ToLower(a)
		if al, ok := aliases[a]; ok {
			a = al
		}
		if a == name {
			return true
		}
	}
	return false
}

// capabilities are what an enabled infra is used for: compute, plus
// storage for clouds with buckets, narrowed by `<cloud>.capabilities`.
func capabilities(cfg *config.Config, in infra) []string {
	caps := []string{"compute"}
	if in.storage {
		caps = append(caps, "storage")
	}
	limit := cfg.GetStringSlice(in.name+".capabilities", nil)
	if limit == nil {
		return caps
	}
	var out []string
	for _, c := range caps {
		for _, l := range limit {
			if l == c {
				out = append(out, c)
			}
		}
	}
	return out
}

// sandboxCheck says whether local nodes get the sandbox that hides the
// server's ~/.sky from their jobs (proc.SandboxCommand); the agent falls
// back to running jobs without it, and check is where the user learns so.
var sandboxCheck = proc.SandboxAvailable

// checkLocal reports SkyGo's embedded local infrastructure, which needs no
// credentials: enabled unless the user turned it off.
func checkLocal(disabled, othersEnabled bool) Result {
	switch {
	case disabled:
		return Result{Reason: "turned off by the user; enable it again to run tasks on this machine"}
	case !othersEnabled:
		return Result{Enabled: true, Reason: "enabled automatically: no other infrastructure is enabled, so tasks run on this machine"}
	default:
		return Result{Enabled: true, Reason: "runs tasks on this machine (no credentials needed)"}
	}
}

// JSON is the `sky check -o json` shape: workspace -> infra display name ->
// enabled capabilities; disabled infras are left out.
func JSON(workspace string, results []Result) map[string]map[string][]string {
	m := map[string][]string{}
	for _, r := range results {
		if r.Enabled {
			m[r.Infra] = append([]string{}, r.Capabilities...)
		}
	}
	return map[string]map[string][]string{workspace: m}
}

// pretty shows a path with the home directory as ~, as users write it.
func (e *env) pretty(path string) string {
	if rel, err := filepath.Rel(e.home, path); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.Join("~", rel)
	}
	return path
}

// inHome joins parts under the home directory.
func (e *env) inHome(parts ...string) string {
	return filepath.Join(append([]string{e.home}, parts...)...)
}

// envPath returns $name when set, else the default path.
func envPath(name, def string) (path string, fromEnv bool) {
	if v := os.Getenv(name); v != "" {
		return v, true
	}
	return def, false
}

func exists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

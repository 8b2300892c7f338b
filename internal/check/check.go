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
	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/proc"
)

// Options says what to check and with which settings.
type Options struct {
	Home          string         // "" = the user's home directory
	Config        *config.Config // merged config; nil = empty
	Workspace     string         // "" = the config's active workspace
	Infras        []string       // kind names or aliases to check; empty = all
	Verbose       bool           // add where each credential came from
	LocalDisabled bool           // the user turned the embedded local infra off (SettingLocalDisabled)
}

// Result is the outcome for one infrastructure.
type Result struct {
	// Key is the infra's canonical name (as in allowed_clouds and the
	// optimizer); not part of the JSON output.
	Key          string   `json:"-"`
	Infra        string   `json:"infra"`   // display name: infrakind.Kind.Display
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
	name     string // as in allowed_clouds and `sky check NAME`
	display  string // as printed and in -o json
	storage  bool   // also offers object storage
	fallback bool   // this machine: decided in Run, after the others
	check    func(e *env) Result
}

// checkers are the credential checks written here, for the catalog clouds
// that have no plug-in directory; a kind with a plug-in brings its own
// (infrakind.Kind.Check), and one with neither gets the API-key file
// check (keyclouds.go).
var checkers = map[string]func(e *env) Result{
	"azure": checkAzure, "gcp": checkGCP, "lambda": checkLambda, "runpod": checkRunPod,
}

// infras are the registry's kinds in report order: clouds alphabetically,
// then the on-premises kinds, the fallback (this machine) last. Every
// cloud of SkyPilot's catalog is there, whether or not this build can
// provision on it: an enabled one is priced by the optimizer.
func infras() []infra {
	kinds := infrakind.All()
	out := make([]infra, len(kinds))
	for i, k := range kinds {
		in := infra{name: k.Name, display: k.Display, storage: k.Storage, fallback: k.Group == infrakind.Fallback}
		switch {
		case k.Check != nil:
			in.check = ownCheck(k.Check)
		case checkers[k.Name] != nil:
			in.check = checkers[k.Name]
		default:
			in.check = keyCheck(k.Name, k.Display)
		}
		out[i] = in
	}
	return out
}

// ownCheck runs a kind's own credential check.
func ownCheck(f func(infrakind.CheckEnv) infrakind.CheckResult) func(e *env) Result {
	return func(e *env) Result {
		r := f(infrakind.CheckEnv{Home: e.home, Workspace: e.ws, Verbose: e.verbose, Lookup: e.cfg.Lookup})
		return Result{Enabled: r.Enabled, Reason: r.Reason, Details: r.Details, Warnings: r.Warnings}
	}
}

// Names lists the infra names Run understands, in report order.
func Names() []string {
	all := infras()
	out := make([]string, len(all))
	for i, in := range all {
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
	for _, in := range infras() {
		if !want[in.name] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var r Result
		switch {
		case infrakind.OmittedBy(in.name) != "":
			r = Result{Reason: fmt.Sprintf("left out of this build of SkyGo (built with -tags %s); use a build without that tag", infrakind.OmittedBy(in.name))}
		case allowed != nil && !inAllowed(in.name, allowed):
			r = Result{Reason: fmt.Sprintf("not in allowed_clouds (%s) of the config; add %s there to use it", strings.Join(allowed, ", "), in.name)}
		case e.cfg.GetBool(in.name+".disabled", false):
			r = Result{Reason: fmt.Sprintf("disabled in workspace %q (workspaces.%s.%s.disabled)", ws, ws, in.name)}
		case in.fallback:
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
			if !in.fallback {
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
		for _, in := range infras() {
			want[in.name] = true
		}
		return want, nil
	}
	for _, n := range names {
		key := infrakind.Canonical(n)
		if key == "" {
			return nil, fmt.Errorf("unknown infra %q for sky check; known: %s", n, strings.Join(Names(), ", "))
		}
		want[key] = true
	}
	return want, nil
}

func inAllowed(name string, allowed []string) bool {
	for _, a := range allowed {
		if infrakind.Canonical(a) == name {
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

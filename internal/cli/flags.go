package cli

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/config"
)

// boolPair is a SkyPilot-style on/off flag pair (--use-spot / --no-use-spot).
// Set records whether either was given, because "not given" must leave the
// YAML's value alone; when both are given the last one wins.
type boolPair struct {
	Value bool
	Set   bool
}

// pairSide is one spelling of a boolPair: the "--x" side (on=true) or the
// "--no-x" side (on=false).
type pairSide struct {
	target *boolPair
	on     bool
}

func (p *pairSide) String() string {
	if p.target == nil {
		return "false"
	}
	return strconv.FormatBool(p.target.Set && p.target.Value == p.on)
}

func (p *pairSide) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	p.target.Value = b == p.on
	p.target.Set = true
	return nil
}

func (p *pairSide) Type() string     { return "bool" }
func (p *pairSide) IsBoolFlag() bool { return true }

// addBoolPair registers --name and --no-name on fs, both writing to target,
// whose Value starts at def. short, if not empty, is the --name shorthand.
func addBoolPair(fs *pflag.FlagSet, target *boolPair, name, short string, def bool, usage, noUsage string) {
	target.Value = def
	on := fs.VarPF(&pairSide{target: target, on: true}, name, short, usage)
	on.NoOptDefVal = "true"
	on.DefValue = strconv.FormatBool(def)
	off := fs.VarPF(&pairSide{target: target, on: false}, "no-"+name, "", noUsage)
	off.NoOptDefVal = "true"
	off.DefValue = "false" // the default is shown once, on the --name side
}

// addConfigFlag registers the repeatable --config flag every command takes.
func addConfigFlag(cmd *cobra.Command, target *[]string) {
	cmd.Flags().StringArrayVar(target, "config", nil,
		"Config file path, or one `KEY=VALUE` override of ~/.sky/config.yaml (dotted key, e.g. jobs.controller.resources.cpus=4); repeat for several")
}

// addAsyncFlag registers --async/--no-async.
func addAsyncFlag(cmd *cobra.Command, target *boolPair) {
	addBoolPair(cmd.Flags(), target, "async", "", false,
		"Submit the request and return at once, without waiting for it to finish",
		"Wait for the request to finish (default)")
}

// addYesFlag registers -y/--yes.
func addYesFlag(cmd *cobra.Command, target *bool) {
	cmd.Flags().BoolVarP(target, "yes", "y", false, "Do not ask for confirmation")
}

// addOutputFlag registers -o/--output (table or json).
func addOutputFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVarP(target, "output", "o", "table", "Output format: table or json")
}

// parseOutput validates an -o value case-insensitively and returns it in
// lower case.
func parseOutput(v string) (string, error) {
	switch s := strings.ToLower(strings.TrimSpace(v)); s {
	case "table", "json":
		return s, nil
	default:
		return "", flagErrorf("invalid value %q for -o/--output: choose table or json", v)
	}
}

// validateConfigArgs checks --config values with the config package: each is
// a config file or dotted.key=VALUE, and must fit the config schema. Errors
// name the key, not the value, which may be a token.
func validateConfigArgs(values []string) error {
	for _, v := range values {
		if _, err := config.ParseCLIOverride(v); err != nil {
			shown := v
			if k, _, ok := strings.Cut(v, "="); ok {
				shown = k + "=..."
			}
			return flagErrorf("invalid --config %s: %v", shown, err)
		}
	}
	return nil
}

// choice checks that v is one of allowed (case-insensitive) and returns it in
// lower case; flag names the flag for the error message.
func choice(flag, v string, allowed ...string) (string, error) {
	low := strings.ToLower(v)
	for _, a := range allowed {
		if low == a {
			return low, nil
		}
	}
	return "", flagErrorf("invalid value %q for %s: choose one of %s", v, flag, strings.Join(allowed, ", "))
}

// parseInts parses positional job/replica IDs; what names them in errors.
func parseInts(what string, args []string) ([]int, error) {
	out := make([]int, 0, len(args))
	for _, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return nil, flagErrorf("invalid %s %q: want a non-negative integer", what, a)
		}
		out = append(out, n)
	}
	return out, nil
}

// envKeyRE is the variable-name rule for envs and secrets.
var envKeyRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// envVar is one --env or --secret entry after resolution.
type envVar struct {
	Key, Value string
}

// parseEnvArgs resolves --env/--secret values: KEY=VALUE as given, or a bare
// KEY that takes the caller's own value of $KEY. flag is "--env" or
// "--secret". Error messages name the key but never the value, since for
// --secret the value is a secret.
func parseEnvArgs(flag string, values []string, lookup func(string) (string, bool)) ([]envVar, error) {
	out := make([]envVar, 0, len(values))
	for _, v := range values {
		k, val, hasValue := strings.Cut(v, "=")
		if !envKeyRE.MatchString(k) {
			shown := k
			if !hasValue && flag == "--secret" {
				shown = "<hidden>"
			}
			return nil, flagErrorf("invalid %s name %q: use letters, digits and _, not starting with a digit (KEY=VALUE or KEY)", flag, shown)
		}
		if !hasValue {
			local, ok := lookup(k)
			if !ok {
				return nil, flagErrorf("%s %s: no value given and $%s is not set here; use %s %s=VALUE", flag, k, k, flag, k)
			}
			val = local
		}
		out = append(out, envVar{Key: k, Value: val})
	}
	return out, nil
}

// checkFiles checks that every path given to a file flag exists.
func checkFiles(flag string, paths []string) error {
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return flagErrorf("%s %s: file not found", flag, p)
		}
		if st.IsDir() {
			return flagErrorf("%s %s: is a directory, want a dotenv file", flag, p)
		}
	}
	return nil
}

// exactlyOneArg, noArgs, etc. return usage errors (exit 2) instead of
// cobra's plain ones so Execute prints usage for them.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return flagErrorf("sky %s takes no arguments, got %q", commandPath(cmd), strings.Join(args, " "))
	}
	return nil
}

func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < lo:
			return flagErrorf("sky %s: missing argument(s); expected %s", commandPath(cmd), argSpec(cmd))
		case hi >= 0 && len(args) > hi:
			return flagErrorf("sky %s: too many arguments (%q); expected %s", commandPath(cmd), strings.Join(args, " "), argSpec(cmd))
		}
		return nil
	}
}

// argSpec is the positional part of a command's Use line ("CLUSTER
// [JOB_IDS]...").
func argSpec(cmd *cobra.Command) string {
	_, rest, _ := strings.Cut(cmd.Use, " ")
	return strings.TrimSpace(strings.Replace(rest, "[flags]", "", 1))
}

// commandPath is the command's path without the leading "sky ".
func commandPath(cmd *cobra.Command) string {
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// loadRequestConfig builds the config this command sends with its
// requests from --config, -w/--workspace (a string flag named
// "workspace") and the config files, and checks it. Without --config,
// -w or a project .sky.yaml nothing is sent: the server then reads the
// same user file itself.
func (f *Factory) loadRequestConfig(cmd *cobra.Command) error {
	f.requestConfig = nil
	if cmd.Flags().Lookup("config") == nil {
		return nil // sends no request a config applies to (api, agent, completion)
	}
	var vals []string
	if fl := cmd.Flags().Lookup("config"); fl != nil && fl.Changed {
		vals, _ = cmd.Flags().GetStringArray("config")
	}
	ws := ""
	if fl := cmd.Flags().Lookup("workspace"); fl != nil && fl.Changed && fl.Value.Type() == "string" {
		ws = fl.Value.String()
		if !workspaceRE.MatchString(ws) {
			return flagErrorf("invalid -w/--workspace %q: a workspace name is lower-case letters, digits, - and _ (see workspaces: in ~/.sky/config.yaml)", ws)
		}
	}
	if len(vals) == 0 && ws == "" && !projectConfigPresent() {
		return nil
	}
	if err := validateConfigArgs(vals); err != nil {
		return err
	}
	cfg, err := config.Load(config.LoadOptions{CLI: vals, Client: true})
	if err != nil {
		return flagErrorf("%v", err)
	}
	// This binary does not link the config schema: the server checks each
	// source as the loader would have, and says it the same way: the
	// --config key=value settings first, one by one, as
	// validateConfigArgs checks them where the schema is linked, then the
	// files.
	if srcs := cfg.Unchecked(); len(srcs) > 0 && f.Client != nil {
		var files []api.ConfigSource
		for _, src := range srcs {
			if src.Value == nil {
				files = append(files, src)
				continue
			}
			if err := f.checkConfigSources([]api.ConfigSource{src}); err != nil {
				v := strings.TrimPrefix(src.Name, "--config ")
				if k, _, ok := strings.Cut(v, "="); ok {
					v = k + "=..."
				}
				return flagErrorf("invalid --config %s: %v", v, err)
			}
		}
		if err := f.checkConfigSources(files); err != nil {
			return flagErrorf("%v", err)
		}
	}
	m := cfg.Map()
	// Which server to talk to is the client's business alone; sending
	// it would only earn a warning that the server ignores it.
	delete(m, "api_server")
	if ws != "" {
		m["active_workspace"] = ws
	}
	f.requestConfig = m
	return nil
}

// checkConfigSources has the server check config sources against the
// schema; it returns the server's verdict on them (nil when they pass or
// when the server could not judge them, as a failure of the request
// itself shows again at the command's own call).
func (f *Factory) checkConfigSources(srcs []api.ConfigSource) error {
	if len(srcs) == 0 {
		return nil
	}
	var res api.ValidateResult
	err := callOp(f, apiop.Validate, api.ValidateBody{ConfigSources: srcs}, &res, callOptions{})
	if errorType(err) == "InvalidSkyPilotConfigError" {
		return err
	}
	return nil
}

// workspaceRE is the workspace name rule of SkyPilot's config schema.
var workspaceRE = regexp.MustCompile(`^[a-z]([-_a-z0-9]*[a-z0-9])?$`)

func projectConfigPresent() bool {
	if os.Getenv(config.EnvProjectConfig) != "" {
		return true
	}
	_, err := os.Stat(".sky.yaml")
	return err == nil
}

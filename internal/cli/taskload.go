package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/fielderr"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/task"
	"github.com/skygo/skygo/internal/upload"
)

// prepareTask loads what a task command line describes (a YAML file, or an
// inline command) through the task loader, with --env/--secret applied,
// then applies the name/num-nodes/workdir and resource flags. Every task
// command goes through here, so a bad YAML or flag fails before anything
// is uploaded or launched. f reaches the API server for the schema check
// (checkTaskYAML); nil leaves it out.
func prepareTask(f *Factory, in *taskInput) (*task.DAG, error) {
	if err := checkTaskYAML(f, in); err != nil {
		return nil, err
	}
	opts := loadOptions(in)
	var (
		dag *task.DAG
		err error
	)
	switch {
	case in.Entry.YAMLPath != "":
		dag, err = task.Load(in.Entry.YAMLPath, opts)
	default:
		// An inline command (or none: provision only) is a one-task YAML
		// built here, so envs and secrets go through the same loader.
		doc := map[string]any{}
		if in.Entry.Command != "" {
			doc["run"] = in.Entry.Command
		}
		data, merr := yaml.Marshal(doc)
		if merr != nil {
			return nil, merr
		}
		if len(doc) == 0 {
			data = []byte("resources: {}\n")
		}
		dag, err = task.LoadBytes("<command line>", data, opts)
	}
	if err != nil {
		return nil, err
	}
	for _, t := range dag.Tasks {
		if err := applyTaskOverrides(t, in); err != nil {
			return nil, err
		}
	}
	return dag, nil
}

// checkTaskYAML has the API server check a task YAML against the schema,
// when this binary cannot: the CLI does not link the JSON-Schema check
// (its start-up cost is what a CLI must not pay; task.SchemaChecked), and
// the server runs the same loader with it, so the user reads the same
// file:line message as from a local check. Any other verdict of the
// server's is left to the local checks that follow, which word it the same.
func checkTaskYAML(f *Factory, in *taskInput) error {
	if task.SchemaChecked() || f == nil || f.Client == nil || in.Entry.YAMLPath == "" {
		return nil
	}
	body, err := validateBody(in)
	if err != nil {
		return err
	}
	var res api.ValidateResult
	err = callOp(f, apiop.Validate, body, &res, callOptions{})
	switch t := errorType(err); {
	case err == nil:
		return nil
	case t == "InvalidSkyPilotConfigError":
		return err
	case t != "":
		return nil
	}
	return err
}

// validateBody is what the validate operation needs of a task command
// line: the YAML as written, with --env/--secret resolved here.
func validateBody(in *taskInput) (api.ValidateBody, error) {
	resolved, err := loadOptions(in).Resolved()
	if err != nil {
		return api.ValidateBody{}, err
	}
	text, err := os.ReadFile(in.Entry.YAMLPath)
	if err != nil {
		return api.ValidateBody{}, err
	}
	body := api.ValidateBody{Name: in.Entry.YAMLPath, YAML: string(text), Env: resolved.Env}
	for _, kv := range resolved.Secrets {
		k, v, _ := strings.Cut(kv, "=")
		if body.Secrets == nil {
			body.Secrets = map[string]string{}
		}
		body.Secrets[k] = v
	}
	return body, nil
}

// loadOptions is how a task command line's --env/--secret flags and files
// reach the task loader.
func loadOptions(in *taskInput) task.LoadOptions {
	return task.LoadOptions{
		Env:         envStrings(in.Env),
		EnvFiles:    in.EnvFiles,
		Secrets:     envStrings(in.Secrets),
		SecretFiles: in.SecretFiles,
	}
}

// envStrings turns resolved --env/--secret entries back into K=V strings.
func envStrings(vars []envVar) []string {
	out := make([]string, 0, len(vars))
	for _, v := range vars {
		out = append(out, v.Key+"="+v.Value)
	}
	return out
}

// applyTaskOverrides applies the non-resource flags, then the resource ones.
func applyTaskOverrides(t *task.Task, in *taskInput) error {
	if in.Name != "" {
		t.Name = in.Name
	}
	if in.NumNodes > 0 {
		t.NumNodes = in.NumNodes
	}
	switch {
	case in.Workdir != "":
		t.Workdir = &task.Workdir{Path: in.Workdir}
	case in.GitURL != "":
		t.Workdir = &task.Workdir{URL: in.GitURL, Ref: in.GitRef}
	case in.GitRef != "":
		if t.Workdir == nil || !t.Workdir.IsGit() {
			return flagErrorf("--git-ref needs a git workdir: give --git-url too (or a workdir with url: in the YAML)")
		}
		t.Workdir.Ref = in.GitRef
	}
	r, err := applyResourceOverrides(t.ResourcesConfig, in.Res)
	if err != nil {
		return err
	}
	if r != nil {
		t.Resources = r
	}
	return nil
}

// applyResourceOverrides is the one place resource flags meet the resources
// package. It edits a copy of the resources section as written and parses
// it again, so the flags get exactly the YAML's validation and messages.
// A flag replaces the field in the base and in every any_of/ordered item
// (SkyPilot overrides each candidate); "none" removes it. It returns nil when
// no resource flag was given.
func applyResourceOverrides(section map[string]any, o resourceOverrides) (*resources.Resources, error) {
	edits := o.edits()
	if len(edits) == 0 {
		return nil, nil
	}
	base := copyMap(section)
	if err := legacyInfraToParts(base, o); err != nil {
		return nil, err
	}
	targets := []map[string]any{base}
	for _, key := range []string{"any_of", "ordered"} {
		items, _ := base[key].([]any)
		for i, it := range items {
			if m, ok := it.(map[string]any); ok {
				m = copyMap(m)
				items[i] = m
				if err := legacyInfraToParts(m, o); err != nil {
					return nil, err
				}
				targets = append(targets, m)
			}
		}
	}
	for _, e := range edits {
		for i, m := range targets {
			for _, k := range e.clear {
				delete(m, k)
			}
			if i == 0 && e.value != nil {
				m[e.key] = e.value
			}
		}
	}
	r, err := resources.Parse(base)
	if err != nil {
		var fe *fielderr.Error
		if errors.As(err, &fe) {
			return nil, flagErrorf("resource flags: %s", fe.Under("resources").Error())
		}
		return nil, flagErrorf("resource flags: %v", err)
	}
	return r, nil
}

// resourceEdit sets key to value (nil: only clear) after deleting the keys
// in clear, which always include key itself and its aliases.
type resourceEdit struct {
	key   string
	value any
	clear []string
}

// edits lists what the flags change, in a fixed order.
func (o resourceOverrides) edits() []resourceEdit {
	var out []resourceEdit
	add := func(f fieldOverride, key string, value func(string) any, alsoClear ...string) {
		if !f.Set {
			return
		}
		e := resourceEdit{key: key, clear: append([]string{key}, alsoClear...)}
		if !f.Reset {
			e.value = value(f.Value)
		}
		out = append(out, e)
	}
	asString := func(s string) any { return s }
	add(o.Infra, "infra", asString, "cloud", "region", "zone")
	add(o.Cloud, "cloud", asString, "infra")
	add(o.Region, "region", asString, "infra")
	add(o.Zone, "zone", asString, "infra")
	add(o.Accelerators, "accelerators", asString, "gpus")
	add(o.InstanceType, "instance_type", asString)
	add(o.Cpus, "cpus", asString)
	add(o.Memory, "memory", asString)
	add(o.DiskSize, "disk_size", func(s string) any { n, _ := strconv.Atoi(s); return n })
	add(o.DiskTier, "disk_tier", asString)
	add(o.NetworkTier, "network_tier", asString)
	add(o.ImageID, "image_id", asString)
	add(o.LocalDisk, "local_disk", asString)
	// A strategy name replaces the whole job_recovery mapping, as
	// SkyPilot's --job-recovery does.
	add(o.JobRecovery, "job_recovery", asString)
	add(o.Ports, "ports", func(s string) any {
		var list []any
		for _, p := range splitComma(s) {
			list = append(list, p)
		}
		return list
	})
	if o.Priority.Set {
		// An integer is a priority, anything else a priority class name;
		// "none" clears both.
		e := resourceEdit{clear: []string{"priority", "priority_class"}}
		if !o.Priority.Reset {
			if n, err := strconv.Atoi(o.Priority.Value); err == nil {
				e.key, e.value = "priority", n
			} else {
				e.key, e.value = "priority_class", o.Priority.Value
			}
		}
		out = append(out, e)
	}
	if o.UseSpot != nil {
		out = append(out, resourceEdit{key: "use_spot", value: *o.UseSpot, clear: []string{"use_spot"}})
	}
	return out
}

// legacyInfraToParts rewrites an `infra:` string into cloud/region/zone when
// a --cloud/--region/--zone flag will change one part, so the other parts
// of the YAML's infra are kept (as SkyPilot does) and the two spellings
// never meet in one mapping.
func legacyInfraToParts(m map[string]any, o resourceOverrides) error {
	if !(o.Cloud.Set || o.Region.Set || o.Zone.Set) || o.Infra.Set {
		return nil
	}
	s, ok := m["infra"].(string)
	if !ok {
		return nil
	}
	inf, err := resources.ParseInfra(s)
	if err != nil {
		return flagErrorf("resources.infra %q: %v", s, err)
	}
	delete(m, "infra")
	for k, v := range map[string]string{"cloud": inf.Cloud, "region": inf.Region, "zone": inf.Zone} {
		if v != "" {
			m[k] = v
		}
	}
	return nil
}

// copyMap copies a decoded YAML mapping deeply enough for editing: nested
// mappings and lists are copied, scalars shared.
func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return copyMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	default:
		return v
	}
}

// describeTask is one line of `sky validate`: "name: resources x N nodes".
func describeTask(i int, name, res string, numNodes int) string {
	if name == "" {
		name = fmt.Sprintf("task %d", i+1)
	}
	nodes := ""
	if numNodes > 1 {
		nodes = fmt.Sprintf(" x %d nodes", numNodes)
	}
	return fmt.Sprintf("%s: %s%s", name, res, nodes)
}

// uploadTaskFiles sends the task's workdir (and, with mounts, its local
// file-mount sources) to the API server, as SkyPilot's client does, and
// records the uploaded tree in the spec: the server syncs that copy to
// the nodes, so a server on another machine sees the user's files. The
// same path serves a local server: with unchanged files it costs a hash
// of each and one round trip (see BenchmarkUpload in internal/e2e).
// SKYPILOT_DEBUG=1 prints what was sent.
func (f *Factory) uploadTaskFiles(io *IOStreams, spec *api.TaskSpec, mounts bool) error {
	roots := upload.Roots(*spec, mounts)
	if len(roots) == 0 {
		return nil
	}
	c, err := f.Client()
	if err != nil {
		return err
	}
	ctx, caught, stop := stopContext(context.Background(), nil)
	defer stop()
	rep, err := c.Upload(ctx, roots)
	if sig := caught(); sig != nil {
		return signalExit(sig)
	}
	var tooLarge *upload.TooLargeError
	if errors.As(err, &tooLarge) {
		return err // it already says what was being uploaded
	}
	if err != nil {
		return fmt.Errorf("uploading the workdir and file mounts to the API server: %w", err)
	}
	spec.UploadID = rep.ID
	if v, _ := f.LookupEnv("SKYPILOT_DEBUG"); v == "1" || strings.EqualFold(v, "true") {
		fmt.Fprintln(io.ErrOut, rep.String())
	}
	return nil
}

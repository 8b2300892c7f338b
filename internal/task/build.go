package task

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/config"
	"github.com/skygo/skygo/internal/fielderr"
	"github.com/skygo/skygo/internal/resources"
	"github.com/skygo/skygo/internal/storage"
	"github.com/skygo/skygo/internal/task/taskdoc"
)

// substitutedFields are the top-level fields whose strings get $VAR
// substitution from envs and inline secrets (spec: task-yaml.md).
var substitutedFields = map[string]bool{"file_mounts": true, "service": true, "workdir": true, "volumes": true}

// loadTask runs the load phase for one task document: envs and overrides,
// substitution, schema, structural rules, then builds the Task.
func loadTask(file string, doc *yaml.Node, ov *overrides) (*Task, error) {
	// First pass: read envs/secrets (needed for substitution) and catch
	// duplicate keys or a non-mapping document early.
	m0, _, err := convertDoc(file, doc)
	if err != nil {
		return nil, err
	}
	envs0 := mergeEnvs(m0["envs"], ov.envs)
	secrets0, _ := mergeSecrets(m0["secrets"], ov.secrets)
	vars := map[string]string{}
	for k, v := range envs0 {
		if s, ok := v.(string); ok {
			vars[k] = s
		}
	}
	for k, v := range secrets0 {
		if s, ok := v.(string); ok && !strings.HasPrefix(k, "secrets:") {
			vars[k] = s
		}
	}

	// Substitute on a copy of the affected subtrees so anchors shared
	// with other fields are not changed behind their back.
	if len(vars) > 0 {
		budget := maxNodes
		for i := 0; i+1 < len(doc.Content); i += 2 {
			if substitutedFields[doc.Content[i].Value] {
				doc.Content[i+1] = substituteNode(doc.Content[i+1], vars, &budget)
			}
		}
	}

	m, src, err := convertDoc(file, doc)
	if err != nil {
		return nil, err
	}
	normalize(m)

	if errs := schemaIssues(file, m, src.idx, taskdoc.Validator.Task); len(errs) > 0 {
		return nil, errs.asError()
	}
	b := &builder{src: src, raw: m}
	t := b.build(ov)
	if len(b.errs) > 0 {
		return nil, b.errs.asError()
	}
	return t, nil
}

// substituteNode returns a copy of n with $VAR replaced in every string
// scalar (keys and values). Aliases are expanded into the copy.
func substituteNode(n *yaml.Node, vars map[string]string, budget *int) *yaml.Node {
	*budget--
	if n == nil || *budget < 0 {
		return n
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		return substituteNode(n.Alias, vars, budget)
	}
	cp := *n
	if n.Kind == yaml.ScalarNode {
		if n.ShortTag() == "!!str" {
			cp.Value = Substitute(n.Value, vars)
		}
		return &cp
	}
	cp.Content = make([]*yaml.Node, len(n.Content))
	for i, c := range n.Content {
		cp.Content[i] = substituteNode(c, vars, budget)
	}
	cp.Anchor = ""
	return &cp
}

// normalize applies the load-time conversions that happen before schema
// validation: env/secret values become strings, and keys whose value is
// null are dropped at the top of the task, resources (and its candidate
// items) and service.
func normalize(m map[string]any) {
	if envs, ok := m["envs"].(map[string]any); ok {
		for k, v := range envs {
			if s, ok := stringify(v); ok {
				envs[k] = s
			}
		}
	}
	switch sec := m["secrets"].(type) {
	case map[string]any:
		for k, v := range sec {
			if s, ok := stringify(v); ok {
				sec[k] = s
			}
		}
	case []any:
		for i, v := range sec {
			if s, ok := stringify(v); ok {
				sec[i] = s
			}
		}
	}
	dropNulls(m)
	if r, ok := m["resources"].(map[string]any); ok {
		dropNulls(r)
		for _, key := range []string{"any_of", "ordered"} {
			if items, ok := r[key].([]any); ok {
				for _, it := range items {
					if im, ok := it.(map[string]any); ok {
						dropNulls(im)
					}
				}
			}
		}
	}
	if s, ok := m["service"].(map[string]any); ok {
		dropNulls(s)
	}
	if p, ok := m["pool"].(map[string]any); ok {
		dropNulls(p)
	}
}

func dropNulls(m map[string]any) {
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
}

// mergeEnvs returns the YAML envs with CLI overrides applied (CLI wins).
// Values are strings or nil (a null that must be supplied).
func mergeEnvs(raw any, over []kv) map[string]any {
	out := map[string]any{}
	if m, ok := raw.(map[string]any); ok {
		for k, v := range m {
			if s, ok := stringify(v); ok {
				out[k] = s
			} else {
				out[k] = nil
			}
		}
	}
	for _, o := range over {
		out[o.key] = o.val
	}
	return out
}

// mergeSecrets is mergeEnvs for secrets; a list-form section first becomes
// a mapping of its references to null.
func mergeSecrets(raw any, over []kv) (map[string]any, bool) {
	out := map[string]any{}
	isList := false
	switch x := raw.(type) {
	case map[string]any:
		for k, v := range x {
			if s, ok := stringify(v); ok {
				out[k] = s
			} else {
				out[k] = nil
			}
		}
	case []any:
		isList = true
		for _, v := range x {
			if s, ok := stringify(v); ok {
				out[s] = nil
			}
		}
	}
	for _, o := range over {
		out[o.key] = o.val
	}
	return out, isList
}

// builder turns a schema-valid document into a Task, collecting every
// structural error instead of stopping at the first.
type builder struct {
	src  *docSource
	raw  map[string]any
	errs ErrorList
}

func (b *builder) fail(path string, preferKey bool, format string, args ...any) {
	b.errs = append(b.errs, b.src.errAt(path, preferKey, format, args...))
}

// fieldErr locates an error returned by another package (resources,
// config): a *fielderr.Error relative to prefix, or any error at prefix.
func (b *builder) fieldErr(prefix string, err error) {
	var fe *fielderr.Error
	if errors.As(err, &fe) {
		e := fe.Under(prefix)
		b.errs = append(b.errs, b.src.errAt(e.Path, false, "%s", e.Msg))
		return
	}
	b.fail(prefix, false, "%v", err)
}

var (
	secretRefRE = regexp.MustCompile(`^secrets:((personal|workspace|global)\.)?[a-zA-Z_][a-zA-Z0-9_]*$`)
	cloudURIRE  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.\-]*://[^/]+`)
)

// IsCloudURI reports whether s has the scheme://netloc shape of a bucket URI.
func IsCloudURI(s string) bool { return cloudURIRE.MatchString(s) }

func (b *builder) build(ov *overrides) *Task {
	m := b.raw
	t := &Task{NumNodes: 1, APIServerAccess: true, src: b.src}
	t.Name, _ = m["name"].(string)

	switch n := m["num_nodes"].(type) {
	case int:
		if n <= 0 {
			b.fail("num_nodes", false, "num_nodes should be a positive int. Got: %d", n)
		} else if n > MaxNumNodes {
			b.fail("num_nodes", false, "num_nodes is out of range: must be at most %d. Got: %d", MaxNumNodes, n)
		}
		t.NumNodes = n
	case float64:
		// The schema's integer type admits integral floats (1e3, 1000.0)
		// and ints too big for int64 decode as floats: none is a node count
		// the user meant, and silently keeping the default 1 would lie.
		lit := b.src.literal("num_nodes")
		if n == math.Trunc(n) && math.Abs(n) > MaxNumNodes {
			b.fail("num_nodes", false, "num_nodes is out of range: must be at most %d. Got: %s", MaxNumNodes, lit)
		} else {
			b.fail("num_nodes", false, "num_nodes should be a positive int written without a decimal point or exponent. Got: %s", lit)
		}
	}
	b.buildWorkdir(t)
	b.buildEnvsAndSecrets(t, ov)
	b.buildManagedSecrets(t)

	rc, _ := m["resources"].(map[string]any)
	if rc == nil {
		rc = map[string]any{}
	}
	t.ResourcesConfig = rc
	res, err := resources.Parse(rc)
	if err != nil {
		b.fieldErr("resources", err)
	}
	t.Resources = res

	b.buildFileMounts(t)
	b.buildVolumes(t)

	switch s := m["setup"].(type) {
	case string:
		t.Setup = s
	case []any:
		lines := make([]string, len(s))
		for i, l := range s {
			lines[i], _ = l.(string)
		}
		t.Setup = strings.Join(lines, "\n")
	}
	t.Run, _ = m["run"].(string)
	t.EventCallback, _ = m["event_callback"].(string)
	if v, ok := m["api_server_access"].(bool); ok {
		t.APIServerAccess = v
	}
	if job, ok := m["job"].(map[string]any); ok {
		if v, set := job["wait_for_scheduling_timeout"]; set && v != nil {
			d, err := ParseDelay(v)
			if err != nil {
				b.fail("job.wait_for_scheduling_timeout", false, "%v", err)
			}
			t.WaitForSchedulingTimeout = d
		}
	}
	t.Inputs = estimate(m["inputs"])
	t.Outputs = estimate(m["outputs"])
	t.FileMountsMapping, _ = m["file_mounts_mapping"].(map[string]any)
	t.VolumeMountsRaw, _ = m["volume_mounts"].([]any)
	t.Metadata, _ = m["_metadata"].(map[string]any)

	if cfg, ok := m["config"].(map[string]any); ok {
		t.Config = cfg
		if err := config.ValidateTaskConfig(cfg); err != nil {
			b.fieldErr("config", err)
		}
	}

	if s, ok := m["service"].(map[string]any); ok {
		t.Service = b.buildService(s)
	}
	if p, ok := m["pool"].(map[string]any); ok {
		if t.Service != nil {
			b.fail("pool", true, "Cannot set both service and pool in the same task.")
		}
		t.Pool = b.buildPool(p, rc)
	}
	return t
}

func estimate(v any) map[string]float64 {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, x := range m {
		out[k] = toFloat(x)
	}
	return out
}

func toFloat(v any) float64 {
	switch x := v.(type) {
	case int:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

func (b *builder) buildWorkdir(t *Task) {
	switch w := b.raw["workdir"].(type) {
	case string:
		t.Workdir = &Workdir{Path: w}
	case map[string]any:
		url, _ := w["url"].(string)
		ref, _ := w["ref"].(string)
		if strings.TrimSpace(url) == "" {
			b.fail("workdir.url", false, "workdir.url must be a git repository URL")
		}
		t.Workdir = &Workdir{URL: url, Ref: ref}
	}
}

var dockerLoginVars = []string{"SKYPILOT_DOCKER_USERNAME", "SKYPILOT_DOCKER_PASSWORD", "SKYPILOT_DOCKER_SERVER"}

func (b *builder) buildEnvsAndSecrets(t *Task, ov *overrides) {
	envs := mergeEnvs(b.raw["envs"], ov.envs)
	t.Envs = make(map[string]string, len(envs))
	for _, k := range b.byLine("envs", envs) {
		s, ok := envs[k].(string)
		if !ok {
			b.fail(joinKey("envs", k), true, "Environment variable '%s' is None. Please set a value for it in task YAML or with --env flag (e.g. --env %s=<value>). An empty string is allowed.", k, k)
			continue
		}
		t.Envs[k] = s
	}

	secrets, isList := mergeSecrets(b.raw["secrets"], ov.secrets)
	if isList {
		for i, v := range b.raw["secrets"].([]any) {
			if s, _ := v.(string); !secretRefRE.MatchString(s) {
				b.fail(joinIndex("secrets", i), false, "Invalid secret in array form: %s. Each item must be a managed secret reference secrets:NAME (optionally secrets:personal.NAME, secrets:workspace.NAME or secrets:global.NAME); inline secrets use the mapping form NAME: value", describe(v))
			}
		}
	}
	t.Secrets = map[string]Secret{}
	for _, k := range b.byLine("secrets", secrets) {
		v := secrets[k]
		path := joinKey("secrets", k)
		if strings.HasPrefix(k, "secrets:") {
			if !secretRefRE.MatchString(k) {
				b.fail(path, true, "invalid managed secret reference %q: expected secrets:NAME", k)
			} else if v != nil {
				b.fail(path, true, "managed secret reference %q must have no value (write `%s:` with nothing after it)", k, k)
			} else {
				t.SecretRefs = append(t.SecretRefs, k)
			}
			continue
		}
		s, ok := v.(string)
		if !ok {
			// Example files ship `HF_TOKEN: null` to be filled with
			// --secret at launch; they load, and ValidateForLaunch refuses
			// to launch while the value is still missing.
			t.MissingSecrets = append(t.MissingSecrets, k)
			continue
		}
		t.Secrets[k] = Secret(s)
	}

	// Docker registry login: all three variables, all in one section.
	inEnvs, inSecrets := 0, 0
	for _, k := range dockerLoginVars {
		if _, ok := t.Envs[k]; ok {
			inEnvs++
		}
		if _, ok := t.Secrets[k]; ok {
			inSecrets++
		}
	}
	if inEnvs+inSecrets > 0 && !(inEnvs == 3 && inSecrets == 0) && !(inSecrets == 3 && inEnvs == 0) {
		section := "envs"
		if inSecrets > 0 {
			section = "secrets"
		}
		b.fail(section, true, "private registry login needs all of %s, and all in the same section (envs or secrets)", strings.Join(dockerLoginVars, ", "))
	}
}

// byLine orders the keys of a section by where they were written (keys
// added by CLI overrides come last, by name), so errors and lists come out
// in file order.
func (b *builder) byLine(section string, m map[string]any) []string {
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool {
		pi, oki := b.src.idx.key[joinKey(section, keys[i])]
		pj, okj := b.src.idx.key[joinKey(section, keys[j])]
		if oki != okj {
			return oki
		}
		return pi.Line < pj.Line
	})
	return keys
}

func (b *builder) buildManagedSecrets(t *Task) {
	items, _ := b.raw["managed_secrets"].([]any)
	for i, it := range items {
		switch x := it.(type) {
		case string:
			t.ManagedSecrets = append(t.ManagedSecrets, ManagedSecret{Name: x})
		case map[string]any:
			for name, v := range x {
				ms := ManagedSecret{Name: name}
				if vm, ok := v.(map[string]any); ok {
					ms.MountPath, _ = vm["mount_path"].(string)
				}
				t.ManagedSecrets = append(t.ManagedSecrets, ms)
			}
		default:
			b.fail(joinIndex("managed_secrets", i), false, "expected a secret name or {NAME: {mount_path: PATH}}")
		}
	}
}

func isWorkdirDest(dst string) bool {
	d := strings.TrimRight(dst, "/")
	return d == "~/sky_workdir" || d == "sky_workdir"
}

func (b *builder) buildFileMounts(t *Task) {
	fm, _ := b.raw["file_mounts"].(map[string]any)
	if len(fm) == 0 {
		return
	}
	t.FileMounts = make(map[string]*FileMount, len(fm))
	for _, dst := range sortedKeys(fm) {
		path := joinKey("file_mounts", dst)
		if IsCloudURI(dst) {
			b.fail(path, true, "File mount destination paths cannot be cloud storage: %q; use a path on the node such as /data", dst)
			continue
		}
		if t.Workdir != nil && isWorkdirDest(dst) {
			b.fail(path, true, "Cannot use '~/sky_workdir' as a destination path of a file mount when a workdir is set; the workdir is synced there")
			continue
		}
		switch v := fm[dst].(type) {
		case string:
			t.FileMounts[dst] = &FileMount{Source: v}
		case map[string]any:
			t.FileMounts[dst] = &FileMount{Storage: b.buildStorage(path, v)}
		}
	}
}

func (b *builder) buildStorage(path string, m map[string]any) *Storage {
	st := &Storage{Mode: "MOUNT", Persistent: true}
	st.Name, _ = m["name"].(string)
	switch s := m["source"].(type) {
	case string:
		st.Source = []string{s}
	case []any:
		st.SourceIsList = true
		for _, x := range s {
			str, _ := x.(string)
			st.Source = append(st.Source, str)
		}
	}
	if s, ok := m["store"].(string); ok {
		st.Store = strings.ToUpper(s)
	}
	if s, ok := m["mode"].(string); ok {
		st.Mode = strings.ToUpper(s)
	}
	if p, ok := m["persistent"].(bool); ok {
		st.Persistent = p
	}
	if s, ok := m["type"].(string); ok {
		st.Type = strings.ToUpper(s)
	}
	st.Config, _ = m["config"].(map[string]any)

	for _, p := range storage.Prefixes {
		if strings.HasPrefix(st.Name, p) {
			b.fail(path+".name", false, "Prefix detected: `name` cannot start with %s; give the bare bucket name, or put the URI in `source`", p)
		}
	}
	remote := !st.SourceIsList && len(st.Source) == 1 && IsCloudURI(st.Source[0])
	switch {
	case st.Name == "" && len(st.Source) == 0:
		b.fail(path, true, "Storage source or storage name must be specified.")
	case remote && st.Name != "":
		b.fail(path+".name", false, "Storage name should not be specified if the source is a remote URI (%s); the bucket name comes from the URI", st.Source[0])
	case !remote && len(st.Source) > 0 && st.Name == "" && st.Store != "VOLUME":
		b.fail(path+".source", false, "Storage name must be specified if the source is local.")
	}
	if st.SourceIsList {
		seen := map[string]bool{}
		for i, s := range st.Source {
			base := s[strings.LastIndex(strings.TrimRight(s, "/"), "/")+1:]
			if seen[base] {
				b.fail(joinIndex(path+".source", i), false, "source paths must have unique base names; %q appears twice", base)
			}
			seen[base] = true
		}
	}
	if st.Type != "" && st.Mode != "MOUNT_CACHED" {
		b.fail(path+".type", false, "`type` (%s) is only valid with mode: MOUNT_CACHED, but mode is %s", st.Type, st.Mode)
	}
	if _, ok := st.Config["mount_cached"]; ok && st.Mode != "MOUNT_CACHED" {
		b.fail(path+".config.mount_cached", true, "config.mount_cached is only valid with mode: MOUNT_CACHED, but mode is %s", st.Mode)
	}
	if _, ok := st.Config["mount"]; ok && st.Mode != "MOUNT" {
		b.fail(path+".config.mount", true, "config.mount is only valid with mode: MOUNT, but mode is %s", st.Mode)
	}
	return st
}

func (b *builder) buildVolumes(t *Task) {
	vols, _ := b.raw["volumes"].(map[string]any)
	if len(vols) == 0 {
		return
	}
	t.Volumes = make(map[string]*VolumeMount, len(vols))
	for _, mp := range sortedKeys(vols) {
		path := joinKey("volumes", mp)
		if strings.HasSuffix(mp, "/") && mp != "/" {
			b.fail(path, true, "volume mount path %q must not end with a slash", mp)
		}
		if !strings.HasPrefix(mp, "/") && !strings.HasPrefix(mp, "~") {
			b.fail(path, true, "volume mount path %q must be absolute (start with / or ~)", mp)
		}
		vm := &VolumeMount{}
		switch v := vols[mp].(type) {
		case string:
			vm.Name = v
		case map[string]any:
			vm.Name, _ = v["name"].(string)
			vm.SubPath, _ = v["sub_path"].(string)
			switch s := v["size"].(type) {
			case string:
				vm.Size = s
			case int:
				vm.Size = fmt.Sprintf("%dGi", s)
			}
			vm.Type, _ = v["type"].(string)
			if l, ok := v["labels"].(map[string]any); ok {
				vm.Labels = map[string]string{}
				for k, x := range l {
					vm.Labels[k], _ = x.(string)
				}
			}
			vm.Config, _ = v["config"].(map[string]any)
			if vm.Name == "" && vm.Size == "" {
				b.fail(path, true, `Either "size" (for ephemeral volume) or "name" (for external volume) must be set.`)
			}
			if vm.Size != "" {
				gi, err := SizeGi(v["size"])
				switch {
				case err != nil:
					b.fail(path+".size", false, "%v", err)
				case gi < 1:
					b.fail(path+".size", false, "volume size must be at least 1Gi, got %s", describe(v["size"]))
				}
			}
		}
		t.Volumes[mp] = vm
	}
}

var sizeRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgGtTpP])?([iI]|[bB])?\s*$`)

// SizeGi converts a volume size (integer = Gi, or a string like 10Gi,
// 500Mi, 1Ti, 100GB) to Gi.
func SizeGi(v any) (float64, error) {
	switch x := v.(type) {
	case int:
		return float64(x), nil
	case float64:
		return x, nil
	case string:
		m := sizeRE.FindStringSubmatch(x)
		if m == nil {
			return 0, fmt.Errorf("expected a size such as 10Gi, 500Gi or 1Ti, got %q", x)
		}
		var n float64
		fmt.Sscan(m[1], &n)
		scale := map[string]float64{"": 1, "k": 1.0 / (1 << 20), "m": 1.0 / (1 << 10), "g": 1, "t": 1 << 10, "p": 1 << 20}
		return n * scale[strings.ToLower(m[2])], nil
	}
	return 0, fmt.Errorf("expected a size such as 10Gi, got %s", describe(v))
}

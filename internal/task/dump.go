package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"gopkg.in/yaml.v3"
)

// field is one top-level entry of a dump, in canonical order.
type field struct {
	key string
	val any
}

// fields lists the task's fields in the order SkyPilot users read them.
// Secret values are always printed as <redacted>.
func (t *Task) fields() []field {
	var out []field
	add := func(k string, v any, present bool) {
		if present {
			out = append(out, field{k, v})
		}
	}
	add("name", t.Name, t.Name != "")
	if w := t.Workdir; w != nil {
		if w.IsGit() {
			g := map[string]any{"url": w.URL}
			if w.Ref != "" {
				g["ref"] = w.Ref
			}
			add("workdir", g, true)
		} else {
			add("workdir", w.Path, true)
		}
	}
	add("num_nodes", t.NumNodes, t.NumNodes != 1)
	add("resources", t.ResourcesConfig, len(t.ResourcesConfig) > 0)
	if len(t.Envs) > 0 {
		m := make(map[string]any, len(t.Envs))
		for k, v := range t.Envs {
			m[k] = v
		}
		add("envs", m, true)
	}
	if len(t.Secrets)+len(t.SecretRefs) > 0 {
		m := make(map[string]any, len(t.Secrets)+len(t.SecretRefs))
		for k := range t.Secrets {
			m[k] = Redacted
		}
		for _, r := range t.SecretRefs {
			m[r] = nil
		}
		add("secrets", m, true)
	}
	if len(t.ManagedSecrets) > 0 {
		items := make([]any, len(t.ManagedSecrets))
		for i, ms := range t.ManagedSecrets {
			if ms.MountPath == "" {
				items[i] = ms.Name
			} else {
				items[i] = map[string]any{ms.Name: map[string]any{"mount_path": ms.MountPath}}
			}
		}
		add("managed_secrets", items, true)
	}
	if len(t.FileMounts) > 0 {
		m := make(map[string]any, len(t.FileMounts))
		for dst, fm := range t.FileMounts {
			m[dst] = fm.config()
		}
		add("file_mounts", m, true)
	}
	if len(t.Volumes) > 0 {
		m := make(map[string]any, len(t.Volumes))
		for p, v := range t.Volumes {
			m[p] = v.config()
		}
		add("volumes", m, true)
	}
	add("setup", t.Setup, t.Setup != "")
	add("run", t.Run, t.Run != "")
	if t.Service != nil {
		add("service", t.Service.Raw, true)
	}
	if t.Pool != nil {
		add("pool", t.Pool.Raw, true)
	}
	add("config", t.Config, len(t.Config) > 0)
	add("event_callback", t.EventCallback, t.EventCallback != "")
	if t.WaitForSchedulingTimeout > 0 {
		add("job", map[string]any{"wait_for_scheduling_timeout": int64(t.WaitForSchedulingTimeout / time.Second)}, true)
	}
	add("inputs", t.Inputs, len(t.Inputs) > 0)
	add("outputs", t.Outputs, len(t.Outputs) > 0)
	add("api_server_access", false, !t.APIServerAccess)
	add("file_mounts_mapping", t.FileMountsMapping, len(t.FileMountsMapping) > 0)
	add("volume_mounts", t.VolumeMountsRaw, len(t.VolumeMountsRaw) > 0)
	add("_metadata", t.Metadata, len(t.Metadata) > 0)
	return out
}

func (fm *FileMount) config() any {
	if fm.Storage == nil {
		return fm.Source
	}
	st := fm.Storage
	m := map[string]any{}
	if st.Name != "" {
		m["name"] = st.Name
	}
	switch {
	case st.SourceIsList:
		m["source"] = st.Source
	case len(st.Source) == 1:
		m["source"] = st.Source[0]
	}
	if st.Store != "" {
		m["store"] = st.Store
	}
	m["mode"] = st.Mode
	if !st.Persistent {
		m["persistent"] = false
	}
	if st.Type != "" {
		m["type"] = st.Type
	}
	if len(st.Config) > 0 {
		m["config"] = st.Config
	}
	return m
}

func (v *VolumeMount) config() any {
	if v.SubPath == "" && v.Size == "" && v.Type == "" && len(v.Labels) == 0 && len(v.Config) == 0 {
		return v.Name
	}
	m := map[string]any{}
	for k, x := range map[string]string{"name": v.Name, "sub_path": v.SubPath, "size": v.Size, "type": v.Type} {
		if x != "" {
			m[k] = x
		}
	}
	if len(v.Labels) > 0 {
		m["labels"] = v.Labels
	}
	if len(v.Config) > 0 {
		m["config"] = v.Config
	}
	return m
}

// ToYAML renders the task as YAML in canonical field order (nested keys
// sorted), with secret values shown as <redacted>.
func (t *Task) ToYAML() ([]byte, error) {
	n, err := fieldsNode(t.fields())
	if err != nil {
		return nil, err
	}
	out, err := encodeYAML(n)
	if err != nil {
		return nil, err
	}
	// Secret values substituted into service/file_mounts text are caught
	// here too.
	return []byte(t.Redactor().Redact(string(out))), nil
}

// ToYAML renders the whole file: a header document for pipelines and job
// groups, then one document per task.
func (d *DAG) ToYAML() ([]byte, error) {
	var buf bytes.Buffer
	header := []field{}
	if d.IsJobGroup() {
		header = append(header, field{"name", d.Name}, field{"execution", string(Parallel)})
		if len(d.PrimaryTasks) > 0 {
			header = append(header, field{"primary_tasks", d.PrimaryTasks})
		}
		if d.TerminationDelay.Default != 0 || len(d.TerminationDelay.PerJob) > 0 {
			td := map[string]any{"default": fmt.Sprintf("%ds", int64(d.TerminationDelay.Default.Seconds()))}
			for k, v := range d.TerminationDelay.PerJob {
				td[k] = fmt.Sprintf("%ds", int64(v.Seconds()))
			}
			header = append(header, field{"termination_delay", td})
		}
	} else if len(d.Tasks) > 1 && d.Name != "" {
		header = append(header, field{"name", d.Name})
	}
	docs := [][]field{}
	if len(header) > 0 {
		docs = append(docs, header)
	}
	for _, t := range d.Tasks {
		docs = append(docs, t.fields())
	}
	for i, fs := range docs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		n, err := fieldsNode(fs)
		if err != nil {
			return nil, err
		}
		b, err := encodeYAML(n)
		if err != nil {
			return nil, err
		}
		buf.Write(b)
	}
	return []byte(d.Redactor().Redact(buf.String())), nil
}

func fieldsNode(fs []field) (*yaml.Node, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, f := range fs {
		var v yaml.Node
		if err := v.Encode(f.val); err != nil {
			return nil, fmt.Errorf("encoding %s: %w", f.key, err)
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: f.key}, &v)
	}
	return n, nil
}

func encodeYAML(n *yaml.Node) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MarshalJSON renders the same content as ToYAML, as a JSON object; secret
// values are <redacted>.
func (t *Task) MarshalJSON() ([]byte, error) {
	fs := t.fields()
	m := make(map[string]any, len(fs))
	for _, f := range fs {
		m[f.key] = f.val
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return []byte(t.Redactor().Redact(string(out))), nil
}

// Redacted returns a copy of the task whose secret values are replaced by
// "<redacted>", safe to hand to code that prints or stores tasks.
func (t *Task) Redacted() *Task {
	cp := *t
	cp.Secrets = make(map[string]Secret, len(t.Secrets))
	for k := range t.Secrets {
		cp.Secrets[k] = Secret(Redacted)
	}
	cp.SecretRefs = append([]string(nil), t.SecretRefs...)
	return &cp
}

// SecretNames lists the inline secret names, sorted.
func (t *Task) SecretNames() []string {
	names := make([]string, 0, len(t.Secrets))
	for k := range t.Secrets {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

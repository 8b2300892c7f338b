package task

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
	"github.com/skygo/skygo/internal/task/taskdoc"
	"gopkg.in/yaml.v3"
)

// HostDirType is SkyGo's own volume type: a directory on the host of
// the local infrastructure or of an SSH node pool, linked into the nodes
// of the clusters that mount it (docs/volumes.md).
const HostDirType = "host-dir"

// VolumeSpec is a `sky volumes apply` file.
type VolumeSpec struct {
	Name        string
	Type        string // a type a kind makes (infrakind.Kind.Volumes), runpod-network-volume
	Infra       string
	Size        string // as written, e.g. "10Gi"; empty for a host path
	SizeGi      float64
	UseExisting bool
	Labels      map[string]string
	Config      VolumeConfig
	// ConfigRaw is the config: section as written, for the record.
	ConfigRaw map[string]any
}

// VolumeConfig is the config: section of a volume spec.
type VolumeConfig struct {
	StorageClassName  *string // nil: cluster default; "" means no class
	AccessMode        string  // default ReadWriteOnce
	Namespace         string
	HostPath          string
	CleanupOnDeletion bool
}

// LoadVolumeSpec reads and validates a volume spec file.
func LoadVolumeSpec(path string) (*VolumeSpec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading volume spec: %w", err)
	}
	return LoadVolumeSpecBytes(path, data)
}

// LoadVolumeSpecBytes validates a volume spec given as bytes; name is used
// in error messages.
func LoadVolumeSpecBytes(name string, data []byte) (*VolumeSpec, error) {
	docs, err := splitDocuments(name, data)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, &Error{File: name, Line: 1, Col: 1, Msg: fmt.Sprintf("a volume spec is one YAML document with name and type, found %d documents", len(docs))}
	}
	m, src, err := convertDoc(name, docs[0])
	if err != nil {
		return nil, err
	}
	dropNulls(m)
	if errs := schemaIssues(name, m, src.idx, taskdoc.Validator.Volume); len(errs) > 0 {
		return nil, errs.asError()
	}
	spec := &VolumeSpec{Config: VolumeConfig{AccessMode: "ReadWriteOnce"}}
	spec.Name, _ = m["name"].(string)
	spec.Type, _ = m["type"].(string)
	spec.Infra, _ = m["infra"].(string)
	spec.UseExisting, _ = m["use_existing"].(bool)
	if l, ok := m["labels"].(map[string]any); ok {
		spec.Labels = map[string]string{}
		for k, v := range l {
			spec.Labels[k], _ = v.(string)
		}
	}
	if c, ok := m["config"].(map[string]any); ok {
		spec.ConfigRaw = c
		if s, ok := c["storage_class_name"].(string); ok {
			spec.Config.StorageClassName = &s
		}
		if s, ok := c["access_mode"].(string); ok {
			spec.Config.AccessMode = s
		}
		spec.Config.Namespace, _ = c["namespace"].(string)
		spec.Config.HostPath, _ = c["host_path"].(string)
		spec.Config.CleanupOnDeletion, _ = c["cleanup_on_deletion"].(bool)
	}
	var errs ErrorList
	if sz, ok := m["size"]; ok {
		spec.Size = fmt.Sprint(sz)
		gi, err := SizeGi(sz)
		switch {
		case err != nil:
			errs = append(errs, src.errAt("size", false, "%v", err))
		case gi < 1:
			errs = append(errs, src.errAt("size", false, "volume size must be at least 1Gi, got %s", describe(sz)))
		case spec.Type == "runpod-network-volume" && gi < 10:
			errs = append(errs, src.errAt("size", false, "RunPod network volumes must be at least 10GB, got %s", describe(sz)))
		}
		spec.SizeGi = gi
	}
	// Where a type lives is what the kinds that make it say (infrakind.Kind.Volumes).
	kinds, types := infrakind.VolumeKinds(spec.Type)
	if len(types) > 0 && types[0].HostPath {
		hp := spec.Config.HostPath
		if !strings.HasPrefix(hp, "/") || hp == "/" {
			errs = append(errs, src.errAt("config.host_path", true, "%s volumes need config.host_path, an absolute directory other than /", spec.Type))
		}
	}
	if cloud, _, _ := strings.Cut(strings.Trim(spec.Infra, "/"), "/"); len(kinds) > 0 && cloud != "" &&
		!slices.ContainsFunc(kinds, func(k infrakind.Kind) bool { return k.Name == infrakind.Canonical(cloud) }) {
		var where []string
		for _, t := range types {
			if !slices.Contains(where, t.Where) {
				where = append(where, t.Where)
			}
		}
		errs = append(errs, src.errAt("infra", false, "a %s volume lives %s, got %q", spec.Type, strings.Join(where, " or "), spec.Infra))
	}
	if len(errs) > 0 {
		return nil, errs.asError()
	}
	return spec, nil
}

// VolumeOverrides are the `sky volumes apply` flags, which win over the
// YAML's keys; empty fields leave the YAML's.
type VolumeOverrides struct {
	Name, Type, Infra, Size string
	UseExisting             *bool
}

// LoadVolumeSpecWith validates a volume spec (data may be empty: the
// flags alone describe the volume) with the flags laid over it. It also
// returns the document validated, as YAML, for the record.
func LoadVolumeSpecWith(name string, data []byte, o VolumeOverrides) (*VolumeSpec, []byte, error) {
	if o == (VolumeOverrides{}) && len(data) > 0 {
		spec, err := LoadVolumeSpecBytes(name, data)
		return spec, data, err
	}
	m := map[string]any{}
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.Unmarshal(data, &m); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", name, err)
		}
		if m == nil {
			m = map[string]any{}
		}
	}
	for k, v := range map[string]string{"name": o.Name, "type": o.Type, "infra": o.Infra, "size": o.Size} {
		if v != "" {
			m[k] = v
		}
	}
	if o.UseExisting != nil {
		m["use_existing"] = *o.UseExisting
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return nil, nil, err
	}
	spec, err := LoadVolumeSpecBytes(name, out)
	return spec, out, err
}

package resources

import (
	"fmt"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
)

// This file holds the smaller sub-structures of resources: TPU arguments,
// attached volumes, and the docker login that SkyGo writes internally.

// AcceleratorArgs are TPU options (accelerator_args).
type AcceleratorArgs struct {
	RuntimeVersion    string
	TPUName           string
	TPUVM             *bool // nil = default (true: a TPU VM)
	GCPQueuedResource *bool
}

// IsTPUVM reports whether the TPU is a TPU VM (the default).
func (a *AcceleratorArgs) IsTPUVM() bool { return a == nil || a.TPUVM == nil || *a.TPUVM }

func (a AcceleratorArgs) toValue() map[string]any {
	m := map[string]any{}
	if a.RuntimeVersion != "" {
		m["runtime_version"] = a.RuntimeVersion
	}
	if a.TPUName != "" {
		m["tpu_name"] = a.TPUName
	}
	if a.TPUVM != nil {
		m["tpu_vm"] = *a.TPUVM
	}
	if a.GCPQueuedResource != nil {
		m["gcp_queued_resource"] = *a.GCPQueuedResource
	}
	return m
}

var acceleratorArgsKeys = []string{"runtime_version", "tpu_name", "tpu_vm", "gcp_queued_resource"}

func parseAcceleratorArgs(v any, path string) (*AcceleratorArgs, error) {
	m, ok := asMap(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("accelerator_args must be a mapping with runtime_version, tpu_name, tpu_vm, gcp_queued_resource; got %s", kindOf(v)))
	}
	if err := checkKeys(m, acceleratorArgsKeys, path, "accelerator_args"); err != nil {
		return nil, err
	}
	a := &AcceleratorArgs{}
	var err error
	for _, k := range sortedKeys(m) {
		val, p := m[k], join(path, k)
		if val == nil {
			continue
		}
		switch k {
		case "runtime_version":
			a.RuntimeVersion, err = getString(val, p)
		case "tpu_name":
			a.TPUName, err = getString(val, p)
		case "tpu_vm":
			a.TPUVM, err = boolPtr(val, p)
		case "gcp_queued_resource":
			a.GCPQueuedResource, err = boolPtr(val, p)
		}
		if err != nil {
			return nil, err
		}
	}
	return a, nil
}

func boolPtr(v any, path string) (*bool, error) {
	b, err := getBool(v, path)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// Volume is an instance-attached volume (an extra disk).
type Volume struct {
	Name        string
	Path        string
	DiskSize    int // GB; 0 = unset
	DiskTier    string
	StorageType string
	AttachMode  string
	AutoDelete  *bool
}

func (v Volume) toValue() map[string]any {
	m := map[string]any{}
	set := func(k, s string) {
		if s != "" {
			m[k] = s
		}
	}
	set("name", v.Name)
	set("path", v.Path)
	set("disk_tier", v.DiskTier)
	set("storage_type", v.StorageType)
	set("attach_mode", v.AttachMode)
	if v.DiskSize != 0 {
		m["disk_size"] = v.DiskSize
	}
	if v.AutoDelete != nil {
		m["auto_delete"] = *v.AutoDelete
	}
	return m
}

var volumeKeys = []string{"disk_size", "disk_tier", "path", "auto_delete", "storage_type", "name", "attach_mode"}

func parseVolumes(v any, path string) ([]Volume, error) {
	l, ok := asList(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("volumes must be a list of mappings {path, disk_size, disk_tier, ...}; got %s", kindOf(v)))
	}
	var out []Volume
	for i, item := range l {
		p := index(path, i)
		m, ok := asMap(item)
		if !ok {
			return nil, fielderr.New(p, fmt.Sprintf("a volume must be a mapping with %s; got %s", strings.Join(volumeKeys, ", "), kindOf(item)))
		}
		if err := checkKeys(m, volumeKeys, p, "volume"); err != nil {
			return nil, err
		}
		var vol Volume
		var err error
		for _, k := range sortedKeys(m) {
			val, kp := m[k], join(p, k)
			if val == nil {
				continue
			}
			switch k {
			case "name":
				vol.Name, err = getString(val, kp)
			case "path":
				vol.Path, err = getString(val, kp)
			case "storage_type":
				vol.StorageType, err = getString(val, kp)
			case "attach_mode":
				vol.AttachMode, err = getString(val, kp)
			case "disk_tier":
				vol.DiskTier, err = parseDiskTier(val, kp)
			case "disk_size":
				vol.DiskSize, err = parseSizeGB(val, kp, "disk_size")
			case "auto_delete":
				vol.AutoDelete, err = boolPtr(val, kp)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, vol)
	}
	return out, nil
}

// DockerLoginConfig is the private registry login SkyGo fills in from the
// SKYPILOT_DOCKER_* variables. Password is a secret: String never shows it
// and MarshalJSON redacts it.
type DockerLoginConfig struct {
	Username string
	Password string
	Server   string
}

func parseDockerLogin(v any, path string) (*DockerLoginConfig, error) {
	m, ok := asMap(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("expected a mapping {username, password, server}, got %s", kindOf(v)))
	}
	if err := checkKeys(m, []string{"username", "password", "server"}, path, "_docker_login_config"); err != nil {
		return nil, err
	}
	d := &DockerLoginConfig{}
	var err error
	for _, k := range sortedKeys(m) {
		val, p := m[k], join(path, k)
		if val == nil {
			continue
		}
		switch k {
		case "username":
			d.Username, err = getString(val, p)
		case "password":
			d.Password, err = getString(val, p)
		case "server":
			d.Server, err = getString(val, p)
		}
		if err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Disk and network tiers.
var (
	DiskTiers    = []string{"low", "medium", "high", "ultra", "best"}
	NetworkTiers = []string{"standard", "best"}
)

func parseDiskTier(v any, path string) (string, error) {
	return parseEnum(v, path, "disk_tier", DiskTiers)
}

func parseNetworkTier(v any, path string) (string, error) {
	return parseEnum(v, path, "network_tier", NetworkTiers)
}

// parseEnum reads a case-insensitive choice and returns it lower-cased.
func parseEnum(v any, path, field string, choices []string) (string, error) {
	s, ok := v.(string)
	c := strings.ToLower(strings.TrimSpace(s))
	if !ok || !contains(choices, c) {
		got := kindOf(v)
		if ok {
			got = fmt.Sprintf("%q", s)
		}
		return "", fielderr.New(path, fmt.Sprintf("%s must be one of %s (case-insensitive); got %s", field, strings.Join(choices, ", "), got))
	}
	return c, nil
}

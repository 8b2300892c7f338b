package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/task"
)

// taskFlags are the flags shared by every command that takes a task
// (launch, exec, jobs launch, serve up/update, jobs pool apply): what to run,
// where, and on what resources. Resource flags override the YAML.
type taskFlags struct {
	Name    string
	Workdir string
	GitURL  string
	GitRef  string

	Infra, Cloud, Region, Zone string
	NumNodes                   int
	Cpus, Memory               string
	DiskSize                   int
	DiskTier, NetworkTier      string
	UseSpot                    boolPair
	ImageID                    string
	LocalDisk                  string
	Gpus                       string
	InstanceType               string
	Ports                      []string
	Priority                   string

	Envs, EnvFiles       []string
	Secrets, SecretFiles []string

	fs *pflag.FlagSet // to ask which flags were given
}

// taskFlagSet picks the optional members of the shared task flags, since
// not every command has all of them.
type taskFlagSet struct {
	name     bool // -n/--name
	git      bool // --git-url/--git-ref
	priority bool // --priority
}

// addTaskFlags registers the shared task flags on cmd.
func addTaskFlags(cmd *cobra.Command, tf *taskFlags, with taskFlagSet) {
	fs := cmd.Flags()
	tf.fs = fs
	if with.name {
		fs.StringVarP(&tf.Name, "name", "n", "", "Task `NAME`; overrides name: in the YAML")
	}
	if with.git {
		fs.StringVar(&tf.GitURL, "git-url", "", "Git repository URL to use as the workdir")
		fs.StringVar(&tf.GitRef, "git-ref", "", "Git branch, tag or commit to check out")
	}
	fs.StringVar(&tf.Workdir, "workdir", "", "Local `DIR` synced to the remote working directory; overrides workdir: in the YAML")
	fs.StringVar(&tf.Infra, "infra", "", "Where to run: cloud, cloud/region, cloud/region/zone, k8s/CONTEXT or ssh/POOL (e.g. aws/us-east-1, aws/*/us-east-1a)")
	fs.StringVar(&tf.Cloud, "cloud", "", "Cloud to use; overrides resources.cloud (\"none\" clears it)")
	fs.StringVar(&tf.Region, "region", "", "Region to use; overrides resources.region (\"none\" clears it)")
	fs.StringVar(&tf.Zone, "zone", "", "Zone to use; overrides resources.zone (\"none\" clears it)")
	fs.IntVar(&tf.NumNodes, "num-nodes", 0, "Number of nodes to run the task on; overrides num_nodes: in the YAML")
	fs.StringVar(&tf.Cpus, "cpus", "", "vCPUs per node: N for exactly N, N+ for at least N")
	fs.StringVar(&tf.Memory, "memory", "", "Memory per node in GB: N for exactly N, N+ for at least N")
	fs.IntVar(&tf.DiskSize, "disk-size", 0, "OS disk size in GB")
	fs.StringVar(&tf.DiskTier, "disk-tier", "", "OS disk tier: low, medium, high, ultra, best, or none for the default")
	fs.StringVar(&tf.NetworkTier, "network-tier", "", "Network tier: standard or best (default standard)")
	addBoolPair(fs, &tf.UseSpot, "use-spot", "", false,
		"Use spot instances; overrides resources.use_spot", "Use on-demand instances; overrides resources.use_spot")
	fs.StringVar(&tf.ImageID, "image-id", "", "Custom image ID (\"none\" clears it)")
	fs.StringArrayVar(&tf.EnvFiles, "env-file", nil, "Dotenv `FILE` of environment variables for the task (--env wins on conflicts)")
	fs.StringArrayVar(&tf.Envs, "env", nil, "Environment variable `KEY=VALUE` for the task, or KEY to pass on the local value; repeatable")
	fs.StringArrayVar(&tf.SecretFiles, "secret-file", nil, "Dotenv `FILE` of secret variables (--secret wins on conflicts)")
	fs.StringArrayVar(&tf.Secrets, "secret", nil, "Secret variable `KEY=VALUE` (or KEY for the local value), redacted in logs and outputs; repeatable")
	fs.StringVar(&tf.LocalDisk, "local-disk", "", "Local instance storage: [nvme|ssd:]SIZE[+] or nvme|ssd")
	fs.StringVar(&tf.Gpus, "gpus", "", "GPU type and count, e.g. V100:8, V100 (count 1) or V100:0.5")
	fs.StringVarP(&tf.InstanceType, "instance-type", "t", "", "Instance type; overrides resources.instance_type (\"none\" clears it)")
	fs.StringArrayVar(&tf.Ports, "ports", nil, "`PORTS` to open: 8080, 8000-8010 or 8080,9090; repeatable")
	if with.priority {
		fs.StringVar(&tf.Priority, "priority", "", "Priority: an integer from -1000 to 1000 or a priority class name (\"none\" clears both)")
	}
}

// fieldOverride is what one resource flag asks for: nothing (not given),
// a reset to the default (the value "none"), or a value.
type fieldOverride struct {
	Set   bool
	Reset bool
	Value string
}

func (o fieldOverride) String() string {
	switch {
	case !o.Set:
		return "(unset)"
	case o.Reset:
		return "none"
	default:
		return o.Value
	}
}

// resourceOverrides maps the resource flags onto resources fields. It is the
// CLI's own view; applyResourceOverrides turns it into the resources
// package's overrides in one place.
type resourceOverrides struct {
	Infra, Cloud, Region, Zone fieldOverride
	Accelerators               fieldOverride // --gpus
	InstanceType               fieldOverride
	Cpus, Memory               fieldOverride
	DiskSize                   fieldOverride
	DiskTier, NetworkTier      fieldOverride
	ImageID                    fieldOverride
	LocalDisk                  fieldOverride
	Priority                   fieldOverride
	JobRecovery                fieldOverride // sky jobs launch --job-recovery
	Ports                      fieldOverride // Value is comma-joined
	UseSpot                    *bool
}

// taskInput is the validated form of a task command line.
type taskInput struct {
	Entry       entrypoint
	Name        string
	NumNodes    int // 0 = keep the YAML's
	Workdir     string
	GitURL      string
	GitRef      string
	Env         []envVar
	EnvFiles    []string
	Secrets     []envVar
	SecretFiles []string
	Res         resourceOverrides
}

// resolve validates the flags and builds the taskInput; lookup reads the
// caller's environment for bare --env KEY.
func (tf *taskFlags) resolve(entry entrypoint, lookup func(string) (string, bool)) (*taskInput, error) {
	in := &taskInput{Entry: entry, Name: tf.Name, Workdir: tf.Workdir, GitURL: tf.GitURL, GitRef: tf.GitRef}
	var err error
	if tf.changed("num-nodes") {
		if tf.NumNodes < 1 {
			return nil, flagErrorf("invalid --num-nodes %d: must be a positive integer", tf.NumNodes)
		}
		if tf.NumNodes > task.MaxNumNodes {
			return nil, flagErrorf("invalid --num-nodes %d: out of range, must be at most %d", tf.NumNodes, task.MaxNumNodes)
		}
		in.NumNodes = tf.NumNodes
	}
	if tf.Workdir != "" && tf.GitURL != "" {
		return nil, flagErrorf("--workdir and --git-url both set the working directory; give only one")
	}
	if in.Res, err = tf.overrides(); err != nil {
		return nil, err
	}
	if in.Env, err = parseEnvArgs("--env", tf.Envs, lookup); err != nil {
		return nil, err
	}
	if in.Secrets, err = parseEnvArgs("--secret", tf.Secrets, lookup); err != nil {
		return nil, err
	}
	if err := checkFiles("--env-file", tf.EnvFiles); err != nil {
		return nil, err
	}
	if err := checkFiles("--secret-file", tf.SecretFiles); err != nil {
		return nil, err
	}
	in.EnvFiles, in.SecretFiles = tf.EnvFiles, tf.SecretFiles
	return in, nil
}

func (tf *taskFlags) changed(name string) bool {
	if tf.fs == nil {
		return false
	}
	f := tf.fs.Lookup(name)
	return f != nil && f.Changed
}

// overrides maps the resource flags to resourceOverrides. "none" (any case)
// resets a field to its default, as SkyPilot's flags document.
func (tf *taskFlags) overrides() (resourceOverrides, error) {
	var o resourceOverrides
	str := func(flag, v string) fieldOverride {
		if !tf.changed(flag) {
			return fieldOverride{}
		}
		v = strings.TrimSpace(v)
		if strings.EqualFold(v, "none") {
			return fieldOverride{Set: true, Reset: true}
		}
		return fieldOverride{Set: true, Value: v}
	}
	o.Infra = str("infra", tf.Infra)
	o.Cloud = str("cloud", tf.Cloud)
	o.Region = str("region", tf.Region)
	o.Zone = str("zone", tf.Zone)
	o.Accelerators = str("gpus", tf.Gpus)
	o.InstanceType = str("instance-type", tf.InstanceType)
	o.Cpus = str("cpus", tf.Cpus)
	o.Memory = str("memory", tf.Memory)
	o.DiskTier = str("disk-tier", tf.DiskTier)
	o.NetworkTier = str("network-tier", tf.NetworkTier)
	o.ImageID = str("image-id", tf.ImageID)
	o.LocalDisk = str("local-disk", tf.LocalDisk)
	o.Priority = str("priority", tf.Priority)

	if o.Infra.Set && !o.Infra.Reset && (o.Cloud.Set || o.Region.Set || o.Zone.Set) {
		return o, flagErrorf("--infra cannot be combined with --cloud, --region or --zone; put everything in --infra (e.g. aws/us-east-1/us-east-1a)")
	}
	for _, c := range []struct {
		flag    string
		v       fieldOverride
		allowed []string
	}{
		{"--disk-tier", o.DiskTier, []string{"low", "medium", "high", "ultra", "best"}},
		{"--network-tier", o.NetworkTier, []string{"standard", "best"}},
	} {
		if c.v.Set && !c.v.Reset {
			if _, err := choice(c.flag, c.v.Value, append(c.allowed, "none")...); err != nil {
				return o, err
			}
		}
	}
	if tf.changed("disk-size") {
		if tf.DiskSize < 1 {
			return o, flagErrorf("invalid --disk-size %d: must be a positive number of GB", tf.DiskSize)
		}
		o.DiskSize = fieldOverride{Set: true, Value: strconv.Itoa(tf.DiskSize)}
	}
	if o.Priority.Set && !o.Priority.Reset {
		if n, err := strconv.Atoi(o.Priority.Value); err == nil && (n < -1000 || n > 1000) {
			return o, flagErrorf("invalid --priority %d: must be between -1000 and 1000 (or a priority class name)", n)
		}
	}
	if tf.changed("ports") {
		o.Ports = fieldOverride{Set: true, Value: strings.Join(tf.Ports, ",")}
		for _, p := range tf.Ports {
			if strings.EqualFold(strings.TrimSpace(p), "none") {
				o.Ports = fieldOverride{Set: true, Reset: true}
			}
		}
	}
	if tf.UseSpot.Set {
		v := tf.UseSpot.Value
		o.UseSpot = &v
	}
	return o, nil
}

// entrypoint is what to run: a task YAML file or an inline shell command.
type entrypoint struct {
	YAMLPath string // set for a YAML file
	Command  string // set for an inline command
}

// parseEntrypoint decides whether the positional words are a YAML file or a
// command. The words are joined with spaces (so `sky launch -- echo hi` runs
// "echo hi"). One word naming a .yaml/.yml file is a YAML (and must exist);
// one word naming an existing file whose content is a YAML mapping is a
// YAML; anything else is a command.
func parseEntrypoint(args []string) (entrypoint, error) {
	if len(args) == 0 {
		return entrypoint{}, nil
	}
	joined := strings.TrimSpace(strings.Join(args, " "))
	if joined == "" {
		return entrypoint{}, flagErrorf("the entrypoint is empty: give a task YAML or a command")
	}
	if len(args) != 1 {
		return entrypoint{Command: joined}, nil
	}
	word := args[0]
	ext := strings.ToLower(filepath.Ext(word))
	looksYAML := ext == ".yaml" || ext == ".yml"
	st, err := os.Stat(word)
	switch {
	case err == nil && st.IsDir():
		if looksYAML {
			return entrypoint{}, fmt.Errorf("%s is a directory, not a task YAML file", word)
		}
		return entrypoint{Command: joined}, nil
	case err == nil && looksYAML:
		return entrypoint{YAMLPath: word}, nil
	case err == nil:
		if isYAMLMapping(word) {
			return entrypoint{YAMLPath: word}, nil
		}
		return entrypoint{Command: joined}, nil
	case looksYAML:
		return entrypoint{}, fmt.Errorf("task YAML %s not found; check the path (to run a command instead, quote it or put it after --)", word)
	default:
		return entrypoint{Command: joined}, nil
	}
}

// isYAMLMapping reports whether the file at path parses as a YAML mapping.
// Only small files are read: a big non-YAML file is a script, not a task.
func isYAMLMapping(path string) bool {
	st, err := os.Stat(path)
	if err != nil || st.Size() > 1<<20 {
		return false
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil || len(n.Content) == 0 {
		return false
	}
	return n.Content[0].Kind == yaml.MappingNode
}

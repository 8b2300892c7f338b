// Package convert (`sky slurm convert`) turns sbatch scripts into SkyPilot task YAML, by the
// rules of the migration guide (seeds/migrating-from-slurm.md): #SBATCH
// directives become name, num_nodes, resources and
// config.slurm.sbatch_options; module loads and environment activation
// become setup; the work becomes run, with srun translated by what it was
// for and SLURM_* variables replaced by SkyPilot's. It is pure: text in,
// text and notes out.
//
// Decisions the guide leaves open, so that what is emitted runs:
//   - setup and run are separate shells, so module loads and environment
//     activation go to setup and also stay in run where they were; package
//     installs before the first command of the work go to setup only.
//   - literal `export K=V` before the work become envs (setup sees them
//     too); exports that expand something stay in the scripts.
//   - an sbatch script runs on the first node only, and srun fans out; run
//     runs on every node, so on multi-node jobs the commands outside srun
//     are guarded to rank 0.
//   - a job without --job-name is named after its script, as sbatch does.
package convert

import (
	"fmt"
	"math"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Options are what a script alone does not say.
type Options struct {
	// Cluster is the SkyPilot Slurm cluster (a Host of ~/.slurm/config)
	// for infra; "" uses the only one of Hosts, if there is exactly one.
	Cluster string
	// Hosts are the Host aliases of ~/.slurm/config.
	Hosts []string
	// GPUType names the GPU for directives that give only a count
	// (--gpus-per-node=8); "" leaves them as GPU, which matches untyped GRES.
	GPUType string
	// Output is the YAML file name used in the commands of the notes.
	Output string
}

// Script is one sbatch script.
type Script struct {
	Path string // for the default name and messages
	Text string
}

// Note is one thing the user should know about the conversion. Unmapped
// notes are what could not be converted; the others say what changed.
type Note struct {
	Script   string // file, for pipelines
	Line     int    // 0 = the whole script
	Text     string
	Unmapped bool
}

func (n Note) String() string {
	var b strings.Builder
	if n.Script != "" {
		b.WriteString(n.Script)
		if n.Line > 0 {
			b.WriteString(":" + strconv.Itoa(n.Line))
		}
		b.WriteString(": ")
	} else if n.Line > 0 {
		b.WriteString("line " + strconv.Itoa(n.Line) + ": ")
	}
	b.WriteString(n.Text)
	return b.String()
}

// Result is a converted script or pipeline.
type Result struct {
	Name   string
	YAML   string
	Notes  []Note
	Submit string // the command to submit it with
	// SlurmOnly is set when the YAML keeps an srun (migration guide §5.3) and so runs
	// only on Slurm.
	SlurmOnly bool
}

// conv is the state of converting one script.
type conv struct {
	script    string
	notes     []Note
	spec      *spec
	opts      Options
	slurmOnly bool
	numNodes  int
	gpus      int // per node
	cpus      int
	accel     string

	varLines    map[string]int // unmapped SLURM_* variable -> first line
	once        map[string]bool
	name        string // the task's name
	usesArrayID bool
	usesModule  bool
	hasWait     bool            // the script waits for its background steps
	srunFuncs   map[string]bool // the script's functions that run srun
	usedTasks   bool            // an #SBATCH task count reached a kept srun
	masterAddr  string          // the last value run assigned to MASTER_ADDR
}

// note records a change the user should know about.
func (c *conv) note(line int, format string, args ...any) {
	c.notes = append(c.notes, Note{Line: line, Text: fmt.Sprintf(format, args...)})
}

// unmapped records something that could not be converted.
func (c *conv) unmapped(line int, format string, args ...any) {
	c.notes = append(c.notes, Note{Line: line, Text: fmt.Sprintf(format, args...), Unmapped: true})
}

// task is one converted task, before it is written out.
type task struct {
	name      string
	numNodes  int
	resources []kv
	envs      []kv
	sbatch    []kv
	setup     string
	run       string
}

// Convert converts one sbatch script.
func Convert(s Script, opts Options) (*Result, error) {
	c := &conv{opts: opts, srunFuncs: map[string]bool{}}
	t, err := c.convert(s)
	if err != nil {
		return nil, err
	}
	out := emitTask(t)
	if err := checkRoundTrip(out, []*task{t}); err != nil {
		return nil, err
	}
	file := opts.Output
	if file == "" {
		file = t.name + ".yaml"
	}
	r := &Result{Name: t.name, YAML: out, Notes: c.notes, SlurmOnly: c.slurmOnly}
	if a := c.spec.array; a != nil {
		r.Submit = fmt.Sprintf("sky jobs launch -n %s --num-jobs %d -y -d %s", t.name, len(a.indices), file)
		c.arrayNotes(r, a, t.name, file)
	} else {
		r.Submit = fmt.Sprintf("sky jobs launch -n %s %s", t.name, file)
	}
	if c.spec.dependency != "" {
		r.Notes = append(r.Notes, Note{Line: c.spec.lines["dependency"], Unmapped: true, Text: fmt.Sprintf(
			"--dependency=%s names jobs submitted separately; convert the chain together (`sky slurm convert first.sbatch %s ...`) to get one managed pipeline that runs them in order (migration guide §7.2)",
			c.spec.dependency, path.Base(s.Path))})
	}
	r.Notes = sortedNotes(r.Notes)
	return r, nil
}

// ConvertPipeline converts scripts that ran one after another (chained
// with --dependency=afterok:...) into one managed pipeline (migration guide §7.2):
// the tasks run in the order given, each when the one before succeeded.
func ConvertPipeline(scripts []Script, opts Options) (*Result, error) {
	if len(scripts) < 2 {
		return nil, fmt.Errorf("a pipeline needs at least two scripts")
	}
	var tasks []*task
	var notes []Note
	slurmOnly := false
	used := map[string]int{}
	seenWhole := map[string]bool{}
	for i, s := range scripts {
		c := &conv{opts: opts, srunFuncs: map[string]bool{}}
		t, err := c.convert(s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.Path, err)
		}
		if c.spec.array != nil {
			return nil, fmt.Errorf("%s: line %d: --array cannot be one stage of a pipeline (--num-jobs launches the whole file N times); convert this script on its own", s.Path, c.spec.lines["array"])
		}
		used[t.name]++
		if used[t.name] > 1 {
			t.name = fmt.Sprintf("%s-%d", t.name, used[t.name])
		}
		if d := c.spec.dependency; d != "" {
			kind, _, _ := strings.Cut(d, ":")
			switch {
			case i == 0:
				c.note(c.spec.lines["dependency"], "--dependency=%s dropped: this is the first task of the pipeline", d)
			case kind != "afterok":
				c.unmapped(c.spec.lines["dependency"], "--dependency=%s: a pipeline runs each task when the one before succeeded (afterok); %s has no equivalent", d, kind)
			default:
				c.note(c.spec.lines["dependency"], "--dependency=%s became the pipeline order: runs after %s succeeded", d, tasks[len(tasks)-1].name)
			}
		}
		for _, n := range sortedNotes(c.notes) {
			if n.Line == 0 && seenWhole[n.Text] {
				continue // said once for the whole pipeline
			}
			seenWhole[n.Text] = n.Line == 0
			if n.Line > 0 {
				n.Script = path.Base(s.Path)
			}
			notes = append(notes, n)
		}
		slurmOnly = slurmOnly || c.slurmOnly
		tasks = append(tasks, t)
	}
	names := make([]string, len(tasks))
	for i, t := range tasks {
		names[i] = t.name
	}
	header := strings.Join(names, "-then-")
	var b strings.Builder
	b.WriteString("name: " + yamlScalar(header) + "\n")
	for _, t := range tasks {
		b.WriteString("\n---\n\n")
		b.WriteString(emitTask(t))
	}
	out := b.String()
	if err := checkRoundTrip(out, tasks); err != nil {
		return nil, err
	}
	file := opts.Output
	if file == "" {
		file = header + ".yaml"
	}
	return &Result{Name: header, YAML: out, Notes: notes, SlurmOnly: slurmOnly,
		Submit: fmt.Sprintf("sky jobs launch -n %s %s", header, file)}, nil
}

func (c *conv) arrayNotes(r *Result, a *arraySpec, name, file string) {
	line := c.spec.lines["array"]
	n := len(a.indices)
	text := fmt.Sprintf("--array=%s became %d managed jobs: submit with `sky jobs launch -n %s --num-jobs %d -y -d %s`; each gets $SKYPILOT_JOB_RANK (0..%d) and $SKYPILOT_NUM_JOBS (migration guide §7.1)", a.raw, n, name, n, file, n-1)
	if !a.zeroBased() {
		text += "; the Slurm index is computed from the rank at the top of run as $ARRAY_TASK_ID"
	}
	r.Notes = append(r.Notes, Note{Line: line, Text: text})
	if a.throttle > 0 {
		r.Notes = append(r.Notes, Note{Line: line, Unmapped: true, Text: fmt.Sprintf(
			"--array limit %%%d has no --num-jobs equivalent (every job gets its own allocation); to run at most %d at once, submit to a pool of %d workers: `sky jobs pool apply -p %s-pool pool.yaml` (a pool: section with workers: %d), then `sky jobs launch -p %s-pool --num-jobs %d %s`",
			a.throttle, a.throttle, a.throttle, name, a.throttle, name, n, file)})
	}
}

func (c *conv) convert(s Script) (*task, error) {
	c.script = path.Base(s.Path)
	text := strings.ReplaceAll(s.Text, "\r\n", "\n")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	ds := parseDirectives(lines, c)
	sp, err := buildSpec(ds, c)
	if err != nil {
		return nil, err
	}
	c.spec = sp
	t := &task{}
	t.name = sp.name
	if t.name == "" {
		// sbatch names a job after its script when --job-name is unset.
		t.name = strings.TrimSuffix(path.Base(s.Path), path.Ext(s.Path))
	}
	if clean := cleanName(t.name); clean != t.name {
		c.note(sp.lines["job-name"], "job name %q is not a valid SkyPilot task name; using %q", t.name, clean)
		t.name = clean
	}
	c.name = t.name
	c.numNodes = max(sp.nodes, 1)
	if sp.nodes > 1 {
		t.numNodes = sp.nodes
	}
	if err := c.resources(t); err != nil {
		return nil, err
	}
	t.sbatch = sp.sbatch
	if err := c.body(lines, t); err != nil {
		return nil, err
	}
	return t, nil
}

var nameBad = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)
var nameSeps = regexp.MustCompile(`[._-]{3,}`)

// cleanName makes a task name of SkyPilot's pattern
// [a-zA-Z0-9]+(?:[._-]{1,2}[a-zA-Z0-9]+)*.
func cleanName(n string) string {
	n = nameBad.ReplaceAllString(n, "-")
	n = nameSeps.ReplaceAllString(n, "-")
	n = strings.Trim(n, "._-")
	if n == "" {
		return "slurm-job"
	}
	return n
}

// tasksPerNode is how many processes a plain srun step started per node.
func (c *conv) tasksPerNode() int {
	sp := c.spec
	if sp.ntasksPerNode > 0 {
		return sp.ntasksPerNode
	}
	if sp.ntasks > 0 {
		return int(math.Ceil(float64(sp.ntasks) / float64(c.numNodes)))
	}
	return 1
}

var simpleGPU = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

func (c *conv) resources(t *task) error {
	sp := c.spec
	// infra
	cluster := c.opts.Cluster
	if cluster == "" && len(c.opts.Hosts) == 1 {
		cluster = c.opts.Hosts[0]
	}
	infra := "slurm"
	switch {
	case cluster != "" && sp.partition != "":
		infra = "slurm/" + cluster + "/" + sp.partition
	case cluster != "":
		infra = "slurm/" + cluster
	case sp.partition != "":
		why := "~/.slurm/config has no Host"
		if len(c.opts.Hosts) > 1 {
			why = "~/.slurm/config has several Hosts (" + strings.Join(c.opts.Hosts, ", ") + ")"
		}
		c.unmapped(sp.lines["partition"], "--partition=%s: infra names a partition only with its cluster, and %s; infra is `slurm` — pass --cluster NAME to get `infra: slurm/NAME/%s`", sp.partition, why, sp.partition)
	}
	t.resources = append(t.resources, kv{"infra", infra})

	// accelerators, per node
	tpn := c.tasksPerNode()
	gline := 0
	switch {
	case sp.gpusPerNode > 0:
		c.gpus = sp.gpusPerNode
		gline = firstLine(sp.lines, "gpus-per-node", "gres")
	case sp.gpusTotal > 0:
		gline = sp.lines["gpus"]
		if sp.gpusTotal%c.numNodes != 0 {
			return fmt.Errorf("line %d: --gpus=%d does not split evenly over %d nodes; SkyPilot gives every node the same accelerators (use --gpus-per-node)", gline, sp.gpusTotal, c.numNodes)
		}
		c.gpus = sp.gpusTotal / c.numNodes
		if c.numNodes > 1 {
			c.note(gline, "--gpus=%d over %d nodes became %d per node", sp.gpusTotal, c.numNodes, c.gpus)
		}
	case sp.gpusPerTask > 0:
		gline = sp.lines["gpus-per-task"]
		c.gpus = sp.gpusPerTask * tpn
		c.note(gline, "--gpus-per-task=%d with %d task(s) per node became %d GPUs per node", sp.gpusPerTask, tpn, c.gpus)
	}
	if c.gpus > 0 {
		typ := sp.gpuType
		switch {
		case typ == "" && c.opts.GPUType != "":
			typ = c.opts.GPUType
		case typ == "":
			typ = "GPU"
			c.unmapped(gline, "the script gives no GPU type, so accelerators is GPU:%d (matches untyped GRES); name the type your cluster's GRES has (`sky gpus list --infra slurm`) with --gpu-type", c.gpus)
		case c.opts.GPUType != "" && !strings.EqualFold(c.opts.GPUType, typ):
			c.note(gline, "the script names GPU type %s; --gpu-type %s applies only to directives without a type", typ, c.opts.GPUType)
		}
		if simpleGPU.MatchString(typ) {
			typ = strings.ToUpper(typ)
		}
		c.accel = fmt.Sprintf("%s:%d", typ, c.gpus)
		t.resources = append(t.resources, kv{"accelerators", c.accel})
	}

	// cpus, per node
	switch {
	case sp.cpusPerTask > 0:
		c.cpus = sp.cpusPerTask * tpn
		if tpn > 1 {
			c.note(sp.lines["cpus-per-task"], "--cpus-per-task=%d with %d tasks per node became cpus: %d+ (per node)", sp.cpusPerTask, tpn, c.cpus)
		}
	case sp.cpusPerGPU > 0 && c.gpus > 0:
		c.cpus = sp.cpusPerGPU * c.gpus
		c.note(sp.lines["cpus-per-gpu"], "--cpus-per-gpu=%d with %d GPUs per node became cpus: %d+", sp.cpusPerGPU, c.gpus, c.cpus)
	case sp.cpusPerGPU > 0:
		c.unmapped(sp.lines["cpus-per-gpu"], "--cpus-per-gpu=%d without GPUs: not converted", sp.cpusPerGPU)
	case tpn > 1:
		// As the guide's §5.3 form: the step's tasks take a CPU each
		// from the allocation, which the YAML leaves to the defaults.
		c.note(firstLine(sp.lines, "ntasks", "ntasks-per-node"), "%d tasks per node need %d CPUs per node; add `cpus: %d+` if the default allocation is smaller", tpn, tpn, tpn)
	}
	if c.cpus > 0 {
		t.resources = append(t.resources, kv{"cpus", strconv.Itoa(c.cpus) + "+"})
	}

	// memory, per node, in GB
	mb := -1.0
	switch {
	case sp.memMB == 0:
		c.unmapped(sp.lines["mem"], "--mem=0 (all of a node's memory) has no SkyPilot form; memory left unset (add `exclusive: true` to sbatch_options to get whole nodes)")
	case sp.memMB > 0:
		mb = sp.memMB
	case sp.memPerCPUMB > 0:
		cpus := max(c.cpus, 1)
		mb = sp.memPerCPUMB * float64(cpus)
		c.note(sp.lines["mem-per-cpu"], "--mem-per-cpu=%s became memory for %d CPU(s) per node: %s+ GB", formatMB(sp.memPerCPUMB), cpus, memGB(mb))
	case sp.memPerGPUMB > 0 && c.gpus > 0:
		mb = sp.memPerGPUMB * float64(c.gpus)
		c.note(sp.lines["mem-per-gpu"], "--mem-per-gpu=%s became memory for %d GPUs per node: %s+ GB", formatMB(sp.memPerGPUMB), c.gpus, memGB(mb))
	case sp.memPerGPUMB > 0:
		c.unmapped(sp.lines["mem-per-gpu"], "--mem-per-gpu without GPUs: not converted")
	}
	if mb > 0 {
		t.resources = append(t.resources, kv{"memory", memGB(mb) + "+"})
	}
	return nil
}

func formatMB(mb float64) string {
	if mb >= 1024 && math.Mod(mb, 1024) == 0 {
		return strconv.Itoa(int(mb/1024)) + "G"
	}
	return strconv.FormatFloat(mb, 'f', -1, 64) + "M"
}

func firstLine(lines map[string]int, keys ...string) int {
	best := 0
	for _, k := range keys {
		if l := lines[k]; l > 0 && (best == 0 || l < best) {
			best = l
		}
	}
	return best
}

// checkRoundTrip parses the emitted YAML back and checks that every
// setup and run reads as the bash that was meant: the block scalars are
// written by hand, and a bad indentation would silently change a script.
func checkRoundTrip(out string, tasks []*task) error {
	dec := yaml.NewDecoder(strings.NewReader(out))
	var docs []map[string]any
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				break
			}
			return fmt.Errorf("internal error: the YAML written does not parse: %v", err)
		}
		docs = append(docs, m)
	}
	if len(tasks) > 1 {
		if len(docs) == 0 {
			return fmt.Errorf("internal error: no YAML documents written")
		}
		docs = docs[1:]
	}
	if len(docs) != len(tasks) {
		return fmt.Errorf("internal error: wrote %d YAML documents for %d tasks", len(docs), len(tasks))
	}
	for i, t := range tasks {
		for _, f := range []struct{ key, want string }{{"setup", t.setup}, {"run", t.run}} {
			got, _ := docs[i][f.key].(string)
			if got != f.want {
				return fmt.Errorf("internal error: %s of task %s reads back differently from what was written", f.key, t.name)
			}
		}
	}
	return nil
}

// sortedNotes orders one script's notes by line, keeping the order of
// notes on one line; whole-script notes (line 0) come last.
func sortedNotes(ns []Note) []Note {
	out := append([]Note(nil), ns...)
	key := func(n Note) int {
		if n.Line == 0 {
			return math.MaxInt
		}
		return n.Line
	}
	sort.SliceStable(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

package convert

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// directive is one sbatch option of an #SBATCH line, named by its long
// option (short forms are translated when read).
type directive struct {
	line     int
	name     string // long name without "--", e.g. "gpus-per-node"
	value    string
	hasValue bool
	raw      string // as written, for notes
}

// shortOpts are sbatch's one-letter options and whether they take a value.
var shortOpts = map[byte]struct {
	long  string
	value bool
}{
	'N': {"nodes", true}, 'n': {"ntasks", true}, 'c': {"cpus-per-task", true},
	'p': {"partition", true}, 't': {"time", true}, 'J': {"job-name", true},
	'G': {"gpus", true}, 'o': {"output", true}, 'e': {"error", true},
	'A': {"account", true}, 'q': {"qos", true}, 'a': {"array", true},
	'd': {"dependency", true}, 'C': {"constraint", true}, 'w': {"nodelist", true},
	'x': {"exclude", true}, 'D': {"chdir", true}, 'M': {"clusters", true},
	'm': {"distribution", true}, 'L': {"licenses", true}, 'i': {"input", true},
	'F': {"nodefile", true}, 'B': {"extra-node-info", true}, 'S': {"core-spec", true},
	'b': {"begin", true}, 'k': {"no-kill", false}, 's': {"oversubscribe", false},
	'O': {"overcommit", false}, 'H': {"hold", false}, 'W': {"wait", false},
	'Q': {"quiet", false}, 'v': {"verbose", false}, 'h': {"help", false},
}

// flagOpts are long options that take no value unless given with "=".
var flagOpts = map[string]bool{
	"exclusive": true, "requeue": true, "no-requeue": true, "overcommit": true,
	"contiguous": true, "hold": true, "spread-job": true, "use-min-nodes": true,
	"no-kill": true, "oversubscribe": true, "ignore-pbs": true, "test-only": true,
	"parsable": true, "quiet": true, "verbose": true, "wait": true,
	"get-user-env": true, "reboot": true, "help": true, "usage": true,
}

// parseDirectives reads the #SBATCH block. As sbatch does, it stops at the
// first line that is neither blank nor a comment; #SBATCH lines after it
// are reported, not applied.
func parseDirectives(lines []string, c *conv) []directive {
	var out []directive
	inBlock := true
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if !strings.HasPrefix(t, "#SBATCH") {
			if t != "" && !strings.HasPrefix(t, "#") {
				inBlock = false
			}
			continue
		}
		if !inBlock {
			c.note(i+1, "%q comes after the first command, so sbatch ignored it; not converted", t)
			continue
		}
		words := directiveWords(strings.TrimPrefix(t, "#SBATCH"))
		for j := 0; j < len(words); j++ {
			w := words[j].value()
			d := directive{line: i + 1}
			switch {
			case strings.HasPrefix(w, "--"):
				name, val, has := strings.Cut(w[2:], "=")
				d.name, d.value, d.hasValue = name, val, has
				if !has && !flagOpts[name] && j+1 < len(words) {
					j++
					d.value, d.hasValue = words[j].value(), true
				}
			case strings.HasPrefix(w, "-") && len(w) >= 2:
				so, ok := shortOpts[w[1]]
				if !ok {
					c.note(i+1, "unknown sbatch option %q; not converted", w)
					continue
				}
				d.name = so.long
				if so.value {
					rest := strings.TrimPrefix(w[2:], "=")
					if rest == "" && j+1 < len(words) {
						j++
						rest = words[j].value()
					}
					d.value, d.hasValue = rest, true
				}
			default:
				c.note(i+1, "%q in an #SBATCH line is not an option; not converted", w)
				continue
			}
			if d.name == "tasks-per-node" { // sbatch's alias
				d.name = "ntasks-per-node"
			}
			d.raw = "--" + d.name
			if d.hasValue {
				d.raw += "=" + d.value
			}
			out = append(out, d)
		}
	}
	return out
}

// directiveWords splits an #SBATCH line as sbatch does: on whitespace
// outside quotes, up to a comment. It is not shell: & | ; are literal.
func directiveWords(s string) []token {
	var out []token
	var cur strings.Builder
	in := false
	var quote byte
	start := 0
	flush := func(end int) {
		if in {
			out = append(out, token{text: cur.String(), start: start, end: end})
			cur.Reset()
			in = false
		}
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			cur.WriteByte(ch)
			if ch == quote {
				quote = 0
			}
		case ch == '"' || ch == '\'':
			if !in {
				in, start = true, i
			}
			quote = ch
			cur.WriteByte(ch)
		case ch == ' ' || ch == '\t':
			flush(i)
		case ch == '#' && !in:
			return out
		default:
			if !in {
				in, start = true, i
			}
			cur.WriteByte(ch)
		}
	}
	flush(len(s))
	return out
}

// protected are the sbatch options SkyPilot sets itself and drops from
// sbatch_options (migration guide §3).
var protected = map[string]bool{
	"job-name": true, "output": true, "error": true, "nodes": true, "wait-all-nodes": true,
	"no-requeue": true, "requeue": true, "cpus-per-task": true, "mem": true, "gres": true, "partition": true,
}

// notPassed are options that are neither modelled nor safe to hand to
// SkyPilot's allocation, with why.
var notPassed = map[string]string{
	"chdir":               "handled as a `cd` at the top of setup and run",
	"export":              "would change the environment of SkyPilot's own allocation script; set `envs:` instead",
	"export-file":         "would change the environment of SkyPilot's own allocation script; set `envs:` instead",
	"input":               "a batch job's stdin has no SkyPilot equivalent",
	"open-mode":           "SkyPilot keeps the job's logs itself (migration guide §7.4)",
	"wrap":                "the script body is the command",
	"hold":                "a held allocation would never start; submit when ready instead",
	"test-only":           "use `sky launch --dryrun` (migration guide §1 step 5)",
	"parsable":            "only changes sbatch's own output",
	"wait":                "`sky jobs launch` without -d already waits",
	"quiet":               "only changes sbatch's own output",
	"verbose":             "only changes sbatch's own output",
	"clusters":            "a Slurm federation cluster; pick the SkyPilot cluster with `infra: slurm/<cluster>` (--cluster)",
	"kill-on-invalid-dep": "dependencies become a pipeline (migration guide §7.2)",
	"help":                "not an option of a job",
	"usage":               "not an option of a job",
	"nodefile":            "use `num_nodes`",
	"ignore-pbs":          "only changes how sbatch reads the script",
}

// spec is what the #SBATCH block asks for.
type spec struct {
	name          string
	nodes         int
	cpusPerTask   int
	ntasks        int
	ntasksPerNode int
	cpusPerGPU    int
	memMB         float64 // <0 unset
	memPerCPUMB   float64
	memPerGPUMB   float64
	gpuType       string
	gpusPerNode   int
	gpusTotal     int
	gpusPerTask   int
	partition     string
	array         *arraySpec
	dependency    string
	chdir         string
	sbatch        []kv
	lines         map[string]int // option -> line, for notes
}

type kv struct {
	key   string
	value any // string or true
}

var timeRE = regexp.MustCompile(`^(\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+)$`)

// validTime reports whether s is a Slurm time limit in one of the forms
// SkyPilot accepts for sbatch_options.time.
func validTime(s string) bool { return timeRE.MatchString(s) }

func buildSpec(ds []directive, c *conv) (*spec, error) {
	s := &spec{nodes: 0, memMB: -1, memPerCPUMB: -1, memPerGPUMB: -1, lines: map[string]int{}}
	set := func(key string, v any) {
		for i := range s.sbatch {
			if s.sbatch[i].key == key {
				s.sbatch[i].value = v // a later directive wins, as in sbatch
				return
			}
		}
		s.sbatch = append(s.sbatch, kv{key, v})
	}
	for _, d := range ds {
		s.lines[d.name] = d.line
		need := func() error {
			if !d.hasValue || d.value == "" {
				return fmt.Errorf("line %d: %s needs a value", d.line, "--"+d.name)
			}
			return nil
		}
		atoi := func() (int, error) {
			if err := need(); err != nil {
				return 0, err
			}
			n, err := strconv.Atoi(d.value)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("line %d: %s: %q is not a count", d.line, "--"+d.name, d.value)
			}
			return n, nil
		}
		var err error
		switch d.name {
		case "job-name":
			if err = need(); err == nil {
				s.name = d.value
			}
		case "nodes":
			if err = need(); err != nil {
				break
			}
			lo, hi, isRange := strings.Cut(d.value, "-")
			n, e := strconv.Atoi(lo)
			if e != nil || n < 1 {
				return nil, fmt.Errorf("line %d: --nodes=%s is not a node count", d.line, d.value)
			}
			s.nodes = n
			if isRange {
				c.note(d.line, "--nodes=%s is a range; SkyPilot needs a fixed count, so num_nodes is the minimum, %d (max %s not kept)", d.value, n, hi)
			}
		case "ntasks":
			s.ntasks, err = atoi()
		case "ntasks-per-node":
			s.ntasksPerNode, err = atoi()
		case "cpus-per-task":
			s.cpusPerTask, err = atoi()
		case "cpus-per-gpu":
			s.cpusPerGPU, err = atoi()
		case "mem", "mem-per-cpu", "mem-per-gpu":
			if err = need(); err != nil {
				break
			}
			mb, ok := parseMem(d.value)
			if !ok {
				return nil, fmt.Errorf("line %d: --%s=%s is not a Slurm memory size (a number with an optional K, M, G or T suffix)", d.line, d.name, d.value)
			}
			switch d.name {
			case "mem":
				s.memMB = mb
			case "mem-per-cpu":
				s.memPerCPUMB = mb
			default:
				s.memPerGPUMB = mb
			}
		case "gpus-per-node", "gpus", "gpus-per-task":
			if err = need(); err != nil {
				break
			}
			typ, n, ok := parseGPUCount(d.value)
			if !ok {
				return nil, fmt.Errorf("line %d: --%s=%s is not [type:]count", d.line, d.name, d.value)
			}
			if typ != "" {
				s.gpuType = typ
			}
			switch d.name {
			case "gpus-per-node":
				s.gpusPerNode = n
			case "gpus":
				s.gpusTotal = n
			default:
				s.gpusPerTask = n
			}
		case "gres":
			if err = need(); err != nil {
				break
			}
			for _, item := range strings.Split(d.value, ",") {
				item = strings.TrimPrefix(item, "gres/")
				parts := strings.Split(item, ":")
				if parts[0] != "gpu" {
					c.note(d.line, "--gres item %q is not a GPU; SkyPilot sets --gres itself, so it is not passed", item)
					continue
				}
				n := 1
				switch len(parts) {
				case 1:
				case 2:
					if v, e := strconv.Atoi(parts[1]); e == nil {
						n = v
					} else {
						s.gpuType = parts[1]
					}
				default:
					s.gpuType = parts[1]
					v, e := strconv.Atoi(strings.SplitN(parts[2], "(", 2)[0])
					if e != nil {
						return nil, fmt.Errorf("line %d: --gres=%s: %q is not a GPU count", d.line, d.value, parts[2])
					}
					n = v
				}
				s.gpusPerNode = n
			}
		case "partition":
			if err = need(); err != nil {
				break
			}
			parts := strings.Split(d.value, ",")
			s.partition = parts[0]
			if len(parts) > 1 {
				c.note(d.line, "--partition=%s lists several partitions; infra names the first, %s (SkyPilot fails over between the partitions that fit when infra names only the cluster)", d.value, parts[0])
			}
		case "array":
			if err = need(); err != nil {
				break
			}
			a, e := parseArray(d.value)
			if e != nil {
				return nil, fmt.Errorf("line %d: --array=%s: %v", d.line, d.value, e)
			}
			s.array = a
		case "dependency":
			if err = need(); err == nil {
				s.dependency = d.value
			}
		case "chdir":
			if err = need(); err == nil {
				s.chdir = d.value
			}
		case "output", "error":
			c.note(d.line, "%s dropped: SkyPilot keeps the job's logs (`sky jobs logs NAME`, migration guide §7.4); write result files to the shared filesystem or a bucket", d.raw)
		case "wait-all-nodes", "requeue", "no-requeue":
			c.note(d.line, "%s dropped: SkyPilot sets it for its own allocation (managed jobs recover failed jobs themselves)", d.raw)
		case "time":
			if err = need(); err != nil {
				break
			}
			switch strings.ToUpper(d.value) {
			case "UNLIMITED", "INFINITE":
				c.note(d.line, "--time=%s dropped: without a time, SkyPilot uses the partition's MaxTime", d.value)
				continue
			}
			if !validTime(d.value) {
				return nil, fmt.Errorf("line %d: --time=%s is not a Slurm time limit (m, m:s, h:m:s, d-h, d-h:m or d-h:m:s)", d.line, d.value)
			}
			set("time", d.value)
		default:
			if why, ok := notPassed[d.name]; ok {
				c.note(d.line, "%s not converted: %s", d.raw, why)
				continue
			}
			if protected[d.name] {
				continue
			}
			if !d.hasValue {
				set(d.name, true)
				continue
			}
			if strings.ContainsAny(d.value, "\n") {
				return nil, fmt.Errorf("line %d: %s: values must be one line", d.line, d.raw)
			}
			set(d.name, d.value)
		}
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

var memRE = regexp.MustCompile(`(?i)^(\d+(?:\.\d+)?)([KMGT]?)B?$`)

// parseMem reads a Slurm memory size in MB (no suffix means MB).
func parseMem(v string) (float64, bool) {
	m := memRE.FindStringSubmatch(v)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	switch strings.ToUpper(m[2]) {
	case "K":
		n /= 1024
	case "G":
		n *= 1024
	case "T":
		n *= 1024 * 1024
	}
	return n, true
}

// parseGPUCount reads "[type:]count" (count may be omitted after a type
// in --gpus-per-node=h100, meaning 1).
func parseGPUCount(v string) (string, int, bool) {
	v = strings.TrimPrefix(v, "gpu:")
	typ, count, has := strings.Cut(v, ":")
	if !has {
		if n, err := strconv.Atoi(v); err == nil {
			return "", n, true
		}
		return v, 1, v != ""
	}
	n, err := strconv.Atoi(count)
	return typ, n, err == nil
}

// arraySpec is a parsed --array: the indices and the concurrency limit.
type arraySpec struct {
	raw      string
	indices  []int
	throttle int
	// start and step when the indices are one arithmetic range.
	start, step int
	ranged      bool
}

func parseArray(v string) (*arraySpec, error) {
	a := &arraySpec{raw: v}
	body, thr, hasThr := strings.Cut(v, "%")
	if hasThr {
		n, err := strconv.Atoi(thr)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a task limit", thr)
		}
		a.throttle = n
	}
	items := strings.Split(body, ",")
	for _, it := range items {
		rng, stepS, hasStep := strings.Cut(it, ":")
		lo, hi, isRange := strings.Cut(rng, "-")
		a0, err := strconv.Atoi(lo)
		if err != nil || a0 < 0 {
			return nil, fmt.Errorf("%q is not an index", lo)
		}
		b0, step := a0, 1
		if isRange {
			if b0, err = strconv.Atoi(hi); err != nil || b0 < a0 {
				return nil, fmt.Errorf("%q is not a range", rng)
			}
		}
		if hasStep {
			if step, err = strconv.Atoi(stepS); err != nil || step < 1 {
				return nil, fmt.Errorf("%q is not a step", stepS)
			}
		}
		for i := a0; i <= b0; i += step {
			a.indices = append(a.indices, i)
			if len(a.indices) > 1_000_000 {
				return nil, fmt.Errorf("more than a million tasks")
			}
		}
		if len(items) == 1 {
			a.start, a.step, a.ranged = a0, step, true
		}
	}
	if len(a.indices) == 0 {
		return nil, fmt.Errorf("no indices")
	}
	return a, nil
}

// zeroBased reports whether the indices are 0..N-1, which SKYPILOT_JOB_RANK
// is.
func (a *arraySpec) zeroBased() bool { return a.ranged && a.start == 0 && a.step == 1 }

// memGB formats MB as the GB count of `memory: N+`.
func memGB(mb float64) string {
	gb := mb / 1024
	if gb == float64(int64(gb)) {
		return strconv.FormatInt(int64(gb), 10)
	}
	s := strconv.FormatFloat(gb, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "0" {
		s = "0.01"
	}
	return s
}

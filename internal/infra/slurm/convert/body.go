package convert

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// stmt is one top-level shell statement of the script body: a simple
// command (with its continuation lines and here-documents) or a whole
// compound command (if/for/while/case/{ }).
type stmt struct {
	line    int
	lines   []string
	block   bool
	heredoc bool
}

func (s *stmt) text() string { return strings.Join(s.lines, "\n") }

var heredocRE = regexp.MustCompile(`<<(-?)\s*['"]?([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// splitStatements groups the body's lines into top-level statements.
// skip marks lines that are not part of the body (shebang, #SBATCH).
func splitStatements(lines []string, skip func(int) bool) []*stmt {
	var out []*stmt
	var cur *stmt
	depth := 0
	logicalStart := 0
	heredoc, heredocTabs := "", false
	for i, l := range lines {
		if cur == nil {
			if skip(i) {
				continue
			}
			cur = &stmt{line: i + 1}
			logicalStart = 0
		}
		cur.lines = append(cur.lines, l)
		if heredoc != "" {
			end := l
			if heredocTabs {
				end = strings.TrimLeft(l, "\t")
			}
			if end != heredoc {
				continue
			}
			heredoc = ""
			logicalStart = len(cur.lines)
		} else {
			if strings.HasSuffix(l, `\`) && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue // continued on the next line
			}
			logical := strings.Join(cur.lines[logicalStart:], "\n")
			logicalStart = len(cur.lines)
			depth += blockDelta(logical)
			if depth < 0 {
				depth = 0
			}
			if m := heredocRE.FindStringSubmatch(logical); m != nil && !strings.Contains(logical, "<<<") && !strings.HasPrefix(strings.TrimSpace(logical), "#") {
				heredoc, heredocTabs = m[2], m[1] == "-"
				cur.heredoc = true
				continue
			}
		}
		if depth > 0 {
			cur.block = true
			continue
		}
		out = append(out, cur)
		cur = nil
	}
	if cur != nil {
		out = append(out, cur)
	}
	return out
}

// blockDelta counts the compound commands a logical line opens minus
// those it closes, looking only at words in command position.
func blockDelta(logical string) int {
	d := 0
	cmdPos := true
	for _, t := range splitWords(logical) {
		w := t.text
		if cmdPos {
			switch w {
			case "if", "for", "while", "until", "case", "select", "{":
				d++
			case "fi", "done", "esac", "}":
				d--
			}
		}
		switch {
		case operators[w], w == "then", w == "do", w == "else", w == "elif", w == "{", w == "(", strings.HasSuffix(w, "()"):
			cmdPos = true
		case isAssignment(w) && cmdPos:
		default:
			cmdPos = false
		}
	}
	return d
}

type class int

const (
	cBlank class = iota
	cEnv
	cInstall
	cExportLiteral
	cHarmless // safe, and needed, on every node: assignments, echo, cd, ...
	cSrun
	cWork
)

var harmless = map[string]bool{
	"echo": true, "printf": true, "mkdir": true, "cd": true, "pushd": true, "popd": true,
	"set": true, "shopt": true, "ulimit": true, "umask": true, "trap": true, "wait": true,
	"sleep": true, "date": true, "hostname": true, "nvidia-smi": true, "true": true, ":": true,
	"unset": true, "alias": true, "declare": true, "local": true, "readonly": true,
	"export": true, "pwd": true, "which": true, "whoami": true, "exit": true, "typeset": true,
	"[": true, "[[": true, "test": true, "read": true, "return": true, "shift": true, "break": true, "continue": true,
}

var pythonRE = regexp.MustCompile(`^python[0-9.]*$`)

// classify is classifyWords, with calls of the script's own functions
// that run srun counted as srun.
func (c *conv) classify(text string) class {
	cl := classifyWords(text)
	if cl == cWork {
		ws := splitWords(text)
		i := 0
		for i < len(ws) && isAssignment(ws[i].text) {
			i++
		}
		if i < len(ws) && c.srunFuncs[ws[i].value()] {
			return cHarmless
		}
	}
	return cl
}

// classifyWords looks at a statement's words: the class of its first
// command, unless a later command of a pipeline or list is work.
func classifyWords(text string) class {
	all := splitWords(text)
	first := -1
	for i, w := range all {
		if operators[w.text] {
			first = i
			break
		}
	}
	if first < 0 {
		return classifySimple(all, text)
	}
	cl := classifySimple(all[:first], text)
	if cl == cSrun || cl == cWork {
		return cl
	}
	start := first + 1
	for i := start; i <= len(all); i++ {
		if i == len(all) || operators[all[i].text] {
			if i > start && classifySimple(all[start:i], text) >= cSrun {
				return cWork
			}
			start = i + 1
		}
	}
	return cl
}

// classifySimple looks at one simple command's words.
func classifySimple(ws []token, text string) class {
	i := 0
	for i < len(ws) && isAssignment(ws[i].text) {
		i++
	}
	if len(ws) == 0 {
		return cBlank
	}
	if i == len(ws) || (i > 0 && strings.HasSuffix(ws[i-1].text, "=(")) {
		return cHarmless // assignments only (an array's words follow its "=(")
	}
	arg := func(k int) string {
		if i+k < len(ws) {
			return ws[i+k].value()
		}
		return ""
	}
	cmd := arg(0)
	switch cmd {
	case "module", "ml", "source", ".":
		return cEnv
	case "conda", "mamba", "micromamba":
		switch arg(1) {
		case "activate", "deactivate":
			return cEnv
		case "install", "create", "env", "update":
			return cInstall
		}
	case "eval":
		if strings.Contains(text, "shell.bash") || strings.Contains(text, "hook") {
			return cEnv
		}
	case "spack":
		switch arg(1) {
		case "load", "env":
			return cEnv
		case "install":
			return cInstall
		}
	case "pip", "pip3":
		if arg(1) == "install" {
			return cInstall
		}
	case "uv":
		if arg(1) == "sync" || (arg(1) == "pip" && arg(2) == "install") || arg(1) == "venv" {
			return cInstall
		}
	case "apt-get", "apt", "yum", "dnf":
		if arg(1) == "install" || (arg(1) == "-y" && arg(2) == "install") {
			return cInstall
		}
	case "time", "exec", "nohup", "command":
		if arg(1) == "srun" {
			return cSrun
		}
	case "srun":
		return cSrun
	case "export":
		for _, w := range ws[i+1:] {
			if !isAssignment(w.text) || strings.ContainsAny(w.text, "$`") {
				return cHarmless
			}
		}
		return cExportLiteral
	}
	if pythonRE.MatchString(cmd) && arg(1) == "-m" && arg(2) == "pip" && arg(3) == "install" {
		return cInstall
	}
	if harmless[cmd] {
		return cHarmless
	}
	return cWork
}

const headIPs = `$(echo "$SKYPILOT_NODE_IPS" | head -n1)`

var waitRE = regexp.MustCompile(`(?m)^\s*wait\b`)

var funcDefRE = regexp.MustCompile(`^\s*(?:function\s+([A-Za-z_][A-Za-z0-9_-]*)|([A-Za-z_][A-Za-z0-9_-]*)\s*\(\))`)

var masterRE = regexp.MustCompile(`(?m)^\s*(?:export\s+)?MASTER_ADDR=(.*)$`)

var continuationRE = regexp.MustCompile(`[ \t]*\\\n[ \t]*`)

var nodeVarRE = regexp.MustCompile(`^\$\{?[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\}?$`)

// myIP is this node's address in SkyPilot's node list.
const myIP = `$(echo "$SKYPILOT_NODE_IPS" | sed -n "$((SKYPILOT_NODE_RANK + 1))p")`

const rank0 = `if [ "$SKYPILOT_NODE_RANK" == "0" ]; then`

// body converts everything after the #SBATCH block into setup, run and
// envs.
func (c *conv) body(lines []string, t *task) error {
	sp := c.spec
	// The comments of the header block, up to the last #SBATCH line of
	// it, describe the job for sbatch; they are dropped with it.
	headerEnd := -1
	for i, l := range lines {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "#SBATCH") {
			headerEnd = i
		} else if l != "" && !strings.HasPrefix(l, "#") {
			break
		}
	}
	skip := func(i int) bool {
		l := strings.TrimSpace(lines[i])
		if i == 0 && strings.HasPrefix(l, "#!") {
			return true
		}
		if strings.HasPrefix(l, "#SBATCH") {
			return true
		}
		return i <= headerEnd && (l == "" || strings.HasPrefix(l, "#"))
	}
	stmts := splitStatements(lines, skip)
	c.hasWait = waitRE.MatchString(strings.Join(lines, "\n"))
	var setup []string
	type runPart struct {
		text  string
		gate  bool // wrap in the rank-0 guard
		plain bool // may be indented when wrapped
	}
	var run []runPart
	prelude := true
	seenEnv := map[string]bool{}
	var gatedWork []int
	for _, s := range stmts {
		text := s.text()
		if s.block {
			out, hasSrun, work := c.convertBlock(s)
			if m := funcDefRE.FindStringSubmatch(s.lines[0]); m != nil && hasSrun {
				// Calls of this function start srun steps: not guarded.
				c.srunFuncs[m[1]+m[2]] = true
				work = false
			}
			if hasSrun || work {
				prelude = false
			}
			gate := !hasSrun && work && c.numNodes > 1
			if gate {
				gatedWork = append(gatedWork, s.line)
			} else if work && hasSrun && c.numNodes > 1 {
				c.note(s.line, "this block mixes srun with other commands; in Slurm only srun ran on every node, in SkyPilot the whole block runs on every node")
			}
			run = append(run, runPart{out, gate, !s.heredoc})
			continue
		}
		cl := c.classify(text)
		switch cl {
		case cBlank:
			if len(run) > 0 || strings.TrimSpace(text) != "" {
				run = append(run, runPart{text, false, true})
			}
		case cEnv:
			if w := splitWords(text); len(w) > 0 && (w[0].text == "module" || w[0].text == "ml") {
				c.usesModule = true
			}
			rw := c.rewriteVars(text, s.line)
			if prelude {
				setup = append(setup, rw)
			}
			run = append(run, runPart{rw, false, true})
		case cInstall:
			rw := c.rewriteVars(text, s.line)
			if prelude {
				setup = append(setup, rw)
			} else {
				run = append(run, runPart{rw, c.numNodes > 1, !s.heredoc})
			}
		case cExportLiteral:
			ok := prelude
			ws := splitWords(text)
			var pairs []kv
			for _, w := range ws[1:] {
				k, v, _ := strings.Cut(w.text, "=")
				if seenEnv[k] {
					ok = false
				}
				pairs = append(pairs, kv{k, unquote(v)})
			}
			if ok {
				for _, p := range pairs {
					seenEnv[p.key] = true
				}
				t.envs = append(t.envs, pairs...)
				continue
			}
			run = append(run, runPart{text, false, true})
		case cHarmless:
			rw := c.rewriteVars(text, s.line)
			if m := masterRE.FindStringSubmatch(rw); m != nil {
				c.masterAddr = strings.Trim(m[1], `"`)
			}
			if prelude && strings.HasPrefix(strings.TrimSpace(text), "export ") && strings.Contains(text, "=") && !strings.Contains(text, "SLURM") && !strings.Contains(text, "scontrol") {
				setup = append(setup, rw)
			}
			run = append(run, runPart{rw, false, !s.heredoc})
		case cSrun:
			prelude = false
			run = append(run, runPart{c.translateSrun(text, s.line), false, false})
		case cWork:
			prelude = false
			if c.numNodes > 1 {
				gatedWork = append(gatedWork, s.line)
			}
			run = append(run, runPart{c.rewriteVars(text, s.line), c.numNodes > 1, !s.heredoc})
		}
	}
	if len(gatedWork) > 0 {
		what := "line " + joinInts(gatedWork)
		if len(gatedWork) > 1 {
			what = "lines " + joinInts(gatedWork)
		}
		c.note(gatedWork[0], "commands outside srun ran once, on the first node of the allocation; SkyPilot runs `run` on every node, so they are guarded to run on rank 0 only (%s)", what)
	}

	// Assemble run: consecutive guarded parts share one guard.
	var rb []string
	for i := 0; i < len(run); {
		if !run[i].gate {
			rb = append(rb, run[i].text)
			i++
			continue
		}
		rb = append(rb, rank0)
		for ; i < len(run) && run[i].gate; i++ {
			if run[i].plain {
				rb = append(rb, indent(run[i].text, "  "))
			} else {
				rb = append(rb, run[i].text)
			}
		}
		rb = append(rb, "fi")
	}
	var pre []string
	if c.usesModule {
		// Batch scripts get `module` from the login profile (#!/bin/bash -l
		// or the site's sbatch setup); setup and run are plain bash.
		pre = append(pre, "type module >/dev/null 2>&1 || source /etc/profile")
	}
	if sp.chdir != "" {
		pre = append(pre, "cd "+shellQuote(sp.chdir))
		c.note(sp.lines["chdir"], "--chdir=%s became `cd %s` at the top of setup and run", sp.chdir, shellQuote(sp.chdir))
	}
	runPre := append([]string(nil), pre...)
	if a := sp.array; a != nil && !a.zeroBased() && c.usesArrayID {
		runPre = append(runPre, arrayIDLine(a))
	}
	runText := joinBlock(append(runPre, rb...))
	if strings.TrimSpace(stripComments(runText)) == "" {
		return fmt.Errorf("the script has no commands after its #SBATCH lines; nothing to run")
	}
	t.run = runText
	if len(setup) > 0 {
		t.setup = joinBlock(append(pre, setup...))
	}
	if sp.chdir == "" {
		c.note(0, "sbatch ran the script in the directory it was submitted from; SkyPilot runs setup and run in ~/sky_workdir, so add `workdir: .` (synced from where you launch) or use absolute paths on the shared filesystem")
	}
	if tpn := c.tasksPerNode(); tpn > 1 && !c.usedTasks {
		c.unmapped(firstLine(sp.lines, "ntasks", "ntasks-per-node"), "%d tasks per node: SkyPilot runs `run` once per node; start the processes per node yourself (e.g. torchrun --nproc_per_node)", tpn)
	}
	c.reportVars()
	return nil
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// joinBlock joins statements into one script text ending in a newline,
// with blank runs squeezed and whitespace-only lines emptied.
func joinBlock(parts []string) string {
	var out []string
	for _, p := range parts {
		for _, l := range strings.Split(p, "\n") {
			l = strings.TrimRight(l, " \t")
			if l == "" && (len(out) == 0 || out[len(out)-1] == "") {
				continue
			}
			out = append(out, l)
		}
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func indent(s, by string) string {
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		if l != "" {
			ls[i] = by + l
		}
	}
	return strings.Join(ls, "\n")
}

// convertBlock translates the srun lines of a compound command and the
// variables of the rest. work reports commands other than srun that are
// not safe to repeat on every node.
func (c *conv) convertBlock(s *stmt) (out string, hasSrun, work bool) {
	var res []string
	var logical []string
	start := s.line
	heredoc := ""
	for i, l := range s.lines {
		if heredoc != "" {
			res = append(res, c.rewriteVars(l, s.line+i))
			if strings.TrimLeft(l, "\t") == heredoc {
				heredoc = ""
			}
			continue
		}
		if len(logical) == 0 {
			start = s.line + i
		}
		logical = append(logical, l)
		if strings.HasSuffix(l, `\`) {
			continue
		}
		text := strings.Join(logical, "\n")
		logical = nil
		if m := heredocRE.FindStringSubmatch(text); m != nil && !strings.Contains(text, "<<<") {
			heredoc = m[2]
		}
		body := stripKeyword(text)
		switch cl := c.classify(body); {
		case cl == cSrun:
			hasSrun = true
			// Whatever keyword or case pattern came first stays in front,
			// and a case arm's ";;" after.
			prefix, suffix := text[:len(text)-len(body)], ""
			if b := strings.TrimRight(body, " \t"); strings.HasSuffix(b, ";;") {
				body, suffix = strings.TrimRight(strings.TrimSuffix(b, ";;"), " \t"), " ;;"
			}
			res = append(res, prefix+c.translateSrun(body, start)+suffix)
			continue
		case cl == cWork, cl == cInstall:
			work = true
		}
		res = append(res, c.rewriteVars(text, start))
	}
	if len(logical) > 0 {
		res = append(res, c.rewriteVars(strings.Join(logical, "\n"), start))
	}
	return strings.Join(res, "\n"), hasSrun, work
}

var keywordRE = regexp.MustCompile(`^\s*(if|elif|while|until|then|do|else|for\s.*;\s*do|fi|done|esac|\{|\}|case\s.*\sin|;;|[^\s()]+\)|function\s+\S+|[A-Za-z_][A-Za-z0-9_]*\(\))(\s|;|$)`)

// stripKeyword drops the keyword a line of a compound command starts
// with, so the command after it can be classified; a line of only
// keywords classifies as blank.
func stripKeyword(text string) string {
	t := text
	for {
		m := keywordRE.FindStringSubmatchIndex(t)
		if m == nil {
			return t
		}
		t = t[m[3]:]
		t = strings.TrimLeft(t, " ;")
	}
}

// Variables.

// varMap are the SLURM_* variables with a SkyPilot equivalent (migration guide §4).
var varMap = map[string]string{
	"SLURM_JOB_NODELIST":     "SKYPILOT_NODE_IPS",
	"SLURM_NODELIST":         "SKYPILOT_NODE_IPS",
	"SLURM_NNODES":           "SKYPILOT_NUM_NODES",
	"SLURM_JOB_NUM_NODES":    "SKYPILOT_NUM_NODES",
	"SLURM_NODEID":           "SKYPILOT_NODE_RANK",
	"SLURM_PROCID":           "SKYPILOT_NODE_RANK",
	"SLURM_GPUS_PER_NODE":    "SKYPILOT_NUM_GPUS_PER_NODE",
	"SLURM_GPUS_ON_NODE":     "SKYPILOT_NUM_GPUS_PER_NODE",
	"SLURM_JOB_ID":           "SKYPILOT_TASK_ID",
	"SLURM_JOBID":            "SKYPILOT_TASK_ID",
	"SLURM_ARRAY_TASK_COUNT": "SKYPILOT_NUM_JOBS",
}

var (
	scontrolRE = regexp.MustCompile(`scontrol\s+show\s+hostnames?(?:\s+"?\$\{?SLURM_(?:JOB_)?NODELIST\}?"?|(\s*)([|)>;&` + "`" + `]|$))`)
	ipLookupRE = regexp.MustCompile(`\$\(\s*srun\b[^)]*?(?:-w\s*|--nodelist[= ])"?\$\{?(\w+)\}?"?[^)]*\bhostname\s+(?:--ip-address|-i|-I)[^)]*\)`)
	headRE     = regexp.MustCompile(`echo "\$SKYPILOT_NODE_IPS"\s*\|\s*head\s+(?:-n\s*1|-1)\b`)
	mpirunRE   = regexp.MustCompile(`(^|[\s;|&(])(mpirun|mpiexec)\s`)
	arithRE    = regexp.MustCompile(`\$\(\([^)]*\)\)`)
	bareVarRE  = regexp.MustCompile(`\bSLURMD?_[A-Za-z0-9_]*\b`)
	slurmVarRE = regexp.MustCompile(`\$\{(SLURMD?_[A-Za-z0-9_]*)([^}]*)\}|\$(SLURMD?_[A-Za-z0-9_]*)`)
	slurmCmdRE = regexp.MustCompile(`(^|[\s;|&(` + "`" + `])(scontrol|squeue|sacct|sinfo|scancel|sbatch|sstat|salloc|srun)\s`)
)

// rewriteVars replaces the SLURM_* variables and hostname lookups of a
// piece of bash with SkyPilot's.
func (c *conv) rewriteVars(text string, line int) string {
	if c.varLines == nil {
		c.varLines = map[string]int{}
	}
	out := scontrolRE.ReplaceAllStringFunc(text, func(m string) string {
		sub := scontrolRE.FindStringSubmatch(m)
		c.noteOnce("scontrol", line, "`scontrol show hostnames $SLURM_JOB_NODELIST` became `echo \"$SKYPILOT_NODE_IPS\"` (IP addresses, one per line; the first is the head node)")
		return `echo "$SKYPILOT_NODE_IPS"` + sub[1] + sub[2]
	})
	out = ipLookupRE.ReplaceAllStringFunc(out, func(m string) string {
		v := ipLookupRE.FindStringSubmatch(m)[1]
		c.noteOnce("iplookup", line, "`$(srun -w $%s hostname --ip-address)` became `${%s}`: SkyPilot's node list is already IP addresses", v, v)
		return "${" + v + "}"
	})
	out = headRE.ReplaceAllLiteralString(out, `echo "$SKYPILOT_NODE_IPS" | head -n1`)
	// Inside $(( )) variables are named without "$".
	out = arithRE.ReplaceAllStringFunc(out, func(m string) string {
		return bareVarRE.ReplaceAllStringFunc(m, func(name string) string {
			repl, ok := c.mapVar(name, line)
			switch {
			case !ok:
				if _, seen := c.varLines[name]; !seen {
					c.varLines[name] = line
				}
				return name
			case strings.HasPrefix(repl, "="):
				return repl[1:]
			case strings.HasPrefix(repl, "$("):
				return repl
			}
			return repl
		})
	})
	out = slurmVarRE.ReplaceAllStringFunc(out, func(m string) string {
		sub := slurmVarRE.FindStringSubmatch(m)
		name, suffix, braced := sub[3], "", false
		if sub[1] != "" {
			name, suffix, braced = sub[1], sub[2], true
		}
		repl, ok := c.mapVar(name, line)
		if !ok {
			if _, seen := c.varLines[name]; !seen {
				c.varLines[name] = line
			}
			return m
		}
		if strings.HasPrefix(repl, "$(") {
			return repl
		}
		if lit, ok := strings.CutPrefix(repl, "="); ok {
			return lit // a constant of this conversion, e.g. the array's first index
		}
		if braced {
			return "${" + repl + suffix + "}"
		}
		return "$" + repl
	})
	if mpirunRE.MatchString(out) {
		c.unmappedOnce("mpirun", line, "mpirun/mpiexec inside a Slurm allocation start their ranks with srun, which must share the allocation with SkyPilot's own step: add `export SLURM_OVERLAP=1` before it (Slurm-only), or use the rank variables (migration guide §5.2)")
	}
	for _, m := range slurmCmdRE.FindAllStringSubmatch(out, -1) {
		if m[2] == "srun" {
			c.unmapped(line, "srun inside a command (not at the start of a line) is not translated; it still runs on Slurm only with `--overlap` (migration guide §5.3)")
			continue
		}
		c.unmappedOnce("cmd-"+m[2], line, "`%s` talks to Slurm directly; kept, so the task runs only on Slurm", m[2])
	}
	return out
}

// rewriteUnquoted is rewriteVars outside single quotes.
func (c *conv) rewriteUnquoted(text string, line int) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(text, '\'')
		if i < 0 {
			b.WriteString(c.rewriteVars(text, line))
			return b.String()
		}
		b.WriteString(c.rewriteVars(text[:i], line))
		j := strings.IndexByte(text[i+1:], '\'')
		if j < 0 {
			b.WriteString(text[i:])
			return b.String()
		}
		b.WriteString(text[i : i+j+2])
		text = text[i+j+2:]
	}
}

func (c *conv) noteOnce(key string, line int, format string, args ...any) {
	if c.once == nil {
		c.once = map[string]bool{}
	}
	if !c.once[key] {
		c.once[key] = true
		c.note(line, format, args...)
	}
}

func (c *conv) unmappedOnce(key string, line int, format string, args ...any) {
	if c.once == nil {
		c.once = map[string]bool{}
	}
	if !c.once[key] {
		c.once[key] = true
		c.unmapped(line, format, args...)
	}
}

// mapVar returns the SkyPilot variable (or a $(...) expression) for a
// Slurm one.
func (c *conv) mapVar(name string, line int) (string, bool) {
	a := c.spec.array
	switch name {
	case "SLURM_ARRAY_TASK_ID":
		c.usesArrayID = true
		if a == nil {
			c.noteOnce(name, line, "$SLURM_ARRAY_TASK_ID became $SKYPILOT_JOB_RANK, which is set when the task is launched with --num-jobs (migration guide §7.1)")
			return "SKYPILOT_JOB_RANK", true
		}
		if a.zeroBased() {
			return "SKYPILOT_JOB_RANK", true
		}
		return "ARRAY_TASK_ID", true
	case "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP":
		if a == nil {
			return "", false
		}
		lo, hi := a.indices[0], a.indices[0]
		for _, i := range a.indices {
			lo, hi = min(lo, i), max(hi, i)
		}
		switch {
		case name == "SLURM_ARRAY_TASK_MIN":
			return "=" + strconv.Itoa(lo), true
		case name == "SLURM_ARRAY_TASK_MAX":
			return "=" + strconv.Itoa(hi), true
		case a.ranged:
			return "=" + strconv.Itoa(a.step), true
		}
		return "", false
	case "SLURM_CPUS_PER_TASK", "SLURM_CPUS_ON_NODE", "SLURM_JOB_CPUS_PER_NODE":
		c.noteOnce(name, line, "$%s became $(nproc), the CPUs this node's job step may use (SkyPilot has no CPU-count variable)", name)
		return "$(nproc)", true
	case "SLURM_JOB_NAME":
		// cleanName makes the name safe to paste into shell words.
		c.noteOnce(name, line, "$SLURM_JOB_NAME became the task name, %s", c.name)
		return "=" + c.name, true
	case "SLURM_SUBMIT_DIR":
		c.noteOnce(name, line, "$SLURM_SUBMIT_DIR became $HOME/sky_workdir, where `workdir: .` syncs the directory you launch from")
		return "=$HOME/sky_workdir", true
	case "SLURM_JOB_NODELIST", "SLURM_NODELIST":
		c.noteOnce(name, line, "$%s became $SKYPILOT_NODE_IPS: IP addresses one per line, not a Slurm hostlist expression", name)
	}
	v, ok := varMap[name]
	return v, ok
}

// reportVars lists the SLURM_* variables left as they were.
func (c *conv) reportVars() {
	names := make([]string, 0, len(c.varLines))
	for n := range c.varLines {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c.unmapped(c.varLines[n], "$%s has no SkyPilot equivalent; kept as is (on Slurm, job-scoped SLURM_* variables are still set inside run; step-scoped ones such as SLURM_LOCALID or SLURM_STEP_* are not)", n)
	}
}

func arrayIDLine(a *arraySpec) string {
	if a.ranged {
		if a.step == 1 {
			return fmt.Sprintf("ARRAY_TASK_ID=$((%d + SKYPILOT_JOB_RANK))", a.start)
		}
		return fmt.Sprintf("ARRAY_TASK_ID=$((%d + %d * SKYPILOT_JOB_RANK))", a.start, a.step)
	}
	ids := make([]string, len(a.indices))
	for i, n := range a.indices {
		ids[i] = strconv.Itoa(n)
	}
	return "ARRAY_IDS=(" + strings.Join(ids, " ") + ")\nARRAY_TASK_ID=${ARRAY_IDS[$SKYPILOT_JOB_RANK]}"
}

// srun.

// srunFlags are srun options that take no value.
var srunFlags = map[string]bool{
	"overlap": true, "exclusive": true, "unbuffered": true, "label": true, "quiet": true,
	"verbose": true, "kill-on-bad-exit": true, "pty": true, "no-kill": true, "overcommit": true,
	"exact": true, "whole": true, "multi-prog": true, "disable-status": true, "test-only": true,
	"immediate": true, "preserve-env": true, "spread-job": true, "use-min-nodes": true,
	"contiguous": true, "oversubscribe": true, "x11": true, "help": true, "usage": true,
	"no-allocate": true, "send-libs": true,
}

// srunShortFlags are srun's one-letter options without a value.
var srunShortFlags = "luQvKkOXIEHsZ"

var srunShortLong = map[byte]string{'N': "nodes", 'n': "ntasks", 'c': "cpus-per-task", 'w': "nodelist", 'G': "gpus"}

var mpiProgRE = regexp.MustCompile(`(?i)mpi|_perf$|^osu_|^xhpl$|^hpl$|^lmp|^gmx|^IMB-|^pw\.x$|^vasp|^cp2k|^nwchem`)

// srunCall is a parsed `srun [options] program args...` line.
type srunCall struct {
	text     string
	indent   string
	prefix   string // assignments and wrappers (time, exec) before srun
	opts     []token
	named    map[string]string
	prog     int // index of the program word in toks
	toks     []token
	progText string // program, its arguments and anything after
	argsEnd  int    // index of the first operator or redirection after the program
}

func parseSrun(text string) *srunCall {
	toks := splitWords(text)
	i := 0
	for i < len(toks) && (isAssignment(toks[i].text) || toks[i].text == "time" || toks[i].text == "exec" || toks[i].text == "nohup" || toks[i].text == "command") {
		i++
	}
	if i >= len(toks) || toks[i].value() != "srun" {
		return nil
	}
	ind := text[:len(text)-len(strings.TrimLeft(text, " \t"))]
	s := &srunCall{text: text, indent: ind, prefix: text[len(ind):toks[i].start], named: map[string]string{}, toks: toks}
	j := i + 1
	for j < len(toks) {
		w := toks[j].value()
		if w == "--" {
			j++
			break
		}
		if !strings.HasPrefix(w, "-") || len(w) < 2 || operators[w] {
			break
		}
		s.opts = append(s.opts, toks[j])
		if strings.HasPrefix(w, "--") {
			name, val, has := strings.Cut(w[2:], "=")
			if !has && !srunFlags[name] && j+1 < len(toks) {
				j++
				s.opts = append(s.opts, toks[j])
				val = toks[j].value()
			}
			s.named[name] = val
		} else {
			letter := w[1]
			val := w[2:]
			if !strings.ContainsRune(srunShortFlags, rune(letter)) && val == "" && j+1 < len(toks) {
				j++
				s.opts = append(s.opts, toks[j])
				val = toks[j].value()
			}
			if long, ok := srunShortLong[letter]; ok {
				s.named[long] = strings.TrimPrefix(val, "=")
			} else {
				s.named[string(letter)] = val
			}
		}
		j++
	}
	s.prog = j
	s.argsEnd = len(toks)
	for k := j; k < len(toks); k++ {
		if operators[toks[k].text] || isRedirect(toks[k].text) {
			s.argsEnd = k
			break
		}
	}
	if j < len(toks) {
		s.progText = text[toks[j].start:]
	}
	return s
}

func (s *srunCall) optsText() string {
	w := make([]string, len(s.opts))
	for i, t := range s.opts {
		w[i] = t.text
	}
	return strings.Join(w, " ")
}

// rest is the text from token k to the end of the line.
func (s *srunCall) rest(k int) string {
	if k >= len(s.toks) {
		return ""
	}
	return s.text[s.toks[k].start:]
}

// translateSrun applies the seed's three srun cases (§5).
func (c *conv) translateSrun(text string, line int) string {
	s := parseSrun(text)
	if s == nil || s.prog >= len(s.toks) || operators[s.toks[s.prog].text] {
		c.unmapped(line, "srun without a program is not translated")
		return text
	}
	if _, ok := s.named["pty"]; ok {
		c.unmapped(line, "`srun --pty` is an interactive session: use `sky launch` and `ssh CLUSTER` instead (migration guide §1.1); kept as is")
		return text
	}
	prog := path.Base(s.toks[s.prog].value())
	if n := len(s.toks); c.numNodes > 1 && s.toks[n-1].text == "&" && !c.hasWait {
		c.unmappedOnce("background", line, "srun step started in the background: in Slurm it lasted until the job ended; in SkyPilot a node's run ends when its own script does, so add `wait` on the nodes that must keep it running")
	}
	if l := c.launcher(s); l != nil {
		return c.emitLauncher(s, l, line)
	}
	stepNodes := c.numNodes
	if v, ok := s.named["nodes"]; ok {
		if n, err := strconv.Atoi(strings.SplitN(v, "-", 2)[0]); err == nil {
			stepNodes = n
		}
	}
	stepTasks := 0 // per node; 0 = one
	_, hasNTPN := s.named["ntasks-per-node"]
	ntasks, hasN := s.named["ntasks"]
	switch {
	case hasNTPN:
		stepTasks, _ = strconv.Atoi(s.named["ntasks-per-node"])
	case hasN:
		if n, err := strconv.Atoi(ntasks); err == nil {
			if _, nodesSet := s.named["nodes"]; !nodesSet && n < c.numNodes {
				stepNodes = n
			}
			stepTasks = (n + stepNodes - 1) / max(stepNodes, 1)
		} else {
			stepTasks = 2 // a variable: assume several
		}
	default:
		if _, nodesSet := s.named["nodes"]; !nodesSet {
			stepTasks = c.tasksPerNode()
		}
	}
	_, hasMPI := s.named["mpi"]
	if hasMPI || mpiProgRE.MatchString(prog) || stepTasks > 1 {
		return c.emitMPI(s, line, hasNTPN || hasN)
	}
	body := s.prefix + c.rewriteVars(s.progText, line)
	list, hasList := s.named["nodelist"]
	if hasList && nodeVarRE.MatchString(list) {
		// A node picked from the node list, which now holds IP addresses:
		// run where this node's own address is that one.
		c.note(line, "`srun -w %s` became a guard on this node's address ($SKYPILOT_NODE_IPS line $SKYPILOT_NODE_RANK+1)", list)
		return fmt.Sprintf("%sif [ \"%s\" == \"%s\" ]; then\n%s  %s\n%sfi", s.indent, list, myIP, s.indent, body, s.indent)
	}
	switch {
	case hasList:
		c.unmapped(line, "srun --nodelist=%s picks Slurm nodes by name; SkyPilot has no node names, so it runs on rank 0", s.named["nodelist"])
		fallthrough
	case stepNodes < c.numNodes && stepNodes <= 1:
		c.note(line, "`srun` on one node became a rank-0 guard (run runs on every node)")
		return s.indent + rank0 + "\n" + s.indent + "  " + body + "\n" + s.indent + "fi"
	case stepNodes < c.numNodes:
		c.note(line, "`srun` on %d of %d nodes became a guard on the node rank", stepNodes, c.numNodes)
		return fmt.Sprintf("%sif [ \"$SKYPILOT_NODE_RANK\" -lt %d ]; then\n%s  %s\n%sfi", s.indent, stepNodes, s.indent, body, s.indent)
	}
	msg := "`srun` dropped: run already runs on every node (migration guide §5.1)"
	if len(s.opts) > 0 {
		msg += "; its options " + s.optsText() + " dropped with it"
	}
	c.note(line, "%s", msg)
	return s.indent + body
}

// launcherKind describes a distributed launcher's flags.
type launcherKind struct {
	name     string
	end      int             // index in toks after the launcher words
	flagless map[string]bool // its flags that take no value
	replaced map[string]bool // flags SkyPilot's rank variables replace
	portKeys []string
	nprocKey []string
}

func (c *conv) launcher(s *srunCall) *launcherKind {
	word := func(k int) string {
		if k < s.argsEnd {
			return s.toks[k].value()
		}
		return ""
	}
	p := s.prog
	base := path.Base(word(p))
	torch := func(end int) *launcherKind {
		return &launcherKind{name: "torchrun", end: end,
			flagless: set("standalone", "no_python", "no-python", "run_path", "run-path", "module", "m", "use_env", "use-env"),
			replaced: set("nnodes", "nproc_per_node", "nproc-per-node", "node_rank", "node-rank", "master_addr", "master-addr",
				"master_port", "master-port", "rdzv_backend", "rdzv-backend", "rdzv_endpoint", "rdzv-endpoint", "rdzv_id", "rdzv-id", "standalone"),
			portKeys: []string{"master_port", "master-port"}, nprocKey: []string{"nproc_per_node", "nproc-per-node"}}
	}
	switch {
	case base == "torchrun":
		return torch(p + 1)
	case pythonRE.MatchString(base) && word(p+1) == "-m" && (word(p+2) == "torch.distributed.run" || word(p+2) == "torch.distributed.launch"):
		return torch(p + 3)
	case base == "deepspeed":
		return &launcherKind{name: "deepspeed", end: p + 1,
			flagless: set("no_ssh", "force_multi", "no_local_rank", "no_python", "module", "elastic_training", "bind_cores_to_rank", "save_pid", "no_ssh_check", "autotuning"),
			replaced: set("num_nodes", "num_gpus", "node_rank", "master_addr", "master_port", "hostfile", "no_ssh", "launcher", "force_multi", "H"),
			portKeys: []string{"master_port"}, nprocKey: []string{"num_gpus"}}
	case base == "accelerate" && word(p+1) == "launch":
		return &launcherKind{name: "accelerate", end: p + 2,
			flagless: set("multi_gpu", "use_deepspeed", "use_fsdp", "use_cpu", "cpu", "same_network", "debug", "quiet", "q", "module", "m", "no_python", "use_megatron_lm", "use_xpu", "tpu"),
			replaced: set("num_machines", "num_processes", "machine_rank", "main_process_ip", "main_process_port", "rdzv_backend"),
			portKeys: []string{"main_process_port"}, nprocKey: nil}
	}
	return nil
}

func set(ws ...string) map[string]bool {
	m := map[string]bool{}
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// emitLauncher writes the rank-variables form of migration guide §5.2.
func (c *conv) emitLauncher(s *srunCall, l *launcherKind, line int) string {
	var kept, dropped []string
	vals := map[string]string{}
	k := l.end
	for k < s.argsEnd {
		w := s.toks[k].value()
		if !strings.HasPrefix(w, "-") || w == "-" {
			break
		}
		if w == "--" {
			break
		}
		name, val, has := strings.Cut(strings.TrimLeft(w, "-"), "=")
		raw := []string{s.toks[k].text}
		if !has && !l.flagless[name] && k+1 < s.argsEnd {
			k++
			val = s.toks[k].value()
			raw = append(raw, s.toks[k].text)
		}
		vals[name] = val
		if l.replaced[name] {
			dropped = append(dropped, strings.Join(raw, " "))
		} else {
			kept = append(kept, c.rewriteVars(strings.Join(raw, " "), line))
		}
		k++
	}
	port := "8008"
	for _, pk := range l.portKeys {
		if v := vals[pk]; v != "" {
			port = c.rewriteVars(v, line)
		}
	}
	nproc := "1"
	if c.gpus > 0 {
		nproc = "$SKYPILOT_NUM_GPUS_PER_NODE"
	} else {
		for _, nk := range l.nprocKey {
			if v := vals[nk]; v != "" {
				nproc = c.rewriteVars(v, line)
			}
		}
		if l.name == "accelerate" {
			if n, err := strconv.Atoi(vals["num_processes"]); err == nil && n > 0 {
				m, _ := strconv.Atoi(vals["num_machines"])
				nproc = strconv.Itoa(n / max(m, 1))
			}
		}
	}
	var flags []string
	switch l.name {
	case "torchrun":
		flags = []string{"--nnodes=$SKYPILOT_NUM_NODES", "--nproc_per_node=" + nproc, "--node_rank=$SKYPILOT_NODE_RANK",
			"--master_addr=$MASTER_ADDR", "--master_port=" + port}
	case "deepspeed":
		flags = []string{"--num_nodes=$SKYPILOT_NUM_NODES", "--num_gpus=" + nproc, "--node_rank=$SKYPILOT_NODE_RANK",
			"--master_addr=$MASTER_ADDR", "--master_port=" + port, "--no_ssh"}
		c.note(line, "deepspeed runs on every node with --no_ssh (DeepSpeed 0.14 or later) instead of reaching the workers over SSH")
	case "accelerate":
		total := "$((SKYPILOT_NUM_NODES * " + strings.TrimPrefix(nproc, "$") + "))"
		flags = []string{"--num_machines=$SKYPILOT_NUM_NODES", "--num_processes=" + total, "--machine_rank=$SKYPILOT_NODE_RANK",
			"--main_process_ip=$MASTER_ADDR", "--main_process_port=" + port}
	}
	launcherWords := s.text[s.toks[s.prog].start:s.toks[l.end-1].end]
	msg := fmt.Sprintf("`srun %s` became the rank-variables form (migration guide §5.2): one %s per node", launcherWords, l.name)
	if len(dropped) > 0 {
		msg += "; replaced " + strings.Join(dropped, " ")
	}
	if len(s.opts) > 0 {
		msg += "; srun options " + s.optsText() + " dropped"
	}
	c.note(line, "%s", msg)
	in := s.indent
	var b strings.Builder
	if c.masterAddr != headIPs {
		b.WriteString(in + "MASTER_ADDR=" + headIPs + "\n")
		c.masterAddr = headIPs
	}
	b.WriteString(in + s.prefix + launcherWords + " \\\n")
	for _, f := range append(flags, kept...) {
		b.WriteString(in + "  " + f + " \\\n")
	}
	// The script's arguments go on one line: their continuations joined,
	// quoted text left alone.
	tail := strings.TrimSpace(continuationRE.ReplaceAllString(c.rewriteVars(s.rest(k), line), " "))
	b.WriteString(in + "  " + tail)
	return b.String()
}

// emitMPI keeps an srun that needs Slurm's PMI (migration guide §5.3): on rank 0
// only, with --overlap, and with the task shape the #SBATCH lines gave it.
func (c *conv) emitMPI(s *srunCall, line int, hasTasks bool) string {
	c.slurmOnly = true
	sp := c.spec
	var added []string
	if !hasTasks {
		switch {
		case sp.ntasksPerNode > 0 && sp.ntasksPerNode == c.gpus:
			// One rank per GPU, the seed's form: stays right if the
			// accelerator count is changed in the YAML.
			added = append(added, "--ntasks-per-node=$SKYPILOT_NUM_GPUS_PER_NODE")
		case sp.ntasksPerNode > 0:
			added = append(added, "--ntasks-per-node="+strconv.Itoa(sp.ntasksPerNode))
		case sp.ntasks > 0:
			added = append(added, "--ntasks="+strconv.Itoa(sp.ntasks))
		}
	}
	if _, ok := s.named["cpus-per-task"]; !ok && sp.cpusPerTask > 0 && c.tasksPerNode() > 1 {
		added = append(added, "--cpus-per-task="+strconv.Itoa(sp.cpusPerTask))
	}
	if len(added) > 0 {
		c.usedTasks = true
	}
	// The outer shell expands these words, so SLURM_* variables there are
	// rewritten; single-quoted ones are expanded by each task of the step,
	// where Slurm sets them, and are kept.
	opts := c.rewriteUnquoted(s.optsText(), line)
	if _, ok := s.named["overlap"]; !ok {
		opts = strings.TrimSpace("--overlap " + opts)
	}
	in := s.indent
	var b strings.Builder
	b.WriteString(in + rank0 + "\n")
	b.WriteString(in + "  " + s.prefix + "srun " + opts + " \\\n")
	for _, a := range added {
		b.WriteString(in + "    " + a + " \\\n")
	}
	b.WriteString(in + "    " + c.rewriteUnquoted(strings.TrimLeft(s.progText, " \t"), line) + "\n")
	b.WriteString(in + "fi")
	c.unmapped(line, "srun kept for Slurm's own launcher (migration guide §5.3), with --overlap and on rank 0 only: this task runs only on Slurm, not on Kubernetes or a cloud")
	return b.String()
}

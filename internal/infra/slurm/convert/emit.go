package convert

import (
	"regexp"
	"strconv"
	"strings"
)

// emitTask writes one task in SkyPilot's field order (name, num_nodes,
// resources, envs, config, setup, run), a blank line between sections as
// the guide writes them, setup and run as literal block scalars.
func emitTask(t *task) string {
	var sections []string
	sections = append(sections, "name: "+yamlScalar(t.name)+"\n")
	if t.numNodes > 1 {
		sections = append(sections, "num_nodes: "+strconv.Itoa(t.numNodes)+"\n")
	}
	if len(t.resources) > 0 {
		sections = append(sections, "resources:\n"+mapping(t.resources, "  "))
	}
	if len(t.envs) > 0 {
		sections = append(sections, "envs:\n"+mapping(t.envs, "  "))
	}
	if len(t.sbatch) > 0 {
		sections = append(sections, "config:\n  slurm:\n    sbatch_options:\n"+mapping(t.sbatch, "      "))
	}
	if t.setup != "" {
		sections = append(sections, "setup: "+blockScalar(t.setup))
	}
	if t.run != "" {
		sections = append(sections, "run: "+blockScalar(t.run))
	}
	return strings.Join(sections, "\n")
}

func mapping(kvs []kv, indent string) string {
	var b strings.Builder
	for _, e := range kvs {
		b.WriteString(indent + yamlKey(e.key) + ": ")
		switch v := e.value.(type) {
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case string:
			b.WriteString(yamlScalar(v))
		}
		b.WriteString("\n")
	}
	return b.String()
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)

func yamlKey(k string) string {
	if plainKey.MatchString(k) && !yamlSpecial(k) {
		return k
	}
	return strconv.Quote(k)
}

var (
	plainScalar = regexp.MustCompile(`^[A-Za-z0-9_./@$~-][A-Za-z0-9_./@$~+=,:-]*$`)
	numberish   = regexp.MustCompile(`^[-+.]?[0-9][0-9_:.-]*([eE][-+]?[0-9]+)?$|^0[xXoObB]`)
)

// yamlSpecial reports words YAML would read as something other than a
// string.
func yamlSpecial(s string) bool {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "null", "~", "y", "n", ".inf", ".nan":
		return true
	}
	return false
}

// yamlScalar writes a string value plain when YAML reads it back as the
// same string, else double-quoted.
func yamlScalar(s string) string {
	if plainScalar.MatchString(s) && !yamlSpecial(s) && !numberish.MatchString(s) &&
		!strings.HasSuffix(s, ":") && !strings.HasPrefix(s, "-") && !strings.HasPrefix(s, "~") {
		return s
	}
	return strconv.Quote(s)
}

// blockScalar writes text as a literal block ("|"), indented two spaces.
// An indentation indicator is added when the first line starts with a
// space, which YAML would otherwise take as the block's indentation.
func blockScalar(text string) string {
	text = strings.TrimRight(text, "\n") + "\n"
	header := "|"
	if strings.HasPrefix(text, " ") || strings.HasPrefix(text, "\t") {
		header = "|2"
	}
	var b strings.Builder
	b.WriteString(header + "\n")
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if strings.TrimSpace(l) == "" {
			b.WriteString("\n")
			continue
		}
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

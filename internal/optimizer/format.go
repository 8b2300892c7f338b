package optimizer

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/skygo/skygo/internal/infrakind"
)

// DisplayName is infra's name as printed ("aws" -> "AWS").
func DisplayName(infra string) string {
	if k, ok := infrakind.Lookup(infra); ok && k.Display != "" {
		return k.Display
	}
	return infra
}

// noInstanceType reports whether infra's candidates print "-" as the
// instance: kinds sized to the request have no instance types.
func noInstanceType(infra string) bool {
	k, ok := infrakind.Lookup(infra)
	return ok && k.Sized
}

// InfraLabel is the INFRA column: "AWS (us-east-1)", "GCP (us-central1-a)"
// (the zone when the candidate is pinned to one), "SSH (pool)".
func InfraLabel(c *Candidate) string {
	loc := c.Region
	if c.Zone != "" {
		loc = c.Zone
	}
	if k, ok := infrakind.Lookup(c.Cloud); ok && k.RegionPrefix != "" {
		loc = strings.TrimPrefix(loc, k.RegionPrefix)
	}
	if loc == "" {
		return DisplayName(c.Cloud)
	}
	return DisplayName(c.Cloud) + " (" + loc + ")"
}

// FormatOptions controls terminal styling of the dry-run report.
type FormatOptions struct {
	Verbose bool // every candidate instead of the best per group
	Color   bool // bold + green check mark on the chosen row (TTY only)
}

// WriteDryRun prints the optimizer report that `sky launch --dryrun` (and
// every launch, before provisioning) shows.
func WriteDryRun(w io.Writer, p *Plan, opts FormatOptions) error {
	ew := &errWriter{w: w}
	multi := len(p.Tasks) > 1
	if multi {
		writeBestPlan(ew, p)
	}
	for _, tp := range p.Tasks {
		rows := tableRows(&tp, opts.Verbose)
		nodes := plural(tp.Task.NumNodes, "node")
		if tp.Task.Ordered {
			writeOrdered(ew, tp.Task)
		}
		if !multi && len(rows) > 1 {
			ew.printf("Target: minimizing %s\n", targetName(p.Target))
			ew.printf("Estimated cost: $%.1f / hour\n\n", tp.Chosen.Cost())
		}
		if multi {
			ew.printf("Considered resources for task '%s' (%s):\n", tp.Task.Name, nodes)
		} else {
			ew.printf("Considered resources (%s):\n", nodes)
		}
		costHeader := "COST ($)"
		if p.Target == Time {
			costHeader = "TIME (hr)"
		}
		t := table{header: []string{"INFRA", "INSTANCE", "vCPUs", "Mem(GB)", "GPUS", costHeader, "CHOSEN"}}
		for _, c := range rows {
			chosen := c.same(&tp.Chosen)
			val := fmt.Sprintf("%.2f", c.Cost())
			if p.Target == Time {
				val = "1.00" // no time estimator: the default one-hour estimate
			}
			mark := ""
			if chosen {
				mark = "✔"
			}
			t.add(chosen && opts.Color, InfraLabel(&c), instanceLabel(&c), numOrDash(c.VCPUs), numOrDash(c.MemoryGiB), gpusLabel(&c), val, mark)
		}
		t.writeFramed(ew, opts.Color)
		writeNotProvisionable(ew, rows)
		ew.printf("\n")
	}
	return ew.err
}

// writeOrdered is the banner of an ordered request, one readable item per
// option ("H100:8 on Lambda, p5.48xlarge on AWS (us-west-2)").
func writeOrdered(ew *errWriter, t Task) {
	var list []string
	for _, o := range t.Options {
		list = append(list, optionLabel(o))
	}
	ew.printf("Using user-specified accelerators list (will be tried in the listed order): %s\n", strings.Join(list, ", "))
}

// optionLabel is one resource option as the ordered banner shows it.
func optionLabel(r Request) string {
	r = normalize(r)
	var what []string
	if r.AccName != "" {
		n := r.AccCount
		if n == 0 {
			n = 1
		}
		what = append(what, r.AccName+":"+formatNum(n))
	}
	if r.InstanceType != "" {
		what = append(what, r.InstanceType)
	}
	if r.CPUs.IsSet() {
		what = append(what, "cpus="+boundString(r.CPUs))
	}
	if r.Memory.IsSet() {
		what = append(what, "memory="+boundString(r.Memory))
	}
	s := strings.Join(what, " ")
	if s == "" {
		s = "any resources"
	}
	if r.UseSpot {
		s += " [Spot]"
	}
	if r.Cloud != "" {
		loc := r.Region
		if r.Zone != "" {
			loc = strings.Trim(r.Region+"/"+r.Zone, "/")
		}
		s += " on " + InfraLabel(&Candidate{Cloud: r.Cloud, Region: loc})
	} else if p := r.place(); p != "" {
		s += " in " + p
	}
	return s
}

// writeNotProvisionable says, under the table, which of its infras this
// build can only price.
func writeNotProvisionable(ew *errWriter, rows []Candidate) {
	var seen []string
	for _, c := range rows {
		if c.NotProvisionable && !slices.Contains(seen, c.Cloud) {
			seen = append(seen, c.Cloud)
			ew.printf("%s: priced from the catalog; not provisionable in this build of SkyGo (a launch without --dryrun will not choose it).\n", DisplayName(c.Cloud))
		}
	}
}

// WriteNotEnabled prints, when nothing enabled fits a task, what the
// clouds that are not enabled offer for it: the cheapest row per cloud and
// accelerator, priced, each saying why it was not considered.
func WriteNotEnabled(w io.Writer, t Task, offers []Candidate) error {
	ew := &errWriter{w: w}
	if len(offers) == 0 {
		return nil
	}
	if t.Ordered {
		writeOrdered(ew, t)
	}
	ew.printf("Offers on infras that are not enabled (%s; not considered):\n", plural(max(t.NumNodes, 1), "node"))
	tp := TaskPlan{Task: t, Candidates: offers, Chosen: Candidate{Cloud: "\x00"}}
	tb := table{header: []string{"INFRA", "INSTANCE", "vCPUs", "Mem(GB)", "GPUS", "COST ($)", "WHY NOT"}}
	var priceOnly []string
	for _, c := range tableRows(&tp, false) {
		tb.add(false, InfraLabel(&c), instanceLabel(&c), numOrDash(c.VCPUs), numOrDash(c.MemoryGiB), gpusLabel(&c),
			fmt.Sprintf("%.2f", c.Cost()), "not enabled (sky check "+c.Cloud+")")
		if c.NotProvisionable && !slices.Contains(priceOnly, DisplayName(c.Cloud)) {
			priceOnly = append(priceOnly, DisplayName(c.Cloud))
		}
	}
	tb.writeFramed(ew, false)
	if len(priceOnly) > 0 {
		ew.printf("Not provisionable in this build of SkyGo (priced only): %s.\n", strings.Join(priceOnly, ", "))
	}
	ew.printf("\n")
	return ew.err
}

func writeBestPlan(ew *errWriter, p *Plan) {
	var total float64
	for _, tp := range p.Tasks {
		total += tp.Chosen.Cost()
	}
	ew.printf("Target: minimizing %s\n", targetName(p.Target))
	ew.printf("Estimated total runtime: %.1f hours\n", float64(len(p.Tasks)))
	ew.printf("Estimated total cost: $%.1f\n\n", total)
	ew.printf("Best plan:\n")
	t := table{header: []string{"TASK", "#NODES", "INFRA", "INSTANCE", "vCPUs", "Mem(GB)", "GPUS"}}
	for _, tp := range p.Tasks {
		c := tp.Chosen
		t.add(false, tp.Task.Name, fmt.Sprint(c.NumNodes), InfraLabel(&c), instanceLabel(&c), numOrDash(c.VCPUs), numOrDash(c.MemoryGiB), gpusLabel(&c))
	}
	t.writeFramed(ew, false)
	ew.printf("\n")
}

func targetName(t Target) string {
	if t == Time {
		return "time"
	}
	return "cost"
}

// tableRows picks the rows to print: all candidates when verbose, else the
// cheapest per (infra, accelerators, spot), and per region too on the
// kinds that report capacity, where regions are separate clusters. The chosen
// candidate is always its group's row. Order follows tp.Candidates (cost,
// or preference order for ordered requests).
func tableRows(tp *TaskPlan, verbose bool) []Candidate {
	if verbose {
		return tp.Candidates
	}
	key := func(c *Candidate) string {
		k := fmt.Sprintf("%s|%s:%g|%t", c.Cloud, c.AccName, c.AccCount, c.UseSpot)
		if noInstanceType(c.Cloud) {
			k += "|" + c.Region
		}
		return k
	}
	chosenKey := key(&tp.Chosen)
	seen := map[string]bool{chosenKey: true}
	var out []Candidate
	for _, c := range tp.Candidates {
		k := key(&c)
		if c.same(&tp.Chosen) {
			out = append(out, c)
			continue
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, c)
	}
	return out
}

func instanceLabel(c *Candidate) string {
	s := c.InstanceType
	if noInstanceType(c.Cloud) {
		s = ""
	}
	switch {
	case c.UseSpot:
		return s + "[Spot]"
	case s == "":
		return "-"
	}
	return s
}

func gpusLabel(c *Candidate) string {
	if c.AccName == "" {
		return "-"
	}
	return c.AccName + ":" + formatNum(c.AccCount)
}

// numOrDash prints whole numbers without decimals, others with one, and
// "-" for unknown.
func numOrDash(v float64) string {
	switch {
	case math.IsNaN(v) || v <= 0:
		return "-"
	case v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// table is a minimal left-aligned text table.
type table struct {
	header []string
	rows   [][]string
	bold   []bool
}

func (t *table) add(bold bool, cells ...string) {
	t.rows = append(t.rows, cells)
	t.bold = append(t.bold, bold)
}

func (t *table) widths() []int {
	w := make([]int, len(t.header))
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i, c := range r {
			w[i] = max(w[i], utf8.RuneCountInString(c))
		}
	}
	return w
}

func (t *table) line(cells []string, w []int) string {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(" ")
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", w[i]-utf8.RuneCountInString(c)+2))
		}
	}
	return strings.TrimRight(b.String(), " ")
}

// writeFramed prints the dry-run style: horizontal rules at the top, under
// the header and at the bottom, no vertical rules.
func (t *table) writeFramed(ew *errWriter, color bool) {
	w := t.widths()
	total := 0
	for _, x := range w {
		total += x + 3
	}
	rule := strings.Repeat("-", total)
	ew.printf("%s\n%s\n%s\n", rule, t.line(t.header, w), rule)
	for i, r := range t.rows {
		l := t.line(r, w)
		if t.bold[i] && color {
			l = "\x1b[1m" + strings.Replace(l, "✔", "\x1b[32m✔\x1b[39m", 1) + "\x1b[0m"
		}
		ew.printf("%s\n", l)
	}
	ew.printf("%s\n", rule)
}

// writePlain prints the `sky gpus list` style: no rules, two spaces
// between columns.
func (t *table) writePlain(ew *errWriter) {
	w := t.widths()
	for _, r := range append([][]string{t.header}, t.rows...) {
		var b strings.Builder
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", w[i]-utf8.RuneCountInString(c)+2))
			}
		}
		ew.printf("%s\n", strings.TrimRight(b.String(), " "))
	}
}

// errWriter keeps the first write error so formatting code stays linear.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, a ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, a...)
	}
}

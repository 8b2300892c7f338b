// Package optimizer picks where a task runs: it enumerates the launchable
// candidates (infra, region, zone, instance type, price) for each of a
// task's resource options across the enabled infras, drops blocked and
// unsupported ones, and chooses the cheapest (or, for ordered requests, the
// first option that has any candidate).
//
// Tie-breaks, so equal inputs always give the same plan: lower cost first;
// then the infra order of Input.Enabled (as given); then region, zone and
// instance type in byte order; then the option index of the request.
package optimizer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"github.com/skygo/skygo/internal/infrakind"
	"math"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/catalog"
)

// Target is what the optimizer minimises.
type Target int

const (
	// Cost minimises the estimated dollar cost (the default).
	Cost Target = iota
	// Time minimises the estimated runtime. Without a time estimator every
	// candidate takes the default hour, so ties fall back to cost.
	Time
)

// Request is one concrete resource option of a task: at most one
// accelerator, any_of/ordered and accelerator sets already flattened.
// Empty fields do not constrain.
type Request struct {
	Cloud, Region, Zone string // "*" is treated as empty
	InstanceType        string
	AccName             string
	AccCount            float64
	CPUs, Memory        catalog.Bound
	UseSpot             bool
	DiskTier            string   // low, medium, high, ultra, best or ""
	Ports               []string // ports to open; only whether any is asked matters here
	ImageID             string   // "" for the infra default; "docker:<img>" for a container
	MaxHourlyCost       float64  // per node, 0 = no limit
	DiskSize            int      // GB asked for explicitly; 0 = the infra's default
	LocalDisk           string   // local_disk as written ("nvme:100+"), "" = none
	NetworkTier         string   // standard, best or ""
}

// String describes the request for messages: "8x H100, spot, aws/us-east-1".
func (r Request) String() string {
	var parts []string
	if r.AccName != "" {
		parts = append(parts, formatNum(r.AccCount)+"x "+r.AccName)
	}
	if r.InstanceType != "" {
		parts = append(parts, r.InstanceType)
	}
	if r.CPUs.IsSet() {
		parts = append(parts, "cpus="+boundString(r.CPUs))
	}
	if r.Memory.IsSet() {
		parts = append(parts, "memory="+boundString(r.Memory))
	}
	if r.UseSpot {
		parts = append(parts, "spot")
	}
	if r.DiskTier != "" {
		parts = append(parts, "disk_tier="+r.DiskTier)
	}
	if len(r.Ports) > 0 {
		parts = append(parts, "ports="+strings.Join(r.Ports, ","))
	}
	if r.ImageID != "" {
		parts = append(parts, "image_id="+r.ImageID)
	}
	if r.DiskSize > 0 {
		parts = append(parts, fmt.Sprintf("disk_size=%d", r.DiskSize))
	}
	if r.LocalDisk != "" {
		parts = append(parts, "local_disk="+r.LocalDisk)
	}
	if r.NetworkTier == "best" {
		parts = append(parts, "network_tier=best")
	}
	if r.MaxHourlyCost > 0 {
		parts = append(parts, fmt.Sprintf("max_hourly_cost=%g", r.MaxHourlyCost))
	}
	if p := r.place(); p != "" {
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "default resources"
	}
	return strings.Join(parts, ", ")
}

// place is "cloud/region/zone" with empty trailing parts left out.
func (r Request) place() string {
	s := strings.Join([]string{orStar(r.Cloud), orStar(r.Region), orStar(r.Zone)}, "/")
	s = strings.TrimRight(strings.TrimSuffix(strings.TrimSuffix(s, "/*"), "/*"), "/")
	if s == "*" {
		return ""
	}
	return s
}

func orStar(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func boundString(b catalog.Bound) string {
	switch {
	case b.PerCPU:
		return formatNum(b.Value) + "x"
	case b.AtLeast:
		return formatNum(b.Value) + "+"
	}
	return formatNum(b.Value)
}

// Task is one task of the DAG as the optimizer sees it.
type Task struct {
	Name     string
	NumNodes int // < 1 is treated as 1
	// Options are the task's resource options: one for a plain request,
	// several for any_of, an accelerator set, or an ordered list.
	Options []Request
	// Ordered means Options are tried in order: the first option with any
	// candidate wins, whatever the others cost.
	Ordered bool
}

// Blocked is a candidate that failed to provision. Every non-empty field
// must equal the candidate's for it to be blocked; empty fields match
// anything (so Blocked{Cloud: "aws"} blocks all of AWS).
type Blocked struct {
	Cloud, Region, Zone, InstanceType string
	AccName                           string
	AccCount                          float64 // 0 = any
	UseSpot                           *bool   // nil = either
}

// Matches reports whether b blocks c.
func (b Blocked) Matches(c *Candidate) bool {
	eq := func(want, got string) bool { return want == "" || strings.EqualFold(want, got) }
	return eq(b.Cloud, c.Cloud) && eq(b.Region, c.Region) && eq(b.Zone, c.Zone) &&
		eq(b.InstanceType, c.InstanceType) && eq(b.AccName, c.AccName) &&
		(b.AccCount == 0 || math.Abs(b.AccCount-c.AccCount) < 1e-9) &&
		(b.UseSpot == nil || *b.UseSpot == c.UseSpot)
}

// CapacityInfra is an infrastructure without a price catalog (one of the
// kinds on the user's machines, infrakind.OnPrem, or this machine) that
// reports its own capacity. Feasible returns the
// candidates it can run req on (NumNodes nodes each; usually cost 0, one
// per context/pool/partition), or none and a short reason ("no node with
// 8x H100 free"). Candidate fields it leaves empty are filled in: Cloud
// from Name, NumNodes, UseSpot, Option.
type CapacityInfra interface {
	Name() string
	Feasible(ctx context.Context, req Request, numNodes int) (cands []Candidate, reason string)
}

// Input is everything Optimize needs.
type Input struct {
	Tasks []Task
	// Enabled lists the infras `sky check` enabled (kind names, as in
	// allowed_clouds), in preference order for ties.
	Enabled []string
	Blocked []Blocked
	Target  Target
	Catalog *catalog.Catalog
	// Capacity serves the catalog-less infras in Enabled, by Name().
	Capacity []CapacityInfra
	// Provisionable says whether this build can provision on an infra; nil
	// means every infra. An enabled infra it cannot provision on is priced
	// and may be chosen in a dry run (Candidate.NotProvisionable), but a
	// real launch never chooses it.
	Provisionable func(infra string) bool
	// DryRun is `sky launch --dryrun`: nothing will be provisioned.
	DryRun bool
	// PriceDisabled prices the catalog clouds that are not enabled when
	// nothing enabled fits a task (NoResourcesError.NotEnabled); they are
	// never chosen.
	PriceDisabled bool
}

// Candidate is one launchable choice for a task.
type Candidate struct {
	Cloud        string
	Region, Zone string // Zone is "" when any zone of the region will do
	InstanceType string // "" on infras without instance types
	VCPUs        float64
	MemoryGiB    float64 // NaN when unknown
	AccName      string
	AccCount     float64
	UseSpot      bool
	HourlyPrice  float64 // one node, $/hr
	NumNodes     int
	Option       int // index into Task.Options
	// NotProvisionable marks a dry-run candidate on an infra this build
	// cannot provision on (see Input.Provisionable).
	NotProvisionable bool
}

// same reports whether a and b are the same launchable (== would fail on
// NaN memory).
func (c *Candidate) same(o *Candidate) bool {
	return c.Cloud == o.Cloud && c.Region == o.Region && c.Zone == o.Zone &&
		c.InstanceType == o.InstanceType && c.AccName == o.AccName && c.AccCount == o.AccCount &&
		c.UseSpot == o.UseSpot && c.Option == o.Option && c.NumNodes == o.NumNodes
}

// Cost is the estimated cost of running all nodes for one hour.
func (c *Candidate) Cost() float64 { return c.HourlyPrice * float64(c.NumNodes) }

// Exclusion says why one infra offered nothing for one option.
type Exclusion struct {
	Infra  string
	Option int
	Reason string
}

func (e Exclusion) String() string { return e.Infra + ": " + e.Reason }

// TaskPlan is the optimizer's answer for one task.
type TaskPlan struct {
	Task       Task
	Chosen     Candidate
	Candidates []Candidate // every launchable, sorted (see package doc)
	Excluded   []Exclusion
}

// Plan is the answer for the whole DAG.
type Plan struct {
	Target Target
	Tasks  []TaskPlan
}

// NoResourcesError means a task has no launchable candidate. Excluded says
// why, per infra and option.
type NoResourcesError struct {
	Task     Task
	Excluded []Exclusion
	// NotEnabled are the offers of the catalog clouds that are not enabled
	// (Input.PriceDisabled), cheapest first: what enabling one would give.
	NotEnabled []Candidate
	// noInfra: no infra is enabled at all (the error is also ErrNoInfra).
	noInfra bool
}

// Unwrap makes a NoResourcesError for no enabled infra also ErrNoInfra.
func (e *NoResourcesError) Unwrap() error {
	if e.noInfra {
		return ErrNoInfra
	}
	return nil
}

func (e *NoResourcesError) Error() string {
	if e.noInfra {
		return ErrNoInfra.Error()
	}
	var b strings.Builder
	var opts []string
	for _, o := range e.Task.Options {
		opts = append(opts, o.String())
	}
	what := "Catalog and enabled infras do not"
	fmt.Fprintf(&b, "%s contain any instances satisfying the request: %dx %s.", what, max(e.Task.NumNodes, 1), strings.Join(opts, " | "))
	if e.Task.Name != "" {
		fmt.Fprintf(&b, " (task %q)", e.Task.Name)
	}
	b.WriteString("\nInfras considered:")
	for _, x := range e.Excluded {
		b.WriteString("\n  ")
		if len(e.Task.Options) > 1 {
			fmt.Fprintf(&b, "[%s] ", e.Task.Options[x.Option].String())
		}
		b.WriteString(x.String())
	}
	b.WriteString("\nTo fix: relax or change the resource requirements.")
	return b.String()
}

// ErrNoInfra means no infra is enabled at all.
var ErrNoInfra = errors.New("no infra is enabled; run `sky check` to see why and how to enable one")

// Optimize chooses a candidate for every task. Tasks are optimised one by
// one: SkyGo does not model egress between tasks, so for chains this gives
// the same answer as SkyPilot's dynamic programme without egress costs.
func Optimize(ctx context.Context, in Input) (*Plan, error) {
	if len(in.Enabled) == 0 {
		if in.PriceDisabled && len(in.Tasks) > 0 {
			// Still say what the clouds would offer for the first task.
			t := in.Tasks[0]
			t.NumNodes = max(t.NumNodes, 1)
			if len(t.Options) == 0 {
				t.Options = []Request{{}}
			}
			return nil, &NoResourcesError{Task: t, NotEnabled: disabledOffers(ctx, in, t), noInfra: true}
		}
		return nil, ErrNoInfra
	}
	plan := &Plan{Target: in.Target}
	for _, t := range in.Tasks {
		tp, err := optimizeTask(ctx, in, t)
		if err != nil {
			return nil, err
		}
		plan.Tasks = append(plan.Tasks, *tp)
	}
	return plan, nil
}

func optimizeTask(ctx context.Context, in Input, t Task) (*TaskPlan, error) {
	if t.NumNodes < 1 {
		t.NumNodes = 1
	}
	if len(t.Options) == 0 {
		t.Options = []Request{{}}
	}
	tp := &TaskPlan{Task: t}
	rank := infraRank(in.Enabled)
	for oi, req := range t.Options {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		req = normalize(req)
		for _, infra := range infrasFor(req, in.Enabled) {
			cands, reason := candidatesOn(ctx, in, infra, req, t.NumNodes)
			if len(cands) == 0 {
				tp.Excluded = append(tp.Excluded, Exclusion{Infra: infra, Option: oi, Reason: reason})
				continue
			}
			for i := range cands {
				cands[i].Option = oi
			}
			tp.Candidates = append(tp.Candidates, cands...)
		}
	}
	if len(tp.Candidates) == 0 {
		nre := &NoResourcesError{Task: t, Excluded: tp.Excluded}
		if in.PriceDisabled {
			nre.NotEnabled = disabledOffers(ctx, in, t)
		}
		return nil, nre
	}
	less := func(a, b Candidate) int {
		return cmp.Or(
			cmp.Compare(a.Cost(), b.Cost()),
			cmp.Compare(rank(a.Cloud), rank(b.Cloud)),
			cmp.Compare(a.Region, b.Region),
			cmp.Compare(a.Zone, b.Zone),
			cmp.Compare(a.InstanceType, b.InstanceType),
			cmp.Compare(a.Option, b.Option),
		)
	}
	if t.Ordered {
		// Preference order first, then cost within an option.
		slices.SortStableFunc(tp.Candidates, func(a, b Candidate) int {
			return cmp.Or(cmp.Compare(a.Option, b.Option), less(a, b))
		})
	} else {
		slices.SortStableFunc(tp.Candidates, less)
	}
	tp.Chosen = tp.Candidates[0]
	return tp, nil
}

// normalize turns "*" parts into "any" and canonical-cases the cloud.
func normalize(r Request) Request {
	star := func(s string) string {
		if s == "*" {
			return ""
		}
		return s
	}
	r.Cloud = strings.ToLower(star(r.Cloud))
	if c := infrakind.Canonical(r.Cloud); c != "" {
		r.Cloud = c
	}
	r.Region, r.Zone = star(r.Region), star(r.Zone)
	r.DiskTier = strings.ToLower(r.DiskTier)
	return r
}

// infrasFor is the infras to consider for req: the named one (even if not
// enabled, so the exclusion says so), else every enabled infra.
func infrasFor(req Request, enabled []string) []string {
	if req.Cloud != "" {
		return []string{req.Cloud}
	}
	var out []string
	for _, e := range enabled {
		out = append(out, strings.ToLower(e))
	}
	return out
}

func infraRank(enabled []string) func(string) int {
	pos := map[string]int{}
	for i, e := range enabled {
		pos[strings.ToLower(e)] = i
	}
	return func(c string) int {
		if p, ok := pos[c]; ok {
			return p
		}
		return len(enabled)
	}
}

// candidatesOn asks one infra for req's launchables, or says why none.
func candidatesOn(ctx context.Context, in Input, infra string, req Request, nodes int) ([]Candidate, string) {
	if !slices.ContainsFunc(in.Enabled, func(e string) bool { return strings.EqualFold(e, infra) }) {
		return nil, "not enabled — run `sky check " + infra + "`"
	}
	if reason := unsupported(infra, req); reason != "" {
		return nil, reason
	}
	notProvisionable := in.Provisionable != nil && !in.Provisionable(infra)
	if notProvisionable && !in.DryRun {
		return nil, "this build of SkyGo cannot provision on " + DisplayName(infra) + " yet (`--dryrun` still prices it)"
	}
	var cands []Candidate
	switch {
	case catalog.IsCatalogCloud(infra):
		if in.Catalog == nil {
			return nil, "no catalog configured"
		}
		var reason string
		cands, reason = catalogCandidates(ctx, in, infra, req, nodes)
		if len(cands) == 0 {
			return nil, reason
		}
	default:
		ci := capacityFor(in.Capacity, infra)
		if ci == nil {
			return nil, "no capacity information (infra not set up in this server)"
		}
		got, reason := ci.Feasible(ctx, req, nodes)
		for _, c := range got {
			if c.Cloud == "" {
				c.Cloud = infra
			}
			c.NumNodes, c.UseSpot = nodes, req.UseSpot
			if c.AccName == "" && req.AccName != "" {
				c.AccName, c.AccCount = req.AccName, req.AccCount
			}
			cands = append(cands, c)
		}
		if len(cands) == 0 {
			if reason == "" {
				reason = "no capacity for " + req.String()
			}
			return nil, reason
		}
		cands = slices.DeleteFunc(cands, func(c Candidate) bool { return isBlocked(in.Blocked, &c) })
		if len(cands) == 0 {
			return nil, "every candidate is blocked (failed to provision earlier)"
		}
	}
	for i := range cands {
		cands[i].NotProvisionable = notProvisionable
	}
	return cands, ""
}

// disabledOffers prices t on every catalog cloud that is not enabled, for
// the options that do not name another cloud; cheapest first.
func disabledOffers(ctx context.Context, in Input, t Task) []Candidate {
	var clouds []string
	for _, c := range catalog.Clouds {
		if !slices.ContainsFunc(in.Enabled, func(e string) bool { return strings.EqualFold(e, c) }) {
			clouds = append(clouds, c)
		}
	}
	if len(clouds) == 0 || in.Catalog == nil {
		return nil
	}
	in.Catalog.Preload(ctx, clouds...)
	var out []Candidate
	for oi, req := range t.Options {
		req = normalize(req)
		for _, c := range clouds {
			if req.Cloud != "" && req.Cloud != c {
				continue
			}
			if unsupported(c, req) != "" {
				continue
			}
			cands, _ := catalogCandidates(ctx, in, c, req, t.NumNodes)
			for i := range cands {
				cands[i].Option = oi
				cands[i].NotProvisionable = in.Provisionable != nil && !in.Provisionable(c)
			}
			out = append(out, cands...)
		}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Cost(), b.Cost()), cmp.Compare(a.Cloud, b.Cloud),
			cmp.Compare(a.Region, b.Region), cmp.Compare(a.Zone, b.Zone), cmp.Compare(a.Option, b.Option))
	})
	return out
}

func capacityFor(list []CapacityInfra, name string) CapacityInfra {
	for _, c := range list {
		if strings.EqualFold(c.Name(), name) {
			return c
		}
	}
	return nil
}

func isBlocked(blocked []Blocked, c *Candidate) bool {
	for _, b := range blocked {
		if b.Matches(c) {
			return true
		}
	}
	return false
}

// catalogCandidates: all offerings matching req, blocked ones removed; the
// cheapest instance type is kept and expanded to one candidate per region,
// or per zone for spot and for clouds priced per zone (GCP), as SkyPilot
// does. Blocked offerings are removed before the cheapest type is picked,
// so failover moves on to the next instance type once a type is exhausted.
func catalogCandidates(ctx context.Context, in Input, cloud string, req Request, nodes int) ([]Candidate, string) {
	q := catalog.Query{
		InstanceType: req.InstanceType, AccName: req.AccName, AccCount: req.AccCount,
		CPUs: req.CPUs, Memory: req.Memory, Region: req.Region, Zone: req.Zone,
		UseSpot: req.UseSpot, MaxHourlyCost: req.MaxHourlyCost,
	}
	if q.AccName != "" {
		if canon, ok := in.Catalog.Canonical(ctx, q.AccName); ok {
			q.AccName = canon
		}
		if q.AccCount == 0 {
			q.AccCount = 1
		}
	}
	offs, err := in.Catalog.Offerings(ctx, cloud, q)
	if err != nil {
		if errors.Is(err, catalog.ErrNoCatalog) {
			return nil, "no catalog available (" + err.Error() + ")"
		}
		return nil, "reading catalog: " + err.Error()
	}
	if len(offs) == 0 {
		return nil, noInstanceReason(ctx, in.Catalog, cloud, req, q)
	}
	byZone := req.UseSpot || cloud == "gcp"
	var cands []Candidate
	for _, o := range offs {
		c := Candidate{
			Cloud: cloud, Region: o.Region, InstanceType: o.InstanceType,
			VCPUs: o.VCPUs, MemoryGiB: o.MemoryGiB, AccName: o.AccName, AccCount: o.AccCount,
			UseSpot: req.UseSpot, HourlyPrice: o.HourlyPrice(req.UseSpot), NumNodes: nodes,
		}
		if byZone || req.Zone != "" {
			c.Zone = o.Zone
		}
		if !isBlocked(in.Blocked, &c) {
			cands = append(cands, c)
		}
	}
	if len(cands) == 0 {
		return nil, "every candidate is blocked (failed to provision earlier)"
	}
	// Offerings come cheapest first: keep the first instance type, then the
	// first (cheapest) entry per region or zone.
	best := cands[0].InstanceType
	seen := map[string]bool{}
	out := cands[:0]
	for _, c := range cands {
		key := c.Region + "\x00" + c.Zone
		if c.InstanceType != best || seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, c)
	}
	return out, ""
}

// noInstanceReason explains an empty catalog answer, naming what was asked.
func noInstanceReason(ctx context.Context, cat *catalog.Catalog, cloud string, req Request, q catalog.Query) string {
	what := "instance"
	switch {
	case req.InstanceType != "":
		what = "instance type " + req.InstanceType
		if ok, _ := cat.HasInstanceType(ctx, cloud, req.InstanceType); !ok {
			return "no instance type " + req.InstanceType + " in the catalog"
		}
	case q.AccName != "":
		what = "instance with " + formatNum(q.AccCount) + "x " + q.AccName
	case req.CPUs.IsSet() || req.Memory.IsSet():
		var p []string
		if req.CPUs.IsSet() {
			p = append(p, boundString(req.CPUs)+" vCPUs")
		}
		if req.Memory.IsSet() {
			p = append(p, boundString(req.Memory)+" GB memory")
		}
		what = "instance with " + strings.Join(p, " and ")
	default:
		cpus, ratio := catalog.DefaultCPUs(cloud, false)
		what = fmt.Sprintf("default instance (%s+ vCPUs, %sx memory)", formatNum(cpus), formatNum(ratio))
	}
	s := "no " + what
	if req.UseSpot {
		s += " offered as spot"
	}
	if req.MaxHourlyCost > 0 {
		s += fmt.Sprintf(" at or under $%g/hr", req.MaxHourlyCost)
	}
	switch {
	case req.Region != "" && req.Zone != "":
		s += " in " + req.Region + "/" + req.Zone
	case req.Region != "":
		s += " in " + req.Region
	case req.Zone != "":
		s += " in zone " + req.Zone
	}
	return s
}

func formatNum(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", f), "0"), ".")
}

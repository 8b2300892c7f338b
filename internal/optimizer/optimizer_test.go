package optimizer

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/testutil"
)

var (
	catMu    sync.Mutex
	catalogs = map[string]*catalog.Catalog{}
)

// catalogAt is one catalog per directory, shared by tests so that each
// cloud file is parsed once.
func catalogAt(dir string) *catalog.Catalog {
	catMu.Lock()
	defer catMu.Unlock()
	if catalogs[dir] == nil {
		catalogs[dir] = catalog.New(catalog.Options{Dir: dir})
	}
	return catalogs[dir]
}

// v8Catalog is the project's test catalog (testdata/catalog).
func v8Catalog(testing.TB) *catalog.Catalog { return catalogAt(testutil.CatalogDir()) }

// bruteForceCatalogs are the catalogs the optimizer is checked against:
// the project's cut-down one always, and the full v8 catalog of the shared
// folder where there is one (CI), since real files hold the odd rows.
func bruteForceCatalogs() map[string]string {
	dirs := map[string]string{"testdata": testutil.CatalogDir()}
	if d, ok := testutil.SharedPath(); ok {
		dirs["shared"] = filepath.Join(d, "catalog", "v8")
	}
	return dirs
}

func gpu(name string, n float64) Request { return Request{AccName: name, AccCount: n} }

func TestOptimizeAgainstBruteForce(t *testing.T) {
	at := func(r Request, cloud, region, zone string) Request {
		r.Cloud, r.Region, r.Zone = cloud, region, zone
		return r
	}
	spot := func(r Request) Request { r.UseSpot = true; return r }
	tests := []struct {
		name    string
		opts    []Request
		ordered bool
		nodes   int
	}{
		{"H100:8", []Request{gpu("H100", 8)}, false, 1},
		{"H100:1", []Request{gpu("H100", 1)}, false, 1},
		{"h100:2 lower case", []Request{gpu("h100", 2)}, false, 1},
		{"A100:8", []Request{gpu("A100", 8)}, false, 1},
		{"A100:1", []Request{gpu("A100", 1)}, false, 1},
		{"A100-80GB:8", []Request{gpu("A100-80GB", 8)}, false, 1},
		{"L4:1", []Request{gpu("L4", 1)}, false, 1},
		{"L4:4", []Request{gpu("L4", 4)}, false, 1},
		{"T4:1 attached to n1", []Request{gpu("T4", 1)}, false, 1},
		{"V100:8", []Request{gpu("V100", 8)}, false, 1},
		{"L40S:4", []Request{gpu("L40S", 4)}, false, 1},
		{"A10:1", []Request{gpu("A10", 1)}, false, 1},
		{"A10:0.5 fractional", []Request{gpu("A10", 0.5)}, false, 1},
		{"B200:8", []Request{gpu("B200", 8)}, false, 1},
		{"H200:8", []Request{gpu("H200", 8)}, false, 1},
		{"RTX4090:1", []Request{gpu("RTX4090", 1)}, false, 1},
		{"H100:16 infeasible", []Request{gpu("H100", 16)}, false, 1},
		{"cpus=4", []Request{{CPUs: catalog.Bound{Value: 4}}}, false, 1},
		{"cpus=8+", []Request{{CPUs: catalog.Bound{Value: 8, AtLeast: true}}}, false, 1},
		{"memory=64+", []Request{{Memory: catalog.Bound{Value: 64, AtLeast: true}}}, false, 1},
		{"cpus=16 memory=64", []Request{{CPUs: catalog.Bound{Value: 16}, Memory: catalog.Bound{Value: 64}}}, false, 1},
		{"defaults", []Request{{}}, false, 1},
		{"spot H100:8", []Request{spot(gpu("H100", 8))}, false, 1},
		{"spot cpus=8+", []Request{spot(Request{CPUs: catalog.Bound{Value: 8, AtLeast: true}})}, false, 1},
		{"spot L4:1", []Request{spot(gpu("L4", 1))}, false, 1},
		{"infra aws H100:8", []Request{at(gpu("H100", 8), "aws", "", "")}, false, 1},
		{"infra gcp/us-central1 H100:8", []Request{at(gpu("H100", 8), "gcp", "us-central1", "")}, false, 1},
		{"infra */*/us-central1-a L4:1", []Request{at(gpu("L4", 1), "*", "*", "us-central1-a")}, false, 1},
		{"infra aws/us-east-1 H100:1", []Request{at(gpu("H100", 1), "aws", "us-east-1", "")}, false, 1},
		{"infra lambda defaults", []Request{at(Request{}, "lambda", "", "")}, false, 1},
		{"infra azure cpus=2", []Request{at(Request{CPUs: catalog.Bound{Value: 2}}, "azure", "", "")}, false, 1},
		{"max_hourly_cost A100:1", []Request{{AccName: "A100", AccCount: 1, MaxHourlyCost: 1.5}}, false, 1},
		{"instance_type p5.48xlarge", []Request{{InstanceType: "p5.48xlarge"}}, false, 1},
		{"instance_type n2-standard-8", []Request{{InstanceType: "n2-standard-8"}}, false, 1},
		{"num_nodes=4 H100:8", []Request{gpu("H100", 8)}, false, 4},
		{"num_nodes=2 cpus=8+", []Request{{CPUs: catalog.Bound{Value: 8, AtLeast: true}}}, false, 2},
		{"any_of aws H100:8 | gcp A100:8", []Request{at(gpu("H100", 8), "aws", "", ""), at(gpu("A100", 8), "gcp", "", "")}, false, 1},
		{"accelerator set {A100:8, H100:8}", []Request{gpu("A100", 8), gpu("H100", 8)}, false, 1},
		{"ordered H100:8 then A100:8", []Request{gpu("H100", 8), gpu("A100", 8)}, true, 1},
		{"ordered infeasible first", []Request{gpu("H100", 16), gpu("A100", 8)}, true, 2},
		{"tpu-v5litepod-4 on gcp", []Request{gpu("tpu-v5litepod-4", 1)}, false, 1},
	}
	ctx := context.Background()
	for cname, dir := range bruteForceCatalogs() {
		t.Run(cname, func(t *testing.T) {
			feasible := 0
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					if checkAgainstOracle(t, ctx, dir, tt.opts, tt.ordered, tt.nodes) {
						feasible++
					}
				})
			}
			// Only two cases are infeasible by design: an empty or
			// half-missing catalog must not pass as "nothing found".
			if feasible < len(tests)-2 {
				t.Errorf("%s: only %d of %d cases have offerings", dir, feasible, len(tests))
			}
		})
	}
}

// checkAgainstOracle optimizes one task over the catalog in dir and
// compares the plan with the brute-force oracle over the same files. It
// reports whether the oracle found any offering.
func checkAgainstOracle(t *testing.T, ctx context.Context, dir string, opts []Request, ordered bool, numNodes int) bool {
	cat := catalogAt(dir)
	task := Task{Name: "t", NumNodes: numNodes, Options: opts, Ordered: ordered}
	plan, err := Optimize(ctx, Input{Tasks: []Task{task}, Enabled: catalog.Clouds, Catalog: cat})

	// Oracle: per option, every offering; ordered takes the first
	// option that has any.
	var want []oracleOffer
	for _, o := range opts {
		o = normalize(o)
		if o.AccName != "" {
			o.AccName, _ = cat.Canonical(ctx, o.AccName)
		}
		got := oracle(t, dir, o)
		want = append(want, got...)
		if ordered && len(got) > 0 {
			break
		}
	}
	if len(want) == 0 {
		var nre *NoResourcesError
		if !errors.As(err, &nre) {
			t.Fatalf("oracle finds nothing; Optimize err = %v, plan = %+v", err, plan)
		}
		if len(nre.Excluded) == 0 || !strings.Contains(err.Error(), "To fix") {
			t.Errorf("error lacks reasons: %v", err)
		}
		return false
	}
	if err != nil {
		t.Fatalf("Optimize: %v (oracle has %d offerings, e.g. %+v)", err, len(want), want[0])
	}
	nodes := float64(max(numNodes, 1))
	minCost := math.Inf(1)
	perCloud := map[string]float64{}
	for _, w := range want {
		minCost = math.Min(minCost, w.price)
		if p, ok := perCloud[w.cloud]; !ok || w.price < p {
			perCloud[w.cloud] = w.price
		}
	}
	ch := plan.Tasks[0].Chosen
	if math.Abs(ch.Cost()-minCost*nodes) > 1e-6 {
		t.Fatalf("chosen %s %s %s/%s cost %.5f, oracle minimum %.5f", ch.Cloud, ch.InstanceType, ch.Region, ch.Zone, ch.Cost(), minCost*nodes)
	}
	if !slices.ContainsFunc(want, func(w oracleOffer) bool {
		return w.cloud == ch.Cloud && w.it == ch.InstanceType && w.region == ch.Region &&
			(ch.Zone == "" || w.zone == ch.Zone) && math.Abs(w.price-minCost) < 1e-9
	}) {
		t.Errorf("chosen %+v is not one of the oracle's cheapest offerings", ch)
	}
	// Every cloud the oracle finds is a candidate at its own minimum;
	// no candidate is cheaper than the oracle allows.
	got := map[string]float64{}
	for _, c := range plan.Tasks[0].Candidates {
		if ordered && c.Option != ch.Option {
			continue // later options are shown, not chosen from
		}
		if p, ok := got[c.Cloud]; !ok || c.HourlyPrice < p {
			got[c.Cloud] = c.HourlyPrice
		}
	}
	for cloud, p := range perCloud {
		if g, ok := got[cloud]; !ok || math.Abs(g-p) > 1e-6 {
			t.Errorf("%s: best candidate $%.5f (present %v), oracle $%.5f", cloud, g, ok, p)
		}
	}
	for cloud := range got {
		if _, ok := perCloud[cloud]; !ok {
			t.Errorf("%s: candidate the oracle does not know", cloud)
		}
	}
	return true
}

// staticPool is a real (if tiny) CapacityInfra: a fixed set of nodes, the
// way an SSH node pool reports what it has.
type staticPool struct {
	name  string
	cpus  float64
	gpus  map[string]float64
	nodes int
}

func (p staticPool) Name() string { return p.name }

func (p staticPool) Feasible(_ context.Context, r Request, n int) ([]Candidate, string) {
	if n > p.nodes {
		return nil, "only " + formatNum(float64(p.nodes)) + " nodes"
	}
	if r.AccName != "" && p.gpus[r.AccName] < r.AccCount {
		return nil, "no node with " + formatNum(r.AccCount) + "x " + r.AccName
	}
	if r.CPUs.IsSet() && p.cpus < r.CPUs.Value {
		return nil, "not enough CPUs"
	}
	return []Candidate{{Region: "pool", VCPUs: p.cpus, MemoryGiB: math.NaN()}}, ""
}

func TestCapacityInfrasBlockedAndFeatures(t *testing.T) {
	ctx := context.Background()
	pool := staticPool{name: "kubernetes", cpus: 16, gpus: map[string]float64{"H100": 8}, nodes: 2}
	slurm := staticPool{name: "slurm", cpus: 64, nodes: 4}
	yes := true
	tests := []struct {
		name        string
		req         Request
		nodes       int
		enabled     []string
		blocked     []Blocked
		wantCloud   string
		wantRegion  string
		wantErrPart []string
	}{
		{name: "free kubernetes beats every cloud", req: gpu("H100", 8), enabled: []string{"aws", "lambda", "kubernetes"}, wantCloud: "kubernetes"},
		{name: "too many nodes falls back to a cloud", req: gpu("H100", 8), nodes: 3, enabled: []string{"lambda", "kubernetes"}, wantCloud: "lambda"},
		{name: "blocked infra skipped", req: gpu("H100", 8), enabled: []string{"lambda", "kubernetes"}, blocked: []Blocked{{Cloud: "kubernetes"}}, wantCloud: "lambda"},
		{name: "blocked region skipped", req: at1(gpu("H100", 8), "aws"), enabled: []string{"aws"}, blocked: []Blocked{{Cloud: "aws", Region: "us-east-1"}}, wantCloud: "aws"},
		{name: "blocked spot only", req: spot1(at1(gpu("H100", 8), "aws")), enabled: []string{"aws"}, blocked: []Blocked{{Cloud: "aws", UseSpot: &yes}},
			wantErrPart: []string{"aws: every candidate is blocked"}},
		{name: "slurm has no spot", req: spot1(Request{Cloud: "slurm"}), enabled: []string{"slurm"}, wantErrPart: []string{"slurm: spot instances are not supported"}},
		{name: "kubernetes disk tier", req: Request{Cloud: "kubernetes", DiskTier: "high"}, enabled: []string{"kubernetes"}, wantErrPart: []string{"kubernetes: disk_tier high is not supported"}},
		{name: "disk tier best is fine everywhere", req: Request{Cloud: "kubernetes", DiskTier: "best"}, enabled: []string{"kubernetes"}, wantCloud: "kubernetes"},
		{name: "slurm cannot open ports", req: Request{Cloud: "slurm", Ports: []string{"8080"}}, enabled: []string{"slurm"}, wantErrPart: []string{"slurm: opening ports is not supported"}},
		{name: "lambda has no custom VM image", req: Request{Cloud: "lambda", ImageID: "ami-123"}, enabled: []string{"lambda"}, wantErrPart: []string{"lambda: custom image_id is not supported"}},
		// A node pool runs on its hosts as they are: it honours no image.
		{name: "ssh runs no docker image", req: Request{Cloud: "ssh", ImageID: "docker:ubuntu"}, enabled: []string{"ssh"}, wantErrPart: []string{"ssh: docker images are not supported"}},
		{name: "ssh boots no custom image", req: Request{Cloud: "ssh", ImageID: "img-1"}, enabled: []string{"ssh"}, wantErrPart: []string{"ssh: custom image_id is not supported"}},
		{name: "not enabled names sky check", req: at1(gpu("H100", 8), "gcp"), enabled: []string{"aws"}, wantErrPart: []string{"gcp: not enabled — run `sky check gcp`"}},
		{name: "every infra explained", req: Request{AccName: "H100", AccCount: 16, Region: "us-east-1"}, enabled: []string{"aws", "lambda", "kubernetes", "slurm"},
			wantErrPart: []string{"aws: no instance with 16x H100 in us-east-1", "lambda: no instance with 16x H100 in us-east-1", "kubernetes: no node with 16x H100", "slurm: no node with 16x H100"}},
		{name: "enabled infra without capacity provider", req: Request{Cloud: "ssh"}, enabled: []string{"ssh"}, wantErrPart: []string{"ssh: no capacity information"}},
		{name: "unknown instance type", req: Request{Cloud: "aws", InstanceType: "p99.huge"}, enabled: []string{"aws"}, wantErrPart: []string{"aws: no instance type p99.huge in the catalog"}},
		// Fixed-disk infras cannot resize disks or add local disks, and a
		// cloud serves the same request.
		{name: "slurm disk size", req: Request{Cloud: "slurm", DiskSize: 500}, enabled: []string{"slurm"}, wantErrPart: []string{"slurm: disk_size 500 is not supported"}},
		{name: "slurm local disk", req: Request{Cloud: "slurm", LocalDisk: "nvme:100+"}, enabled: []string{"slurm"}, wantErrPart: []string{"slurm: local_disk nvme:100+ is not supported"}},
		{name: "slurm best network", req: Request{Cloud: "slurm", NetworkTier: "best"}, enabled: []string{"slurm"}, wantErrPart: []string{"slurm: network_tier best is not supported"}},
		{name: "standard network anywhere", req: Request{Cloud: "slurm", NetworkTier: "standard"}, enabled: []string{"slurm"}, wantCloud: "slurm"},
		{name: "disk size goes to a cloud", req: Request{AccName: "H100", AccCount: 8, DiskSize: 500}, enabled: []string{"slurm", "aws"}, wantCloud: "aws"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{
				Tasks:   []Task{{NumNodes: tt.nodes, Options: []Request{tt.req}}},
				Enabled: tt.enabled, Blocked: tt.blocked, Catalog: v8Catalog(t),
				Capacity: []CapacityInfra{pool, slurm},
			}
			plan, err := Optimize(ctx, in)
			if len(tt.wantErrPart) > 0 {
				if err == nil {
					t.Fatalf("want error, got plan %+v", plan.Tasks[0].Chosen)
				}
				for _, p := range tt.wantErrPart {
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error lacks %q:\n%v", p, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ch := plan.Tasks[0].Chosen
			if ch.Cloud != tt.wantCloud {
				t.Errorf("chosen %+v, want cloud %s", ch, tt.wantCloud)
			}
			for _, c := range plan.Tasks[0].Candidates {
				for _, b := range tt.blocked {
					if b.Matches(&c) {
						t.Errorf("blocked candidate %+v offered", c)
					}
				}
			}
		})
	}
	if _, err := Optimize(ctx, Input{Tasks: []Task{{}}}); !errors.Is(err, ErrNoInfra) {
		t.Errorf("no infra enabled: err = %v", err)
	}
	// With PriceDisabled, no infra enabled still says what the clouds offer.
	_, err := Optimize(ctx, Input{Tasks: []Task{{Options: []Request{{AccName: "H100", AccCount: 8}}}}, Catalog: v8Catalog(t), PriceDisabled: true})
	var nre *NoResourcesError
	if !errors.Is(err, ErrNoInfra) || !errors.As(err, &nre) || len(nre.NotEnabled) == 0 {
		t.Errorf("no infra enabled, PriceDisabled: err = %v", err)
	}
}

func at1(r Request, cloud string) Request { r.Cloud = cloud; return r }
func spot1(r Request) Request             { r.UseSpot = true; return r }

// TestDeterministic runs the same request repeatedly: ties must resolve
// the same way every time.
func TestDeterministic(t *testing.T) {
	in := Input{Tasks: []Task{{Options: []Request{gpu("H100", 8)}}}, Enabled: catalog.Clouds, Catalog: v8Catalog(t)}
	first, err := Optimize(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := Optimize(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(first.Tasks[0].Candidates, again.Tasks[0].Candidates, func(a, b Candidate) bool { return a.same(&b) }) {
			t.Fatal("candidate order changed between runs")
		}
	}
}

func BenchmarkOptimizeH100x8AllClouds(b *testing.B) {
	cat := v8Catalog(b)
	in := Input{Tasks: []Task{{Options: []Request{gpu("H100", 8)}}}, Enabled: catalog.Clouds, Catalog: cat}
	if _, err := Optimize(context.Background(), in); err != nil { // load catalogs outside the loop
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Optimize(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
}

package optimizer

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/catalog"
)

func TestWriteDryRun(t *testing.T) {
	aws := Candidate{Cloud: "aws", Region: "us-east-1", InstanceType: "m6i.2xlarge", VCPUs: 8, MemoryGiB: 32, HourlyPrice: 0.384, NumNodes: 2}
	awsWest := aws
	awsWest.Region, awsWest.HourlyPrice = "us-west-2", 0.4
	gcp := Candidate{Cloud: "gcp", Region: "us-central1", Zone: "us-central1-a", InstanceType: "n2-standard-8", VCPUs: 8, MemoryGiB: 32, HourlyPrice: 0.3885, NumNodes: 2}
	k8s := Candidate{Cloud: "kubernetes", Region: "kind", VCPUs: 0.5, MemoryGiB: math.NaN(), AccName: "H100", AccCount: 1, UseSpot: true, NumNodes: 2}
	plan := &Plan{Tasks: []TaskPlan{{
		Task:       Task{NumNodes: 2, Options: []Request{{}}},
		Chosen:     k8s,
		Candidates: []Candidate{k8s, aws, gcp, awsWest},
	}}}
	var buf bytes.Buffer
	if err := WriteDryRun(&buf, plan, FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `Target: minimizing cost
Estimated cost: $0.0 / hour

Considered resources (2 nodes):
-------------------------------------------------------------------------------------
 INFRA                 INSTANCE        vCPUs   Mem(GB)   GPUS     COST ($)   CHOSEN
-------------------------------------------------------------------------------------
 Kubernetes (kind)     [Spot]          0.5     -         H100:1   0.00       ✔
 AWS (us-east-1)       m6i.2xlarge     8       32        -        0.77
 GCP (us-central1-a)   n2-standard-8   8       32        -        0.78
-------------------------------------------------------------------------------------

`
	if got := buf.String(); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	buf.Reset()
	if err := WriteDryRun(&buf, plan, FormatOptions{Verbose: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "AWS (us-west-2)") {
		t.Errorf("verbose output lacks the second AWS region:\n%s", buf.String())
	}
}

func TestWriteDryRunMultiTask(t *testing.T) {
	c := Candidate{Cloud: "lambda", Region: "us-east-1", InstanceType: "gpu_1x_a10", VCPUs: 30, MemoryGiB: 200, AccName: "A10", AccCount: 1, HourlyPrice: 0.75, NumNodes: 1}
	plan := &Plan{Tasks: []TaskPlan{
		{Task: Task{Name: "train", NumNodes: 1}, Chosen: c, Candidates: []Candidate{c}},
		{Task: Task{Name: "eval", NumNodes: 1}, Chosen: c, Candidates: []Candidate{c}},
	}}
	var buf bytes.Buffer
	if err := WriteDryRun(&buf, plan, FormatOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Estimated total runtime: 2.0 hours", "Estimated total cost: $1.5", "Best plan:",
		" TASK    #NODES   INFRA", " train   1        Lambda (us-east-1)", "Considered resources for task 'eval' (1 node):"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}
}

func gpuFixture(t *testing.T) *catalog.Catalog {
	dir := t.TempDir()
	files := map[string]string{
		"lambda/vms.csv": "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n" +
			"gpu_8x_h100,H100,8,208,1800,23.92,us-east-1,\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}\",\n" +
			"gpu_8x_h100,H100,8,208,1800,23.92,us-west-1,\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}\",\n" +
			"gpu_1x_a10,A10,1,30,200,0.75,us-east-1,,\n",
		"gcp/vms.csv": "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice\n" +
			",,,T4,1,\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 16384}}]}\",us-central1,us-central1-a,0.35,0.1654\n" +
			",,,tpu-v4-8,1,tpu-v4-8,us-central2,us-central2-b,12.88,\n",
	}
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return catalog.New(catalog.Options{Dir: dir})
}

func TestGPUList(t *testing.T) {
	cat := gpuFixture(t)
	ctx := context.Background()
	all, err := cat.ListGPUs(ctx, catalog.GPUFilter{Clouds: []string{"lambda", "gcp"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteGPUTable(&buf, all, GPUListOptions{}); err != nil {
		t.Fatal(err)
	}
	want := `COMMON_GPU  AVAILABLE_QUANTITIES
A10         1
H100        8
T4          1

GOOGLE_TPU  AVAILABLE_QUANTITIES
tpu-v4-8    1

Hint: use -a/--all to see all accelerators (including non-common ones) and pricing.
`
	if buf.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", buf.String(), want)
	}

	name, count, err := ParseGPUArg("h100:8")
	if err != nil || name != "h100" || count != 8 {
		t.Fatalf("ParseGPUArg = %q %v %v", name, count, err)
	}
	h100, err := cat.ListGPUs(ctx, catalog.GPUFilter{Name: name, Count: count, Clouds: []string{"lambda", "gcp"}})
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := WriteGPUTable(&buf, h100, GPUListOptions{Name: name}); err != nil {
		t.Fatal(err)
	}
	want = `GPU   QTY  CLOUD   INSTANCE_TYPE  DEVICE_MEM  vCPUs  HOST_MEM  HOURLY_PRICE  HOURLY_SPOT_PRICE  REGION
H100  8    Lambda  gpu_8x_h100    80GB        208    1800GB    $ 23.920      -                  us-east-1
`
	if buf.String() != want {
		t.Errorf("H100 table:\n%s\nwant:\n%s", buf.String(), want)
	}

	t4, _ := cat.ListGPUs(ctx, catalog.GPUFilter{Name: "T4", Clouds: []string{"gcp"}})
	buf.Reset()
	if err := WriteGPUJSON(&buf, t4); err != nil {
		t.Fatal(err)
	}
	var decoded map[string][]map[string]any
	if err := json.Unmarshal(buf.Bytes(), &decoded); err != nil {
		t.Fatalf("not strict JSON: %v\n%s", err, buf.String())
	}
	row := decoded["T4"][0]
	if row["instance_type"] != nil || row["cpu_count"] != nil || row["cloud"] != "GCP" || row["price"] != 0.35 || row["device_memory"] != 16.0 {
		t.Errorf("T4 JSON row = %v", row)
	}

	for _, bad := range []string{"", ":2", "H100:x", "H100:0", "H100:1:2"} {
		if _, _, err := ParseGPUArg(bad); err == nil {
			t.Errorf("ParseGPUArg(%q) accepted", bad)
		}
	}
}

func TestShorten(t *testing.T) {
	for in, want := range map[string]string{
		"p5.48xlarge":                        "p5.48xlarge",
		"hyperstack__8xH100_80GB__252__1440": "hyperstack__8x...GB__252__1440",
		"California, US, North America":      "California, US, North America",
	} {
		if got := shorten(in, maxCell); got != want || len([]rune(got)) > maxCell {
			t.Errorf("shorten(%q) = %q, want %q", in, got, want)
		}
	}
}

// The ordered banner names each option as one item (testdata's
// task-ordered.yaml), not a comma soup of all their parts.
func TestOrderedBanner(t *testing.T) {
	var b strings.Builder
	ew := &errWriter{w: &b}
	writeOrdered(ew, Task{Ordered: true, Options: []Request{
		{Cloud: "lambda", AccName: "H100", AccCount: 8},
		{Cloud: "aws", Region: "us-west-2", InstanceType: "p5.48xlarge"},
		{Cloud: "gcp", Region: "us-central1", AccName: "A100", AccCount: 8, UseSpot: true},
		{CPUs: catalog.Bound{Value: 4, AtLeast: true}},
	}})
	want := "Using user-specified accelerators list (will be tried in the listed order): " +
		"H100:8 on Lambda, p5.48xlarge on AWS (us-west-2), A100:8 [Spot] on GCP (us-central1), cpus=4+\n"
	if b.String() != want {
		t.Errorf("banner:\n got %q\nwant %q", b.String(), want)
	}
}

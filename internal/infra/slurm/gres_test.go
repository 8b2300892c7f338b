package slurm

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/skygo/skygo/internal/provision"
)

func TestParseGRES(t *testing.T) {
	cases := map[string][]GRES{
		"gpu:8":                              {{Count: 8}},
		"gpu":                                {{Count: 1}},
		"gpu:H100:8":                         {{Type: "H100", Count: 8}},
		"gpu:fake:4":                         {{Type: "fake", Count: 4}},
		"gpu:nvidia_h100_80gb_hbm3:8(S:0-1)": {{Type: "nvidia_h100_80gb_hbm3", Count: 8}},
		"gpu:a100:4(S:0,1),gpu:v100:2(S:1)":  {{Type: "a100", Count: 4}, {Type: "v100", Count: 2}},
		"gpu:l4:2,shard:16,mps:200":          {{Type: "l4", Count: 2}},
		"gpu:fake:2(IDX:0-1)":                {{Type: "fake", Count: 2}},
		"gpu:fake:0(IDX:N/A)":                {{Type: "fake", Count: 0}},
		"gpu:t4":                             {{Type: "t4", Count: 1}},
		"gpu:1k":                             {{Count: 1024}},
		"(null)":                             nil,
		"":                                   nil,
		"shard:8":                            nil,
		"gpu:a:b:c":                          nil,
		"gpu:a100:x":                         nil,
	}
	for in, want := range cases {
		if got := ParseGRES(in); !reflect.DeepEqual(got, want) {
			t.Errorf("ParseGRES(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func gpuNodes(t *testing.T) []Node {
	t.Helper()
	nodes, err := ParseSinfoNodes(fixture(t, "sinfo-mixed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

func TestGPUNameMatch(t *testing.T) {
	cases := []struct {
		req, raw     string
		match, exact bool
	}{
		{"H100", "h100", true, true},
		{"H100", "nvidia_h100_80gb_hbm3", true, false}, // segments h100 within h100-80gb-hbm3
		{"H100-80GB", "nvidia_h100_80gb_hbm3", true, false},
		{"A100-80GB", "a100-sxm4-80gb", true, false}, // ordered subsequence
		{"A100", "nvidia-a100", true, false},         // vendor stripped
		{"V100", "Tesla_V100", true, false},
		{"L4", "L40", false, false}, // whole segments only
		{"L40", "l40s", false, false},
		{"H100", "h200", false, false},
		{"80GB-A100", "a100-sxm4-80gb", false, false}, // order matters
		{"H100", "", false, false},                    // untyped never matches by name
	}
	for _, c := range cases {
		m, e := gpuNameMatch(c.req, c.raw)
		if m != c.match || e != c.exact {
			t.Errorf("gpuNameMatch(%q, %q) = %v, %v; want %v, %v", c.req, c.raw, m, e, c.match, c.exact)
		}
	}
}

func TestMatchGPU(t *testing.T) {
	nodes := gpuNodes(t)
	cases := []struct {
		req       string
		count     int
		partition string
		want      string
	}{
		{"H100", 8, "gpu", "nvidia_h100_80gb_hbm3"},
		{"h100-80gb", 4, "", "nvidia_h100_80gb_hbm3"},
		{"A100-80GB", 8, "gpu", "a100-sxm4-80gb"},
		{"A100", 8, "gpu", "a100-sxm4-80gb"}, // two GRES lines of a100-01 add up
		{"L4", 2, "inference", "L4"},
		{"l40", 1, "inference", "l40"},
	}
	for _, c := range cases {
		got, err := MatchGPU(c.req, nodes, c.count, "mycluster", c.partition)
		if err != nil || got != c.want {
			t.Errorf("MatchGPU(%s:%d in %q) = %q, %v; want %q", c.req, c.count, c.partition, got, err, c.want)
		}
	}
}

func TestMatchGPUChoiceOrder(t *testing.T) {
	mk := func(name, gres string) Node {
		return Node{Name: name, State: "idle", GRES: ParseGRES(gres), CPUs: 8, MemoryMB: 8192, Partitions: []string{"p"}}
	}
	// exact beats more nodes
	nodes := []Node{mk("a", "gpu:h100:8"), mk("b", "gpu:nvidia_h100:8"), mk("c", "gpu:nvidia_h100:8")}
	if got, _ := MatchGPU("H100", nodes, 8, "c", "p"); got != "h100" {
		t.Fatalf("exact first: got %q", got)
	}
	// then most nodes
	nodes = []Node{mk("a", "gpu:h100-sxm:8"), mk("b", "gpu:nvidia_h100:8"), mk("c", "gpu:nvidia_h100:8")}
	if got, _ := MatchGPU("H100", nodes, 8, "c", "p"); got != "nvidia_h100" {
		t.Fatalf("most nodes: got %q", got)
	}
	// then lexicographic
	nodes = []Node{mk("a", "gpu:h100-sxm:8"), mk("b", "gpu:h100-pcie:8")}
	if got, _ := MatchGPU("H100", nodes, 8, "c", "p"); got != "h100-pcie" {
		t.Fatalf("lexicographic: got %q", got)
	}
	// only nodes with enough GPUs count
	nodes = []Node{mk("a", "gpu:h100-sxm:2"), mk("b", "gpu:h100-sxm:2"), mk("c", "gpu:h100-pcie:8")}
	if got, _ := MatchGPU("H100", nodes, 4, "c", "p"); got != "h100-pcie" {
		t.Fatalf("count filter: got %q", got)
	}
}

func TestMatchGPUErrors(t *testing.T) {
	nodes := gpuNodes(t)
	_, err := MatchGPU("H100", nodes, 16, "mycluster", "gpu")
	var ce *provision.CapacityError
	if !errors.As(err, &ce) {
		t.Fatalf("want a CapacityError, got %T %v", err, err)
	}
	want := "No GPU nodes matching 'H100' (count>=16) found on Slurm cluster 'mycluster' in partition 'gpu'. Discovered GPU types on cluster: ['L4', 'a100-sxm4-80gb', 'gpu', 'l40', 'nvidia_h100_80gb_hbm3']"
	if ce.Msg != want {
		t.Fatalf("message\n got %s\nwant %s", ce.Msg, want)
	}
	if ce.Where != "slurm/mycluster/gpu" {
		t.Fatalf("where %q", ce.Where)
	}
	// L4 lives in inference only.
	if _, err := MatchGPU("L4", nodes, 1, "mycluster", "gpu"); err == nil {
		t.Fatal("L4 is not in partition gpu")
	}

	// No partition: no " in partition" clause. The real test cluster's
	// fake GPUs match nothing called H100.
	real, err := ParseSinfoNodes(fixture(t, "sinfo-testcluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = MatchGPU("H100", real, 2, "tc", "")
	if !errors.As(err, &ce) || ce.Msg != "No GPU nodes matching 'H100' (count>=2) found on Slurm cluster 'tc'. Discovered GPU types on cluster: ['fake']" {
		t.Fatalf("got %v", err)
	}
	if got, err := MatchGPU("fake", real, 4, "tc", "gpu"); err != nil || got != "fake" {
		t.Fatalf("fake:4 in gpu: %q %v", got, err)
	}

	cpuOnly := []Node{{Name: "c1", State: "idle", CPUs: 4, MemoryMB: 4096, Partitions: []string{"cpu"}}}
	_, err = MatchGPU("A100", cpuOnly, 1, "tc", "cpu")
	if !errors.As(err, &ce) || ce.Msg != "No GPU nodes matching 'A100' (count>=1) found on Slurm cluster 'tc' in partition 'cpu'. No GPU nodes found on cluster." {
		t.Fatalf("got %v", err)
	}
}

func TestCanonicalGPU(t *testing.T) {
	cases := map[string]string{
		"nvidia_h100_80gb_hbm3":   "H100-80GB",
		"":                        "GPU",
		"fake":                    "FAKE",
		"h100":                    "H100",
		"H100":                    "H100",
		"h100_nvl":                "H100-NVL",
		"a100-sxm4-80gb":          "A100-80GB",
		"a100-sxm4-40gb":          "A100",
		"nvidia_a100-pcie-40gb":   "A100",
		"tesla_v100-sxm2-16gb":    "V100",
		"tesla_t4":                "T4",
		"l40s":                    "L40S",
		"l40":                     "L40",
		"L4":                      "L4",
		"nvidia_geforce_rtx_4090": "RTX4090",
		"rtx_a6000":               "RTXA6000",
		"amd_mi300x":              "MI300X",
		"gh200":                   "GH200",
		"my_custom_card":          "MY_CUSTOM_CARD",
	}
	for raw, want := range cases {
		if got := CanonicalGPU(raw); got != want {
			t.Errorf("CanonicalGPU(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestGPUAvailability(t *testing.T) {
	nodes, err := ParseSinfoNodes(fixture(t, "sinfo-testcluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	used, err := ParseGresUsed(fixture(t, "gresused-testcluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(used["tihost1"], []GRES{{Type: "fake", Count: 2}}) || !reflect.DeepEqual(used["tihost3"], []GRES{{Type: "fake", Count: 0}}) {
		t.Fatalf("used %+v", used)
	}
	got := GPUAvailabilityByPartition(nodes, used)
	want := []GPUAvailability{
		{Partition: "cpu", Name: "FAKE", RawType: "fake", Free: 8, Total: 12, Counts: []int{1, 2, 4}},
		{Partition: "gpu", Name: "FAKE", RawType: "fake", Free: 8, Total: 12, Counts: []int{1, 2, 4}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}

	mixed := gpuNodes(t)
	rows := GPUAvailabilityByPartition(mixed, nil)
	var gpuRows []string
	for _, r := range rows {
		if r.Partition == "gpu" {
			gpuRows = append(gpuRows, fmt.Sprintf("%s %d/%d %v", r.Name, r.Free, r.Total, r.Counts))
		}
	}
	// h100-03 (drain) and h100-04 (down*) are left out.
	if want := []string{"A100-80GB 16/16 [1 2 4 8]", "H100-80GB 16/16 [1 2 4 8]"}; !reflect.DeepEqual(gpuRows, want) {
		t.Fatalf("gpu rows %q", gpuRows)
	}
	for _, r := range rows {
		if r.Partition == "legacy" && (r.Name != "GPU" || r.Total != 8) {
			t.Fatalf("untyped: %+v", r)
		}
	}
	if _, err := ParseGresUsed("tihost1 gpu:fake:2\n"); err == nil {
		t.Fatal("want a separator error")
	}
}

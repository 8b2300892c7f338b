package slurm

import (
	"strings"
	"testing"
)

func names(nodes []Node) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.Name)
	}
	return strings.Join(s, ",")
}

func TestDefaultSizes(t *testing.T) {
	cases := []struct {
		in, want Request
	}{
		{Request{}, Request{CPUs: 2, MemoryGB: 2, MemorySet: true}},
		{Request{CPUs: 8}, Request{CPUs: 8, MemoryGB: 8, MemorySet: true}},
		{Request{GPU: "H100", GPUCount: 2}, Request{CPUs: 8, MemoryGB: 32, MemorySet: true, GPU: "H100", GPUCount: 2}},
		{Request{CPUs: 4, GPU: "H100", GPUCount: 1}, Request{CPUs: 4, MemoryGB: 16, MemorySet: true, GPU: "H100", GPUCount: 1}},
		{Request{MemoryGB: 64}, Request{CPUs: 2, MemoryGB: 64, MemorySet: true}},
		{Request{CPUs: 1, MemorySet: true}, Request{CPUs: 1, MemorySet: true}}, // explicit 0: no --mem
	}
	for _, c := range cases {
		if got := DefaultSizes(c.in); got != c.want {
			t.Errorf("DefaultSizes(%+v) = %+v, want %+v", c.in, got, c.want)
		}
	}
	got, warn := DefaultSizesOnCluster(Request{CPUs: 4}, false, "tc")
	if got.MemoryGB != 0 || !got.MemorySet || !strings.Contains(warn, "SelectTypeParameters lacks MEMORY") {
		t.Fatalf("%+v %q", got, warn)
	}
	got, warn = DefaultSizesOnCluster(Request{CPUs: 4, MemoryGB: 8, MemorySet: true}, false, "tc")
	if got.MemoryGB != 8 || warn != "" {
		t.Fatalf("requested memory stays: %+v %q", got, warn)
	}
	got, warn = DefaultSizesOnCluster(Request{CPUs: 4}, true, "tc")
	if got.MemoryGB != 4 || warn != "" {
		t.Fatalf("%+v %q", got, warn)
	}
}

func TestFitTestCluster(t *testing.T) {
	nodes, err := ParseSinfoNodes(fixture(t, "sinfo-testcluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{Cluster: "tc"}

	fit, gres, reason := Fit(nodes, "gpu", Request{CPUs: 2, MemoryGB: 2, GPU: "fake", GPUCount: 2, NumNodes: 2}, s)
	if reason != "" || names(fit) != "tihost1,tihost2,tihost3" || gres != "gpu:fake:2" {
		t.Fatalf("%s %q %q", names(fit), gres, reason)
	}
	fit, gres, reason = Fit(nodes, "cpu", Request{CPUs: 4, MemoryGB: 4}, s)
	if reason != "" || len(fit) != 3 || gres != "" {
		t.Fatalf("%s %q %q", names(fit), gres, reason)
	}
	_, _, reason = Fit(nodes, "cpu", Request{CPUs: 8, MemoryGB: 4}, s)
	if reason != "No node in partition 'cpu' of Slurm cluster 'tc' fits 8 CPUs, 4 GB memory: 3 nodes have fewer than 8 CPUs (largest: 4)." {
		t.Fatalf("reason %q", reason)
	}
	_, _, reason = Fit(nodes, "cpu", Request{CPUs: 2, MemoryGB: 5}, s)
	if reason != "No node in partition 'cpu' of Slurm cluster 'tc' fits 2 CPUs, 5 GB memory: 3 nodes have less than 5 GB of memory (largest: 4 GB)." {
		t.Fatalf("reason %q", reason)
	}
	_, _, reason = Fit(nodes, "gpu", Request{CPUs: 1, GPU: "H100", GPUCount: 1}, s)
	if reason != "No GPU nodes matching 'H100' (count>=1) found on Slurm cluster 'tc' in partition 'gpu'. Discovered GPU types on cluster: ['fake']" {
		t.Fatalf("reason %q", reason)
	}
	_, _, reason = Fit(nodes, "gpu", Request{CPUs: 1, GPU: "fake", GPUCount: 8}, s)
	if !strings.HasPrefix(reason, "No GPU nodes matching 'fake' (count>=8)") {
		t.Fatalf("reason %q", reason)
	}
	fit, _, reason = Fit(nodes, "gpu", Request{CPUs: 1, NumNodes: 4}, s)
	if len(fit) != 3 || reason != "Partition 'gpu' of Slurm cluster 'tc' has 3 of the 4 nodes needed that fit 1 CPU." {
		t.Fatalf("%s %q", names(fit), reason)
	}
	_, _, reason = Fit(nodes, "nope", Request{CPUs: 1}, s)
	if reason != "Partition 'nope' of Slurm cluster 'tc' has no nodes." {
		t.Fatalf("reason %q", reason)
	}
}

func TestFitMixed(t *testing.T) {
	nodes := gpuNodes(t)
	s := Settings{Cluster: "big"}

	// Drained and not-responding H100 nodes do not fit, and say why.
	fit, gres, reason := Fit(nodes, "gpu", Request{CPUs: 64, MemoryGB: 512, GPU: "H100", GPUCount: 8}, s)
	if reason != "" || names(fit) != "h100-01,h100-02" || gres != "gpu:nvidia_h100_80gb_hbm3:8" {
		t.Fatalf("%s %q %q", names(fit), gres, reason)
	}
	_, _, reason = Fit(nodes, "gpu", Request{CPUs: 64, MemoryGB: 512, GPU: "H100", GPUCount: 8, NumNodes: 3}, s)
	want := "Partition 'gpu' of Slurm cluster 'big' has 2 of the 3 nodes needed that fit 64 CPUs, 512 GB memory, H100:8: 2 nodes cannot take jobs (h100-03: drained, h100-04: down); 2 nodes have fewer than 8 nvidia_h100_80gb_hbm3 GPUs (largest: 0)."
	if reason != want {
		t.Fatalf("reason\n got %q\nwant %q", reason, want)
	}
	// CPU partition: drng and failg nodes are out; a planned node (mix-) is in.
	fit, _, reason = Fit(nodes, "cpu", Request{CPUs: 96, MemoryGB: 300}, s)
	if reason != "" || names(fit) != "cpu-01,cpu-03" {
		t.Fatalf("%s %q", names(fit), reason)
	}
	_, _, reason = Fit(nodes, "cpu", Request{CPUs: 128, MemoryGB: 300}, s)
	want = "No node in partition 'cpu' of Slurm cluster 'big' fits 128 CPUs, 300 GB memory: 2 nodes cannot take jobs (cpu-02: draining, cpu-04: failing); 2 nodes have fewer than 128 CPUs (largest: 96)."
	if reason != want {
		t.Fatalf("reason\n got %q\nwant %q", reason, want)
	}
	// Memory 0 is not checked.
	if fit, _, reason := Fit(nodes, "inference", Request{CPUs: 16, MemorySet: true, GPU: "L4", GPUCount: 2}, s); reason != "" || names(fit) != "l4-01" {
		t.Fatalf("%s %q", names(fit), reason)
	}
	// A powered-down node (idle~) fits: Slurm boots it.
	if fit, _, _ := Fit(nodes, "gpu", Request{CPUs: 8, GPU: "A100-80GB", GPUCount: 8}, s); names(fit) != "a100-01,a100-02" {
		t.Fatalf("%s", names(fit))
	}
}

// The acceptance setup: the test cluster's GRES are gpu:fake:4, and
// gpu_partition_map sends H100 to partition gpu with untyped --gres.
func TestFitTestClusterH100ViaMap(t *testing.T) {
	nodes, err := ParseSinfoNodes(fixture(t, "sinfo-testcluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s := Settings{Cluster: "tc", GPUPartitionMap: map[string][]string{"H100": {"gpu"}}}
	req := DefaultSizes(Request{CPUs: 1, GPU: "H100", GPUCount: 2, NumNodes: 2})
	fit, gres, reason := Fit(nodes, "gpu", req, s)
	if reason != "" || gres != "gpu:2" || len(fit) != 3 {
		t.Fatalf("%s %q %q", names(fit), gres, reason)
	}
	if _, _, reason := Fit(nodes, "cpu", req, s); !strings.Contains(reason, "not in slurm gpu_partition_map for H100 (gpu)") {
		t.Fatalf("cpu partition: %q", reason)
	}
	// Without the map, H100 matches nothing there.
	if _, _, reason := Fit(nodes, "gpu", req, Settings{Cluster: "tc"}); !strings.HasPrefix(reason, "No GPU nodes matching 'H100' (count>=2)") {
		t.Fatalf("no map: %q", reason)
	}
}

func TestFitPartitionMaps(t *testing.T) {
	nodes := gpuNodes(t)
	s := Settings{Cluster: "big", GPUPartitionMap: map[string][]string{"H100": {"gpu"}, "Legacy": {"legacy"}}, CPUPartition: []string{"cpu"}}

	_, _, reason := Fit(nodes, "long", Request{CPUs: 8, GPU: "H100", GPUCount: 8}, s)
	if reason != "Partition 'long' of Slurm cluster 'big' is not in slurm gpu_partition_map for H100 (gpu)." {
		t.Fatalf("reason %q", reason)
	}
	// A map hit asks for untyped GPUs and counts every GPU of a node.
	fit, gres, reason := Fit(nodes, "gpu", Request{CPUs: 8, GPU: "h100", GPUCount: 8}, s)
	if reason != "" || gres != "gpu:8" || names(fit) != "h100-01,h100-02,a100-01,a100-02" {
		t.Fatalf("%s %q %q", names(fit), gres, reason)
	}
	fit, gres, reason = Fit(nodes, "legacy", Request{CPUs: 8, GPU: "Legacy", GPUCount: 4}, s)
	if reason != "" || gres != "gpu:4" || names(fit) != "old-01" {
		t.Fatalf("untyped GRES via the map: %s %q %q", names(fit), gres, reason)
	}
	_, _, reason = Fit(nodes, "gpu", Request{CPUs: 8}, s)
	if reason != "Partition 'gpu' of Slurm cluster 'big' is not the slurm cpu_partition (cpu) for CPU-only tasks." {
		t.Fatalf("reason %q", reason)
	}
	if fit, _, reason := Fit(nodes, "cpu", Request{CPUs: 8}, s); reason != "" || len(fit) != 2 {
		t.Fatalf("%s %q", names(fit), reason)
	}
	// GPUs not in the map match by name wherever they are.
	if fit, gres, reason := Fit(nodes, "inference", Request{CPUs: 8, GPU: "L40", GPUCount: 4}, s); reason != "" || gres != "gpu:l40:4" || names(fit) != "l40-01" {
		t.Fatalf("%s %q %q", names(fit), gres, reason)
	}
}

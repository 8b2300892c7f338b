package slurm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParsePartitionsTestCluster(t *testing.T) {
	parts, err := ParsePartitions(fixture(t, "partitions-testcluster.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Partition{
		{Name: "cpu", Default: true, MaxTime: "UNLIMITED", DefaultTime: "NONE", Nodes: "tihost[1-3]", State: "UP"},
		{Name: "gpu", MaxTime: "UNLIMITED", DefaultTime: "NONE", Nodes: "tihost[1-3]", State: "UP"},
	}
	if !reflect.DeepEqual(parts, want) {
		t.Fatalf("got %+v\nwant %+v", parts, want)
	}
}

func TestParsePartitionsOrder(t *testing.T) {
	parts, err := ParsePartitions(fixture(t, "partitions-mixed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range parts {
		names = append(names, p.Name)
	}
	// default first, then alphabetical
	if got := strings.Join(names, ","); got != "gpu,cpu,inference,legacy,long" {
		t.Fatalf("order %s", got)
	}
	byName := map[string]Partition{}
	for _, p := range parts {
		byName[p.Name] = p
	}
	if p := byName["gpu"]; p.MaxTime != "2-00:00:00" || p.DefaultTime != "04:00:00" || p.Nodes != "h100-[01-04],a100-[01-02]" || !p.Up() {
		t.Fatalf("gpu: %+v", p)
	}
	if p := byName["legacy"]; p.Up() || p.State != "DOWN" || p.Unavailable("big") != "Partition 'legacy' of Slurm cluster 'big' is DOWN." {
		t.Fatalf("legacy: %+v", p)
	}
	if p := byName["inference"]; p.MaxTime != "30:00" || p.Unavailable("big") != "" {
		t.Fatalf("inference: %+v", p)
	}
}

func TestParsePartitionsErrors(t *testing.T) {
	if parts, err := ParsePartitions("\n\n"); err != nil || len(parts) != 0 {
		t.Fatalf("empty: %v %v", parts, err)
	}
	if _, err := ParsePartitions("slurm_load_partitions: Unable to contact slurm controller (connect failure)"); err == nil ||
		!strings.Contains(err.Error(), "no PartitionName") {
		t.Fatalf("want an error naming the line, got %v", err)
	}
}

func TestParseSinfoNodesTestCluster(t *testing.T) {
	out := fixture(t, "sinfo-testcluster.txt")
	if !strings.Contains(out, "\x1f") {
		t.Fatal("fixture should hold the real 0x1f separators")
	}
	nodes, err := ParseSinfoNodes(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("want 3 nodes, got %+v", nodes)
	}
	for i, n := range nodes {
		want := Node{Name: "tihost" + string(rune('1'+i)), State: "idle", GRES: []GRES{{Type: "fake", Count: 4}}, CPUs: 4, MemoryMB: 4096, Partitions: []string{"cpu", "gpu"}}
		if !reflect.DeepEqual(n, want) {
			t.Fatalf("node %d: got %+v want %+v", i, n, want)
		}
		if ok, why := n.Usable(); !ok {
			t.Fatalf("idle node unusable: %s", why)
		}
	}
}

func TestParseSinfoNodesSeparators(t *testing.T) {
	pipe := "tihost1|idle|gpu:fake:4|4|4096|cpu*\ntihost1|idle|gpu:fake:4|4|4096|gpu\n"
	literal := strings.ReplaceAll(pipe, "|", `\x1f`)
	for name, out := range map[string]string{"pipe": pipe, "literal": literal} {
		nodes, err := ParseSinfoNodes(out)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(nodes) != 1 || !reflect.DeepEqual(nodes[0].Partitions, []string{"cpu", "gpu"}) || nodes[0].GPUs("fake") != 4 {
			t.Fatalf("%s: %+v", name, nodes)
		}
	}
	if _, err := ParseSinfoNodes("tihost1 idle 4\n"); err == nil || !strings.Contains(err.Error(), "6") {
		t.Fatalf("want a field-count error, got %v", err)
	}
	if _, err := ParseSinfoNodes("n1|idle|(null)|four|4096|cpu\n"); err == nil || !strings.Contains(err.Error(), "CPUs") {
		t.Fatalf("want a CPUs error, got %v", err)
	}
	nodes, err := ParseSinfoNodes("n1|idle|(null)|4+|4096+|cpu\n")
	if err != nil || nodes[0].CPUs != 4 || nodes[0].MemoryMB != 4096 || len(nodes[0].GRES) != 0 {
		t.Fatalf("plus figures: %+v %v", nodes, err)
	}
}

func TestParseSinfoNodesMixed(t *testing.T) {
	nodes, err := ParseSinfoNodes(fixture(t, "sinfo-mixed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Node{}
	for _, n := range nodes {
		by[n.Name] = n
	}
	if len(nodes) != 13 {
		t.Fatalf("want 13 nodes, got %d", len(nodes))
	}
	if n := by["h100-01"]; !reflect.DeepEqual(n.Partitions, []string{"gpu", "long"}) || n.GPUs("nvidia_h100_80gb_hbm3") != 8 || n.MemoryMB != 1031000 {
		t.Fatalf("h100-01: %+v", n)
	}
	if n := by["a100-01"]; n.GPUs("a100-sxm4-80gb") != 8 || len(n.GRES) != 2 {
		t.Fatalf("a100-01 (two sockets of one type): %+v", n)
	}
	if n := by["l4-01"]; !reflect.DeepEqual(n.GRES, []GRES{{Type: "L4", Count: 2}}) {
		t.Fatalf("l4-01 (shard dropped): %+v", n)
	}
	if n := by["old-01"]; !reflect.DeepEqual(n.GRES, []GRES{{Count: 8}}) || n.GPUs("") != 8 {
		t.Fatalf("old-01 (untyped): %+v", n)
	}
}

func TestStateUsable(t *testing.T) {
	cases := []struct {
		state string
		ok    bool
		why   string
	}{
		{"idle", true, ""}, {"mix", true, ""}, {"alloc", true, ""}, {"comp", true, ""},
		{"resv", true, ""}, {"maint", true, ""}, {"plnd", true, ""},
		{"idle~", true, ""}, {"idle#", true, ""}, {"mix-", true, ""}, {"idle@", true, ""},
		{"idle%", true, ""}, {"idle!", true, ""}, {"alloc$", true, ""}, {"mix^", true, ""},
		{"drain", false, "drained"}, {"drng", false, "draining"}, {"drain*", false, "drained"},
		{"down", false, "down"}, {"down*", false, "down"}, {"down~", false, "down"},
		{"idle*", false, "not responding"}, {"mix*", false, "not responding"},
		{"fail", false, "failed"}, {"failg", false, "failing"}, {"futr", false, "not yet in service (future)"},
		{"inval", false, "invalid configuration"}, {"unk*", false, "state unknown"},
		// long (%T / scontrol) spellings
		{"IDLE+DRAIN", false, "drained"}, {"MIXED", true, ""}, {"ALLOCATED+DRAIN", false, "drained"},
		{"DOWN+NOT_RESPONDING", false, "down"}, {"IDLE+POWERED_DOWN", true, ""},
	}
	for _, c := range cases {
		ok, why := StateUsable(c.state)
		if ok != c.ok || why != c.why {
			t.Errorf("%s: got (%v, %q), want (%v, %q)", c.state, ok, why, c.ok, c.why)
		}
	}
}

func TestParseNodeAddrs(t *testing.T) {
	got := ParseNodeAddrs(fixture(t, "nodes-testcluster.txt"))
	want := map[string]string{"tihost1": "10.200.0.11", "tihost2": "10.200.0.12", "tihost3": "10.200.0.13"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	info := ParseNodeInfo(fixture(t, "nodes-mixed.txt"))
	if len(info) != 2 {
		t.Fatalf("%+v", info)
	}
	if n := info[0]; n.Addr != "h100-03.cluster.internal" || n.State != "IDLE+DRAIN" || n.Reason != "bad GPU 3 [admin@2026-12-01T10:05:00]" || !reflect.DeepEqual(n.Partitions, []string{"gpu"}) {
		t.Fatalf("h100-03: %+v", n)
	}
	// No NodeAddr: Slurm's default is the node name.
	if a := ParseNodeAddrs(fixture(t, "nodes-mixed.txt"))["cpu-01"]; a != "cpu-01" {
		t.Fatalf("cpu-01 addr %q", a)
	}
}

func TestShowConfig(t *testing.T) {
	cfg := fixture(t, "config-testcluster.txt")
	if !SelectMemory(cfg) {
		t.Fatal("CR_CPU_MEMORY schedules memory")
	}
	if got := ProctrackType(cfg); got != "proctrack/linuxproc" {
		t.Fatalf("proctrack %q", got)
	}
	for _, p := range []string{"CR_CPU", "CR_Core", "NONE"} {
		if SelectMemory("SelectType              = select/cons_tres\nSelectTypeParameters    = " + p + "\n") {
			t.Errorf("%s does not schedule memory", p)
		}
	}
	if !SelectMemory("SelectTypeParameters    = CR_Core_Memory,CR_ONE_TASK_PER_CORE\n") {
		t.Error("CR_Core_Memory schedules memory")
	}
	if SelectMemory("") {
		t.Error("no config, no memory")
	}
}

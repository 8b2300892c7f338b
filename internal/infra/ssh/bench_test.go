package ssh

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil"
)

// BenchmarkBootstrapNode measures what a fresh SSH host costs before its
// agent can start: infra.EnsureBinary of the node runtime over a new
// connection (uname and hash probe, upload, check, rename) against a
// plain `scp` of the same file on a new connection, the baseline; and,
// for scale, EnsureBinary of the server program (sky-server), the one
// binary that held the agent before the node runtime (nodes got all of
// it, then 105 MB). Each run starts from a host without the file.
// Medians of SKYGO_BENCH_NODE_RUNS runs (default 5), printed with ratios.
//
// `make bench-node` runs it (SKYGO_BENCH_NODE=1, SKYGO_TEST_BINARY=bin/sky).
func BenchmarkBootstrapNode(b *testing.B) {
	if os.Getenv("SKYGO_BENCH_NODE") == "" {
		b.Skip("set SKYGO_BENCH_NODE=1 (make bench-node)")
	}
	runs := 5
	if v := os.Getenv("SKYGO_BENCH_NODE_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SKYGO_BENCH_NODE_RUNS=%q is not a positive number", v)
		}
		runs = n
	}
	h := sshHosts(b)
	ep := h.endpoint(2)
	node := testutil.NodeBinary(b, runtime.GOARCH)
	sky := filepath.Join(filepath.Dir(testutil.SkyBinary(b)), "sky-server")
	ctx := context.Background()
	clean := func() {
		d := newTestDialer(b)
		if _, err := NewRunner(d, ep, "", "", "").Run(ctx, "rm -rf ~/.sky/benchboot", provision.RunOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	ensure := func(file string) time.Duration {
		clean()
		d := newTestDialer(b)
		start := time.Now()
		copied, err := infra.EnsureBinaryAt(ctx, NewRunner(d, ep, "", "", ""), func(string) (string, error) { return file, nil }, "~/.sky/benchboot/sky-node")
		el := time.Since(start)
		if err != nil || !copied {
			b.Fatalf("EnsureBinary of %s: copied=%v err=%v", file, copied, err)
		}
		return el
	}
	scp := func(file string) time.Duration {
		clean()
		start := time.Now()
		cmd := exec.Command("scp", "-q", "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
			"-o", "LogLevel=ERROR", "-i", h.Key, file, h.User+"@"+h.IPs[2]+":.sky-benchboot-scp")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("scp: %v\n%s", err, out)
		}
		return time.Since(start)
	}
	var tNode, tSCP, tSky []time.Duration
	b.ResetTimer()
	for i := 0; i < runs; i++ {
		tSCP = append(tSCP, scp(node))
		tNode = append(tNode, ensure(node))
		tSky = append(tSky, ensure(sky))
	}
	b.StopTimer()
	clean()
	med := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	size := func(p string) float64 {
		fi, err := os.Stat(p)
		if err != nil {
			b.Fatal(err)
		}
		return float64(fi.Size()) / 1e6
	}
	mNode, mSCP, mSky := med(tNode), med(tSCP), med(tSky)
	fmt.Printf("\nBootstrap of a fresh SSH host (a real sshd in a network namespace), median of %d runs:\n", runs)
	fmt.Printf("  scp of the node runtime (%.1f MB), new connection: %8s (baseline)\n", size(node), mSCP.Round(time.Millisecond))
	fmt.Printf("  EnsureBinary, node runtime:                       %8s (%.2fx scp)\n", mNode.Round(time.Millisecond), float64(mNode)/float64(mSCP))
	fmt.Printf("  EnsureBinary, server program (%.1f MB):          %8s (%.2fx scp; what held the agent before)\n\n", size(sky), mSky.Round(time.Millisecond), float64(mSky)/float64(mSCP))
	b.ReportMetric(float64(mNode)/float64(mSCP), "ensure/scp")
	b.ReportMetric(float64(mSky)/float64(mNode), "full/node")
	b.ReportMetric(float64(mNode.Milliseconds()), "ensure-ms")
}

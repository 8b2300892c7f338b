package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// offlineEnv is a fresh installation with no catalog directory and the
// hosted catalog's URL pointing at a closed port: what a user without
// network sees, whatever the machine running the tests can reach.
func offlineEnv(t testing.TB) *skyEnv {
	t.Helper()
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/catalogs"
	ln.Close()
	env := e.env[:0]
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "SKYPILOT_CATALOG_DIR=") {
			env = append(env, kv)
		}
	}
	e.env = append(env, "SKYGO_CATALOG_URL="+closed)
	return e
}

// noDownloadErrors fails when a catalog download error reached the user.
func noDownloadErrors(t *testing.T, r result) {
	t.Helper()
	for _, s := range []string{"downloading", "connection refused", "no such host", "no catalog for cloud", "catalogs/v8"} {
		if strings.Contains(r.out(), s) {
			t.Errorf("output shows a download error (%q):\n%s", s, r)
		}
	}
}

// TestOfflineDryrunNoCredentials: the README's dry run on a fresh machine
// without network or credentials prices the built-in catalog's offers,
// says for each why it was not considered, and ends as SkyPilot does
// when no cloud is enabled.
func TestOfflineDryrunNoCredentials(t *testing.T) {
	parallel(t)
	e := offlineEnv(t)
	r := e.exec(cmdTimeout, nil, "launch", "--dryrun", "-y", "--gpus", "H100:8")
	noDownloadErrors(t, r)
	if r.code != 1 {
		t.Errorf("exit %d, want 1 (NoCloudAccessError)\n%s", r.code, r)
	}
	for _, want := range []string{"Offers on infras that are not enabled", "AWS (us-east-1)", "p5.48xlarge", "55.04",
		"not enabled (sky check aws)", "Lambda (", "Not provisionable in this build of SkyGo"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r)
		}
	}
	if !strings.Contains(r.stderr, "Cloud access is not set up. Run: `sky check`") {
		t.Errorf("stderr lacks SkyPilot's no-cloud message:\n%s", r)
	}

	g := e.must("gpus", "list", "H100")
	noDownloadErrors(t, g)
	if !strings.HasPrefix(g.stdout, "GPU ") || !strings.Contains(g.stdout, "HOURLY_PRICE") || !strings.Contains(g.stdout, "Lambda") {
		t.Errorf("gpus list H100 from the built-in catalog:\n%s", g)
	}
	// -v prints long cells in full; without it they are shortened.
	long := "hyperstack__8xH100_80GB__252__1440"
	if v := e.must("gpus", "list", "H100:8", "-v"); !strings.Contains(v.stdout, long) {
		t.Errorf("gpus list -v does not print %s in full:\n%s", long, v)
	}
	if g := e.must("gpus", "list", "H100:8"); strings.Contains(g.stdout, long) || !strings.Contains(g.stdout, "...") {
		t.Errorf("gpus list without -v does not shorten %s:\n%s", long, g)
	}
	j := e.must("gpus", "list", "H100", "-o", "json")
	var parsed map[string][]map[string]any
	if err := json.Unmarshal([]byte(j.stdout), &parsed); err != nil || len(parsed["H100"]) == 0 {
		t.Fatalf("gpus list -o json: %v\n%s", err, j)
	}
	if !strings.HasPrefix(j.stdout, "{\n  \"H100\": [\n    {\n      \"") {
		t.Errorf("gpus list -o json is not 2-space indented (cli-output.md):\n%.200s", j.stdout)
	}
}

// TestOfflineDryrunAWS: with (fake) AWS credentials the same dry run
// prints SkyPilot's optimizer table, AWS chosen, and exits 0; a real
// launch fails fast on AWS being unreachable.
func TestOfflineDryrunAWS(t *testing.T) {
	parallel(t)
	e := offlineEnv(t)
	fakeCloudHome(t, e)
	e.must("check")
	r := e.must("launch", "--dryrun", "-y", "--gpus", "H100:8")
	noDownloadErrors(t, r)
	for _, want := range []string{"Considered resources (1 node):", "INFRA", "CHOSEN", "AWS (us-east-1)", "p5.48xlarge", "55.04", "✔",
		"Dryrun finished."} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r)
		}
	}
	// Spot is priced per zone: zones print as names, not zone IDs.
	s := e.must("launch", "--dryrun", "-y", "--gpus", "H100:8", "--use-spot")
	if !awsZone.MatchString(s.stdout) || strings.Contains(s.stdout, "-az") {
		t.Errorf("spot dry run does not name AWS zones as SkyPilot does:\n%s", s)
	}
	// A real launch tries AWS, which this machine cannot reach: each
	// region fails at once (no retries of a name that does not resolve),
	// saying so, and the launch ends.
	l := e.exec(cmdTimeout, nil, "launch", "-y", "-c", "h", "--gpus", "H100:8", "--", "true")
	if l.code == 0 || !strings.Contains(l.out(), "no capacity on aws/us-east-1") || !strings.Contains(l.out(), "AWS cannot be reached") {
		t.Errorf("a real launch on unreachable AWS:\n%s", l)
	}
}

// awsZone is an AWS zone name in the INFRA column: "AWS (us-east-2c)".
var awsZone = regexp.MustCompile(`AWS \([a-z]+-[a-z]+-[0-9][a-z]\)`)

// TestCatalogDirPerRequest: SKYPILOT_CATALOG_DIR is the client's, read per
// request, not the one the server was started with.
func TestCatalogDirPerRequest(t *testing.T) {
	parallel(t)
	e := offlineEnv(t)
	r := e.must("gpus", "list", "H100")
	if !strings.Contains(r.stdout, "Hyperbolic") {
		t.Fatalf("built-in catalog lacks Hyperbolic's H100:\n%s", r)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "lambda"), 0o755); err != nil {
		t.Fatal(err)
	}
	csv := "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n" +
		"gpu_1x_h100_test,H100,1,26,200,9.87,us-test-1,,\n"
	if err := os.WriteFile(filepath.Join(dir, "lambda", "vms.csv"), []byte(csv), 0o644); err != nil {
		t.Fatal(err)
	}
	r = e.exec(cmdTimeout, []string{"SKYPILOT_CATALOG_DIR=" + dir}, "gpus", "list", "H100")
	if r.code != 0 || !strings.Contains(r.stdout, "gpu_1x_h100_test") || strings.Contains(r.stdout, "Hyperbolic") {
		t.Errorf("the same server did not use the client's SKYPILOT_CATALOG_DIR:\n%s", r)
	}
	// The dry run's catalog too: the one offer of that directory.
	r = e.exec(cmdTimeout, []string{"SKYPILOT_CATALOG_DIR=" + dir}, "launch", "--dryrun", "-y", "--gpus", "H100:1")
	if !strings.Contains(r.stdout, "gpu_1x_h100_test") || strings.Contains(r.stdout, "Hyperbolic") {
		t.Errorf("the dry run did not use the client's SKYPILOT_CATALOG_DIR:\n%s", r)
	}
	if r = e.must("gpus", "list", "H100"); !strings.Contains(r.stdout, "Hyperbolic") {
		t.Errorf("without the variable, the built-in catalog again:\n%s", r)
	}
}

// TestCheckOneInfraTakesEffect: `sky check hyperbolic` enables Hyperbolic
// for the optimizer at once (no full `sky check`), and the end of `sky
// check` reads like SkyPilot's.
func TestCheckOneInfraTakesEffect(t *testing.T) {
	parallel(t)
	e := offlineEnv(t)
	c := e.must("check")
	for _, want := range []string{"Hyperbolic: disabled", "🎉 Enabled infra 🎉", "  Local [compute]",
		fmt.Sprintf("Using SkyPilot API server: http://127.0.0.1:%d", e.port)} {
		if !strings.Contains(c.stdout, want) {
			t.Errorf("sky check lacks %q:\n%s", want, c)
		}
	}
	args := []string{"launch", "--dryrun", "-y", "--infra", "hyperbolic", "--gpus", "H100:1"}
	r := e.exec(cmdTimeout, nil, args...)
	if r.code == 0 || !strings.Contains(r.out(), "run `sky check hyperbolic`") {
		t.Fatalf("hyperbolic before it is enabled:\n%s", r)
	}
	key := filepath.Join(e.home, ".hyperbolic", "api_key")
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte("e2e-fake-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c = e.must("check", "hyperbolic"); !strings.Contains(c.stdout, "Hyperbolic: enabled") {
		t.Fatalf("sky check hyperbolic:\n%s", c)
	}
	r = e.must(args...)
	if !strings.Contains(r.stdout, "Hyperbolic (") || !strings.Contains(r.stdout, "✔") {
		t.Errorf("after sky check hyperbolic the dry run does not choose it:\n%s", r)
	}
	// The partial check kept the others: local still runs CPU tasks.
	if r = e.must("launch", "--dryrun", "-y", "--", "true"); !strings.Contains(r.stdout, "Local") {
		t.Errorf("sky check hyperbolic lost the local infra:\n%s", r)
	}
}

// BenchmarkDryrunOffline: the acceptance's `sky launch --dryrun --gpus
// H100:8` on a machine without network or credentials (it exits 1, as
// SkyPilot does without cloud access), against /bin/true and `sky
// --help` in the same run. The first call, which also starts the API
// server, is reported apart.
func BenchmarkDryrunOffline(b *testing.B) {
	e := offlineEnv(b)
	args := []string{"launch", "--dryrun", "-y", "--gpus", "H100:8"}
	dryrun := func() time.Duration {
		start := time.Now()
		r := runCmd(b, cmdTimeout, e.env, e.bin, args...)
		d := time.Since(start)
		if r.code != 1 || !strings.Contains(r.stdout, "p5.48xlarge") {
			b.Fatalf("%s\n(want exit 1 and the built-in catalog's offers)", r)
		}
		return d
	}
	first := dryrun()
	var sum, base, help time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum += dryrun()
		b.StopTimer()
		base += timeRun(b, e.env, "", "/bin/true")
		help += timeRun(b, e.env, "Usage", e.bin, "--help")
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "dryrun", sum, base, b.N)
	b.ReportMetric(float64(help.Microseconds())/1000/float64(b.N), "help-ms/op")
	b.ReportMetric(float64(first.Microseconds())/1000, "first-call-ms")
}

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// The flag probes of `sky jobs pool apply / status / down / logs`, run in
// the flag walk's installation: each probe makes its own pool on the
// local infrastructure and tears it down at its end.

// poolRow is the pool's line of the Pools table ("" when not listed).
func (e *flagEnv) poolRow(name string) (row string, out flagRun) {
	r := e.sky("jobs", "pool", "status", "-a")
	for _, line := range strings.Split(r.out, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == name {
			return line, r
		}
	}
	return "", r
}

// waitPoolStatus polls until the pool's row shows status.
func (e *flagEnv) waitPoolStatus(t *testing.T, name, status string) {
	t.Helper()
	var r flagRun
	if !testutil.WaitFor(60*time.Second, 200*time.Millisecond, func() bool {
		var row string
		row, r = e.poolRow(name)
		return strings.Contains(" "+row+" ", " "+status+" ")
	}) {
		t.Fatalf("pool %s not %s after 60s: %s", name, status, r)
	}
}

// upPool applies a pool (extra flags before the YAML) and waits until it
// is READY; the pool is torn down when the probe ends.
func (e *flagEnv) upPool(t *testing.T, name, yaml string, flags ...string) flagRun {
	t.Helper()
	r := e.sky(append(append([]string{"jobs", "pool", "apply", "-y", "-p", name}, flags...), yaml)...)
	t.Cleanup(func() { e.sky("jobs", "pool", "down", "-y", name) })
	wantWorks(t, r)
	e.waitPoolStatus(t, name, "READY")
	return r
}

// setupLog is worker 1's launch and setup log.
func (e *flagEnv) setupLog(t *testing.T, name string) string {
	t.Helper()
	r := e.sky("jobs", "pool", "logs", "--no-follow", name, "1")
	wantWorks(t, r)
	return r.out
}

func poolFlagCases() []flagCase {
	var cs []flagCase
	add := func(key string, p func(*testing.T, *flagEnv)) { cs = append(cs, flagCase{key, p}) }
	apply := func(name string, flags ...string) []string {
		return append(append([]string{"jobs", "pool", "apply", "-y", "-p", name}, flags...), "pool.yaml")
	}
	k := func(f string) string { return "jobs pool apply --" + f }

	add(k("config"), configRefused("jobs", "pool", "apply", "-y", "-p", "fwp-cfg", "pool.yaml"))
	add(k("pool"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-named", "pool.yaml")
		if row, r := e.poolRow("fwp-named"); !strings.Contains(row, "1/1") {
			t.Errorf("pool fwp-named row %q, want 1/1 workers: %s", row, r)
		}
		wantWorks(t, e.sky("status"), "fwp-named-1")
	})
	add(k("mode"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-mode", "pool.yaml")
		wantWorks(t, e.sky(apply("fwp-mode", "--mode", "blue_green")...), "version 2 (blue_green update)")
		wantRefused(t, e.sky(apply("fwp-mode", "--mode", "sideways")...), "--mode")
	})
	add(k("workers"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-wk", "pool.yaml", "--workers", "2")
		e.waitPoolStatus(t, "fwp-wk", "2/2") // --workers 2 over the YAML's 1
		wantWorks(t, e.sky("jobs", "pool", "apply", "-y", "-p", "fwp-wk", "--workers", "1"), "resized to 1 worker(s)")
		wantRefused(t, e.sky("jobs", "pool", "apply", "-y", "-p", "fwp-none", "--workers", "1"), "fwp-none does not exist")
	})
	add(k("workdir"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-wd", "poolsetup.yaml", "--workdir", "wd")
		if out := e.setupLog(t, "fwp-wd"); !strings.Contains(out, "hello from the workdir") {
			t.Errorf("the setup did not run in the workdir: %s", out)
		}
	})
	add(k("infra"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-inf", "pool.yaml", "--infra", "local")
		wantRefused(t, e.sky(apply("fwp-inf2", "--infra", "aws")...), "aws")
	})
	for _, c := range []struct{ flag, value, want string }{
		{"cloud", "aws", "aws"},
		{"region", "us-east-1", "us-east-1"},
		{"zone", "us-east-1a", "us-east-1a"},
		{"memory", "99999", "99999 GB"},
		{"disk-size", "100", "disk_size 100"},
		{"disk-tier", "high", "disk_tier high"},
		{"network-tier", "best", "network_tier best"},
		{"image-id", "ami-123", "image_id"},
		{"local-disk", "nvme", "local_disk nvme"},
		{"gpus", "A100:1", "A100"},
		{"instance-type", "m5.large", "m5.large"},
		{"ports", "8080", "Cannot specify ports in a pool."},
	} {
		add(k(c.flag), refuses(apply("fwp-bad", "--"+c.flag, c.value), c.want))
	}
	add(k("use-spot"), refuses(apply("fwp-bad", "--use-spot"), "spot"))
	add(k("no-use-spot"), func(t *testing.T, e *flagEnv) { e.upPool(t, "fwp-od", "pool.yaml", "--no-use-spot") })
	add(k("num-nodes"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-nn", "pool.yaml", "--num-nodes", "2")
		wantWorks(t, e.sky("jobs", "pool", "status", "fwp-nn"), "2x(")
	})
	add(k("cpus"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-cpu", "pool.yaml", "--cpus", "1")
		wantRefused(t, e.sky(apply("fwp-cpu2", "--cpus", "4096")...), "4096 CPUs")
	})
	add(k("env"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-env", "poolsetup.yaml", "--env", "FOO=bar-value")
		if out := e.setupLog(t, "fwp-env"); !strings.Contains(out, "ENV=bar-value") {
			t.Errorf("setup did not see --env: %s", out)
		}
	})
	add(k("env-file"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-envf", "poolsetup.yaml", "--env-file", "vars.env")
		if out := e.setupLog(t, "fwp-envf"); !strings.Contains(out, "FILE=file-value") {
			t.Errorf("setup did not see --env-file: %s", out)
		}
	})
	add(k("secret"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-sec", "poolsetup.yaml", "--secret", "TOKEN=tok-value")
		if out := e.setupLog(t, "fwp-sec"); !strings.Contains(out, "SLEN=9") || strings.Contains(out, "tok-value") {
			t.Errorf("setup did not see --secret, or its log shows it: %s", out)
		}
	})
	add(k("secret-file"), func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-secf", "poolsetup.yaml", "--secret-file", "secrets.env")
		if out := e.setupLog(t, "fwp-secf"); !strings.Contains(out, "SFLEN=11") {
			t.Errorf("setup did not see --secret-file: %s", out)
		}
	})
	add(k("async"), func(t *testing.T, e *flagEnv) {
		r := e.sky(apply("fwp-async", "--async")...)
		t.Cleanup(func() { e.sky("jobs", "pool", "down", "-y", "fwp-async") })
		wantWorks(t, r, "Submitted sky.jobs.pool_apply request")
		e.waitPoolStatus(t, "fwp-async", "READY")
	})
	add(k("no-async"), func(t *testing.T, e *flagEnv) {
		r := e.upPool(t, "fwp-sync", "pool.yaml", "--no-async")
		wantWorks(t, r, "Pool 'fwp-sync' is spinning up 1 worker(s).")
	})
	add(k("yes"), func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.skyIn("n\n", "jobs", "pool", "apply", "-p", "fwp-ask", "pool.yaml"), "Aborted")
		if row, _ := e.poolRow("fwp-ask"); row != "" {
			t.Errorf("a declined apply made the pool: %s", row)
		}
		e.upPool(t, "fwp-yes", "pool.yaml")
	})

	add("jobs pool status --config", configRefused("jobs", "pool", "status"))
	add("jobs pool status --verbose", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-v", "pool.yaml")
		wantWorks(t, e.sky("jobs", "pool", "status", "-v", "fwp-v"), "POLICY", "Fixed 1", "fwp-v-1")
		if r := e.sky("jobs", "pool", "status", "fwp-v"); strings.Contains(r.out, "POLICY") {
			t.Errorf("status without -v shows the policy column: %s", r)
		}
	})
	add("jobs pool status --all", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("jobs", "pool", "apply", "-y", "-p", "fwp-fail", "poolfail.yaml"))
		t.Cleanup(func() { e.sky("jobs", "pool", "down", "-y", "--purge", "fwp-fail") })
		e.waitPoolStatus(t, "fwp-fail", "FAILED")
		if r := e.sky("jobs", "pool", "status", "fwp-fail"); !strings.Contains(r.out, "No workers") {
			t.Errorf("status without -a lists the failed worker: %s", r)
		}
		r := e.sky("jobs", "pool", "status", "-a", "fwp-fail")
		wantWorks(t, r, "FAILED")
		if n := strings.Count(r.out, "\nfwp-fail "); n != 2 {
			t.Errorf("status -a: want the pool's row and its failed worker's: %s", r)
		}
	})

	add("jobs pool down --config", configRefused("jobs", "pool", "down", "-y", "fwp-x"))
	add("jobs pool down --all", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-all1", "pool.yaml")
		e.upPool(t, "fwp-all2", "pool.yaml")
		wantWorks(t, e.sky("jobs", "pool", "down", "-y", "-a"), "Pool 'fwp-all1' is torn down.", "Pool 'fwp-all2' is torn down.")
		if r := e.sky("status"); strings.Contains(r.out, "fwp-all") {
			t.Errorf("workers survived pool down -a: %s", r)
		}
	})
	add("jobs pool down --purge", func(t *testing.T, e *flagEnv) {
		wantWorks(t, e.sky("jobs", "pool", "apply", "-y", "-p", "fwp-purge", "poolfail.yaml"))
		e.waitPoolStatus(t, "fwp-purge", "FAILED")
		wantWorks(t, e.sky("jobs", "pool", "down", "-y", "--purge", "fwp-purge"), "Pool 'fwp-purge' is torn down.")
		if row, _ := e.poolRow("fwp-purge"); row != "" {
			t.Errorf("purged pool still listed: %s", row)
		}
	})
	add("jobs pool down --yes", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-dy", "pool.yaml")
		wantRefused(t, e.skyIn("n\n", "jobs", "pool", "down", "fwp-dy"), "Aborted")
		if row, _ := e.poolRow("fwp-dy"); row == "" {
			t.Errorf("a declined down took the pool")
		}
		wantWorks(t, e.sky("jobs", "pool", "down", "-y", "fwp-dy"), "torn down")
	})
	add("jobs pool down --async", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-da", "pool.yaml")
		wantWorks(t, e.sky("jobs", "pool", "down", "-y", "--async", "fwp-da"), "Submitted sky.jobs.pool_down request")
		var row string
		if !testutil.WaitFor(60*time.Second, 200*time.Millisecond, func() bool { row, _ = e.poolRow("fwp-da"); return row == "" }) {
			t.Fatalf("pool fwp-da still there 60s after an async down: %s", row)
		}
	})
	add("jobs pool down --no-async", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-dn", "pool.yaml")
		wantWorks(t, e.sky("jobs", "pool", "down", "-y", "--no-async", "fwp-dn"), "Pool 'fwp-dn' is torn down.")
	})

	add("jobs pool logs --config", configRefused("jobs", "pool", "logs", "--no-follow", "fwp-x", "1"))
	add("jobs pool logs --controller", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-lc", "pool.yaml")
		wantWorks(t, e.sky("jobs", "pool", "logs", "--no-follow", "--controller", "fwp-lc"), "Pool fwp-lc created by ", "Worker 1 (fwp-lc-1) is READY.")
	})
	add("jobs pool logs --follow", func(t *testing.T, e *flagEnv) {
		r := e.sky("jobs", "pool", "apply", "-y", "--async", "-p", "fwp-lf", "poolsetup.yaml")
		t.Cleanup(func() { e.sky("jobs", "pool", "down", "-y", "fwp-lf") })
		wantWorks(t, r)
		// The worker may not be recorded yet when the request is accepted.
		testutil.WaitFor(30*time.Second, 200*time.Millisecond, func() bool {
			r = e.sky("jobs", "pool", "logs", "--follow", "fwp-lf", "1")
			return r.code == 0
		})
		wantWorks(t, r, "Setup job", "ENV=")
	})
	add("jobs pool logs --no-follow", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-ln", "poolsetup.yaml")
		wantWorks(t, e.sky("jobs", "pool", "logs", "--no-follow", "fwp-ln", "1"), "ENV=")
		wantRefused(t, e.sky("jobs", "pool", "logs", "--no-follow", "fwp-ln", "9"), "no worker 9")
	})
	add("jobs pool logs --tail", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-lt", "pool.yaml")
		r := e.sky("jobs", "pool", "logs", "--no-follow", "--tail", "1", "--controller", "fwp-lt")
		wantWorks(t, r, "is READY.")
		if n := strings.Count(strings.TrimSpace(r.out), "\n"); n != 0 {
			t.Errorf("--tail 1 printed %d lines: %s", n+1, r)
		}
	})
	add("status --show-pools", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-st", "pool.yaml")
		wantWorks(t, e.sky("status", "--show-pools"), "Pools", "fwp-st", "1/1")
	})
	add("status --no-show-pools", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-nst", "pool.yaml")
		wantWorks(t, e.sky("status"), "fwp-nst  1")
		if r := e.sky("status", "--no-show-pools"); strings.Contains(r.out, "Pools") {
			t.Errorf("--no-show-pools shows the pools section: %s", r)
		}
	})
	add("jobs pool logs --sync-down", func(t *testing.T, e *flagEnv) {
		e.upPool(t, "fwp-sd", "poolsetup.yaml")
		dir := filepath.Join(e.home, "sky_logs", "pools", "fwp-sd")
		wantWorks(t, e.sky("jobs", "pool", "logs", "-s", "fwp-sd"), "Pool fwp-sd logs: "+dir)
		for file, want := range map[string]string{"controller.log": "is READY.", "worker-1.log": "ENV="} {
			if b, err := os.ReadFile(filepath.Join(dir, file)); err != nil || !strings.Contains(string(b), want) {
				t.Errorf("synced %s: %q, %v", file, b, err)
			}
		}
		os.RemoveAll(dir)
		wantWorks(t, e.sky("jobs", "pool", "logs", "-s", "--controller", "fwp-sd"))
		if _, err := os.Stat(filepath.Join(dir, "worker-1.log")); err == nil {
			t.Errorf("-s --controller also synced the worker's log")
		}
		wantRefused(t, e.sky("jobs", "pool", "logs", "-s", "fwp-sd", "7"), "no worker 7")
	})
	return cs
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/testutil"
)

// The flag probes of `sky serve up / update / status / down / logs` and
// of the Services section of `sky status`, run in the flag walk's
// installation. A probe that needs a running service makes its own on
// the local infrastructure, whose replica serves its working directory
// over HTTP (python3 -m http.server), and tears it down at its end. The
// resource flags are proven through the estimate `sky serve up` shows
// before its prompt: it is the optimizer's answer for the very task the
// service would launch.

// replicaPython is the interpreter replicas serve HTTP with. The flag
// walk's HOME is a temp directory, so a pyenv shim would not find its
// versions: the system one is taken.
func replicaPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "/usr/local/bin/python3"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Skip("no system python3 for the replicas' HTTP server")
	return ""
}

// serviceYAML writes a service YAML whose replica runs pre (a shell
// line, may be empty) and then serves its working directory on a free
// port of its head node's address (local nodes without a network
// namespace of their own share the machine's ports, and two replicas
// are up together during an update); without withPort resources.ports
// is left out (the probe gives --ports).
// It returns the file name in the work directory and the port.
func (e *flagEnv) serviceYAML(t *testing.T, name, pre string, withPort bool) (string, int) {
	t.Helper()
	return e.serviceYAMLOn(t, name, pre, withPort, testutil.FreePort(t), "replicas: 1")
}

// serviceYAMLOn is serviceYAML on a given port (a new version keeps its
// service's port) with the given replica count or policy.
func (e *flagEnv) serviceYAMLOn(t *testing.T, name, pre string, withPort bool, port int, replicas string) (string, int) {
	t.Helper()
	res := ""
	if withPort {
		res = fmt.Sprintf("resources:\n  ports: %d\n", port)
	}
	if pre == "" {
		pre = "true"
	}
	yaml := fmt.Sprintf(`service:
  readiness_probe:
    path: /
    initial_delay_seconds: 120
    endpoint_probe_interval_seconds: 1
    timeout_seconds: 2
  %s
%srun: |
  %s
  exec %s -m http.server %d --bind "$(echo "$SKYPILOT_NODE_IPS" | head -n1)"
`, replicas, res, pre, replicaPython(t), port)
	file := "svc-" + name + ".yaml"
	if err := os.WriteFile(filepath.Join(e.dir, file), []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return file, port
}

// envPre prints what the env and secret probes look for.
const envPre = `echo ENV=$FOO FILE=$FROM_FILE SLEN=${#TOKEN} SFLEN=${#SECRET_FILE} REPLICA=$SKYPILOT_SERVE_REPLICA_ID`

// serviceRecord is the service's record from `sky serve status -o
// json` (nil when it is not listed).
func (e *flagEnv) serviceRecord(t *testing.T, name string) *api.ServiceRecord {
	t.Helper()
	r := e.sky("serve", "status", "-o", "json")
	var recs []api.ServiceRecord
	if err := json.Unmarshal([]byte(r.out), &recs); err != nil {
		t.Fatalf("serve status -o json: %v\n%s", err, r)
	}
	for i := range recs {
		if recs[i].Name == name {
			return &recs[i]
		}
	}
	return nil
}

// waitService polls until ok holds of the service's record (nil when
// gone).
func (e *flagEnv) waitService(t *testing.T, name, what string, ok func(*api.ServiceRecord) bool) *api.ServiceRecord {
	t.Helper()
	var rec *api.ServiceRecord
	if !testutil.WaitFor(120*time.Second, 300*time.Millisecond, func() bool { rec = e.serviceRecord(t, name); return ok(rec) }) {
		t.Fatalf("service %s not %s after 120s: %+v\n%s", name, what, rec, e.sky("serve", "status", "-v", name))
	}
	return rec
}

// readyReplica is the ID of a READY replica of version v (0: any), or 0.
func readyReplica(rec *api.ServiceRecord, v int) int {
	if rec == nil {
		return 0
	}
	for _, rep := range rec.Replicas {
		if rep.Status == api.ReplicaReady && (v == 0 || rep.Version == v) {
			return rep.ID
		}
	}
	return 0
}

func (e *flagEnv) waitReady(t *testing.T, name string, version int) (*api.ServiceRecord, int) {
	t.Helper()
	rec := e.waitService(t, name, fmt.Sprintf("READY with a READY replica of version %d", version), func(r *api.ServiceRecord) bool {
		if r != nil && r.Status == api.ServiceFailed {
			var logs strings.Builder
			for _, rep := range r.Replicas {
				if api.ReplicaFailedStatus(rep.Status) {
					fmt.Fprintf(&logs, "\n--- sky serve logs %s %d:\n%s", name, rep.ID, e.sky("serve", "logs", "--no-follow", name, fmt.Sprint(rep.ID)).out)
				}
			}
			t.Fatalf("service %s FAILED (%s)%s", name, r.Reason, logs.String())
		}
		return r != nil && r.Status == api.ServiceReady && readyReplica(r, version) > 0
	})
	return rec, readyReplica(rec, version)
}

func (e *flagEnv) waitGone(t *testing.T, name string) {
	t.Helper()
	e.waitService(t, name, "gone", func(r *api.ServiceRecord) bool { return r == nil })
}

// upService runs `sky serve up -y -n name FLAGS yaml`, waits until a
// replica is READY and returns the run and that replica's ID; the
// service is torn down when the probe ends.
func (e *flagEnv) upService(t *testing.T, name, yaml string, flags ...string) (flagRun, int) {
	t.Helper()
	r := e.sky(append(append([]string{"serve", "up", "-y", "-n", name}, flags...), yaml)...)
	t.Cleanup(func() { e.sky("serve", "down", "-y", "--purge", name) })
	wantWorks(t, r)
	_, id := e.waitReady(t, name, 0)
	return r, id
}

// updateService runs `sky serve update -y name FLAGS yaml` and waits
// until a replica of the new version is READY; it returns that
// replica's ID.
func (e *flagEnv) updateService(t *testing.T, name, yaml string, flags ...string) int {
	t.Helper()
	r := e.sky(append(append([]string{"serve", "update", "-y"}, flags...), name, yaml)...)
	wantWorks(t, r, "version 2")
	_, id := e.waitReady(t, name, 2)
	return id
}

// replicaLog is a replica's log so far.
func (e *flagEnv) replicaLog(t *testing.T, name string, id int) string {
	t.Helper()
	r := e.sky("serve", "logs", "--no-follow", name, fmt.Sprint(id))
	wantWorks(t, r)
	return r.out
}

// getVia fetches path from the service through its load balancer.
func (e *flagEnv) getVia(t *testing.T, name, path string) string {
	t.Helper()
	r := e.sky("serve", "status", "--endpoint", name)
	wantWorks(t, r)
	url := strings.TrimSpace(r.out)
	if !strings.HasPrefix(url, "http://") {
		t.Fatalf("endpoint %q is not an http URL: %s", url, r)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url + path)
	if err != nil {
		t.Fatalf("GET %s%s: %v", url, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s%s: %d %s", url, path, resp.StatusCode, b)
	}
	return string(b)
}

func serveFlagCases() []flagCase {
	var cs []flagCase
	add := func(key string, p func(*testing.T, *flagEnv)) { cs = append(cs, flagCase{key, p}) }
	// estimate is `sky serve up/update` up to its prompt, answered no:
	// the resource flags' effect is the estimate's verdict.
	estimate := func(cmd string, flags ...string) []string {
		args := []string{"serve", cmd, "fws-none"}
		if cmd == "up" {
			args = []string{"serve", cmd, "-n", "fws-none"}
		}
		return append(append(args, flags...), "service.yaml")
	}
	estimateRefused := func(cmd string, flags []string, want ...string) func(*testing.T, *flagEnv) {
		return func(t *testing.T, e *flagEnv) {
			t.Helper()
			wantRefused(t, e.skyIn("n\n", estimate(cmd, flags...)...), want...)
		}
	}

	for _, cmd := range []string{"up", "update"} {
		k := func(f string) string { return "serve " + cmd + " --" + f }
		cmd := cmd
		// The config reaches the server with the estimate's request.
		add(k("config"), func(t *testing.T, e *flagEnv) {
			wantRefused(t, e.skyIn("n\n", estimate(cmd, "--config", "active_workspace=nope")...), "Workspace nope does not exist")
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
		} {
			add(k(c.flag), estimateRefused(cmd, []string{"--" + c.flag, c.value}, c.want))
		}
		add(k("use-spot"), estimateRefused(cmd, []string{"--use-spot"}, "spot"))
		add(k("yes"), func(t *testing.T, e *flagEnv) {
			r := e.skyIn("n\n", estimate(cmd)...)
			wantRefused(t, r, "Aborted")
			verb := map[string]string{"up": "Launching a new service", "update": "Updating service 'fws-none'"}[cmd]
			if !strings.Contains(r.out, verb) || !strings.Contains(r.out, "Service spec:") || !strings.Contains(r.out, "Considered resources") {
				t.Errorf("without -y: want the spec, the estimate and the prompt: %s", r)
			}
			if cmd == "up" {
				if rec := e.serviceRecord(t, "fws-none"); rec != nil {
					t.Errorf("a declined up made a service: %+v", rec)
				}
				yaml, _ := e.serviceYAML(t, "yes", "", true)
				e.upService(t, "fws-yes", yaml)
				return
			}
			yaml, _ := e.serviceYAML(t, "updyes", "", true)
			e.upService(t, "fws-updyes", yaml)
			wantRefused(t, e.skyIn("n\n", "serve", "update", "fws-updyes", yaml), "Aborted")
			if rec := e.serviceRecord(t, "fws-updyes"); rec == nil || rec.Version != 1 {
				t.Errorf("a declined update changed the service: %+v", rec)
			}
		})
	}

	// Flags that work: each over a service of its own (up) or a new
	// version of one (update).
	withFlag := func(key string, pre string, withPort bool, flags []string, check func(t *testing.T, e *flagEnv, name string, id int)) {
		for _, cmd := range []string{"up", "update"} {
			cmd := cmd
			add("serve "+cmd+" --"+key, func(t *testing.T, e *flagEnv) {
				name := "fws-" + map[string]string{"up": "u", "update": "d"}[cmd] + "-" + strings.ReplaceAll(key, "-", "")
				if len(name) > 30 {
					name = name[:30]
				}
				// A new version keeps the service's port.
				yaml, port := e.serviceYAML(t, name, pre, withPort)
				fl := append([]string(nil), flags...)
				for i, f := range fl {
					fl[i] = strings.ReplaceAll(f, "PORT", fmt.Sprint(port))
				}
				if cmd == "up" {
					_, id := e.upService(t, name, yaml, fl...)
					check(t, e, name, id)
					return
				}
				base, _ := e.serviceYAMLOn(t, name+"-v1", "", true, port, "replicas: 1")
				e.upService(t, name, base)
				check(t, e, name, e.updateService(t, name, yaml, fl...))
			})
		}
	}
	withFlag("workdir", "", true, []string{"--workdir", "wd"}, func(t *testing.T, e *flagEnv, name string, _ int) {
		if got := e.getVia(t, name, "/hello.txt"); !strings.Contains(got, "hello from the workdir") {
			t.Errorf("the replica does not serve the workdir: %q", got)
		}
	})
	withFlag("infra", "", true, []string{"--infra", "local"}, func(t *testing.T, e *flagEnv, name string, id int) {
		rec := e.serviceRecord(t, name)
		for _, rep := range rec.Replicas {
			if rep.ID == id && !strings.Contains(strings.ToLower(rep.Infra), "local") {
				t.Errorf("replica %d infra %q, want local", id, rep.Infra)
			}
		}
	})
	withFlag("no-use-spot", "", true, []string{"--no-use-spot"}, func(t *testing.T, e *flagEnv, name string, id int) {
		for _, rep := range e.serviceRecord(t, name).Replicas {
			if rep.ID == id && rep.IsSpot {
				t.Errorf("replica %d is spot", id)
			}
		}
	})
	// Only the head serves: without a network namespace per node the
	// local nodes share the machine's ports.
	withFlag("num-nodes", `[ "$SKYPILOT_NODE_RANK" = 0 ] || exec sleep 100000`, true, []string{"--num-nodes", "2"}, func(t *testing.T, e *flagEnv, name string, id int) {
		if n := e.statusOf(t, fmt.Sprintf("%s-%d", name, id))["nodes"]; n != 2.0 {
			t.Errorf("replica cluster %s-%d has %v nodes, want 2", name, id, n)
		}
		for _, rep := range e.serviceRecord(t, name).Replicas {
			if rep.ID == id && !strings.HasPrefix(rep.Resources, "2x") {
				t.Errorf("replica %d resources %q, want 2 nodes", id, rep.Resources)
			}
		}
	})
	// What --cpus asks reaches the estimate; a request the machine meets
	// launches.
	withFlag("cpus", "", true, []string{"--cpus", "1"}, func(t *testing.T, e *flagEnv, _ string, _ int) {
		wantRefused(t, e.skyIn("n\n", estimate("up", "--cpus", "4096")...), "4096 CPUs")
	})
	withFlag("ports", "", false, []string{"--ports", "PORT"}, func(t *testing.T, e *flagEnv, name string, _ int) {
		// The only port opened is the service port: the balancer reaches it.
		if got := e.getVia(t, name, "/"); !strings.Contains(got, "Directory listing") {
			t.Errorf("GET / through the balancer: %q", got)
		}
	})
	withFlag("env", envPre, true, []string{"--env", "FOO=bar-value"}, func(t *testing.T, e *flagEnv, name string, id int) {
		if out := e.replicaLog(t, name, id); !strings.Contains(out, "ENV=bar-value") || !strings.Contains(out, fmt.Sprintf("REPLICA=%d", id)) {
			t.Errorf("the replica did not see --env (or its replica ID): %s", out)
		}
	})
	withFlag("env-file", envPre, true, []string{"--env-file", "vars.env"}, func(t *testing.T, e *flagEnv, name string, id int) {
		if out := e.replicaLog(t, name, id); !strings.Contains(out, "FILE=file-value") {
			t.Errorf("the replica did not see --env-file: %s", out)
		}
	})
	withFlag("secret", envPre, true, []string{"--secret", "TOKEN=tok-value"}, func(t *testing.T, e *flagEnv, name string, id int) {
		if out := e.replicaLog(t, name, id); !strings.Contains(out, "SLEN=9") || strings.Contains(out, "tok-value") {
			t.Errorf("the replica did not see --secret, or its log shows it: %s", out)
		}
	})
	withFlag("secret-file", envPre, true, []string{"--secret-file", "secrets.env"}, func(t *testing.T, e *flagEnv, name string, id int) {
		if out := e.replicaLog(t, name, id); !strings.Contains(out, "SFLEN=11") || strings.Contains(out, "s3cr3t-file") {
			t.Errorf("the replica did not see --secret-file, or its log shows it: %s", out)
		}
	})
	for _, cmd := range []string{"up", "update"} {
		cmd := cmd
		add("serve "+cmd+" --async", func(t *testing.T, e *flagEnv) {
			yaml, _ := e.serviceYAML(t, "async-"+cmd, "", true)
			name := "fws-async-" + cmd
			if cmd == "update" {
				e.upService(t, name, yaml)
				wantWorks(t, e.sky("serve", "update", "-y", "--async", name, yaml), "Submitted sky.serve.update request")
				e.waitReady(t, name, 2)
				return
			}
			r := e.sky("serve", "up", "-y", "--async", "-n", name, yaml)
			t.Cleanup(func() { e.sky("serve", "down", "-y", "--purge", name) })
			wantWorks(t, r, "Submitted sky.serve.up request")
			if strings.Contains(r.out, "Service is spinning up") {
				t.Errorf("--async printed the closing block: %s", r)
			}
			e.waitReady(t, name, 0)
		})
		add("serve "+cmd+" --no-async", func(t *testing.T, e *flagEnv) {
			yaml, _ := e.serviceYAML(t, "sync-"+cmd, "", true)
			name := "fws-sync-" + cmd
			r, _ := e.upService(t, name, yaml, "--no-async")
			wantWorks(t, r, "Service name: "+name, "Endpoint URL: http://", "curl http://", "✓ Service is spinning up and replicas will be ready shortly.")
			if cmd == "update" {
				wantWorks(t, e.sky("serve", "update", "-y", "--no-async", name, yaml), "version 2", "sky serve status "+name)
			}
		})
	}
	add("serve up --service-name", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("serve", "up", "-y", "-n", "1bad", "service.yaml"), "invalid service name")
		yaml, _ := e.serviceYAML(t, "named", "", true)
		_, id := e.upService(t, "fws-named", yaml)
		if s := e.statusOf(t, fmt.Sprintf("fws-named-%d", id))["status"]; s != "UP" {
			t.Errorf("replica cluster fws-named-%d is %v, want UP", id, s)
		}
	})
	for _, c := range []struct{ flag, file, want string }{{"git-url", "/README.txt", "from git"}, {"git-ref", "/OTHER.txt", "on the other branch"}} {
		c := c
		add("serve up --"+c.flag, func(t *testing.T, e *flagEnv) {
			repo := "file://" + filepath.Join(e.dir, "git")
			flags := []string{"--git-url", repo}
			if c.flag == "git-ref" {
				wantRefused(t, e.sky("serve", "up", "-y", "--git-ref", "main", "service.yaml"), "--git-ref needs a git workdir")
				flags = append(flags, "--git-ref", "other")
			}
			yaml, _ := e.serviceYAML(t, c.flag, "", true)
			name := "fws-" + c.flag
			e.upService(t, name, yaml, flags...)
			if got := e.getVia(t, name, c.file); !strings.Contains(got, c.want) {
				t.Errorf("the replica does not serve the repository's %s: %q", c.file, got)
			}
		})
	}
	add("serve update --mode", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("serve", "update", "-y", "--mode", "sideways", "fws-none", "service.yaml"), "--mode")
		// Blue-green holds the old replica until the new one is READY:
		// max_replicas leaves room for both.
		yaml, _ := e.serviceYAMLOn(t, "mode", "", true, testutil.FreePort(t),
			"replica_policy: {min_replicas: 1, max_replicas: 2, target_qps_per_replica: 1000}")
		e.upService(t, "fws-mode", yaml)
		r := e.sky("serve", "update", "-y", "--mode", "blue_green", "fws-mode", yaml)
		wantWorks(t, r, "version 2 (blue_green update)")
		rec, _ := e.waitReady(t, "fws-mode", 2)
		if rec.UpdateMode != "" && rec.UpdateMode != api.UpdateBlueGreen {
			t.Errorf("update mode %q, want blue_green", rec.UpdateMode)
		}
	})

	add("serve status --config", func(t *testing.T, e *flagEnv) {
		configRefused("serve", "status")(t, e)
	})
	add("serve status --verbose", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "verbose", "", true)
		e.upService(t, "fws-v", yaml)
		wantWorks(t, e.sky("serve", "status", "-v", "fws-v"), "AUTOSCALING_POLICY", "LOAD_BALANCING_POLICY", "REQUESTED_RESOURCES", "fws-v-1")
		if r := e.sky("serve", "status", "fws-v"); strings.Contains(r.out, "AUTOSCALING_POLICY") || !strings.Contains(r.out, "Service Replicas") {
			t.Errorf("status without -v: want the two tables without the policy column: %s", r)
		}
	})
	add("serve status --endpoint", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "endpoint", "", true)
		e.upService(t, "fws-ep", yaml)
		r := e.sky("serve", "status", "--endpoint", "fws-ep")
		wantWorks(t, r)
		if lines := strings.Split(strings.TrimSpace(r.out), "\n"); len(lines) != 1 || !regexp.MustCompile(`^https?://[^/]+:\d+$`).MatchString(lines[0]) {
			t.Errorf("--endpoint: want only the URL: %s", r)
		}
		if got := e.getVia(t, "fws-ep", "/"); !strings.Contains(got, "Directory listing") {
			t.Errorf("GET through the endpoint: %q", got)
		}
		wantRefused(t, e.sky("serve", "status", "--endpoint", "fws-nope"), "fws-nope", "does not exist")
		wantRefused(t, e.sky("serve", "status", "--endpoint"), "--endpoint needs exactly one SERVICE_NAME")
	})
	add("serve status --output", func(t *testing.T, e *flagEnv) {
		wantRefused(t, e.sky("serve", "status", "-o", "yaml"), "-o/--output")
		yaml, _ := e.serviceYAML(t, "output", "", true)
		e.upService(t, "fws-json", yaml)
		if rec := e.serviceRecord(t, "fws-json"); rec == nil || len(rec.Replicas) == 0 || rec.Version != 1 {
			t.Errorf("-o json: %+v", rec)
		}
	})

	add("serve down --config", func(t *testing.T, e *flagEnv) {
		configRefused("serve", "down", "-y", "fws-x")(t, e)
	})
	add("serve down --all", func(t *testing.T, e *flagEnv) {
		y1, _ := e.serviceYAML(t, "all1", "", true)
		y2, _ := e.serviceYAML(t, "all2", "", true)
		e.upService(t, "fws-all1", y1)
		e.upService(t, "fws-all2", y2)
		wantWorks(t, e.sky("serve", "down", "-y", "-a"))
		e.waitGone(t, "fws-all1")
		e.waitGone(t, "fws-all2")
	})
	add("serve down --purge", func(t *testing.T, e *flagEnv) {
		if err := os.WriteFile(filepath.Join(e.dir, "svc-fail.yaml"), []byte("service:\n  readiness_probe: /\n  replicas: 1\nresources:\n  ports: 8080\nrun: exit 3\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wantWorks(t, e.sky("serve", "up", "-y", "-n", "fws-purge", "svc-fail.yaml"))
		t.Cleanup(func() { e.sky("serve", "down", "-y", "--purge", "fws-purge") })
		e.waitService(t, "fws-purge", "FAILED", func(r *api.ServiceRecord) bool { return r != nil && r.Status == api.ServiceFailed })
		wantWorks(t, e.sky("serve", "down", "-y", "--purge", "fws-purge"))
		e.waitGone(t, "fws-purge")
	})
	add("serve down --yes", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "downyes", "", true)
		e.upService(t, "fws-dy", yaml)
		r := e.skyIn("n\n", "serve", "down", "fws-dy")
		wantRefused(t, r, "Aborted")
		if !strings.Contains(r.out, "Terminating service(s) 'fws-dy'. Proceed?") {
			t.Errorf("want SkyPilot's prompt: %s", r)
		}
		if rec := e.serviceRecord(t, "fws-dy"); rec == nil {
			t.Errorf("a declined down took the service")
		}
		wantWorks(t, e.sky("serve", "down", "-y", "fws-dy"))
		e.waitGone(t, "fws-dy")
	})
	add("serve down --replica-id", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "rid", "", true)
		_, id := e.upService(t, "fws-rid", yaml)
		wantRefused(t, e.sky("serve", "down", "-y", "--replica-id", "1", "fws-rid", "fws-other"), "--replica-id needs exactly one SERVICE_NAME")
		wantWorks(t, e.sky("serve", "down", "-y", "--replica-id", fmt.Sprint(id), "fws-rid"))
		// The replica goes; the service, which wants one, launches another.
		e.waitService(t, "fws-rid", fmt.Sprintf("without replica %d serving", id), func(r *api.ServiceRecord) bool {
			if r == nil {
				return false
			}
			for _, rep := range r.Replicas {
				if rep.ID == id && !api.ReplicaTerminalStatus(rep.Status) {
					return false
				}
			}
			return true
		})
		if rec := e.serviceRecord(t, "fws-rid"); rec == nil {
			t.Errorf("terminating a replica took the whole service")
		}
		wantRefused(t, e.sky("serve", "down", "-y", "--replica-id", "99", "fws-rid"), "99")
	})
	add("serve down --async", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "downasync", "", true)
		e.upService(t, "fws-da", yaml)
		wantWorks(t, e.sky("serve", "down", "-y", "--async", "fws-da"), "Submitted sky.serve.down request")
		e.waitGone(t, "fws-da")
	})
	add("serve down --no-async", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "downsync", "", true)
		_, id := e.upService(t, "fws-dn", yaml)
		wantWorks(t, e.sky("serve", "down", "-y", "--no-async", "fws-dn"))
		if rec := e.serviceRecord(t, "fws-dn"); rec != nil && rec.Status != api.ServiceShuttingDown {
			t.Errorf("after a synchronous down the service is %s", rec.Status)
		}
		e.waitGone(t, "fws-dn")
		e.waitStatus(t, fmt.Sprintf("fws-dn-%d", id), "", 60*time.Second)
	})

	add("serve logs --config", func(t *testing.T, e *flagEnv) {
		configRefused("serve", "logs", "--no-follow", "fws-x", "1")(t, e)
	})
	add("serve logs --controller", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "logc", "", true)
		_, id := e.upService(t, "fws-lc", yaml)
		r := e.sky("serve", "logs", "--no-follow", "--controller", "fws-lc")
		wantWorks(t, r)
		if !strings.Contains(r.out, fmt.Sprintf("fws-lc-%d", id)) && !strings.Contains(strings.ToLower(r.out), fmt.Sprintf("replica %d", id)) {
			t.Errorf("the controller log does not mention replica %d: %s", id, r)
		}
	})
	add("serve logs --load-balancer", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "loglb", "", true)
		e.upService(t, "fws-llb", yaml)
		e.getVia(t, "fws-llb", "/")
		r := e.sky("serve", "logs", "--no-follow", "--load-balancer", "fws-llb")
		wantWorks(t, r)
		if strings.TrimSpace(r.out) == "" || r.out == e.sky("serve", "logs", "--no-follow", "--controller", "fws-llb").out {
			t.Errorf("want the load balancer's own log: %s", r)
		}
	})
	add("serve logs --follow", func(t *testing.T, e *flagEnv) {
		// A replica whose job ends: following its log ends with it.
		if err := os.WriteFile(filepath.Join(e.dir, "svc-follow.yaml"), []byte("service:\n  readiness_probe: /\n  replicas: 1\nresources:\n  ports: 8080\nrun: echo FOLLOW-1; sleep 2; echo FOLLOW-2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		wantWorks(t, e.sky("serve", "up", "-y", "-n", "fws-lf", "svc-follow.yaml"))
		t.Cleanup(func() { e.sky("serve", "down", "-y", "--purge", "fws-lf") })
		deadline := time.Now().Add(60 * time.Second)
		var r flagRun
		for {
			r = e.sky("serve", "logs", "--follow", "fws-lf", "1")
			if r.code == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		wantWorks(t, r, "FOLLOW-1", "FOLLOW-2")
	})
	add("serve logs --no-follow", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "lognf", envPre, true)
		_, id := e.upService(t, "fws-ln", yaml)
		wantWorks(t, e.sky("serve", "logs", "--no-follow", "fws-ln", fmt.Sprint(id)), "ENV=")
		wantRefused(t, e.sky("serve", "logs", "--no-follow", "fws-ln", "99"), "99")
	})
	add("serve logs --tail", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "logtail", "echo TAIL-A; echo TAIL-B", true)
		_, id := e.upService(t, "fws-lt", yaml)
		r := e.sky("serve", "logs", "--no-follow", "--tail", "1", "--controller", "fws-lt")
		wantWorks(t, r)
		if n := strings.Count(strings.TrimSpace(r.out), "\n"); n != 0 {
			t.Errorf("--tail 1 printed %d lines: %s", n+1, r)
		}
		wantRefused(t, e.sky("serve", "logs", "--tail", "-1", "fws-lt", fmt.Sprint(id)), "--tail")
	})
	add("serve logs --sync-down", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "logsd", envPre, true)
		_, id := e.upService(t, "fws-sd", yaml)
		dir := filepath.Join(e.home, "sky_logs", "service", "fws-sd")
		wantWorks(t, e.sky("serve", "logs", "-s", "fws-sd"), "Service fws-sd logs: "+dir)
		all := filesUnder(dir)
		for _, f := range []string{"controller.log", "load_balancer.log", fmt.Sprintf("replica_%d.log", id)} {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || len(b) == 0 {
				t.Errorf("synced %v: %s missing or empty (%v)", all, f, err)
			}
		}
		os.RemoveAll(dir)
		wantWorks(t, e.sky("serve", "logs", "-s", "--controller", "fws-sd"))
		if only := filesUnder(dir); len(only) != 1 {
			t.Errorf("-s --controller synced %v, want only the controller's log", only)
		}
		wantRefused(t, e.sky("serve", "logs", "-s", "fws-sd", fmt.Sprint(id+50)), fmt.Sprint(id+50))
	})

	add("status --show-services", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "st", "", true)
		e.upService(t, "fws-st", yaml)
		wantWorks(t, e.sky("status", "--show-services"), "Services", "fws-st", "1/1", "sky serve status -v")
	})
	add("status --no-show-services", func(t *testing.T, e *flagEnv) {
		yaml, _ := e.serviceYAML(t, "nst", "", true)
		e.upService(t, "fws-nst", yaml)
		wantWorks(t, e.sky("status"), "fws-nst")
		if r := e.sky("status", "--no-show-services"); strings.Contains(r.out, "Services") {
			t.Errorf("--no-show-services shows the services section: %s", r)
		}
	})
	return cs
}

// filesUnder lists the regular files below dir.
func filesUnder(dir string) []string {
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

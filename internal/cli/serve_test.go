package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/client"
)

func TestServiceURL(t *testing.T) {
	cases := []struct {
		endpoint string
		tls      bool
		apiHost  string
		want     string
	}{
		{"0.0.0.0:30001", false, "10.1.2.3", "http://10.1.2.3:30001"},
		{"[::]:30001", false, "10.1.2.3", "http://10.1.2.3:30001"},
		{":30002", true, "api.example.com", "https://api.example.com:30002"},
		{"0.0.0.0:30001", false, "fd00::1", "http://[fd00::1]:30001"},
		{"0.0.0.0:30001", false, "", "http://127.0.0.1:30001"},
		// A bound host is where the balancer is: kept.
		{"127.0.0.1:30003", false, "10.1.2.3", "http://127.0.0.1:30003"},
		{"192.168.1.5:30004", true, "10.1.2.3", "https://192.168.1.5:30004"},
		// A server that already gives a URL keeps its scheme.
		{"https://0.0.0.0:30005", false, "h", "https://h:30005"},
		{"", false, "h", ""},
	}
	for _, c := range cases {
		if got := serviceURL(c.endpoint, c.tls, c.apiHost); got != c.want {
			t.Errorf("serviceURL(%q, %v, %q) = %q, want %q", c.endpoint, c.tls, c.apiHost, got, c.want)
		}
	}
}

func serviceFixture(now float64) []api.ServiceRecord {
	return []api.ServiceRecord{
		{Name: "llm", Status: api.ServiceReady, Version: 2, Uptime: fp(now - 3725), Endpoint: "0.0.0.0:30001",
			Policy: "Autoscaling from 1 to 3 replicas", LoadBalancingPolicy: "least_load", RequestedResources: "1x[L4:1]",
			Replicas: []api.ReplicaRecord{
				{ID: 1, Name: "llm-1", Version: 1, Status: api.ReplicaReady, Endpoint: "http://10.0.0.2:8080", LaunchedAt: fp(now - 3800),
					Infra: "Local", Resources: "1x(cpus=2, mem=4)"},
				{ID: 3, Name: "llm-3", Version: 2, Status: api.ReplicaProvisioning, Infra: "Local", Resources: "1x(cpus=2, mem=4)",
					LaunchedAt: fp(now - 30), Reason: "replacing replica 2 (version 1)"},
			}},
		{Name: "tls-svc", Status: api.ServiceControllerInit, Version: 1, TLSEncrypted: true,
			Policy: "Fixed 1 replica", LoadBalancingPolicy: "round_robin", RequestedResources: "1x[CPU:1+]"},
	}
}

func TestServeStatusTables(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	io, out, _ := testIO("", false)
	writeServices(io, serviceFixture(float64(now.Unix())), false, now, "10.9.8.7")
	want := `Services
NAME     VERSION  UPTIME    STATUS           REPLICAS  ENDPOINT
llm      2        1h 2m 5s  READY            1/2       http://10.9.8.7:30001
tls-svc  1        -         CONTROLLER_INIT  0/0       -

Service Replicas
SERVICE_NAME  ID  VERSION  ENDPOINT              LAUNCHED     INFRA  RESOURCES          STATUS
llm           1   1        http://10.0.0.2:8080  1 hr ago     Local  1x(cpus=2, mem=4)  READY
llm           3   2        -                     30 secs ago  Local  1x(cpus=2, mem=4)  PROVISIONING
`
	if got := out.String(); got != want {
		t.Errorf("tables:\n%s\nwant:\n%s", got, want)
	}
}

func TestServeStatusTablesVerbose(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	io, out, _ := testIO("", false)
	writeServices(io, serviceFixture(float64(now.Unix())), true, now, "h")
	lines := strings.Split(out.String(), "\n")
	if got := strings.Join(strings.Fields(lines[1]), " "); got != "NAME VERSION UPTIME STATUS REPLICAS ENDPOINT AUTOSCALING_POLICY LOAD_BALANCING_POLICY REQUESTED_RESOURCES" {
		t.Errorf("services header %q", got)
	}
	if got := strings.Join(strings.Fields(lines[6]), " "); got != "SERVICE_NAME ID VERSION ENDPOINT LAUNCHED INFRA RESOURCES STATUS CLUSTER REASON" {
		t.Errorf("replicas header %q", got)
	}
	for _, w := range []string{"Autoscaling from 1 to 3 replicas", "least_load", "1x[L4:1]", "round_robin", "Fixed 1 replica",
		"llm-3", "replacing replica 2 (version 1)"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("verbose tables lack %q:\n%s", w, out)
		}
	}
}

func TestServeStatusEmpty(t *testing.T) {
	io, out, _ := testIO("", false)
	writeServices(io, nil, false, time.Now(), "")
	if out.String() != "Services\nNo existing services.\n" {
		t.Errorf("%q", out)
	}
	out.Reset()
	writeServices(io, []api.ServiceRecord{{Name: "s", Status: api.ServiceNoReplica, Version: 1}}, false, time.Now(), "")
	if !strings.HasSuffix(out.String(), "\nService Replicas\nNo existing replicas.\n") {
		t.Errorf("%q", out)
	}
}

func TestServeUpDone(t *testing.T) {
	io, out, _ := testIO("", false)
	printServeUpDone(io, "svc", "http://10.0.0.1:30001")
	want := "Service name: svc\nEndpoint URL: http://10.0.0.1:30001\n📋 Useful Commands\n" +
		"├── To check service status:\tsky serve status svc [--endpoint]\n" +
		"├── To teardown the service:\tsky serve down svc\n" +
		"├── To see replica logs:\tsky serve logs svc [REPLICA_ID]\n" +
		"├── To see load balancer logs:\tsky serve logs --load-balancer svc\n" +
		"├── To see controller logs:\tsky serve logs --controller svc\n" +
		"├── To monitor the status:\twatch -n10 sky serve status svc\n" +
		"└── To send a test request:\tcurl http://10.0.0.1:30001\n" +
		"\n✓ Service is spinning up and replicas will be ready shortly.\n"
	if out.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", out.String(), want)
	}
}

func TestServeDownConfirm(t *testing.T) {
	cases := []struct {
		opts ServeDownOptions
		want string
	}{
		{ServeDownOptions{Services: []string{"a"}, ReplicaID: -1}, "Terminating service(s) 'a'. Proceed?"},
		{ServeDownOptions{Services: []string{"a", "b"}, ReplicaID: -1}, "Terminating service(s) 'a, b'. Proceed?"},
		{ServeDownOptions{All: true, ReplicaID: -1}, "Terminating all services. Proceed?"},
		{ServeDownOptions{Services: []string{"a"}, ReplicaID: 2}, "Terminating replica ID 2 in 'a'. Proceed?"},
	}
	for _, c := range cases {
		if got := serveDownConfirm(&c.opts); got != c.want {
			t.Errorf("%+v: %q, want %q", c.opts, got, c.want)
		}
	}
}

func TestPolicyString(t *testing.T) {
	one, three := 1, 3
	q := 2.5
	cases := []struct {
		svc  api.ServiceSpec
		want string
	}{
		{api.ServiceSpec{Replicas: &one}, "Fixed 1 replica"},
		{api.ServiceSpec{Replicas: &three}, "Fixed 3 replicas"},
		{api.ServiceSpec{}, "Fixed 1 replica"},
		{api.ServiceSpec{ReplicaPolicy: &api.ReplicaPolicySpec{MinReplicas: 1, MaxReplicas: 3, TargetQPS: &q, NumOverprovision: 1}},
			"Autoscaling from 1 to 3 replicas (target QPS per replica: 2.5), overprovisioning 1"},
	}
	for _, c := range cases {
		if got := c.svc.PolicyString(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

// fakeAPI is an API server that answers each operation (by path) with
// what its function returns for the body sent, streams log as every
// request's log, and serves files for downloads.
type fakeAPI struct {
	mu      sync.Mutex
	bodies  map[string]string // path -> last body
	results map[string]func(body []byte) any
	log     string
	files   map[string]string
}

func newFakeAPI(t *testing.T, results map[string]func([]byte) any) (*fakeAPI, *Factory, *strings.Builder) {
	t.Helper()
	fa := &fakeAPI{bodies: map[string]string{}, results: results, files: map[string]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fa.mu.Lock()
		defer fa.mu.Unlock()
		switch r.URL.Path {
		case "/api/stream":
			_, _ = w.Write([]byte(fa.log))
		case "/api/download":
			_, _ = w.Write([]byte(fa.files[r.URL.Query().Get("path")]))
		case "/api/get":
			path := r.URL.Query().Get("request_id")
			var rv []byte
			if f := fa.results[path]; f != nil {
				rv, _ = json.Marshal(f([]byte(fa.bodies[path])))
			}
			_ = json.NewEncoder(w).Encode(api.Request{RequestID: path, Status: "SUCCEEDED", ReturnValue: string(rv)})
		default:
			if _, ok := fa.results[r.URL.Path]; !ok || r.Method != http.MethodPost {
				http.NotFound(w, r)
				return
			}
			b, _ := io.ReadAll(r.Body)
			fa.bodies[r.URL.Path] = string(b)
			w.Header().Set(api.HeaderRequestID, r.URL.Path)
			_, _ = w.Write([]byte("{}"))
		}
	}))
	t.Cleanup(srv.Close)
	home := t.TempDir()
	t.Setenv("HOME", home)
	iost, _, _ := testIO("", false)
	out := &strings.Builder{}
	iost.Out, iost.ErrOut = out, &strings.Builder{}
	f := testFactory(iost, nil)
	f.Client = func() (*client.Client, error) { return client.New(client.Options{Endpoint: srv.URL, Home: home}) }
	return fa, f, out
}

func (fa *fakeAPI) body(t *testing.T, path string, v any) {
	t.Helper()
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if err := json.Unmarshal([]byte(fa.bodies[path]), v); err != nil {
		t.Fatalf("body of %s: %v (%q)", path, err, fa.bodies[path])
	}
}

// fakeServeServer answers serve.status with those of recs named in the
// body (all without names).
func fakeServeServer(t *testing.T, recs []api.ServiceRecord) (*Factory, *strings.Builder, *strings.Builder) {
	t.Helper()
	_, f, out := newFakeAPI(t, map[string]func([]byte) any{"/serve/status": func(body []byte) any {
		var b api.ServeStatusBody
		_ = json.Unmarshal(body, &b)
		out := []api.ServiceRecord{}
		for _, rec := range recs {
			if len(b.Names) == 0 || slices.Contains(b.Names, rec.Name) {
				out = append(out, rec)
			}
		}
		return out
	}})
	return f, out, nil
}

func TestServeStatusEndpoint(t *testing.T) {
	now := float64(time.Unix(1_700_000_000, 0).Unix())
	recs := serviceFixture(now)
	f, out, _ := fakeServeServer(t, recs)
	opts := &ServeStatusOptions{IO: f.IO, Services: []string{"llm"}, Endpoint: true, Output: "table"}
	if err := serveStatusRun(f, opts); err != nil {
		t.Fatal(err)
	}
	// The balancer binds every address; the URL names the API server's host.
	if out.String() != "http://127.0.0.1:30001\n" {
		t.Errorf("--endpoint printed %q", out)
	}
	out.Reset()
	opts.Services = []string{"tls-svc"}
	if err := serveStatusRun(f, opts); err != nil || out.String() != "-\n" {
		t.Errorf("no endpoint yet: %q, %v", out, err)
	}
	out.Reset()
	opts.Services = []string{"nope"}
	err := serveStatusRun(f, opts)
	if err == nil || !strings.Contains(err.Error(), "service 'nope' not found") || out.Len() != 0 {
		t.Errorf("unknown service: %v, printed %q", err, out)
	}
}

func TestServeStatusRun(t *testing.T) {
	now := float64(time.Unix(1_700_000_000, 0).Unix())
	f, out, _ := fakeServeServer(t, serviceFixture(now))
	if err := serveStatusRun(f, &ServeStatusOptions{IO: f.IO, Output: "table"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "llm      2        1h 2m 5s  READY            1/2       http://127.0.0.1:30001") {
		t.Errorf("table:\n%s", out)
	}
	out.Reset()
	if err := serveStatusRun(f, &ServeStatusOptions{IO: f.IO, Output: "json", Services: []string{"llm"}}); err != nil {
		t.Fatal(err)
	}
	var got []api.ServiceRecord
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || len(got) != 1 || got[0].Name != "llm" || len(got[0].Replicas) != 2 {
		t.Errorf("-o json: %v %s", err, out)
	}
	out.Reset()
	err := serveStatusRun(f, &ServeStatusOptions{IO: f.IO, Output: "table", Services: []string{"llm", "gone"}})
	if err == nil || !strings.Contains(err.Error(), "service(s) not found: gone") || !strings.Contains(out.String(), "llm") {
		t.Errorf("partly unknown: %v\n%s", err, out)
	}
}

// The Services section of `sky status`: the services' rows and a hint,
// "No live services." when there are none, nothing from a server
// without SkyServe.
func TestStatusServicesSection(t *testing.T) {
	now := float64(time.Unix(1_700_000_000, 0).Unix())
	f, out, _ := fakeServeServer(t, serviceFixture(now))
	statusServices(f, &StatusOptions{IO: f.IO})
	want := "\nServices\nNAME     VERSION  UPTIME    STATUS           REPLICAS  ENDPOINT\n" +
		"llm      2        1h 2m 5s  READY            1/2       http://127.0.0.1:30001\n" +
		"tls-svc  1        -         CONTROLLER_INIT  0/0       -\n" +
		"\n* To see detailed service status: sky serve status -v\n"
	if out.String() != want {
		t.Errorf("got:\n%q\nwant:\n%q", out.String(), want)
	}
	f, out, _ = fakeServeServer(t, nil)
	statusServices(f, &StatusOptions{IO: f.IO})
	if out.String() != "\nServices\nNo live services.\n" {
		t.Errorf("none: %q", out)
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	home := t.TempDir()
	f.Client = func() (*client.Client, error) { return client.New(client.Options{Endpoint: srv.URL, Home: home}) }
	out.Reset()
	statusServices(f, &StatusOptions{IO: f.IO})
	if out.String() != "" {
		t.Errorf("server without serve.status: %q", out)
	}
}

// `sky serve up -y`: the body carries the task and the checked service
// spec under the given name, and the closing block names the endpoint
// on the API server's host.
func TestServeUpRun(t *testing.T) {
	fa, f, out := newFakeAPI(t, map[string]func([]byte) any{
		"/serve/up": func([]byte) any { return api.ServeUpResult{Name: "web", Endpoint: "0.0.0.0:30001"} },
	})
	fa.log = "Launching service web...\n"
	dir := t.TempDir()
	yaml := filepath.Join(dir, "svc.yaml")
	if err := os.WriteFile(yaml, []byte("service:\n  readiness_probe: /health\n  replicas: 2\nresources:\n  ports: 8080\nenvs:\n  A: b\nrun: echo hi\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := (&taskFlags{}).resolve(entrypoint{YAMLPath: yaml}, f.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := serveUpRun(f, &ServeUpOptions{IO: f.IO, ServiceName: "web", Task: in, Yes: true}); err != nil {
		t.Fatal(err)
	}
	var b api.ServeUpBody
	fa.body(t, "/serve/up", &b)
	if b.Name != "web" || b.Service.Port != 8080 || b.Service.MinReplicas() != 2 || b.Service.Probe.Path != "/health" || b.Task.Envs["A"] != "b" || b.Task.Run != "echo hi" {
		t.Errorf("body %+v", b)
	}
	for _, w := range []string{"Launching service web...\n", "Service name: web\nEndpoint URL: http://127.0.0.1:30001\n", "curl http://127.0.0.1:30001\n",
		"✓ Service is spinning up and replicas will be ready shortly.\n"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestServeUpdateRun(t *testing.T) {
	fa, f, out := newFakeAPI(t, map[string]func([]byte) any{
		"/serve/update": func([]byte) any { return api.ServeUpdateResult{Name: "web", Version: 3} },
	})
	yaml := filepath.Join(t.TempDir(), "svc.yaml")
	if err := os.WriteFile(yaml, []byte("service:\n  readiness_probe: /\n  ports: 9000\nrun: echo v3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := (&taskFlags{}).resolve(entrypoint{YAMLPath: yaml}, f.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := serveUpdateRun(f, &ServeUpdateOptions{IO: f.IO, ServiceName: "web", Task: in, Mode: "blue_green", Yes: true}); err != nil {
		t.Fatal(err)
	}
	var b api.ServeUpdateBody
	fa.body(t, "/serve/update", &b)
	if b.Name != "web" || b.Mode != "blue_green" || b.Service.Port != 9000 || b.Task.Run != "echo v3" {
		t.Errorf("body %+v", b)
	}
	if want := "Service 'web' update scheduled: version 3 (blue_green update).\nPlease use sky serve status web to check the latest status, or watch -n10 sky serve status web to follow it.\n"; out.String() != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

// down, terminate-replica and logs send what their flags say.
func TestServeDownAndLogsBodies(t *testing.T) {
	fa, f, _ := newFakeAPI(t, map[string]func([]byte) any{
		"/serve/down":              func([]byte) any { return api.ServeDownResult{Down: []string{"a", "b"}} },
		"/serve/terminate-replica": func([]byte) any { return nil },
		"/serve/logs":              func([]byte) any { return nil },
		"/serve/sync-down-logs": func([]byte) any {
			return api.LogsDownload{RequestID: "/serve/sync-down-logs", Jobs: []api.JobLogs{{RunTimestamp: "web", Files: []string{"controller.log", "replica_1.log"}}}}
		},
	})
	if err := serveDownRun(f, &ServeDownOptions{IO: f.IO, Services: []string{"a", "b"}, Purge: true, Yes: true, ReplicaID: -1}); err != nil {
		t.Fatal(err)
	}
	var d api.ServeDownBody
	fa.body(t, "/serve/down", &d)
	if !slices.Equal(d.Names, []string{"a", "b"}) || !d.Purge || d.All {
		t.Errorf("down body %+v", d)
	}
	if err := serveDownRun(f, &ServeDownOptions{IO: f.IO, Services: []string{"a"}, Yes: true, ReplicaID: 0}); err != nil {
		t.Fatal(err)
	}
	var tr api.ServeTerminateReplicaBody
	fa.body(t, "/serve/terminate-replica", &tr)
	if tr.Name != "a" || tr.ReplicaID != 0 {
		t.Errorf("terminate body %+v", tr)
	}
	// A declined prompt sends nothing.
	f.IO.In = strings.NewReader("n\n")
	if err := serveDownRun(f, &ServeDownOptions{IO: f.IO, All: true, ReplicaID: -1}); err == nil {
		t.Errorf("declined down did not abort")
	}
	d = api.ServeDownBody{}
	fa.body(t, "/serve/down", &d)
	if d.All {
		t.Errorf("a declined down -a was sent")
	}

	if err := serveLogsRun(f, &ServeLogsOptions{IO: f.IO, Name: "web", IDs: []int{2}, Follow: false, Tail: 5}); err != nil {
		t.Fatal(err)
	}
	var l api.ServeLogsBody
	fa.body(t, "/serve/logs", &l)
	if l.Name != "web" || l.ReplicaID != 2 || l.Follow || l.Tail != 5 || l.Controller || l.LoadBalancer {
		t.Errorf("logs body %+v", l)
	}
	if err := serveLogsRun(f, &ServeLogsOptions{IO: f.IO, Name: "web", LoadBalancer: true, Follow: true, Tail: -1}); err != nil {
		t.Fatal(err)
	}
	l = api.ServeLogsBody{}
	fa.body(t, "/serve/logs", &l)
	if !l.LoadBalancer || l.ReplicaID != 0 || !l.Follow || l.Tail != 0 {
		t.Errorf("lb logs body %+v", l)
	}

	fa.files["web/controller.log"] = "controller says hi\n"
	fa.files["web/replica_1.log"] = "replica says hi\n"
	out := f.IO.Out.(*strings.Builder)
	out.Reset()
	if err := serveLogsRun(f, &ServeLogsOptions{IO: f.IO, Name: "web", SyncDown: true, IDs: []int{1}, Controller: true}); err != nil {
		t.Fatal(err)
	}
	var sd api.ServeSyncDownBody
	fa.body(t, "/serve/sync-down-logs", &sd)
	if sd.Name != "web" || !slices.Equal(sd.ReplicaIDs, []int{1}) || !sd.Controller {
		t.Errorf("sync-down body %+v", sd)
	}
	home, _ := os.UserHomeDir()
	dir := filepath.Join(home, "sky_logs", "service", "web")
	if want := "\x1b[36mService web logs: " + dir + "\x1b[0m\n"; out.String() != want {
		t.Errorf("sync-down printed %q, want %q", out, want)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "replica_1.log")); err != nil || string(b) != "replica says hi\n" {
		t.Errorf("replica_1.log: %q %v", b, err)
	}
}

// The spec shown before the prompt leaves out what may hold secrets.
func TestWriteServiceSpecHidesProbeSecrets(t *testing.T) {
	io, out, _ := testIO("", false)
	writeServiceSpec(io, api.ServiceSpec{Port: 8080, Probe: api.ProbeSpec{Path: "/v1", PostData: `{"key":"s3cr3t"}`,
		Headers: map[string]string{"Authorization": "Bearer s3cr3t"}}})
	if strings.Contains(out.String(), "s3cr3t") || !strings.Contains(out.String(), "POST /v1") {
		t.Errorf("spec:\n%s", out)
	}
}

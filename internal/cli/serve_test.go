package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

func TestReplicaPolicyString(t *testing.T) {
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
		if got := replicaPolicyString(c.svc); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

// fakeServeServer answers serve.status with recs, as an API server
// does: the request id on submit, the result on /api/get.
func fakeServeServer(t *testing.T, recs []api.ServiceRecord) (*Factory, *strings.Builder, *strings.Builder) {
	t.Helper()
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/serve/status":
			var b api.ServeStatusBody
			body, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(body, &b)
			asked = b.Names
			w.Header().Set(api.HeaderRequestID, "req-1")
			_, _ = w.Write([]byte("{}"))
		case "/api/get":
			var out []api.ServiceRecord
			for _, rec := range recs {
				for _, n := range asked {
					if n == rec.Name {
						out = append(out, rec)
					}
				}
				if len(asked) == 0 {
					out = append(out, rec)
				}
			}
			rv, _ := json.Marshal(out)
			_ = json.NewEncoder(w).Encode(api.Request{RequestID: "req-1", Name: "sky.serve.status", Status: "SUCCEEDED", ReturnValue: string(rv)})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	home := t.TempDir()
	iost, _, _ := testIO("", false)
	out, errOut := &strings.Builder{}, &strings.Builder{}
	iost.Out, iost.ErrOut = out, errOut
	f := testFactory(iost, nil)
	f.Client = func() (*client.Client, error) { return client.New(client.Options{Endpoint: srv.URL, Home: home}) }
	return f, out, errOut
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

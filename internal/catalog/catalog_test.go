package catalog

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/skygo/skygo/internal/testutil"
)

// v8Dir is the project's test catalog (testdata/catalog: real v8 rows,
// a few regions per cloud).
func v8Dir(testing.TB) string { return testutil.CatalogDir() }

// writeCatalog lays out files as <dir>/<cloud>/vms.csv.
func writeCatalog(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, body := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestParseVMsEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		cloud   string
		csv     string
		want    int // rows kept
		check   func(t *testing.T, rows []Row)
		wantErr string
	}{
		{
			name:  "CRLF line endings",
			cloud: "lambda",
			csv:   "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\r\ngpu_1x_a10,A10,1.0,30.0,200.0,0.75,us-east-1,,\r\n",
			want:  1,
			check: func(t *testing.T, rows []Row) {
				r := rows[0]
				if r.InstanceType != "gpu_1x_a10" || r.AccName != "A10" || r.AccCount != 1 || r.Price != 0.75 || r.Region != "us-east-1" {
					t.Errorf("row = %+v", r)
				}
				if !math.IsNaN(r.SpotPrice) {
					t.Errorf("empty SpotPrice = %v, want NaN", r.SpotPrice)
				}
			},
		},
		{
			name:  "empty price is not offered, spot kept",
			cloud: "primeintellect",
			csv:   "InstanceType,UpstreamCloudId,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice\nx__SPOT,u,22.0,120,A100-80GB,1.0,\"{\"\"Gpus\"\":[{\"\"MemoryInfo\"\":{\"\"SizeInMiB\"\":81920}}]}\",FI,FIN-01,,0.53\n",
			want:  1,
			check: func(t *testing.T, rows []Row) {
				if !math.IsNaN(rows[0].Price) || rows[0].SpotPrice != 0.53 || rows[0].Zone != "FIN-01" {
					t.Errorf("row = %+v", rows[0])
				}
				if rows[0].DeviceMemGiB != 80 {
					t.Errorf("device memory = %v, want 80", rows[0].DeviceMemGiB)
				}
			},
		},
		{
			name:  "identical duplicates collapse, price duplicates keep minimum",
			cloud: "gcp",
			csv: "InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice\n" +
				",,,tpu-v4-8,1,tpu-v4-8,us-central2,us-central2-b,12.88,3.8\n" +
				",,,tpu-v4-8,1,tpu-v4-8,us-central2,us-central2-b,12.88,3.8\n" +
				",,,tpu-v4-8,1,tpu-v4-8,us-central2,us-central2-b,11.00,4.1\n",
			want: 1,
			check: func(t *testing.T, rows []Row) {
				if rows[0].Price != 11 || rows[0].SpotPrice != 3.8 {
					t.Errorf("prices = %v/%v, want 11/3.8", rows[0].Price, rows[0].SpotPrice)
				}
			},
		},
		{
			name:  "fractional accelerator counts and extra unquoted field",
			cloud: "azure",
			csv:   "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,Generation\nStandard_NV6ads_A10_v5,A10,0.167,6,55,A10,0.658,0.121598,australiaeast,V1,V2\n",
			want:  1,
			check: func(t *testing.T, rows []Row) {
				if rows[0].AccCount != 0.167 || rows[0].VCPUs != 6 || rows[0].Region != "australiaeast" {
					t.Errorf("row = %+v", rows[0])
				}
			},
		},
		{
			name:  "zero spot is not offered; quoted region with commas",
			cloud: "vast",
			csv:   "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region\n2x-H200,H200,2,32,64.0,\"{'Gpus': [{'MemoryInfo': {'SizeInMiB': 287542}}]}\",4.71,0.00,\"Michigan, US, NA\"\n",
			want:  1,
			check: func(t *testing.T, rows []Row) {
				r := rows[0]
				if !math.IsNaN(r.SpotPrice) || r.Region != "Michigan, US, NA" {
					t.Errorf("row = %+v", r)
				}
				if math.Abs(r.DeviceMemGiB-140.4) > 0.1 { // vast stores the total
					t.Errorf("device memory = %v, want ~140.4", r.DeviceMemGiB)
				}
			},
		},
		{
			name:  "placeholder price below 5 cents per GPU-hour is unknown",
			cloud: "mithril",
			csv:   "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region,GpuInfo\na100.1x,A100,1,26,190,0.01,0.01,us-central3-a,\nh100.8x,H100,8,168,1814,8.0,8.0,us-central2-a,\n",
			want:  2,
			check: func(t *testing.T, rows []Row) {
				if !math.IsNaN(rows[0].Price) || rows[1].Price != 8 {
					t.Errorf("prices = %v, %v", rows[0].Price, rows[1].Price)
				}
			},
		},
		{
			name:  "no trailing newline and BOM header",
			cloud: "yotta",
			csv:   "\ufeffInstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Region,SpotPrice,Price\nx,RTX5090,1.0,14.0,119.0,,us-east-2,,0.65",
			want:  1,
		},
		{
			name:    "bad number names line and column",
			cloud:   "lambda",
			csv:     "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region\nx,,,four,16,0.2,r\n",
			wantErr: `line 2: column vCPUs: "four" is not a number`,
		},
		{
			name:    "missing required column",
			cloud:   "lambda",
			csv:     "InstanceType,vCPUs\nx,4\n",
			wantErr: "header lacks required column(s) Price, Region",
		},
		{name: "empty file", cloud: "lambda", csv: "", wantErr: "empty file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows, err := parseVMs(tt.cloud, strings.NewReader(tt.csv))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != tt.want {
				t.Fatalf("got %d rows, want %d: %+v", len(rows), tt.want, rows)
			}
			if tt.check != nil {
				tt.check(t, rows)
			}
		})
	}
}

func TestOfferingsFixture(t *testing.T) {
	dir := writeCatalog(t, map[string]string{
		"lambda/vms.csv": "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\n" +
			"cpu_4x,,,4.0,16.0,0.2,r1,,\n" +
			"cpu_32x,,,32.0,128.0,0.9,r1,,\n" +
			"cpu_32x,,,32.0,128.0,0.8,r2,,\n" +
			"gpu_1x_a10,A10,1,30,200,0.75,r1,,\n" +
			"gpu_2x_a10,A10,2,60,400,1.5,r1,,\n",
	})
	c := New(Options{Dir: dir})
	ctx := context.Background()
	tests := []struct {
		name string
		q    Query
		want []string // instance/region in order
	}{
		{"defaults 30+ cpus 4x memory", Query{}, []string{"cpu_32x/r2", "cpu_32x/r1"}},
		{"exact cpus", Query{CPUs: Bound{Value: 4}}, []string{"cpu_4x/r1"}},
		{"at least memory", Query{Memory: Bound{Value: 100, AtLeast: true}}, []string{"cpu_32x/r2", "cpu_32x/r1"}},
		{"region filter", Query{Region: "R1"}, []string{"cpu_32x/r1"}},
		{"accelerator name any case", Query{AccName: "a10", AccCount: 2}, []string{"gpu_2x_a10/r1"}},
		{"instance type", Query{InstanceType: "cpu_4x"}, []string{"cpu_4x/r1"}},
		{"max hourly cost", Query{MaxHourlyCost: 0.85}, []string{"cpu_32x/r2"}},
		{"spot not offered", Query{UseSpot: true}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Offerings(ctx, "lambda", tt.q)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, o := range got {
				names = append(names, o.InstanceType+"/"+o.Region)
			}
			if strings.Join(names, " ") != strings.Join(tt.want, " ") {
				t.Errorf("got %v, want %v", names, tt.want)
			}
		})
	}
	if _, err := c.Offerings(ctx, "aws", Query{}); err == nil || !strings.Contains(err.Error(), "not found in catalog dir") {
		t.Errorf("missing cloud: err = %v", err)
	}
}

func TestLazyLoadPerCloud(t *testing.T) {
	c := New(Options{Dir: v8Dir(t)})
	if _, err := c.Offerings(context.Background(), "lambda", Query{AccName: "H100", AccCount: 8}); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.clouds) != 1 || c.clouds["lambda"] == nil {
		t.Errorf("loaded clouds = %v, want only lambda", c.clouds)
	}
}

// TestUnusedCloudIsLetGo: a cloud's index is dropped once it has not been
// queried for Keep, and the next query loads it again with the same
// answer.
func TestUnusedCloudIsLetGo(t *testing.T) {
	c := New(Options{Dir: v8Dir(t), Keep: 50 * time.Millisecond})
	ctx := context.Background()
	q := Query{AccName: "H100", AccCount: 8}
	first, err := c.Offerings(ctx, "lambda", q)
	if err != nil || len(first) == 0 {
		t.Fatalf("offerings: %v, %v", first, err)
	}
	loaded := func() bool {
		c.mu.Lock()
		e := c.clouds["lambda"]
		c.mu.Unlock()
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.loaded && e.idx != nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for loaded() {
		if time.Now().After(deadline) {
			t.Fatal("lambda's index still held 10 s after its last query (Keep 50 ms)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	again, err := c.Offerings(ctx, "lambda", q)
	if err != nil || fmt.Sprint(first) != fmt.Sprint(again) { // NaN prices: DeepEqual never matches
		t.Fatalf("after the index was let go: %v, %v; want %v", again, err, first)
	}
	if !loaded() {
		t.Fatal("the query after the release did not load the index again")
	}
}

// TestParsedRowsHoldNoLines: a row's strings are copies, not substrings
// of the file's lines, and equal values share one copy.
func TestParsedRowsHoldNoLines(t *testing.T) {
	rows, err := parseVMs("gcp", strings.NewReader("InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,SpotPrice,Region,AvailabilityZone\n"+
		"n2-standard-8,,,8,32,0.38,0.1,us-central1,us-central1-a\n"+
		"n2-standard-8,,,8,32,0.38,0.1,us-central1,us-central1-b\n"))
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	// Two lines' substrings would be two strings; one copy per value is
	// one.
	a, b := rows[0], rows[1]
	if unsafe.StringData(a.InstanceType) != unsafe.StringData(b.InstanceType) || unsafe.StringData(a.Region) != unsafe.StringData(b.Region) {
		t.Error("equal values on two rows are two copies")
	}
}

func TestGCPJoinsHostAndAccelerator(t *testing.T) {
	c := New(Options{Dir: v8Dir(t)})
	ctx := context.Background()
	tests := []struct {
		q        Query
		wantType string
		price    float64 // host + accelerator in us-central1-a
	}{
		{Query{AccName: "H100", AccCount: 8, Zone: "us-central1-a"}, "a3-highgpu-8g", 9.46006 + 33.60609},
		{Query{AccName: "L4", AccCount: 1, Zone: "us-central1-a"}, "g2-standard-4", 0.14679 + 0.56004},
		{Query{AccName: "T4", AccCount: 1, Zone: "us-central1-a"}, "n1-highmem-8", 0.47321 + 0.35},
		{Query{InstanceType: "a3-highgpu-8g", Zone: "us-central1-a"}, "a3-highgpu-8g", 9.46006 + 33.60609},
	}
	for _, tt := range tests {
		got, err := c.Offerings(ctx, "gcp", tt.q)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			t.Fatalf("%+v: no offerings", tt.q)
		}
		if got[0].InstanceType != tt.wantType || math.Abs(got[0].Price-tt.price) > 1e-6 {
			t.Errorf("%+v: got %s %.5f, want %s %.5f", tt.q, got[0].InstanceType, got[0].Price, tt.wantType, tt.price)
		}
	}
	tpu, err := c.Offerings(ctx, "gcp", Query{AccName: "tpu-v5litepod-4", AccCount: 1})
	if err != nil || len(tpu) == 0 || tpu[0].InstanceType != gcpTPUHost || !math.IsNaN(tpu[0].VCPUs) {
		t.Errorf("tpu offerings = %+v, %v", tpu, err)
	}
}

func TestCanonical(t *testing.T) {
	c := New(Options{Dir: v8Dir(t)})
	for in, want := range map[string]string{"h100": "H100", "a100-80gb": "A100-80GB", "TPU-V4-8": "tpu-v4-8", "rtx6000ada": "RTX6000Ada", "nope": "nope"} {
		if got, _ := c.Canonical(context.Background(), in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDownloadCacheAndTTL(t *testing.T) {
	body := "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\ncpu_32x,,,32,128,0.9,r1,,\n"
	var hits atomic.Int32
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/catalogs/v8/lambda/vms.csv" || fail.Load() {
			http.NotFound(w, r)
			return
		}
		hits.Add(1)
		w.Write([]byte(body))
	}))
	defer srv.Close()
	cache := t.TempDir()
	now := time.Now()
	newCat := func() *Catalog {
		return New(Options{CacheDir: cache, BaseURLs: []string{srv.URL + "/broken", srv.URL + "/catalogs"},
			HTTPClient: srv.Client(), Now: func() time.Time { return now }})
	}
	t.Setenv(EnvDir, "")
	query := func() {
		t.Helper()
		c := newCat()
		got, err := c.Offerings(context.Background(), "lambda", Query{CPUs: Bound{Value: 32}})
		if err != nil || len(got) != 1 {
			t.Fatalf("offerings = %v, %v", got, err)
		}
	}
	query() // downloads (first base URL 404s, mirror works)
	if hits.Load() != 1 {
		t.Fatalf("hits = %d, want 1", hits.Load())
	}
	if _, err := os.Stat(filepath.Join(cache, "v8", "lambda", "vms.csv")); err != nil {
		t.Fatalf("cache file: %v", err)
	}
	query() // fresh cache: no download
	if hits.Load() != 1 {
		t.Fatalf("hits = %d after cached query, want 1", hits.Load())
	}
	now = now.Add(DefaultTTL + time.Minute)
	query() // stale: downloaded again
	if hits.Load() != 2 {
		t.Fatalf("hits = %d after TTL, want 2", hits.Load())
	}
	now = now.Add(DefaultTTL + time.Minute)
	fail.Store(true)
	query() // stale and server down: stale copy still used
	c := New(Options{CacheDir: cache, BaseURLs: []string{srv.URL + "/catalogs"}, HTTPClient: srv.Client(), NoEmbedded: true})
	if _, err := c.Offerings(context.Background(), "nebius", Query{}); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("undownloadable cloud: err = %v", err)
	}
	// With the snapshot (the default), the same cloud is answered from it.
	c = New(Options{CacheDir: cache, BaseURLs: []string{srv.URL + "/catalogs"}, HTTPClient: srv.Client()})
	if got, err := c.Offerings(context.Background(), "nebius", Query{}); err != nil || len(got) == 0 {
		t.Errorf("nebius from the snapshot: %d offerings, %v", len(got), err)
	}
}

// An unreachable hosted catalog (a closed port) falls back to the built-in
// snapshot without an error, tries the network once rather than once per
// cloud, and tries again after the back-off.
func TestOfflineFallsBackToEmbedded(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	t.Setenv(EnvDir, "")
	var dials atomic.Int32
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}}
	now := time.Now()
	c := New(Options{CacheDir: t.TempDir(), BaseURLs: []string{closed}, HTTPClient: client, Now: func() time.Time { return now }})
	ctx := context.Background()
	got, err := c.Offerings(ctx, "aws", Query{AccName: "H100", AccCount: 8, Region: "us-east-2"})
	if err != nil || len(got) == 0 {
		t.Fatalf("aws offline: %d offerings, %v", len(got), err)
	}
	// A known price of the snapshot: p5.48xlarge in us-east-2, zone names
	// as users write them.
	if got[0].InstanceType != "p5.48xlarge" || math.Abs(got[0].Price-55.04) > 1e-9 || !strings.HasPrefix(got[0].Zone, "us-east-2") {
		t.Errorf("first offering = %+v, want p5.48xlarge at $55.04 in a us-east-2 zone", got[0])
	}
	if _, err := c.Offerings(ctx, "lambda", Query{AccName: "H100", AccCount: 8}); err != nil {
		t.Fatalf("lambda offline: %v", err)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("dials = %d, want 1 (back-off after the first failure)", n)
	}
	now = now.Add(offlineBackoff + time.Minute)
	if _, err := c.Offerings(ctx, "aws", Query{AccName: "H100", AccCount: 8}); err != nil {
		t.Fatal(err)
	}
	if n := dials.Load(); n != 2 {
		t.Errorf("dials = %d after the back-off, want 2", n)
	}
}

// Every cloud of the snapshot loads, and has offerings.
func TestEmbeddedSnapshotLoads(t *testing.T) {
	t.Setenv(EnvDir, "")
	c := New(Options{BaseURLs: []string{"http://127.0.0.1:1"}, CacheDir: t.TempDir()})
	for _, cloud := range Clouds {
		ix, err := c.cloud(context.Background(), cloud)
		if err != nil || len(ix.rows) == 0 {
			t.Errorf("%s: %v", cloud, err)
		}
	}
	if got, _ := c.Canonical(context.Background(), "h100"); got != "H100" {
		t.Errorf("Canonical(h100) = %q from the snapshot", got)
	}
}

func TestListGPUs(t *testing.T) {
	c := New(Options{Dir: v8Dir(t)})
	got, err := c.ListGPUs(context.Background(), GPUFilter{Name: "h100", Count: 8, Clouds: []string{"lambda", "gcp"}})
	if err != nil {
		t.Fatal(err)
	}
	h := got["H100"]
	if len(h) != 2 {
		t.Fatalf("H100:8 offerings = %+v, want one per cloud", h)
	}
	for _, o := range h {
		if o.AccCount != 8 || o.InstanceType == "" || math.IsNaN(o.Price) {
			t.Errorf("offering %+v", o)
		}
	}
	if _, ok := got["H100-MEGA"]; !ok {
		t.Errorf("substring match should include H100-MEGA: %v", got)
	}
	all, err := c.ListGPUs(context.Background(), GPUFilter{Name: "H100", Count: 8, Clouds: []string{"lambda"}, AllRegions: true})
	if err != nil || len(all["H100"]) < 2 {
		t.Errorf("all regions = %+v, %v", all["H100"], err)
	}
}

func BenchmarkLoadAndFirstQuery(b *testing.B) {
	dir := v8Dir(b)
	for _, cloud := range []string{"aws", "gcp", "azure", "lambda", "runpod"} {
		b.Run(cloud, func(b *testing.B) {
			for b.Loop() {
				c := New(Options{Dir: dir})
				if _, err := c.Offerings(context.Background(), cloud, Query{AccName: "H100", AccCount: 8}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEmbeddedLoadAll measures a cold load of every cloud from the
// snapshot (what a dry run over all clouds costs a fresh server).
func BenchmarkEmbeddedLoadAll(b *testing.B) {
	b.Setenv(EnvDir, "")
	for b.Loop() {
		c := New(Options{BaseURLs: []string{"http://127.0.0.1:1"}, CacheDir: b.TempDir()})
		c.Preload(context.Background())
	}
}

// A long-lived Catalog (the API server's) follows the hosted catalog: an
// index built from a download is rebuilt from a new download once the TTL
// has passed, not kept for the life of the process.
func TestLongLivedCatalogRefreshes(t *testing.T) {
	price := atomic.Value{}
	price.Store("0.9")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v8/lambda/vms.csv" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintf(w, "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,GpuInfo,SpotPrice\ncpu_32x,,,32,128,%s,r1,,\n", price.Load())
	}))
	defer srv.Close()
	t.Setenv(EnvDir, "")
	now := time.Now()
	c := New(Options{CacheDir: t.TempDir(), BaseURLs: []string{srv.URL}, HTTPClient: srv.Client(), Now: func() time.Time { return now }})
	get := func() float64 {
		t.Helper()
		got, err := c.Offerings(context.Background(), "lambda", Query{CPUs: Bound{Value: 32}})
		if err != nil || len(got) != 1 {
			t.Fatalf("offerings = %v, %v", got, err)
		}
		return got[0].Price
	}
	if p := get(); p != 0.9 {
		t.Fatalf("price = %v", p)
	}
	price.Store("1.5")
	if p := get(); p != 0.9 {
		t.Errorf("price within the TTL = %v, want the loaded 0.9", p)
	}
	now = now.Add(DefaultTTL + time.Minute)
	if p := get(); p != 1.5 {
		t.Errorf("price after the TTL = %v, want the refreshed 1.5", p)
	}
}

package resources

import (
	"slices"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/infrakind"
)

func TestParseInfra(t *testing.T) {
	tests := []struct {
		in   string
		want Infra
		str  string // canonical String(); "" means same as in
	}{
		{"aws", Infra{Cloud: "aws"}, ""},
		{"AWS", Infra{Cloud: "aws"}, "aws"},
		{"aws/us-east-1", Infra{Cloud: "aws", Region: "us-east-1"}, ""},
		{"aws/us-east-1/us-east-1a", Infra{Cloud: "aws", Region: "us-east-1", Zone: "us-east-1a"}, ""},
		{"aws/*/us-east-1a", Infra{Cloud: "aws", Zone: "us-east-1a"}, ""},
		{"gcp/*/us-central1-a", Infra{Cloud: "gcp", Zone: "us-central1-a"}, ""},
		{"*", Infra{}, ""},
		{"", Infra{}, ""},
		{"*/us-east-1", Infra{Region: "us-east-1"}, ""},
		{"*/*/us-east-1a", Infra{Zone: "us-east-1a"}, ""},
		{"aws/*", Infra{Cloud: "aws"}, "aws"},
		{"/aws/us-east-1/", Infra{Cloud: "aws", Region: "us-east-1"}, "aws/us-east-1"},
		{"aws/us-east-1//", Infra{Cloud: "aws", Region: "us-east-1"}, "aws/us-east-1"}, // all outer slashes are stripped
		{"k8s", Infra{Cloud: "kubernetes"}, "kubernetes"},
		{"kubernetes", Infra{Cloud: "kubernetes"}, ""},
		{"k8s/my-context", Infra{Cloud: "kubernetes", Region: "my-context"}, "kubernetes/my-context"},
		{"K8S/gke_proj_us-central1_c", Infra{Cloud: "kubernetes", Region: "gke_proj_us-central1_c"}, "kubernetes/gke_proj_us-central1_c"},
		{"k8s/arn:aws:eks:us-east-1:123:cluster/my-cluster", Infra{Cloud: "kubernetes", Region: "arn:aws:eks:us-east-1:123:cluster/my-cluster"}, "kubernetes/arn:aws:eks:us-east-1:123:cluster/my-cluster"},
		{"ssh/my-pool", Infra{Cloud: "ssh", Region: "ssh-my-pool"}, ""},
		{"ssh", Infra{Cloud: "ssh"}, ""},
		{"slurm/mycluster", Infra{Cloud: "slurm", Region: "mycluster"}, ""},
		{"slurm/mycluster/gpu", Infra{Cloud: "slurm", Region: "mycluster", Zone: "gpu"}, ""},
		{"local", Infra{Cloud: "local"}, ""},
		{"oci/ap-seoul-1", Infra{Cloud: "oci", Region: "ap-seoul-1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseInfra(tt.in)
			if err != nil {
				t.Fatalf("ParseInfra(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("ParseInfra(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			want := tt.str
			if want == "" {
				want = tt.in
				if tt.in == "*" {
					want = ""
				}
			}
			if got.String() != want {
				t.Errorf("String() = %q, want %q", got.String(), want)
			}
			back, err := ParseInfra(got.String())
			if err != nil || back != got {
				t.Errorf("round trip of %q gave %+v, %v", got.String(), back, err)
			}
		})
	}
}

func TestParseInfraErrors(t *testing.T) {
	tests := []struct{ in, msg string }{
		{"aws//us-east-1", "empty segment"},
		{"aws/us-east-1//z", "empty segment"},
		{"notacloud/us-east-1", `unknown cloud "notacloud"`},
		{"gpc", `did you mean "gcp"?`},
		{"aws/a/b/c", "at most"},
		{"ssh/pool/zone", "ssh/<pool>"},
		{"local/x", "no regions"},
		{"k8s//ctx", "empty Kubernetes context"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseInfra(tt.in)
			if err == nil {
				t.Fatalf("ParseInfra(%q) = %+v, want an error", tt.in, got)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

func TestClouds(t *testing.T) {
	Clouds := Clouds()
	if !slices.IsSorted(Clouds) {
		t.Errorf("Clouds is not sorted: %v", Clouds)
	}
	for _, c := range []string{"aws", "gcp", "kubernetes", "ssh", "slurm", "local", "verda", "do"} {
		if !slices.Contains(Clouds, c) {
			t.Errorf("Clouds lacks %q", c)
		}
	}
	// Every cloud name is accepted as infra and as the legacy cloud field.
	for _, c := range Clouds {
		if _, err := ParseInfra(c); err != nil {
			t.Errorf("ParseInfra(%q): %v", c, err)
		}
		if _, err := Parse(map[string]any{"cloud": strings.ToUpper(c)}); err != nil {
			t.Errorf("Parse(cloud: %s): %v", c, err)
		}
	}
}

// The infra grammar of the kinds that are not <cloud>/<region>/<zone>
// comes from the registry (infrakind.Kind.Place); its messages read as
// they did when the kinds were written here.
func TestPlaceMessages(t *testing.T) {
	for _, tc := range []struct {
		in   map[string]any
		want string
	}{
		{map[string]any{"infra": "k8s//ctx"}, `infra "k8s//ctx": empty Kubernetes context after "k8s/"; write k8s or k8s/<context>`},
		{map[string]any{"infra": "ssh/a/b"}, `infra "ssh/a/b": an SSH node pool is written ssh/<pool>, with no zone`},
		{map[string]any{"infra": "local/x"}, `infra "local/x": local infrastructure has no regions or zones; write just local`},
		{map[string]any{"infra": "aws/a/b/c"}, `infra "aws/a/b/c" has 4 parts; expected at most <cloud>/<region>/<zone> (only a Kubernetes context may contain slashes)`},
		{map[string]any{"cloud": "kubernetes", "zone": "z"}, `kubernetes has no zones (zone "z"); the context goes in region, or use infra: k8s/<context>`},
		{map[string]any{"cloud": "local", "region": "r"}, `local infrastructure has no regions (region "r")`},
		{map[string]any{"cloud": "local", "zone": "z"}, `local infrastructure has no zones (zone "z")`},
		{map[string]any{"cloud": "ssh", "zone": "z"}, `SSH node pools have no zones (zone "z"); the pool name goes in region, or use infra: ssh/<pool>`},
		{map[string]any{"cloud": "aws", "region": "a/b"}, `region "a/b" may not contain '/' (only a Kubernetes context may)`},
	} {
		if _, err := Parse(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%v) = %v, want %q", tc.in, err, tc.want)
		}
	}
	for in, want := range map[string]string{"ssh/gpus": "ssh/gpus", "k8s/a/b:c": "kubernetes/a/b:c", "local": "local", "aws/*/z": "aws/*/z"} {
		inf, err := ParseInfra(in)
		if err != nil || inf.String() != want {
			t.Errorf("ParseInfra(%q).String() = %q, %v; want %q", in, inf.String(), err, want)
		}
	}
}

// The unknown-cloud message lists every kind and then the aliases that
// abbreviate a kind's name, read from the registry.
func TestUnknownCloudListsShortAliases(t *testing.T) {
	_, err := ParseInfra("notacloud")
	if err == nil {
		t.Fatal("notacloud parsed")
	}
	want := strings.Join(infrakind.Names(), ", ") + ", k8s, or * for any)"
	if !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %q\ndoes not end with %q", err, want)
	}
}

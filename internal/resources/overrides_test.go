package resources

import (
	"strings"
	"testing"
)

func TestApply(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name string
		yaml string
		o    Overrides
		want string // canonical JSON after Apply
	}{
		{"no flags", `cpus: 4`, Overrides{}, `{"cpus":"4"}`},
		{"cpus overrides", `cpus: 4`, Overrides{CPUs: "8+"}, `{"cpus":"8+"}`},
		{"none resets", "cpus: 4\ninstance_type: m5.large", Overrides{CPUs: "none", InstanceType: "NONE"}, `{}`},
		{"gpus", `accelerators: V100:1`, Overrides{GPUs: "H100:8"}, `{"accelerators":"H100:8"}`},
		{"infra replaces legacy", "cloud: aws\nregion: us-east-1", Overrides{Infra: "gcp/us-central1"}, `{"infra":"gcp/us-central1"}`},
		{"infra none", `infra: aws`, Overrides{Infra: "none"}, `{}`},
		{"cloud change drops region", `infra: aws/us-east-1`, Overrides{Cloud: "gcp"}, `{"infra":"gcp"}`},
		{"same cloud keeps region", `infra: aws/us-east-1`, Overrides{Cloud: "AWS"}, `{"infra":"aws/us-east-1"}`},
		{"region only", `infra: aws/us-east-1`, Overrides{Region: "us-west-2"}, `{"infra":"aws/us-west-2"}`},
		{"zone none", `infra: aws/us-east-1/us-east-1a`, Overrides{Zone: "none"}, `{"infra":"aws/us-east-1"}`},
		{"spot on", ``, Overrides{UseSpot: &yes}, `{"use_spot":true}`},
		{"spot off", `use_spot: true`, Overrides{UseSpot: &no}, `{"use_spot":false}`},
		{"disk size units", `disk_size: 100`, Overrides{DiskSize: "1TB"}, `{"disk_size":1024}`},
		{"tiers", ``, Overrides{DiskTier: "High", NetworkTier: "best"}, `{"disk_tier":"high","network_tier":"best"}`},
		{"disk tier none", `disk_tier: best`, Overrides{DiskTier: "none"}, `{}`},
		{"ports", `ports: 80`, Overrides{Ports: []string{"8080,8081", "9000-9010"}}, `{"ports":["8080-8081","9000-9010"]}`},
		{"image", ``, Overrides{ImageID: "docker:ubuntu"}, `{"image_id":"docker:ubuntu"}`},
		{"image none", `image_id: ami-1`, Overrides{ImageID: "none"}, `{}`},
		{"local disk", ``, Overrides{LocalDisk: "ssd"}, `{"local_disk":"ssd:100+"}`},
		{"priority int", `priority_class: high`, Overrides{Priority: "7"}, `{"priority":7,"priority_class":"high"}`},
		{"priority class", `priority: 3`, Overrides{Priority: "batch"}, `{"priority":3,"priority_class":"batch"}`},
		{"priority none", "priority: 3\npriority_class: high", Overrides{Priority: "none"}, `{}`},
		{"flag beats items", "any_of:\n- infra: aws\n  cpus: 2\n- infra: gcp", Overrides{CPUs: "16"},
			`{"any_of":[{"infra":"aws"},{"infra":"gcp"}],"cpus":"16"}`},
		{"infra flag beats items", "any_of:\n- infra: aws\n  cpus: 2\n- infra: gcp", Overrides{Infra: "azure"},
			`{"any_of":[{"cpus":"2"},{}],"infra":"azure"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(decode(t, tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			before := canon(t, r)
			got, err := r.Apply(tt.o)
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if c := canon(t, got); c != tt.want {
				t.Errorf("after Apply\n got: %s\nwant: %s", c, tt.want)
			}
			if canon(t, r) != before {
				t.Errorf("Apply changed its receiver")
			}
		})
	}
}

func TestApplyErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		o    Overrides
		msg  string
	}{
		{"bad cpus", ``, Overrides{CPUs: "lots"}, `invalid --cpus "lots"`},
		{"bad gpus count", ``, Overrides{GPUs: "A100:0"}, "Accelerator count must be a positive number"},
		{"bad infra", ``, Overrides{Infra: "aws//x"}, "empty segment"},
		{"infra and cloud", ``, Overrides{Infra: "aws", Cloud: "gcp"}, "cannot specify both --infra and --cloud"},
		{"unknown cloud", ``, Overrides{Cloud: "awz"}, `did you mean "aws"?`},
		{"bad disk tier", ``, Overrides{DiskTier: "fastest"}, "low, medium, high, ultra, best"},
		{"bad port", ``, Overrides{Ports: []string{"0"}}, "1..65535"},
		{"priority range", ``, Overrides{Priority: "1001"}, "-1000 to 1000"},
		{"tpu moved to aws", `accelerators: tpu-v2-8`, Overrides{Infra: "aws"}, "only available on GCP or Kubernetes"},
		{"k8s zone", `infra: k8s/ctx`, Overrides{Zone: "z"}, "no zones"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(decode(t, tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Apply(tt.o)
			if err == nil {
				t.Fatalf("Apply accepted it: %s", got)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}
}

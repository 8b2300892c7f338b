package resources

import (
	"testing"
)

func TestCandidates(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    []string // String() of each candidate
		ordered bool
	}{
		{"plain", `cpus: 4+`, []string{"* (cpus=4+)"}, false},
		{"empty", ``, []string{"*"}, false},
		{"accelerator set", `accelerators: {H100: 1, A100: 1}`,
			[]string{"* (gpus=A100:1)", "* (gpus=H100:1)"}, false},
		{"accelerator list", `accelerators: [H100:8, A100:8]`,
			[]string{"* (gpus=H100:8)", "* (gpus=A100:8)"}, true},
		{"any_of merges base", "cpus: 8+\nuse_spot: true\nany_of:\n- infra: aws\n  accelerators: A100:1\n- infra: gcp\n  cpus: 4",
			[]string{"aws (gpus=A100:1, cpus=8+, spot)", "gcp (cpus=4, spot)"}, false},
		{"ordered keeps order", "accelerators: L4:1\nordered:\n- infra: gcp/us-east1\n- infra: aws",
			[]string{"gcp/us-east1 (gpus=L4:1)", "aws (gpus=L4:1)"}, true},
		{"any_of times accelerator set", "accelerators: {A100: 1, H100: 1}\nany_of:\n- infra: aws\n- infra: gcp",
			[]string{"aws (gpus=A100:1)", "aws (gpus=H100:1)", "gcp (gpus=A100:1)", "gcp (gpus=H100:1)"}, false},
		{"item region keeps base cloud", "infra: aws\nany_of:\n- region: us-east-1\n- infra: '*/us-west-2'",
			[]string{"aws/us-east-1", "aws/us-west-2"}, false},
		{"item cloud replaces base infra", "infra: aws/us-east-1\nany_of:\n- infra: gcp",
			[]string{"gcp"}, false},
		{"labels merged", "labels: {team: ml, env: dev}\nany_of:\n- labels: {env: prod}\n- infra: aws",
			[]string{"* (labels=env=prod,team=ml)", "aws (labels=env=dev,team=ml)"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse(decode(t, tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			before := canon(t, r)
			got, ordered := r.Candidates()
			if ordered != tt.ordered {
				t.Errorf("ordered = %v, want %v", ordered, tt.ordered)
			}
			var strs []string
			for _, c := range got {
				strs = append(strs, c.String())
				if len(c.AnyOf) > 0 || len(c.Ordered) > 0 || len(c.Accelerators.List) > 1 {
					t.Errorf("candidate %s is not flat", c)
				}
			}
			if len(strs) != len(tt.want) {
				t.Fatalf("candidates = %q, want %q", strs, tt.want)
			}
			for i := range strs {
				if strs[i] != tt.want[i] {
					t.Errorf("candidate %d = %q, want %q", i, strs[i], tt.want[i])
				}
			}
			// Candidates are copies: changing one leaves r alone.
			got[0].Labels = map[string]string{"changed": "yes"}
			got[0].InstanceType = "changed"
			if canon(t, r) != before {
				t.Errorf("Candidates changed the receiver: %s -> %s", before, canon(t, r))
			}
		})
	}
}

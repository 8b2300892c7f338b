package task

import (
	"strings"
	"testing"
)

// Where a volume type may live comes from the kinds that make it
// (infrakind.Kind.Volumes); the messages are those written before the
// registry said it.
func TestVolumeTypeLivesWhereItsKindsSay(t *testing.T) {
	for _, tc := range []struct {
		yaml, want string
	}{
		{"name: v\ntype: k8s-pvc\ninfra: ssh/gpus\nsize: 10Gi\n",
			`a k8s-pvc volume lives on Kubernetes; infra must be k8s or k8s/<context>, got "ssh/gpus"`},
		{"name: v\ntype: k8s-hostpath\ninfra: aws\nconfig:\n  host_path: /data\n",
			`a k8s-hostpath volume lives on Kubernetes; infra must be k8s or k8s/<context>, got "aws"`},
		{"name: v\ntype: k8s-hostpath\ninfra: k8s\n",
			"k8s-hostpath volumes need config.host_path, an absolute directory other than /"},
		{"name: v\ntype: host-dir\ninfra: k8s/ctx\n",
			`a host-dir volume lives on this machine (infra: local) or on a host of an SSH node pool (infra: ssh/<pool>[/<host>]), got "k8s/ctx"`},
		{"name: v\ntype: k8s-pvc\ninfra: Kubernetes/arn:aws:eks:us-east-1:1:cluster/x\nsize: 10Gi\n", ""},
		{"name: v\ntype: k8s-hostpath\ninfra: k8s\nconfig:\n  host_path: /data\n", ""},
		{"name: v\ntype: host-dir\ninfra: ssh/gpus/h1\n", ""},
		{"name: v\ntype: host-dir\ninfra: LOCAL\n", ""},
	} {
		_, err := LoadVolumeSpecBytes("vol.yaml", []byte(tc.yaml))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.yaml, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

//go:build !skygo_omit_kubernetes

package servermain

import (
	"testing"

	"github.com/skygo/skygo/internal/infra/kubernetes"
)

func TestK8sExecVerbIsKubernetes(t *testing.T) {
	if K8sExecVerb != kubernetes.ExecCommand {
		t.Errorf("K8sExecVerb = %q, kubernetes.ExecCommand = %q", K8sExecVerb, kubernetes.ExecCommand)
	}
}

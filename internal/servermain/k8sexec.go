//go:build !skygo_omit_kubernetes

package servermain

import (
	"io"

	"github.com/skygo/skygo/internal/infra/kubernetes"
)

func k8sExec(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return kubernetes.ExecMain(args, stdin, stdout, stderr)
}

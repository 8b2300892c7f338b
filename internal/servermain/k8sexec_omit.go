//go:build skygo_omit_kubernetes

package servermain

import (
	"fmt"
	"io"
)

func k8sExec(_ []string, _ io.Reader, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "sky k8s-exec: this build of SkyGo leaves Kubernetes out (built with -tags skygo_omit_kubernetes); use a build without that tag")
	return 1
}

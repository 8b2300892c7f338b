package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/infra/kubernetes"
)

// newK8sExecCmd is the hidden `sky k8s-exec`: one command in a pod over
// the Kubernetes exec API, stdin and stdout passed through. rsync uses it
// as its remote shell for workdirs and file mounts on pods, and `ssh
// <cluster>` as its ProxyCommand. Its flags are parsed by the kubernetes
// package, and parsing stops at the pod name so the command's own flags
// (rsync --server ...) pass untouched.
func newK8sExecCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:                kubernetes.ExecCommand + " --context C --namespace N POD COMMAND [ARG...]",
		Hidden:             true,
		Short:              "Run a command in a Kubernetes pod (internal).",
		DisableFlagParsing: true,
		SilenceUsage:       true,
		RunE: func(cmd *cobra.Command, args []string) error {
			io := defaultIO()
			if f != nil && f.IO != nil {
				io = f.IO
			}
			if code := kubernetes.ExecMain(args, io.In, io.Out, io.ErrOut); code != 0 {
				os.Exit(code)
			}
			return nil
		},
	}
}

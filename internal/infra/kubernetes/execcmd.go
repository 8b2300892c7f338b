package kubernetes

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// ExecCommand is the hidden sky subcommand that runs one command in a
// pod over the exec API with stdin and stdout passed through: the remote
// shell of rsync (`rsync -e "sky k8s-exec ..." dir pod:dir`) and the
// ProxyCommand of `ssh <cluster>` (the pod's agent speaks SSH on it).
//
//	sky k8s-exec --context C --namespace N POD COMMAND [ARG...]
const ExecCommand = "k8s-exec"

// ExecMain is ExecCommand: it returns the command's exit code (255 when
// the pod could not be reached, as ssh does).
func ExecMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sky "+ExecCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	ctxName := fs.String("context", "", "kubeconfig context")
	ns := fs.String("namespace", "default", "namespace of the pod")
	// rsync passes `-l user` before the host when one is given.
	fs.String("l", "", "ignored: the container's user is the pod's")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) < 2 {
		fmt.Fprintln(stderr, "usage: sky "+ExecCommand+" --context C --namespace N POD COMMAND [ARG...]")
		return 2
	}
	home, err := os.UserHomeDir()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 255
	}
	rc, err := restConfig(home, *ctxName)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 255
	}
	kc, err := newKubeAPI(rc)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 255
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	c := &client{context: *ctxName, namespace: *ns, rest: rc, kc: kc}
	code, err := execStream(ctx, c, *ns, rest[0], rest[1:], stdin, stdout, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sky %s: %v\n", ExecCommand, err)
		return 255
	}
	return code
}

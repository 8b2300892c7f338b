package kubernetes

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	kexec "k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/skygo/skygo/internal/provision"
)

// Runner runs commands in one pod through the API server's exec
// endpoint: WebSocket, falling back to SPDY on API servers that predate
// it. Commands run in a session of their own inside the container, so
// that cancelling one kills everything it started there.
type Runner struct {
	c         *client
	namespace string
	pod       string
	ip        string
	sky       string // the server's sky binary, for rsync's remote shell

	mu   sync.Mutex
	home string
	user string
}

var _ provision.CommandRunner = (*Runner)(nil)

// Runners implements provision.Provisioner.
func (p *Provisioner) Runners(info *provision.ClusterInfo) ([]provision.CommandRunner, error) {
	ctxName := info.Meta[metaContext]
	if ctxName == "" {
		ctxName = p.context
	}
	c, err := p.in.client(ctxName)
	if err != nil {
		return nil, err
	}
	ns := info.Meta[metaNamespace]
	if ns == "" {
		ns = c.namespace
	}
	out := make([]provision.CommandRunner, len(info.Nodes))
	for i, n := range info.Nodes {
		out[i] = &Runner{c: c, namespace: ns, pod: n.ID, ip: n.InternalIP, home: n.Home, sky: p.in.env.Sky}
	}
	return out, nil
}

// NodeIP implements provision.CommandRunner: the pod's IP.
func (r *Runner) NodeIP() string { return r.ip }

// Pod is the pod's name.
func (r *Runner) Pod() string { return r.pod }

// Home implements provision.CommandRunner: $HOME of the container's user,
// asked once.
func (r *Runner) Home() string {
	home, _, _ := r.identity(context.Background())
	return home
}

// identity is the container user's home and name.
func (r *Runner) identity(ctx context.Context) (home, user string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.home != "" && r.user != "" {
		return r.home, r.user, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code, err := execStream(ctx, r.c, r.namespace, r.pod, []string{"/bin/sh", "-c", `printf '%s\n' "$HOME"; id -un`}, nil, &out, &errb)
	if err == nil && code != 0 {
		err = fmt.Errorf("exit %d: %s", code, strings.TrimSpace(errb.String()))
	}
	if err != nil {
		return r.home, "", fmt.Errorf("pod %s: finding its user: %w", r.pod, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 || lines[0] == "" {
		return r.home, "", fmt.Errorf("pod %s: its container has no $HOME", r.pod)
	}
	r.home, r.user = strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1])
	return r.home, r.user, nil
}

// Run implements provision.CommandRunner.
func (r *Runner) Run(ctx context.Context, cmd string, opts provision.RunOptions) (provision.Result, error) {
	var res provision.Result
	var out, errb bytes.Buffer
	stdout, stderr := io.Writer(&out), io.Writer(&errb)
	if opts.Stdout != nil {
		stdout = opts.Stdout
	}
	if opts.Stderr != nil {
		stderr = opts.Stderr
	}
	code, err := r.exec(ctx, cmd, opts.Stdin, stdout, stderr)
	res.Stdout, res.Stderr, res.ExitCode = out.Bytes(), errb.Bytes(), code
	return res, err
}

// Stream implements provision.CommandRunner.
func (r *Runner) Stream(ctx context.Context, cmd string, stdout, stderr io.Writer) (int, error) {
	return r.exec(ctx, cmd, nil, stdout, stderr)
}

// exec runs cmd with bash in its own session; when ctx ends first, the
// session is killed by a second exec (closing the stream alone would
// leave the command running in the container).
func (r *Runner) exec(ctx context.Context, cmd string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	pgFile := "/tmp/.skygo-run-" + token()
	done := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		select {
		case <-done:
		case <-ctx.Done():
			r.killSession(pgFile)
		}
	}()
	code, err := execStream(ctx, r.c, r.namespace, r.pod, []string{"/bin/bash", "-c", sessionWrap, "bash", pgFile, cmd}, stdin, stdout, stderr)
	close(done)
	<-killed
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return code, err
}

// sessionWrap runs $2 under bash in a new session whose id it leaves in
// $1 while it runs (setsid -w waits and passes the exit code on). Images
// without setsid run the command directly.
const sessionWrap = `if command -v setsid >/dev/null 2>&1; then exec setsid -w bash -c 'echo $$ > "$0"; bash -c "$1"; rc=$?; rm -f "$0"; exit $rc' "$1" "$2"; else exec bash -c "$2"; fi`

// killSession ends a cancelled command's session: TERM, then KILL after
// two seconds.
func (r *Runner) killSession(pgFile string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	script := `f=` + provision.Quote(pgFile) + `; pg=$(cat "$f" 2>/dev/null); [ -n "$pg" ] || exit 0
kill -TERM -- -"$pg" 2>/dev/null
i=0; while [ $i -lt 10 ] && kill -0 -- -"$pg" 2>/dev/null; do sleep 0.2; i=$((i+1)); done
kill -KILL -- -"$pg" 2>/dev/null; rm -f "$f"; exit 0`
	_, _ = execStream(ctx, r.c, r.namespace, r.pod, []string{"/bin/bash", "-c", script}, nil, io.Discard, io.Discard)
}

func token() string {
	b := make([]byte, 9)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Upload implements provision.CommandRunner: the file goes through the
// exec stream's stdin.
func (r *Runner) Upload(ctx context.Context, localPath, remotePath string) error {
	f, err := os.Open(localPath)
	if err != nil {
		return err
	}
	defer f.Close()
	dir := "."
	if i := strings.LastIndex(remotePath, "/"); i > 0 {
		dir = remotePath[:i]
	}
	cmd := "mkdir -p " + provision.QuoteHomePath(dir) + " && cat > " + provision.QuoteHomePath(remotePath)
	if _, err := provision.RunChecked(ctx, r, cmd, provision.RunOptions{Stdin: f}); err != nil {
		return fmt.Errorf("copying %s to pod %s:%s: %w", localPath, r.pod, remotePath, err)
	}
	return nil
}

// Rsync implements provision.CommandRunner: this machine's rsync, with
// `sky k8s-exec` as its remote shell, so the rsync in the pod speaks
// over the exec stream.
func (r *Runner) Rsync(ctx context.Context, localDir, remoteDir string, opts provision.RsyncOptions) error {
	home, _, err := r.identity(ctx)
	if err != nil {
		return err
	}
	dst := provision.HomePath(home, remoteDir)
	res, err := r.Run(ctx, "mkdir -p "+provision.Quote(dst)+" && command -v rsync >/dev/null", provision.RunOptions{})
	if err == nil && res.ExitCode != 0 {
		err = fmt.Errorf("the pod's image has no rsync (exit %d %s); use an image with rsync installed", res.ExitCode, bytes.TrimSpace(res.Stderr))
	}
	if err != nil {
		return fmt.Errorf("syncing %s to pod %s: %w", localDir, r.pod, err)
	}
	args := []string{"-a"}
	if opts.Delete {
		args = append(args, "--delete")
	}
	for _, ex := range opts.Excludes {
		args = append(args, "--exclude="+ex)
	}
	rsh := provision.Join(r.sky, ExecCommand, "--context", r.c.context, "--namespace", r.namespace)
	args = append(args, "--blocking-io", "-e", rsh, strings.TrimSuffix(localDir, "/")+"/", r.pod+":"+dst+"/")
	out, err := exec.CommandContext(ctx, "rsync", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("rsync %s to pod %s:%s: %v: %s", localDir, r.pod, dst, err, bytes.TrimSpace(out))
	}
	return nil
}

// execStream runs argv in the pod's container, copying the streams, and
// returns its exit code. err is for "could not run it at all".
func execStream(ctx context.Context, c *client, ns, pod string, argv []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	ex, err := executor(c.rest, c.kc.execURL(ns, pod, &corev1.PodExecOptions{Container: containerName, Command: argv, Stdin: stdin != nil, Stdout: true, Stderr: true}))
	if err != nil {
		return -1, err
	}
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Stderr: stderr})
	if err == nil {
		return 0, nil
	}
	var ce kexec.CodeExitError
	if errors.As(err, &ce) {
		return ce.Code, nil
	}
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return -1, fmt.Errorf("exec in pod %s: %w", pod, err)
}

// executor is kubectl's choice of stream: WebSocket first, SPDY when the
// API server cannot upgrade to it.
func executor(rc *rest.Config, u *url.URL) (remotecommand.Executor, error) {
	spdy, err := remotecommand.NewSPDYExecutor(rc, http.MethodPost, u)
	if err != nil {
		return nil, err
	}
	ws, err := remotecommand.NewWebSocketExecutor(rc, http.MethodGet, u.String())
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	})
}

var _ provision.SkyLocator = (*Runner)(nil)

// SkyCommand implements provision.SkyLocator: the pod's own copy of the
// sky binary (Bootstrap put it there).
func (r *Runner) SkyCommand() string { return provision.Quote(skyInPod(r.Home())) }

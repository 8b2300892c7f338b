package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/provision"
)

// The "ssh" transport: the head reaches a worker of an SSH node pool
// cluster with the system ssh client and the key the backend put on the
// head. The agent stays free of an SSH library (it is the same binary,
// but its code path stays small), and a host that stops answering is
// noticed by ssh's own keepalives within a few seconds.

func init() {
	Transports["ssh"] = newSSHNodeRunner
}

// sshKeepAlive and sshKeepAliveMax bound how long a rank on a dead host
// keeps its job waiting: ServerAliveInterval × ServerAliveCountMax.
const (
	sshKeepAlive    = 3
	sshKeepAliveMax = 3
)

// sshNodeRunner runs commands on one node with `ssh ... bash -c CMD`.
type sshNodeRunner struct {
	dest string   // user@ip
	args []string // ssh options, before the destination
}

func newSSHNodeRunner(n agentapi.Node) (NodeRunner, error) {
	if n.IP == "" {
		return nil, errors.New("ssh transport: node has no ip")
	}
	if n.SSHKey == "" {
		return nil, fmt.Errorf("node %s: ssh transport needs ssh_key (the private key's path on the head)", n.IP)
	}
	port := n.SSHPort
	if port == 0 {
		port = 22
	}
	home, err := homeDir()
	if err != nil {
		return nil, err
	}
	args := []string{
		"-i", n.SSHKey,
		"-o", "BatchMode=yes",
		"-o", "IdentitiesOnly=yes",
		"-o", "StrictHostKeyChecking=accept-new",
		"-o", "UserKnownHostsFile=" + home + "/.sky/known_hosts",
		"-o", "ConnectTimeout=5",
		"-o", "ServerAliveInterval=" + strconv.Itoa(sshKeepAlive),
		"-o", "ServerAliveCountMax=" + strconv.Itoa(sshKeepAliveMax),
		"-o", "LogLevel=ERROR",
		"-p", strconv.Itoa(port),
	}
	dest := n.IP
	if strings.Contains(dest, ":") {
		dest = "[" + dest + "]"
	}
	if n.SSHUser != "" {
		dest = n.SSHUser + "@" + dest
	}
	return &sshNodeRunner{dest: dest, args: args}, nil
}

// command is the ssh invocation of cmd. ssh joins its remote arguments
// with spaces for the remote login shell, so cmd travels as one quoted
// word to bash -c.
func (r *sshNodeRunner) command(ctx context.Context, cmd string) *exec.Cmd {
	args := append(append([]string{}, r.args...), r.dest, "--", "bash -c "+provision.Quote(cmd))
	c := exec.CommandContext(ctx, "ssh", args...)
	// Cancelling kills ssh; the remote side is ended by the caller's
	// kill-rank, which is why a cancelled Run is an error.
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGKILL) }
	c.WaitDelay = 2 * time.Second
	return c
}

// Run implements NodeRunner. ssh's exit status 255 means ssh itself
// failed (host unreachable, auth refused, connection lost): that is an
// error naming the node and ssh's message, not a command result.
func (r *sshNodeRunner) Run(ctx context.Context, cmd string, opts provision.RunOptions) (provision.Result, error) {
	return RunTransport(ctx, r.command(ctx, cmd), opts, "ssh to "+r.dest, func(code int, stderrTail string) error {
		if code != 255 {
			return nil
		}
		msg := strings.TrimSpace(stderrTail)
		if msg == "" {
			msg = "connection failed or was lost (is the host up and its sshd running?)"
		}
		return errors.New(msg)
	})
}

// RunTransport runs a transport's command (ssh, or a plug-in's) with opts' input and
// output, and returns the remote command's result. failed tells a transport
// failure from the command's own exit status, given the end of stderr; an
// error it returns is reported as what (the transport and the node) failing.
func RunTransport(ctx context.Context, c *exec.Cmd, opts provision.RunOptions, what string, failed func(code int, stderrTail string) error) (provision.Result, error) {
	c.Stdin = opts.Stdin
	var out, errBuf bytes.Buffer
	tail := &tailBuffer{max: 4096}
	c.Stdout = &out
	if opts.Stdout != nil {
		c.Stdout = opts.Stdout
	}
	if opts.Stderr != nil {
		c.Stderr = io.MultiWriter(opts.Stderr, tail)
	} else {
		c.Stderr = io.MultiWriter(&errBuf, tail)
	}
	err := c.Run()
	res := provision.Result{Stdout: out.Bytes(), Stderr: errBuf.Bytes()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("%s: %w", what, ctx.Err())
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
		if ferr := failed(res.ExitCode, tail.String()); ferr != nil {
			return res, fmt.Errorf("%s: %w", what, ferr)
		}
		return res, nil
	case err != nil:
		return res, fmt.Errorf("running %s: %w", what, err)
	}
	return res, nil
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

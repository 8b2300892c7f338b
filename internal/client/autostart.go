package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/paths"
)

// startTimeout bounds how long the client waits for a server it started.
const startTimeout = 30 * time.Second

func isConnRefused(err error) bool {
	var oe *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || (errors.As(err, &oe) && oe.Op == "dial")
}

// isConnReset is a connection the server dropped unanswered: what a local
// server that is still starting, or stopping for the next one, does.
func isConnReset(err error) bool { return errors.Is(err, syscall.ECONNRESET) }

func osUserName() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

// ensureServer starts the local server unless one answers. An exclusive
// flock on ~/.sky/api_server/.start.lock makes check-and-start atomic
// across processes, so two CLI calls racing here start one server; the
// loser finds it healthy once it gets the lock.
func (c *Client) ensureServer(ctx context.Context) error {
	dir := paths.ServerDir(c.home)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(dir, ".start.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("open start lock: %w", err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lf.Name(), err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN) //nolint:errcheck
	if _, err := c.Health(ctx); err == nil || errors.Is(err, ErrForeignServer) {
		return err
	}
	logPath := filepath.Join(dir, "server.log")
	if err := c.spawnServer(logPath); err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	// A refused connection costs microseconds, and the server is usually
	// up within ~100 ms: poll often at first so the first command does
	// not sit out most of a fixed interval.
	wait := 5 * time.Millisecond
	for {
		if _, err := c.Health(ctx); err == nil || errors.Is(err, ErrForeignServer) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("started a local API server but it did not answer at %s within %s; see %s", c.Endpoint, startTimeout, logPath)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

// spawnServer starts `sky-server api start --foreground` detached: a new session
// (setsid) so it outlives this command and ignores its Ctrl-C, output
// appended to the server log.
func (c *Client) spawnServer(logPath string) error {
	argv := c.opts.StartCommand
	if len(argv) == 0 {
		find := c.opts.ServerBinary
		if find == nil {
			find = os.Executable
		}
		exe, err := find()
		if err != nil {
			return fmt.Errorf("find the API server program to start a server: %w", err)
		}
		argv = []string{exe, "api", "start", "--foreground"}
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, logf, logf
	cmd.Env = append(os.Environ(), c.opts.ServerEnv...)
	if c.home != "" {
		cmd.Env = append(cmd.Env, "HOME="+c.home)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start API server (%s): %w", argv[0], err)
	}
	// Reap it if it exits while we still run (e.g. port taken); otherwise
	// it lives on after we exit.
	go cmd.Wait() //nolint:errcheck
	return nil
}

package lb

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// `sky-lb serve-lb` is the load balancer as the controller starts it:
// a child process driven through its control socket, exiting 2 when its
// port is taken and 0 after POST /shutdown.
func TestServeLBCommand(t *testing.T) {
	bin := testutil.LBBinary(t)
	dir, err := os.MkdirTemp("", "lbcmd") // short: unix socket paths are limited
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "lb.sock")
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "serve-lb", "--service", "svc", "--listen", addr, "--control", sock,
		"--policy", "instance_aware_least_load", "--stream-timeout", "30", "--hold-timeout", "5")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	if !waitSocket(sock, exited) {
		t.Fatalf("sky serve-lb did not come up: %s", stderr.String())
	}
	c := Dial(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := c.State(ctx)
	if err != nil || st.PID != cmd.Process.Pid || st.Listen != addr {
		t.Fatalf("state %+v (%v), want pid %d listen %s", st, err, cmd.Process.Pid, addr)
	}
	rep := replicaServer(t, named(4))
	if err := c.SetReplicas(ctx, ReplicaSet{Generation: 3, Replicas: []Replica{{ID: 4, URL: rep.URL, TargetQPS: 2}}}); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, http.DefaultClient, "http://"+addr+"/anything?x=1"); code != 200 || body != "replica 4" {
		t.Fatalf("%d %q", code, body)
	}

	second := exec.Command(bin, "serve-lb", "--service", "svc", "--listen", addr, "--control", filepath.Join(dir, "other.sock"))
	out, err := second.CombinedOutput()
	if second.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), addr+" is in use") {
		t.Fatalf("second load balancer on a taken port: %v, %q", err, out)
	}

	if err := c.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(8 * time.Second):
		t.Fatal("sky serve-lb did not exit after /shutdown")
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "policy instance_aware_least_load") {
		t.Errorf("log: %s", stderr.String())
	}
}

// A load balancer (re)started by the controller knows no replica until
// the controller's first push, moments later: a request that arrives in
// between is held and served by the replica the push brings, not
// answered 503 "No ready replicas" (the service may have ready replicas
// all along).
func TestServeLBHoldsUntilTheFirstPush(t *testing.T) {
	bin := testutil.LBBinary(t)
	dir, err := os.MkdirTemp("", "lbhold")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "lb.sock")
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	var stderr syncBuf
	cmd := exec.Command(bin, "serve-lb", "--service", "svc", "--listen", addr, "--control", sock)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	if !waitSocket(sock, exited) {
		t.Fatalf("sky serve-lb did not come up: %s", stderr.String())
	}
	c := Dial(sock)
	ctx := ctxTimeout(t, 30*time.Second)
	type result struct {
		code int
		body string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Get("http://" + addr + "/first")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, err = b.ReadFrom(resp.Body)
		done <- result{resp.StatusCode, b.String(), err}
	}()
	waitFor(t, "the request before the first push to be held", func() bool {
		select {
		case r := <-done:
			t.Fatalf("request before the first push answered %d %q (%v), want it held until the push", r.code, strings.TrimSpace(r.body), r.err)
		default:
		}
		st, err := c.State(ctx)
		return err == nil && st.Waiting == 1 && !st.Known
	})
	rep := replicaServer(t, named(2))
	if err := c.SetReplicas(ctx, ReplicaSet{Generation: 1, Replicas: []Replica{{ID: 2, URL: rep.URL}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.code != 200 || r.body != "replica 2" {
			t.Fatalf("held request: %d %q %v, want 200 from replica 2", r.code, r.body, r.err)
		}
	case <-ctx.Done():
		t.Fatal("held request not served after the push")
	}
}

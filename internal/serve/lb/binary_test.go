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

// `sky serve-lb` is the load balancer as the controller starts it: a
// child process driven through its control socket, exiting 2 when its
// port is taken and 0 after POST /shutdown.
func TestServeLBCommand(t *testing.T) {
	bin := testutil.SkyBinary(t)
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

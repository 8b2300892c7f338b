package agent

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/skygo/skygo/internal/agent/agentapi"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil"
)

// servedNode is a worker node's HOME served by ssh-serve on loopback, and
// a head HOME (this test's HOME) holding the key that may log in.
type servedNode struct {
	t    *testing.T
	head string
	home string
	port int
	key  string // the authorized private key, in head
	user string
}

func newServedNode(t *testing.T) *servedNode {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	n := &servedNode{t: t, head: testutil.TempHome(t), home: t.TempDir(), port: testutil.FreePort(t), user: u.Username}
	n.key = filepath.Join(n.head, ".ssh", "id_node")
	pub := writeClientKey(t, n.key)
	if err := os.MkdirAll(filepath.Join(n.home, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.home, ".ssh", "authorized_keys"), gossh.MarshalAuthorizedKey(pub), 0o600); err != nil {
		t.Fatal(err)
	}
	// Whatever a test leaves running on the node (the programs of a
	// server it killed) goes with it.
	t.Cleanup(func() {
		for _, pid := range proc.ProcsWithEnv(proc.EnvNode + "=" + n.home) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return n
}

func (n *servedNode) addr() string { return "127.0.0.1:" + strconv.Itoa(n.port) }

// writeConfig makes the node worker 1 of a two-node cluster.
func (n *servedNode) writeConfig() {
	n.t.Helper()
	cfg := agentapi.Config{ClusterName: "c1", Cloud: "kubernetes", NodeIndex: 1, Nodes: []agentapi.Node{
		{IP: "127.0.0.1", Home: n.head, CPUs: 1},
		{IP: "127.0.0.1", Home: n.home, CPUs: 1, Transport: agentapi.TransportAgentSSH},
	}}
	b, _ := json.Marshal(cfg)
	if err := writeFileAtomic(paths{n.home}.config(), b, 0o600); err != nil {
		n.t.Fatal(err)
	}
}

// serveInProcess runs ssh-serve for the node in this process until the
// test ends.
func (n *servedNode) serveInProcess() {
	n.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- sshServe(ctx, n.home, []string{"--listen", n.addr()}, &bytes.Buffer{}, &stderr) }()
	n.t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			n.t.Error("ssh-serve did not stop within 10 s of its context ending")
		}
	})
	for deadline := time.Now().Add(10 * time.Second); readPid(paths{n.home}.sshServePid()) != os.Getpid(); {
		select {
		case code := <-done:
			n.t.Fatalf("ssh-serve exited with %d: %s", code, stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			n.t.Fatal("ssh-serve did not listen within 10 s")
		}
	}
}

// detach runs `sky agent ssh-serve --listen ADDR --detach` for the node,
// expects it to say nothing and succeed, and returns the server's pid.
func (n *servedNode) detach(sky string) int {
	n.t.Helper()
	cmd := exec.Command(sky, "agent", "ssh-serve", "--listen", n.addr(), "--detach")
	cmd.Env = append(withoutKeys(os.Environ(), "HOME"), "HOME="+n.home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil || out.Len() > 0 {
		n.t.Fatalf("ssh-serve --detach: %v, output %q", err, out.String())
	}
	pid := readPid(paths{n.home}.sshServePid())
	if pid <= 0 || gone(pid) {
		n.t.Fatalf("after ssh-serve --detach, the pid file names %d, which does not run", pid)
	}
	n.t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return pid
}

func (n *servedNode) hostKey() string {
	n.t.Helper()
	k, err := HostPublicKey(n.home)
	if err != nil {
		n.t.Fatal(err)
	}
	return k
}

// runner is the agent-ssh runner of the node, with the node's pinned
// host key unless the test changes the node record.
func (n *servedNode) runner(edit func(*agentapi.Node)) *agentSSHRunner {
	n.t.Helper()
	node := agentapi.Node{IP: "127.0.0.1", Transport: agentapi.TransportAgentSSH, SSHPort: n.port, SSHUser: n.user, SSHKey: n.key, SSHHostKey: n.hostKey()}
	if edit != nil {
		edit(&node)
	}
	r, err := newNodeRunner(node)
	if err != nil {
		n.t.Fatal(err)
	}
	ar := r.(*agentSSHRunner)
	n.t.Cleanup(func() { ar.Close() })
	return ar
}

func (n *servedNode) run(r NodeRunner, cmd string, opts provision.RunOptions) provision.Result {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.Run(ctx, cmd, opts)
	if err != nil {
		n.t.Fatalf("run %q: %v", cmd, err)
	}
	return res
}

func writeClientKey(t *testing.T, path string) gossh.PublicKey {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// gone says whether pid no longer runs (a zombie does not).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z'
}

func waitGone(t *testing.T, pid int, within time.Duration, what string) {
	t.Helper()
	for deadline := time.Now().Add(within); !gone(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) still runs after %s", what, pid, within)
		}
	}
}

// waitFile waits for path to have content, and returns it.
func waitFile(t *testing.T, path string, within time.Duration) []byte {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %s", path, within)
		}
	}
}

func TestAgentSSHRunsCommandsAsTheNodesJobsDo(t *testing.T) {
	n := newServedNode(t)
	n.writeConfig()
	n.serveInProcess()
	r := n.runner(nil)

	res := n.run(r, `cat; echo to-stderr >&2; exit 3`, provision.RunOptions{Stdin: strings.NewReader("from-stdin\n")})
	if string(res.Stdout) != "from-stdin\n" || string(res.Stderr) != "to-stderr\n" || res.ExitCode != 3 {
		t.Errorf("result = stdout %q stderr %q code %d, want stdin echoed, to-stderr, 3", res.Stdout, res.Stderr, res.ExitCode)
	}
	// No stdin: the program reads EOF rather than waiting.
	if res := n.run(r, `cat; echo done`, provision.RunOptions{}); string(res.Stdout) != "done\n" {
		t.Errorf("without stdin: stdout %q", res.Stdout)
	}
	// A program killed by a signal counts as bash reports it.
	if res := n.run(r, `kill -9 $$`, provision.RunOptions{}); res.ExitCode != 137 {
		t.Errorf("killed by SIGKILL: exit code %d, want 137", res.ExitCode)
	}
	// The command reaches bash -c as one word, as with the ssh transport:
	// spaces, both quotes and $ survive, and variables expand on the node.
	cmd := `printf '%s|' "a b" 'c "d"' "it's" '$HOME' "$HOME" "$PWD" "$SKYPILOT_NODE_RANK" "$SKYPILOT_NUM_NODES"`
	want := fmt.Sprintf(`a b|c "d"|it's|$HOME|%s|%s|1|2|`, n.home, n.home)
	if res := n.run(r, cmd, provision.RunOptions{}); string(res.Stdout) != want {
		t.Errorf("quoting: stdout %q, want %q", res.Stdout, want)
	}
	// Streamed output goes to the writers, not the result.
	var out, errOut bytes.Buffer
	res = n.run(r, `echo out; echo err >&2`, provision.RunOptions{Stdout: &out, Stderr: &errOut})
	if out.String() != "out\n" || errOut.String() != "err\n" || len(res.Stdout)+len(res.Stderr) != 0 {
		t.Errorf("streamed: writers %q %q, result %q %q", out.String(), errOut.String(), res.Stdout, res.Stderr)
	}

	// Commands at once share one connection: every session sees the same
	// client port.
	var wg sync.WaitGroup
	ports := make([]string, 8)
	for i := range ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.Run(context.Background(), `echo "${SSH_CLIENT% *}"; sleep 0.2`, provision.RunOptions{})
			if err != nil || res.ExitCode != 0 {
				t.Errorf("concurrent run %d: %v, code %d", i, err, res.ExitCode)
			}
			ports[i] = strings.TrimSpace(string(res.Stdout))
		}()
	}
	wg.Wait()
	for _, p := range ports {
		if p == "" || p != ports[0] {
			t.Fatalf("sessions came from client addresses %q, want one connection", ports)
		}
	}
}

func TestAgentSSHRefusesWrongHostKeyAndUnknownClient(t *testing.T) {
	n := newServedNode(t)
	n.writeConfig()
	n.serveInProcess()
	other := writeClientKey(t, filepath.Join(n.head, ".ssh", "id_other"))
	marker := filepath.Join(n.home, "ran")
	for _, c := range []struct {
		name string
		edit func(*agentapi.Node)
		want string
	}{
		{"pinned host key differs", func(nd *agentapi.Node) {
			nd.SSHHostKey = strings.TrimSpace(string(gossh.MarshalAuthorizedKey(other)))
		}, "not the node's ssh_host_key"},
		{"client key not authorized", func(nd *agentapi.Node) { nd.SSHKey = filepath.Join(n.head, ".ssh", "id_other") }, "unable to authenticate"},
		{"another user", func(nd *agentapi.Node) { nd.SSHUser = n.user + "-not" }, "unable to authenticate"},
	} {
		r := n.runner(c.edit)
		res, err := r.Run(context.Background(), "touch "+marker, provision.RunOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), n.addr()) {
			t.Errorf("%s: err = %v (code %d), want an error naming %s with %q", c.name, err, res.ExitCode, n.addr(), c.want)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the command ran", c.name)
		}
	}
	if _, err := newNodeRunner(agentapi.Node{IP: "127.0.0.1", Transport: agentapi.TransportAgentSSH, SSHKey: n.key, SSHHostKey: "ssh-ed25519 not-base64"}); err == nil || !strings.Contains(err.Error(), "ssh_host_key") {
		t.Errorf("malformed ssh_host_key: err = %v", err)
	}
	if _, err := newNodeRunner(agentapi.Node{IP: "127.0.0.1", Transport: agentapi.TransportAgentSSH}); err == nil || !strings.Contains(err.Error(), "needs ssh_key") {
		t.Errorf("no ssh_key: err = %v", err)
	}
}

// Without a pinned key the first key seen is kept in ~/.sky/known_hosts,
// and a different one later is refused.
func TestAgentSSHAcceptsNewHostKeyOnce(t *testing.T) {
	n := newServedNode(t)
	n.writeConfig()
	n.serveInProcess()
	unpinned := func(nd *agentapi.Node) { nd.SSHHostKey = "" }
	if res := n.run(n.runner(unpinned), "echo ok", provision.RunOptions{}); string(res.Stdout) != "ok\n" {
		t.Fatalf("first contact: stdout %q", res.Stdout)
	}
	known := filepath.Join(n.head, ".sky", "known_hosts")
	b, _ := os.ReadFile(known)
	wantLine := fmt.Sprintf("[127.0.0.1]:%d %s", n.port, n.hostKey())
	if strings.TrimSpace(string(b)) != wantLine {
		t.Fatalf("known_hosts = %q, want %q", b, wantLine)
	}
	// The next contact finds the recorded key and adds nothing.
	n.run(n.runner(unpinned), "true", provision.RunOptions{})
	if b2, _ := os.ReadFile(known); !bytes.Equal(b, b2) {
		t.Fatalf("known_hosts changed on a second contact: %q", b2)
	}
	other := writeClientKey(t, filepath.Join(n.head, "other"))
	if err := os.WriteFile(known, []byte(fmt.Sprintf("[127.0.0.1]:%d %s", n.port, gossh.MarshalAuthorizedKey(other))), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := n.runner(unpinned).Run(context.Background(), "true", provision.RunOptions{}); err == nil || !strings.Contains(err.Error(), "has changed") {
		t.Errorf("a changed host key: err = %v, want a refusal", err)
	}
}

// A server started before the node's config refuses sessions, saying
// why, and serves them once the config is there.
func TestSSHServeBeforeConfig(t *testing.T) {
	n := newServedNode(t)
	n.serveInProcess()
	r := n.runner(nil)
	_, err := r.Run(context.Background(), "true", provision.RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "refused the session") || !strings.Contains(err.Error(), "no config") {
		t.Fatalf("before the config: err = %v, want the session refused for want of a config", err)
	}
	n.writeConfig()
	if res := n.run(r, `echo "$SKYPILOT_NODE_RANK"`, provision.RunOptions{}); string(res.Stdout) != "1\n" {
		t.Fatalf("after the config: stdout %q", res.Stdout)
	}
}

func TestAgentSSHCancelKillsRemoteProgram(t *testing.T) {
	n := newServedNode(t)
	n.writeConfig()
	n.serveInProcess()
	r := n.runner(nil)
	pidFile := filepath.Join(n.home, "pid")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := r.Run(ctx, `echo $$ > `+pidFile+`; echo started; exec sleep 300`, provision.RunOptions{Stdout: &out})
		done <- err
	}()
	pid, err := strconv.Atoi(strings.TrimSpace(string(waitFile(t, pidFile, 10*time.Second))))
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled run: err = %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a cancelled run did not return within 2 s")
	}
	waitGone(t, pid, 5*time.Second, "the cancelled command")
	// The connection outlives the cancelled session.
	if res := n.run(r, "echo still", provision.RunOptions{}); string(res.Stdout) != "still\n" {
		t.Errorf("after a cancel: stdout %q", res.Stdout)
	}
}

func TestSSHServeDetachIsIdempotent(t *testing.T) {
	sky := testutil.NodeBinary(t, runtime.GOARCH)
	n := newServedNode(t)
	n.writeConfig()
	var wg sync.WaitGroup
	pids := make([]int, 3)
	for i := range pids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(sky, "agent", "ssh-serve", "--listen", n.addr(), "--detach")
			cmd.Env = append(withoutKeys(os.Environ(), "HOME"), "HOME="+n.home)
			if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("concurrent ssh-serve --detach: %v, output %q", err, out)
			}
			pids[i] = readPid(paths{n.home}.sshServePid())
		}()
	}
	wg.Wait()
	first := n.detach(sky)
	for _, p := range pids {
		if p != first {
			t.Fatalf("starts saw servers %v and then %d, want one", pids, first)
		}
	}
	if again := n.detach(sky); again != first {
		t.Fatalf("a second start made server %d beside %d", again, first)
	}
	if servers := proc.ProcsWithEnv("HOME=" + n.home); len(servers) != 1 || servers[0] != first {
		t.Fatalf("processes of the node's HOME = %v, want only the server %d", servers, first)
	}
	if res := n.run(n.runner(nil), "echo served", provision.RunOptions{}); string(res.Stdout) != "served\n" {
		t.Fatalf("through the detached server: stdout %q", res.Stdout)
	}
	// In the foreground, a second server says who serves.
	cmd := exec.Command(sky, "agent", "ssh-serve", "--listen", "127.0.0.1:"+strconv.Itoa(testutil.FreePort(t)))
	cmd.Env = append(withoutKeys(os.Environ(), "HOME"), "HOME="+n.home)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "pid "+strconv.Itoa(first)) {
		t.Errorf("a foreground server beside a running one: %v, %q", err, out)
	}
}

func TestSSHServeStopsWhenAgentDirRemoved(t *testing.T) {
	sky := testutil.NodeBinary(t, runtime.GOARCH)
	n := newServedNode(t)
	pid := n.detach(sky)
	if err := os.RemoveAll(paths{n.home}.dir()); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 5*time.Second, "the server of a removed node")
	if fresh := n.detach(sky); fresh == pid {
		t.Fatalf("no new server after the old one stopped")
	}
}

// A server that dies, or stops answering, fails the commands running
// through it with an error (not an exit code) in bounded time, and the
// runner dials again afterwards.
func TestAgentSSHNoticesDeadServer(t *testing.T) {
	sky := testutil.NodeBinary(t, runtime.GOARCH)
	n := newServedNode(t)
	n.writeConfig()
	pid := n.detach(sky)
	r := n.runner(nil)
	n.run(r, "true", provision.RunOptions{})

	lose := func(name string, sig syscall.Signal) {
		started := filepath.Join(n.home, name)
		done := make(chan error, 1)
		go func() {
			res, err := r.Run(context.Background(), "echo x > "+started+"; sleep 60", provision.RunOptions{})
			if err == nil {
				err = fmt.Errorf("a result, exit code %d", res.ExitCode)
			}
			done <- err
		}()
		waitFile(t, started, 10*time.Second)
		if err := syscall.Kill(pid, sig); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		select {
		case err := <-done:
			if !strings.Contains(err.Error(), "connection was lost") {
				t.Errorf("server %s: err = %v, want the connection reported lost", name, err)
			}
			t.Logf("server %s: noticed after %s", name, time.Since(t0).Round(time.Millisecond))
		case <-time.After(13 * time.Second):
			t.Fatalf("server %s: the run still waits 13 s later", name)
		}
	}
	lose("killed", syscall.SIGKILL)
	waitGone(t, pid, 5*time.Second, "the killed server")
	pid = n.detach(sky)
	n.run(r, "true", provision.RunOptions{})
	// A stopped server keeps its socket open and answers nothing, as a pod
	// whose node went away does: only keepalives can tell.
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	lose("stopped", syscall.SIGSTOP)
}

// Processes of one node that make the host key at once (the daemon,
// concurrent `ssh-serve --detach` starts) all end up serving one key,
// whose public half is the one beside it.
func TestHostKeyMadeOnceUnderConcurrency(t *testing.T) {
	p := paths{t.TempDir()}
	const n = 16
	keys := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := loadHostKey(p, true)
			if err != nil {
				t.Errorf("loadHostKey: %v", err)
				return
			}
			keys[i] = string(s.PublicKey().Marshal())
		}()
	}
	wg.Wait()
	for _, k := range keys[1:] {
		if k != keys[0] {
			t.Fatal("concurrent makers ended with different host keys")
		}
	}
	pub, err := HostPublicKey(p.home)
	if err != nil {
		t.Fatal(err)
	}
	onDisk, err := os.ReadFile(p.hostKeyPath() + ".pub")
	if err != nil || strings.TrimSpace(string(onDisk)) != pub {
		t.Fatalf(".pub = %q (%v), want %q", onDisk, err, pub)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(p.hostKeyPath()), ".*tmp-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

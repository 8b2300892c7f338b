package ssh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/provision"
	"github.com/skygo/skygo/internal/testutil"
)

func TestRunStreamOverCachedConnections(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	ctx := context.Background()
	seen := map[string]bool{}
	for i := range h.IPs {
		r := NewRunner(d, h.endpoint(i), "", "", "")
		res, err := r.Run(ctx, "hostname; echo err >&2; exit 3", provision.RunOptions{})
		if err != nil {
			t.Fatalf("host %s: %v", h.IPs[i], err)
		}
		name := strings.TrimSpace(string(res.Stdout))
		if res.ExitCode != 3 || string(res.Stderr) != "err\n" || name != h.Names[i] {
			t.Fatalf("host %s: got exit %d stdout %q stderr %q, want 3, %q, err", h.IPs[i], res.ExitCode, name, res.Stderr, h.Names[i])
		}
		seen[name] = true
		c1, _ := d.Client(ctx, h.endpoint(i))

		var out bytes.Buffer
		code, err := r.Stream(ctx, `for i in 1 2 3; do echo "line $i"; done; echo "$SSH_CONNECTION" | cut -d' ' -f3`, &out, io.Discard)
		if err != nil || code != 0 {
			t.Fatalf("stream on %s: code %d err %v", h.IPs[i], code, err)
		}
		if want := "line 1\nline 2\nline 3\n" + h.IPs[i] + "\n"; out.String() != want {
			t.Fatalf("stream on %s: got %q want %q", h.IPs[i], out.String(), want)
		}
		// stdin reaches the command, quoting survives.
		res, err = r.Run(ctx, `cat; printf '%s' "it's a \"test\" $HOME"`, provision.RunOptions{Stdin: strings.NewReader("input|")})
		if err != nil || string(res.Stdout) != `input|it's a "test" /root` {
			t.Fatalf("stdin/quoting on %s: %q %v", h.IPs[i], res.Stdout, err)
		}
		if c2, _ := d.Client(ctx, h.endpoint(i)); c1 != c2 {
			t.Fatalf("host %s: connection was not reused", h.IPs[i])
		}
		if r.Home() != "/root" {
			t.Fatalf("Home = %q", r.Home())
		}
	}
	if len(seen) != len(h.IPs) {
		t.Fatalf("hostnames not distinct: %v", seen)
	}
}

func TestReconnectAfterConnectionDies(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	ctx := context.Background()
	r := NewRunner(d, h.endpoint(0), "", "", "")
	if _, err := r.Run(ctx, "true", provision.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	c, _ := d.Client(ctx, h.endpoint(0))
	c.Close() // as if the network dropped it
	res, err := r.Run(ctx, "echo back", provision.RunOptions{})
	if err != nil || string(res.Stdout) != "back\n" {
		t.Fatalf("after the connection died: %q %v", res.Stdout, err)
	}
}

func TestCancelKillsRemoteProcessTree(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	r := NewRunner(d, h.endpoint(1), "", "", "")
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		// A child in the background and one in the foreground: both must go.
		_, err := r.Stream(ctx, `sleep 301 & ps -o pgid= $$; sleep 300`, pw, io.Discard)
		pw.Close()
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("pgid %q: %v", line, err)
	}
	go io.Copy(io.Discard, pr)
	// The checker records its own commands elsewhere, so that the
	// runner's record directory can be checked for leftovers.
	check := NewRunner(d, h.endpoint(1), "", "~/.sky/run-check", "")
	if res, _ := check.Run(context.Background(), "pgrep -g "+strconv.Itoa(pgid), provision.RunOptions{}); res.ExitCode != 0 {
		t.Fatalf("process group %d not running before cancel", pgid)
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Stream after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stream did not return after cancel")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("cancel took %v", el)
	}
	// By process group and by session: pids are shared with the whole
	// machine (the hosts have their own network, not their own pids).
	// Zombies are dead already; this machine's init reaps them late.
	pg := strconv.Itoa(pgid)
	res, err := check.Run(context.Background(), "ps -e -o pid=,pgid=,sid=,stat=,args= | awk -v pg="+pg+" '($2==pg || $3==pg) && $4 !~ /^Z/'; echo done", provision.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.Stdout); got != "done\n" {
		t.Fatalf("processes of group %d still running after cancel: %q", pgid, got)
	}
	// The pgid record is gone too.
	res, _ = check.Run(context.Background(), "ls ~/.sky/run | wc -l", provision.RunOptions{})
	if strings.TrimSpace(string(res.Stdout)) != "0" {
		t.Fatalf("pgid files left: %s", res.Stdout)
	}
}

func TestUploadAndEnsureBinary(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	ctx := context.Background()
	r := NewRunner(d, h.endpoint(2), "", "", "")
	dir := t.TempDir()
	src := filepath.Join(dir, "script.sh")
	os.WriteFile(src, []byte("#!/bin/sh\necho uploaded\n"), 0o751)
	if err := r.Upload(ctx, src, "~/up dir/script.sh"); err != nil {
		t.Fatal(err)
	}
	res, err := r.Run(ctx, `stat -c %a ~/'up dir/script.sh' && ~/'up dir/script.sh'`, provision.RunOptions{})
	if err != nil || string(res.Stdout) != "751\nuploaded\n" {
		t.Fatalf("uploaded file: %q %q %v", res.Stdout, res.Stderr, err)
	}

	bin := filepath.Join(dir, "sky-node")
	os.WriteFile(bin, bytes.Repeat([]byte("fake node binary\n"), 100000), 0o755)
	bins := func(string) (string, error) { return bin, nil }
	copied, err := infra.EnsureBinary(ctx, r, bins)
	if err != nil || !copied {
		t.Fatalf("first EnsureBinary: copied=%v err=%v", copied, err)
	}
	copied, err = infra.EnsureBinary(ctx, r, bins)
	if err != nil || copied {
		t.Fatalf("second EnsureBinary: copied=%v err=%v, want no copy", copied, err)
	}
	os.WriteFile(bin, []byte("new version\n"), 0o755)
	if copied, err = infra.EnsureBinary(ctx, r, bins); err != nil || !copied {
		t.Fatalf("changed binary: copied=%v err=%v", copied, err)
	}
	res, _ = r.Run(ctx, `cat ~/.sky/bin/sky-node; stat -c %a ~/.sky/bin/sky-node; ls -A ~/.sky/bin | wc -l`, provision.RunOptions{})
	if string(res.Stdout) != "new version\n755\n1\n" {
		t.Fatalf("installed binary: %q", res.Stdout)
	}
}

// unameRunner is a real SSH host whose PATH starts with a directory
// holding a `uname` that reports another machine, so the host looks like
// an aarch64 (or other) node to everything that asks it.
type unameRunner struct {
	*Runner
	shim string
}

func (u unameRunner) Run(ctx context.Context, cmd string, o provision.RunOptions) (provision.Result, error) {
	return u.Runner.Run(ctx, "PATH="+u.shim+":$PATH; "+cmd, o)
}

func withUname(t *testing.T, ctx context.Context, r *Runner, machine string) unameRunner {
	t.Helper()
	shim := "/tmp/uname-shim-" + strconv.Itoa(os.Getpid()) + "-" + machine
	script := `#!/bin/sh
if [ "$1" = -m ]; then echo ` + machine + `; else exec /usr/bin/uname "$@"; fi
`
	if _, err := provision.RunChecked(ctx, r, "mkdir -p "+shim+" && cat > "+shim+"/uname && chmod 755 "+shim+"/uname",
		provision.RunOptions{Stdin: strings.NewReader(script)}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = r.Run(context.Background(), "rm -rf "+shim, provision.RunOptions{}) })
	return unameRunner{Runner: r, shim: shim}
}

// A node gets the node runtime built for its own architecture: an
// aarch64 host gets the arm64 build (and the installed file runs, as an
// arm64 program, under qemu-user), an x86_64 host the amd64 build, and a
// host of another architecture a clear error and nothing installed.
func TestEnsureBinaryPerArch(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	ctx := context.Background()
	r := NewRunner(d, h.endpoint(1), "", "", "")
	arm, amd := testutil.NodeBinary(t, "arm64"), testutil.NodeBinary(t, "amd64")
	bins := infra.NodeBinariesBeside(filepath.Join(filepath.Dir(arm), "sky"))
	sum := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", sha256.Sum256(b))
	}
	const path = "~/.sky/archtest/sky-node"
	t.Cleanup(func() { _, _ = r.Run(context.Background(), "rm -rf ~/.sky/archtest", provision.RunOptions{}) })
	installed := func() string {
		res, err := provision.RunChecked(ctx, r, "sha256sum ~/.sky/archtest/sky-node | cut -d' ' -f1", provision.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(res.Stdout))
	}

	aarch := withUname(t, ctx, r, "aarch64")
	if copied, err := infra.EnsureBinaryAt(ctx, aarch, bins, path); err != nil || !copied {
		t.Fatalf("aarch64 host: copied=%v err=%v", copied, err)
	}
	if got, want := installed(), sum(arm); got != want {
		t.Fatalf("aarch64 host got a file with hash %s; the arm64 build's is %s (amd64's %s)", got, want, sum(amd))
	}
	if copied, err := infra.EnsureBinaryAt(ctx, aarch, bins, path); err != nil || copied {
		t.Fatalf("aarch64 host again: copied=%v err=%v, want the cached copy kept", copied, err)
	}
	if q, err := exec.LookPath("qemu-aarch64"); err == nil {
		res, err := provision.RunChecked(ctx, r, q+" ~/.sky/archtest/sky-node version && "+q+" ~/.sky/archtest/sky-node agent ping --json", provision.RunOptions{})
		if err != nil || !strings.Contains(string(res.Stdout), "linux/arm64") || !strings.Contains(string(res.Stdout), `{"ok":true}`) {
			t.Fatalf("the installed arm64 build under qemu-aarch64: %q %v", res.Stdout, err)
		}
	} else if os.Getenv("CI") != "" {
		t.Fatal("qemu-aarch64 is missing (CI installs qemu-user): the arm64 build was not run")
	} else {
		t.Log("qemu-aarch64 not installed (apt-get install qemu-user): the arm64 build was installed but not run")
	}

	// The same host as what it is, x86_64: the amd64 build replaces it.
	if copied, err := infra.EnsureBinaryAt(ctx, withUname(t, ctx, r, "x86_64"), bins, path); err != nil || !copied {
		t.Fatalf("x86_64 host: copied=%v err=%v", copied, err)
	}
	if got, want := installed(), sum(amd); got != want {
		t.Fatalf("x86_64 host got a file with hash %s; the amd64 build's is %s", got, want)
	}
	_, err := infra.EnsureBinaryAt(ctx, withUname(t, ctx, r, "riscv64"), bins, path)
	if err == nil || !strings.Contains(err.Error(), `"riscv64"`) || !strings.Contains(err.Error(), "x86_64 and aarch64") {
		t.Fatalf("riscv64 host: err = %v, want one naming the architecture and what SkyGo runs on", err)
	}
	if got := installed(); got != sum(amd) {
		t.Errorf("the refused host's file changed to %s", got)
	}
}

func TestRsyncWithExcludes(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	ctx := context.Background()
	r := NewRunner(d, h.endpoint(0), "", "", "")
	src := t.TempDir()
	for _, f := range []string{"a.txt", "sub/b.txt", "skip.log", "node_modules/x.js"} {
		os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755)
		os.WriteFile(filepath.Join(src, f), []byte(f), 0o644)
	}
	if _, err := r.Run(ctx, "rm -rf ~/sync && mkdir -p ~/sync/dst && echo keep > ~/sync/dst/remote-only", provision.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Rsync(ctx, src, "~/sync/dst", provision.RsyncOptions{Excludes: []string{"*.log", "node_modules/"}}); err != nil {
		t.Fatal(err)
	}
	res, _ := r.Run(ctx, "cd ~/sync/dst && find . -type f | sort", provision.RunOptions{})
	if want := "./a.txt\n./remote-only\n./sub/b.txt\n"; string(res.Stdout) != want {
		t.Fatalf("synced files:\n%s\nwant:\n%s", res.Stdout, want)
	}
}

func TestKnownHostsAcceptNewThenRefuseChanged(t *testing.T) {
	h := sshHosts(t)
	ctx := context.Background()
	kh := &KnownHosts{File: filepath.Join(t.TempDir(), "known_hosts")}
	d := NewDialer(kh)
	defer d.Close()
	if _, err := d.Probe(ctx, h.endpoint(0)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(kh.File)
	if !strings.HasPrefix(string(b), h.IPs[0]+" ssh-ed25519 ") || strings.Count(string(b), "\n") != 1 {
		t.Fatalf("accept-new recorded %q", b)
	}
	// A second, fresh dialer trusts the recorded key and adds nothing.
	d2 := NewDialer(kh)
	defer d2.Close()
	if _, err := d2.Probe(ctx, h.endpoint(0)); err != nil {
		t.Fatal(err)
	}
	if b2, _ := os.ReadFile(kh.File); !bytes.Equal(b, b2) {
		t.Fatalf("known_hosts changed on a known host: %q", b2)
	}
	// Pretend host 0 used to have host 1's key: the real key is refused.
	other := filepath.Join(h.State, "ssh-hosts", h.Names[1], "ssh_host_ed25519_key.pub")
	pub, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(pub))
	os.WriteFile(kh.File, []byte(h.IPs[0]+" "+fields[0]+" "+fields[1]+"\n"), 0o600)
	d3 := NewDialer(kh)
	defer d3.Close()
	_, err = d3.Probe(ctx, h.endpoint(0))
	var de *DialError
	var hk *HostKeyChangedError
	if !errors.As(err, &de) || de.Kind != HostKeyChanged || !errors.As(err, &hk) {
		t.Fatalf("changed key: got %v, want a host key changed DialError", err)
	}
	if !strings.Contains(err.Error(), h.IPs[0]) || !strings.Contains(err.Error(), kh.File+":1") {
		t.Fatalf("error should name the host and the known_hosts line: %v", err)
	}
}

func TestUnreachableAndAuthErrorsNameTheHost(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	d.ConnectTimeout = 2 * time.Second
	ctx := context.Background()

	nobody := h.Prefix + ".250" // on the hosts' subnet, but no host
	bogus := Endpoint{Name: nobody, Addr: nobody, Port: 22, User: "root", IdentityFiles: []string{h.Key}}
	_, err := d.Probe(ctx, bogus)
	var de *DialError
	if !errors.As(err, &de) || (de.Kind != Timeout && de.Kind != Unreachable) || !strings.Contains(err.Error(), nobody) {
		t.Fatalf("bogus host: %v", err)
	}

	// A real host, wrong port: connection refused.
	closed := h.endpoint(0)
	closed.Port = 2
	_, err = d.Probe(ctx, closed)
	if !errors.As(err, &de) || de.Kind != Unreachable || !strings.Contains(err.Error(), h.IPs[0]+":2") {
		t.Fatalf("closed port: %v", err)
	}

	// A key the host does not accept.
	wrongKey := filepath.Join(t.TempDir(), "id")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", wrongKey).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v %s", err, out)
	}
	bad := h.endpoint(0)
	bad.IdentityFiles = []string{wrongKey}
	_, err = d.Probe(ctx, bad)
	if !errors.As(err, &de) || de.Kind != AuthFailed || !strings.Contains(err.Error(), h.IPs[0]) {
		t.Fatalf("wrong key: %v", err)
	}
	// A password is never shown in errors.
	bad.IdentityFiles = nil
	bad.Password = "hunter2-secret"
	_, err = d.Probe(ctx, bad)
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("password auth error: %v", err)
	}
}

func TestProbe(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	f, err := d.Probe(context.Background(), h.endpoint(1))
	if err != nil {
		t.Fatal(err)
	}
	if f.OS != "linux" || f.Arch == "" || f.CPUs < 1 || f.MemoryGB <= 0 || f.Home != "/root" || f.IP != h.IPs[1] {
		t.Fatalf("facts: %+v", f)
	}
}

func TestProxyJump(t *testing.T) {
	h := sshHosts(t)
	home := t.TempDir()
	cfg := "Host jumpbox\n  HostName " + h.IPs[0] + "\n  User root\n  IdentityFile " + h.Key + "\n" +
		"Host behind\n  HostName " + h.IPs[2] + "\n  ProxyJump jumpbox\n"
	c, err := ParseConfig(cfg, home)
	if err != nil {
		t.Fatal(err)
	}
	res := &Resolver{Home: home, Config: c, LocalUser: "nobody"}
	ep, err := res.Resolve(&Pool{Name: "p", User: "root", IdentityFile: h.Key}, Host{Name: "behind", UseSSHConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ep.Jumps) != 1 || ep.Jumps[0].Addr != h.IPs[0] {
		t.Fatalf("jumps: %+v", ep.Jumps)
	}
	d := newTestDialer(t)
	r := NewRunner(d, ep, "", "", "")
	out, err := r.Run(context.Background(), `hostname; echo "$SSH_CONNECTION" | cut -d' ' -f1`, provision.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := h.Names[2] + "\n" + h.IPs[0] + "\n"; string(out.Stdout) != want {
		t.Fatalf("through jump host: %q, want %q (connection from the jump host)", out.Stdout, want)
	}
	// The system ssh command we hand to rsync takes the same path.
	args := append(SSHCommand(ep, d.KnownHosts), ep.Addr, "hostname")
	b, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(b)) != h.Names[2] {
		t.Fatalf("system ssh via ProxyCommand: %q %v", b, err)
	}
}

// TestProxyCommand: a host behind `ProxyCommand ssh -W %h:%p jumpbox` is
// reached by our own client (the command's stdio carries the connection)
// and by the system ssh we hand to rsync.
func TestProxyCommand(t *testing.T) {
	h := sshHosts(t)
	home := t.TempDir()
	jump := "ssh -F none -i " + h.Key + " -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -W %h:%p root@" + h.IPs[0]
	cfg := "Host behind\n  HostName " + h.IPs[2] + "\n  User root\n  IdentityFile " + h.Key + "\n  ProxyCommand " + jump + "\n"
	c, err := ParseConfig(cfg, home)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Lookup("behind", home).ProxyCommand; got != jump {
		t.Fatalf("ProxyCommand read as %q, want %q", got, jump)
	}
	res := &Resolver{Home: home, Config: c, LocalUser: "nobody"}
	ep, err := res.Resolve(nil, Host{Name: "behind", UseSSHConfig: true})
	if err != nil {
		t.Fatal(err)
	}
	if ep.ProxyCommand != jump {
		t.Fatalf("endpoint ProxyCommand %q", ep.ProxyCommand)
	}
	d := newTestDialer(t)
	r := NewRunner(d, ep, "", "", "")
	out, err := r.Run(context.Background(), `hostname; echo "$SSH_CONNECTION" | cut -d' ' -f1`, provision.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := h.Names[2] + "\n" + h.IPs[0] + "\n"; string(out.Stdout) != want {
		t.Fatalf("through ProxyCommand: %q, want %q (connection from the jump host)", out.Stdout, want)
	}
	args := append(SSHCommand(ep, d.KnownHosts), ep.Addr, "hostname")
	b, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil || strings.TrimSpace(string(b)) != h.Names[2] {
		t.Fatalf("system ssh with the ProxyCommand: %q %v", b, err)
	}
	if got := expandProxyTokens("nc %h %p %r %% %x", ep); got != "nc "+h.IPs[2]+" 22 root % %x" {
		t.Fatalf("tokens: %q", got)
	}
}

// BenchmarkRunTrue compares one command over the cached connection with a
// fresh system `ssh host true` (what every command would cost without the
// cache); ratio = ours / system ssh.
func BenchmarkRunTrue(b *testing.B) {
	h := sshHosts(b)
	d := newTestDialer(b)
	ctx := context.Background()
	ep := h.endpoint(0)
	r := NewRunner(d, ep, "", "", "")
	if _, err := r.Run(ctx, "true", provision.RunOptions{}); err != nil {
		b.Fatal(err)
	}
	const sysRuns = 10
	args := append(SSHCommand(ep, d.KnownHosts), ep.Addr, "true")
	start := time.Now()
	for i := 0; i < sysRuns; i++ {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("system ssh: %v %s", err, out)
		}
	}
	sys := time.Since(start) / sysRuns
	b.ResetTimer()
	start = time.Now()
	for i := 0; i < b.N; i++ {
		if res, err := r.Run(ctx, "true", provision.RunOptions{}); err != nil || res.ExitCode != 0 {
			b.Fatal(err)
		}
	}
	ours := time.Since(start) / time.Duration(b.N)
	b.ReportMetric(float64(sys.Microseconds()), "ssh-true-us")
	b.ReportMetric(float64(ours)/float64(sys), "ratio")
}

// A host that stops answering (its link goes down) must not hang a running
// command: keepalives notice, the command fails naming the host, and the
// next command dials again once the host is back.
func TestKeepaliveDetectsDeadHost(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	d.KeepAlive = 200 * time.Millisecond
	d.KeepAliveMax = 3
	d.ConnectTimeout = 2 * time.Second
	ep := h.endpoint(2)
	r := NewRunner(d, ep, "", "", "")
	ctx := context.Background()
	if _, err := r.Run(ctx, "true", provision.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	veth := h.Name + "v3" // the root-namespace end of host 3's link
	link := func(state string) {
		if out, err := exec.Command("ip", "link", "set", veth, state).CombinedOutput(); err != nil {
			t.Fatalf("ip link set %s %s: %v %s", veth, state, err, out)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Stream(ctx, "sleep 20", io.Discard, io.Discard)
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	link("down")
	t.Cleanup(func() { exec.Command("ip", "link", "set", veth, "up").Run() })
	select {
	case err := <-done:
		var de *DialError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), h.IPs[2]) {
			t.Fatalf("command on a dead host: %v, want a DialError naming %s", err, h.IPs[2])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("command on a dead host did not end")
	}
	link("up")
	waitFor(t, "host back", func() bool {
		res, err := r.Run(ctx, "echo back", provision.RunOptions{})
		return err == nil && string(res.Stdout) == "back\n"
	})
}

func TestConcurrentCommandsShareOneConnection(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	d.MaxSessions = 3
	r := NewRunner(d, h.endpoint(0), "", "", "")
	ctx := context.Background()
	start := time.Now()
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		go func() {
			res, err := r.Run(ctx, "sleep 0.5; echo "+strconv.Itoa(i), provision.RunOptions{})
			if err == nil && strings.TrimSpace(string(res.Stdout)) != strconv.Itoa(i) {
				err = errors.New("wrong output " + string(res.Stdout))
			}
			errs <- err
		}()
	}
	for i := 0; i < 6; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// 6 commands, 3 at a time: at least two rounds of 0.5 s.
	if el := time.Since(start); el < time.Second {
		t.Fatalf("6 commands with MaxSessions=3 took %v; the cap was not applied", el)
	}
}

// A caller with a deadline is not held by a host that stopped answering
// before its connection is known dead (keepalives at their default): a
// new command gives up opening its session at the deadline, and a
// running one returns soon after it, its remote kill left to finish in
// the background. The managed-jobs controller's health checks rely on it.
func TestDeadlineOnSilentHost(t *testing.T) {
	h := sshHosts(t)
	d := newTestDialer(t)
	ep := h.endpoint(1)
	r := NewRunner(d, ep, "", "", "")
	if _, err := r.Run(context.Background(), "true", provision.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	veth := h.Name + "v2" // the root-namespace end of host 2's link
	if out, err := exec.Command("ip", "link", "set", veth, "down").CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s down: %v %s", veth, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "set", veth, "up").Run() })

	running := make(chan error, 1)
	rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
	defer rcancel()
	start := time.Now()
	go func() {
		_, err := r.Stream(rctx, "sleep 20", io.Discard, io.Discard)
		running <- err
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := r.Run(ctx, "true", provision.RunOptions{})
	var de *DialError
	if took := time.Since(start); !errors.As(err, &de) || de.Kind != Timeout || took > 2*time.Second {
		t.Errorf("a command with a 1s deadline on a silent host: %v after %s, want a timeout DialError within 2s", err, took.Round(time.Millisecond))
	}
	select {
	case err := <-running:
		if took := time.Since(start); err == nil || took > time.Second+killWait+2*time.Second {
			t.Errorf("a command cut off by its deadline on a silent host: %v after %s", err, took.Round(time.Millisecond))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a command cut off by its deadline on a silent host did not return")
	}
}

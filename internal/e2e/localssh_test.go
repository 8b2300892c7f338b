package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/skygo/skygo/internal/paths"
	skyproc "github.com/skygo/skygo/internal/proc"
)

// TestLocalSSH: `ssh <cluster>` on a local 2-node cluster with the system
// OpenSSH client through the generated entries, as SKILL.md's debug step,
// scp and rsync use it; and the entries and the server follow the
// cluster through stop, start and down. OpenSSH reads ~/.ssh/config from
// the passwd home, not $HOME, so the generated file is named with -F.
func TestLocalSSH(t *testing.T) {
	parallel(t)
	for _, tool := range []string{"ssh", "scp", "rsync"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (.ci/run installs openssh-client and rsync)", tool)
		}
	}
	e := newEnv(t)
	r := e.must("launch", "-y", "-c", "dev", "--num-nodes", "2", "--", "true")
	if !strings.Contains(r.stdout, "To log into the head VM:\tssh dev") {
		t.Errorf("launch does not offer `ssh dev`:\n%s", r.stdout)
	}
	gen := filepath.Join(paths.GeneratedSSH(e.home), "dev")
	ssh := func(args ...string) result {
		t.Helper()
		return runCmd(t, 30*time.Second, e.env, "ssh", append([]string{"-F", gen, "-o", "BatchMode=yes"}, args...)...)
	}
	for alias, rank := range map[string]string{"dev": "0", "dev-worker1": "1"} {
		out := ssh(alias, `echo $SKYPILOT_NODE_RANK`)
		if out.code != 0 || strings.TrimSpace(out.stdout) != rank {
			t.Errorf("ssh %s 'echo $SKYPILOT_NODE_RANK': want %s, got %s", alias, rank, out)
		}
	}
	// A session is where the node's jobs run: its HOME and working
	// directory, its variables, its sandbox (the server's ~/.sky hidden
	// but the cluster's directory), and the command's exit code comes back.
	out := ssh("dev-worker1", `echo "$HOME|$PWD|$SKYPILOT_NUM_NODES|$SKYPILOT_NODE_IPS" | tr '\n' ,; ls `+paths.Root(e.home)+`; exit 7`)
	home1 := e.nodeHome("dev", 1)
	visible := ",local\n"
	if skyproc.SandboxAvailable() != nil {
		visible = "\n" // no sandbox on this machine: `sky check` says so
	}
	ips, netns := e.nodeIPs("dev")
	if want := fmt.Sprintf("%s|%s|2|%s,%s,", home1, home1, ips[0], ips[1]); out.code != 7 || !strings.HasPrefix(out.stdout, want) || !strings.HasSuffix(out.stdout, visible) {
		t.Errorf("ssh dev-worker1: want exit 7 and %q..., only local/ visible in %s; got %s", want, paths.Root(e.home), out)
	}
	if b, _ := os.ReadFile(filepath.Join(e.home, ".ssh", "config")); !strings.Contains(string(b), "Include ~/.sky/skygo/generated/ssh/*") {
		t.Errorf("~/.ssh/config does not include the generated entries:\n%s", b)
	}

	// No command and no terminal: the login shell reads its commands.
	if out := runCmdStdin(t, 30*time.Second, e.env, "echo via-stdin $SKYPILOT_NODE_RANK\n", "ssh", "-F", gen, "-o", "BatchMode=yes", "-T", "dev-worker1"); !strings.Contains(out.stdout, "via-stdin 1\n") {
		t.Errorf("echo ... | ssh -T dev-worker1: %s", out)
	}
	// A dropped connection ends the command, as with sshd. The command is
	// found by its arguments among the node's processes: its own $$ is a
	// pid of the node's PID namespace, not of this machine's.
	drop := exec.Command("ssh", "-F", gen, "-o", "BatchMode=yes", "dev", "exec sleep 120.25")
	drop.Env = e.env
	if err := drop.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	if !waitFor(15*time.Second, func() bool {
		for _, p := range skyproc.ProcsWithEnv(skyproc.EnvNode + "=" + e.nodeHome("dev", 0)) {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); string(b) == "sleep\x00120.25\x00" {
				pid = p
			}
		}
		return pid > 0
	}) {
		t.Fatal("the command over ssh did not start")
	}
	_ = drop.Process.Kill()
	_ = drop.Wait()
	if !waitFor(10*time.Second, func() bool { return !skyproc.Alive(pid) }) {
		t.Errorf("the command of a dropped ssh connection (pid %d) still runs", pid)
	}

	// A session is in its node's PID namespace, under the node's pid 1.
	if skyproc.PIDNamespaceAvailable() == nil {
		for _, alias := range []string{"dev", "dev-worker1"} {
			if out := ssh(alias, `tr '\0' ' ' < /proc/1/cmdline`); !strings.Contains(out.stdout, "agent "+skyproc.PIDInitVerb) {
				t.Errorf("ssh %s: pid 1 is not the node's: %s", alias, out)
			}
		}
	}

	// A pty: ssh -tt gives the command a terminal.
	out = ssh("-tt", "dev", "tty; echo TERM=$TERM")
	if out.code != 0 || !regexp.MustCompile(`(?m)^/dev/pts/[0-9]+\r?$`).MatchString(out.stdout) {
		t.Errorf("ssh -tt dev tty: want a /dev/pts/N, got %s", out)
	}

	// rsync and scp (legacy, over exec; and the sftp one) into a node's home.
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "sub", "f.txt"), []byte("synced-9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := runCmd(t, time.Minute, e.env, "rsync", "-a", "-e", "ssh -F "+gen+" -o BatchMode=yes", src+"/", "dev-worker1:~/dst/")
	if b, err := os.ReadFile(filepath.Join(home1, "dst", "sub", "f.txt")); rs.code != 0 || err != nil || string(b) != "synced-9\n" {
		t.Errorf("rsync to dev-worker1:~/dst/: %s; file: %q %v", rs, b, err)
	}
	scpArgs := []string{"-F", gen, "-o", "BatchMode=yes"}
	sc := runCmd(t, time.Minute, e.env, "scp", append(append([]string{"-O"}, scpArgs...), filepath.Join(src, "sub", "f.txt"), "dev:~/legacy.txt")...)
	if b, err := os.ReadFile(filepath.Join(e.nodeHome("dev", 0), "legacy.txt")); sc.code != 0 || err != nil || string(b) != "synced-9\n" {
		t.Errorf("scp -O to dev:~/legacy.txt: %s; file: %q %v", sc, b, err)
	}
	if _, err := os.Stat("/usr/lib/openssh/sftp-server"); err == nil {
		sc = runCmd(t, time.Minute, e.env, "scp", append(scpArgs, "dev:~/legacy.txt", filepath.Join(src, "back.txt"))...)
		if b, err := os.ReadFile(filepath.Join(src, "back.txt")); sc.code != 0 || err != nil || string(b) != "synced-9\n" {
			t.Errorf("scp (sftp) from dev:~/legacy.txt: %s; file: %q %v", sc, b, err)
		}
	}

	port := generatedPort(t, gen, "dev")
	// Forwarding (ssh -W, as ssh -L and VS Code's tunnels): a connection
	// from the node's side. On loopback the node's network is this
	// machine's, so the API server answers; a node with a namespace of
	// its own reaches its own addresses, where its agent serves ssh.
	if netns {
		fw := runCmdStdin(t, 30*time.Second, e.env, "", "ssh",
			"-F", gen, "-o", "BatchMode=yes", "-W", net.JoinHostPort(ips[0], strconv.Itoa(port)), "dev")
		if !strings.HasPrefix(fw.stdout, "SSH-2.0-SkyGo_agent") {
			t.Errorf("ssh -W to the head's own ssh port through dev: %s", fw)
		}
	} else {
		fw := runCmdStdin(t, 30*time.Second, e.env, "GET /api/health HTTP/1.0\r\n\r\n", "ssh",
			"-F", gen, "-o", "BatchMode=yes", "-W", fmt.Sprintf("127.0.0.1:%d", e.port), "dev")
		if !strings.HasPrefix(fw.stdout, "HTTP/1.0 200") {
			t.Errorf("ssh -W to the API server through dev: %s", fw)
		}
	}

	interactiveShell(t, e, net.JoinHostPort(ips[0], strconv.Itoa(port)))

	// Stop ends the server with the nodes; start brings it back.
	e.must("stop", "-y", "dev")
	if portOpen(ips[0], port) {
		t.Errorf("ssh port %d still open on a stopped cluster", port)
	}
	e.must("start", "-y", "dev")
	port = generatedPort(t, gen, "dev")
	if out := ssh("dev-worker1", "cat dst/sub/f.txt"); out.code != 0 || out.stdout != "synced-9\n" {
		t.Errorf("ssh dev-worker1 after stop and start: %s", out)
	}

	e.must("down", "-y", "dev")
	if _, err := os.Stat(gen); !os.IsNotExist(err) {
		t.Errorf("generated ssh config %s survived down (%v)", gen, err)
	}
	if _, err := os.Stat(paths.GeneratedKnownHosts(e.home, "dev")); !os.IsNotExist(err) {
		t.Errorf("generated known_hosts survived down (%v)", err)
	}
	for _, ip := range ips {
		if portOpen(ip, port) {
			t.Errorf("ssh port %s:%d still open after down", ip, port)
		}
	}
}

// generatedPort is the Port of host in a generated config.
func generatedPort(t *testing.T, gen, host string) int {
	t.Helper()
	b, err := os.ReadFile(gen)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Host ` + regexp.QuoteMeta(host) + `\n(?:  .*\n)*?  Port ([0-9]+)\n`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no Port for %s in %s:\n%s", host, gen, b)
	}
	port, _ := strconv.Atoi(string(m[1]))
	return port
}

func portOpen(ip string, port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(port)), time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// interactiveShell drives a login shell on a pty as a terminal would:
// the size it asked for, a window change, and the exit code of `exit`.
// It uses SkyGo's key and the generated known_hosts, as ssh does.
func interactiveShell(t *testing.T, e *skyEnv, addr string) {
	t.Helper()
	keyPEM, err := os.ReadFile(paths.SSHKey(e.home))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := gossh.ParsePrivateKey(keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	hk, err := knownhosts.New(paths.GeneratedKnownHosts(e.home, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	u := os.Getenv("USER")
	if out, err := exec.Command("id", "-un").Output(); err == nil {
		u = strings.TrimSpace(string(out))
	}
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: u, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, HostKeyCallback: hk, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("ssh to %s: %v", addr, err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm-256color", 24, 80, gossh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	in, _ := s.StdinPipe()
	outR, _ := s.StdoutPipe()
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- strings.TrimRight(sc.Text(), "\r")
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		timeout := time.After(15 * time.Second)
		var seen []string
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("shell output ended before %q; saw %q", want, seen)
				}
				if strings.HasSuffix(l, want) && !strings.Contains(l, "echo") {
					return
				}
				seen = append(seen, l)
			case <-timeout:
				t.Fatalf("no %q from the shell; saw %q", want, seen)
			}
		}
	}
	_, _ = io.WriteString(in, "echo size=$(stty size) term=$TERM\n")
	expect("size=24 80 term=xterm-256color")
	if err := s.WindowChange(50, 132); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(in, "echo size=$(stty size)\n")
	expect("size=50 132")
	_, _ = io.WriteString(in, "exit 3\n")
	var ee *gossh.ExitError
	if err := s.Wait(); !asExit(err, &ee) || ee.ExitStatus() != 3 {
		t.Errorf("shell `exit 3`: %v", err)
	}
}

func asExit(err error, ee **gossh.ExitError) bool {
	x, ok := err.(*gossh.ExitError)
	*ee = x
	return ok
}

// TestAutostopWaitsForSSH: with the default wait_for (jobs_and_ssh) an
// idle cluster is not stopped while someone is logged in over `ssh
// <cluster>`, and is once they leave.
func TestAutostopWaitsForSSH(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("ssh is not installed (.ci/run installs openssh-client)")
	}
	e := newEnv(t)
	e.must("launch", "-y", "-c", "aw", "--", "true")
	gen := filepath.Join(paths.GeneratedSSH(e.home), "aw")
	marker := filepath.Join(e.nodeHome("aw", 0), "in")
	session := exec.Command("ssh", "-F", gen, "-o", "BatchMode=yes", "aw", "touch ~/in; sleep 4")
	session.Env = e.env
	if err := session.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- session.Wait() }()
	if !waitFor(15*time.Second, func() bool { _, err := os.Stat(marker); return err == nil }) {
		t.Fatal("the ssh session did not start")
	}
	e.must("autostop", "aw", "-i", "0", "-y")
	time.Sleep(2500 * time.Millisecond) // the agent checks every second
	if c := e.status(true)["aw"]; c.Status != "UP" {
		t.Errorf("autostop stopped the cluster during an ssh session: %+v", c)
	}
	if err := <-ended; err != nil {
		t.Errorf("ssh session: %v", err)
	}
	if !waitFor(20*time.Second, func() bool { return e.status(true)["aw"].Status == "STOPPED" }) {
		t.Errorf("autostop did not stop the cluster within 20 s of the session's end: %+v", e.status(false)["aw"])
	}
}

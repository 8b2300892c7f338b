package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/paths"
	skyproc "github.com/skygo/skygo/internal/proc"
)

// hostProcsWithEnvValue counts this machine's processes whose environment
// holds an entry containing value.
func hostProcsWithEnvValue(value string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(b, []byte(value)) {
			n++
		}
	}
	return n
}

// linesWith returns what follows prefix on the lines of out holding it
// (a job's lines come after the log's own prefix).
func linesWith(out, prefix string) []string {
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if _, rest, ok := strings.Cut(line, prefix); ok {
			got = append(got, strings.TrimSpace(rest))
		}
	}
	return got
}

// TestHostileLocalJobReadsOtherProcesses: alice runs a job holding a
// secret; bob's job on another local cluster walks /proc looking for it,
// for the server's SKYPILOT_INITIAL_BASIC_AUTH, and for the server's
// ~/.sky through /proc/PID/root. It must find none of them, and its /proc
// must list only its own node's processes (each carrying its node's
// marker), under the node's pid 1.
func TestHostileLocalJobReadsOtherProcesses(t *testing.T) {
	parallel(t)
	if err := skyproc.PIDNamespaceAvailable(); err != nil {
		t.Skipf("local nodes get no PID namespace here: %v", err)
	}
	tm := newTeam(t)
	const secret = "alice-s3cret-6c1d"
	alice := writeFile(t, "alice.yaml", "run: sleep 600\n")
	tm.mustAs("alice", "launch", "-y", "-d", "-c", "alices", "--secret", "ALICE_TOKEN="+secret, alice)
	if !waitFor(60*time.Second, func() bool { return hostProcsWithEnvValue(secret) > 0 }) {
		t.Fatalf("alice's job never ran with its secret\n%s", tm.serverLogTail())
	}

	stateDB := paths.StateDB(tm.home)
	bob := writeFile(t, "bob.yaml", `run: |
  echo "SECRET_HITS $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c `+secret+`)"
  echo "AUTH_HITS $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep -c -e SKYPILOT_INITIAL_BASIC_AUTH -e adminpw)"
  n=0; for f in /proc/[0-9]*/root`+stateDB+`; do [ -r "$f" ] && n=$((n+1)); done; echo "ROOT_HITS $n"
  for p in /proc/[0-9]*; do
    m=$(tr '\0' '\n' < $p/environ 2>/dev/null | grep '^SKYGO_LOCAL_NODE=') || { [ -d $p ] && echo "FOREIGN ${p#/proc/}"; continue; }
    echo "NODE ${m#SKYGO_LOCAL_NODE=}"
  done
  echo "PID1 $(tr '\0' ' ' < /proc/1/cmdline)"
`)
	r := tm.mustAs("bob", "launch", "-y", "-c", "bobs", bob)
	out := r.stdout
	for _, probe := range []string{"SECRET_HITS", "AUTH_HITS", "ROOT_HITS"} {
		got := linesWith(out, probe+" ")
		if len(got) != 1 || got[0] != "0" {
			t.Errorf("bob's job: %s = %v, want [0]", probe, got)
		}
	}
	if foreign := linesWith(out, "FOREIGN "); len(foreign) > 0 {
		t.Errorf("bob's job sees %d processes that are not its node's (pids %v ...)", len(foreign), foreign[:min(10, len(foreign))])
	}
	bobNode := tm.nodeHome("bobs", 0)
	nodes := linesWith(out, "NODE ")
	if len(nodes) == 0 {
		t.Errorf("bob's job listed none of its own processes:\n%s", out)
	}
	others := map[string]bool{}
	for _, n := range nodes {
		if n != bobNode {
			others[n] = true
		}
	}
	if len(others) > 0 {
		t.Errorf("bob's job sees processes of other nodes %v; want only its own, %s", others, bobNode)
	}
	if pid1 := linesWith(out, "PID1 "); len(pid1) != 1 || !strings.Contains(pid1[0], skyproc.PIDInitVerb) {
		t.Errorf("pid 1 of bob's node is %v; want sky agent %s", pid1, skyproc.PIDInitVerb)
	}
}

// TestHostileLocalJobOpenFiles: a job gets the open-files limit a SkyPilot
// node gives (1048576), or this machine's hard limit when lower, even
// when the API server itself started with a lower soft limit.
func TestHostileLocalJobOpenFiles(t *testing.T) {
	parallel(t)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Max <= 1024 {
		t.Skipf("the hard limit of open files here is %d; nothing to raise", lim.Max)
	}
	// The server (and so everything it starts) begins with a soft limit
	// of 1024, as a login shell's often is.
	low := syscall.Rlimit{Cur: 1024, Max: lim.Max}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	tm := newTeam(t)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	task := writeFile(t, "nofile.yaml", "run: echo \"NOFILE $(ulimit -n)\"\n")
	r := tm.mustAs("bob", "launch", "-y", "-c", "bobs", task)
	want := strconv.FormatUint(min(1<<20, lim.Max), 10)
	if got := linesWith(r.stdout, "NOFILE "); len(got) != 1 || got[0] != want {
		t.Errorf("ulimit -n in bob's job = %v, want %s", got, want)
	}
}

// TestHostileLocalInfraIsForAdmins: on a server with users, a non-admin's
// launch on the local infrastructure (whose jobs run as the server's
// user) is refused with what to do, unless the admin allowed it; the
// admin's own launch goes ahead.
func TestHostileLocalInfraIsForAdmins(t *testing.T) {
	parallel(t)
	tm := newTeam(t, "SKYGO_LOCAL_FOR_USERS=0", "SKYGO_JOBS_RETRY_GAP=1s")
	task := writeFile(t, "t.yaml", "run: echo ran-as-$USER\n")
	r := tm.as("bob", "launch", "-y", "--infra", "local", "-c", "bobs", task)
	if r.code == 0 || strings.Contains(r.stdout, "ran-as-") {
		t.Fatalf("bob launched on the local infrastructure:\n%s", r)
	}
	if !strings.Contains(r.out(), "only admins may launch on it") || !strings.Contains(r.out(), "SKYGO_LOCAL_FOR_USERS=1") {
		t.Errorf("the refusal does not say why and what to do:\n%s", r)
	}
	if r := tm.as("bob", "status", "bobs"); strings.Contains(r.stdout, "UP") {
		t.Errorf("the refused launch left a cluster:\n%s", r)
	}
	if r := tm.mustAs("admin", "launch", "-y", "--infra", "local", "-c", "admins", task); !strings.Contains(r.stdout, "ran-as-") {
		t.Errorf("the admin's launch on the local infrastructure:\n%s", r)
	}

	// A managed job is held to its owner's role when the controller
	// launches its cluster.
	bob := *tm.skyEnv
	bob.env = append(append([]string{}, tm.env...), tm.endpoint("bob")...)
	ids := bob.jobsLaunch("--infra", "local", "-n", "bobs-mj", task)
	q := bob.waitManaged(ids, 3*time.Minute, "over", func(m mjob) bool { return terminal(m.Status) })
	for _, m := range q {
		t.Logf("bob's managed job: %s", m)
		if m.Status == "SUCCEEDED" || m.FailureReason == nil || !strings.Contains(*m.FailureReason, "only admins may launch on it") {
			t.Errorf("bob's managed job on the local infrastructure: %s", m)
		}
	}
}

// TestLocalCheckSaysPIDIsolation: `sky check -v local` says whether a
// node's jobs see only their node's processes, and warns when they see
// the whole machine (here: the server's environment turns it off).
func TestLocalCheckSaysPIDIsolation(t *testing.T) {
	parallel(t)
	if err := skyproc.PIDNamespaceAvailable(); err != nil {
		t.Skipf("local nodes get no PID namespace here: %v", err)
	}
	on := newEnv(t)
	if r := on.must("check", "-v", "local"); !strings.Contains(r.out(), "each node has its own PID namespace") {
		t.Errorf("sky check -v local does not say jobs see only their node's processes:\n%s", r)
	}
	off := newEnv(t)
	r := off.exec(cmdTimeout, []string{skyproc.EnvPIDNS + "=0"}, "check", "-v", "local")
	if r.code != 0 || !strings.Contains(r.out(), "nodes get no PID namespace of their own ("+skyproc.EnvPIDNS+"=0 is set)") ||
		!strings.Contains(r.out(), "jobs see every process of this machine") {
		t.Errorf("sky check -v local with PID namespaces off:\n%s", r)
	}
	task := writeFile(t, "t.yaml", "run: echo \"PID1 $(tr '\\0' ' ' < /proc/1/cmdline)\"\n")
	if r := off.must("launch", "-y", "-c", "nopidns", task); strings.Contains(r.stdout, skyproc.PIDInitVerb) {
		t.Errorf("with %s=0 a job still runs under the node's pid 1:\n%s", skyproc.EnvPIDNS, r)
	}
}

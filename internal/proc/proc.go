// Package proc runs and finds processes on this machine. A local node is
// a directory used as HOME; Runner starts its commands with a marker in
// the environment that every descendant inherits, so ProcsWithEnv and
// KillProcsWithEnv find all of a node's processes (or a rank's, by its own
// marker) without trusting PID files. Command gives an operation's child
// its own process group, so that cancelling kills what it spawned.
//
// The local infrastructure and the node agent both need these; keeping
// them here lets the agent run local nodes without importing the
// infrastructure that creates them.
package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// ProcsWithEnv lists the live processes (of any user we may read) whose
// environment holds the exact entry kv ("NAME=value"). Zombies have an
// empty environment and are never listed. The caller's own process is
// skipped so that a process never kills itself by accident.
func ProcsWithEnv(kv string) []int {
	want := []byte(kv)
	return procsWhere(func(entry []byte) bool { return bytes.Equal(entry, want) })
}

// ProcsWithEnvPrefix is ProcsWithEnv for every entry starting with
// prefix ("SKYGO_LOCAL_NODE=/root/clusters/c/": every node of a cluster,
// including nodes no record lists any more).
func ProcsWithEnvPrefix(prefix string) []int {
	want := []byte(prefix)
	return procsWhere(func(entry []byte) bool { return bytes.HasPrefix(entry, want) })
}

// EnvValuesWithPrefix lists, for every live process, the entries of its
// environment starting with prefix, each once: what is left of a kind of
// process on this machine, by marker.
func EnvValuesWithPrefix(prefix string) []string {
	want := []byte(prefix)
	seen := map[string]bool{}
	var out []string
	procsWhere(func(entry []byte) bool {
		if bytes.HasPrefix(entry, want) && !seen[string(entry)] {
			seen[string(entry)] = true
			out = append(out, string(entry))
		}
		return false
	})
	return out
}

// procsWhere lists the live processes other than this one with an
// environment entry that match accepts.
func procsWhere(match func(entry []byte) bool) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || len(env) == 0 {
			continue
		}
		for _, entry := range bytes.Split(env, []byte{0}) {
			if match(entry) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// KillProcsWithEnv ends every process whose environment holds kv: SIGTERM,
// then SIGKILL after grace, and waits until none is left (up to 10 s more).
// It is how a local node is stopped: every process started through the
// node's runner inherits the node marker.
func KillProcsWithEnv(kv string, grace time.Duration) error {
	pids := ProcsWithEnv(kv)
	if len(pids) == 0 {
		return nil
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if len(ProcsWithEnv(kv)) == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pids = ProcsWithEnv(kv)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("processes %v (%s) still alive after SIGKILL", pids, kv)
}

// KillProcsWithEnvNow ends every process whose environment holds kv at
// once, as switching a machine off does, and waits until none is left
// (up to 10 s). All are stopped before any is killed: a SIGTERM, or a
// SIGKILL that reaches a child before its shell, lets the shell run its
// next command (an interactive bash, as a job's rank runs, ignores
// SIGTERM), so a job torn down could still write "done".
func KillProcsWithEnvNow(kv string) error {
	return killNow(kv, func() []int { return ProcsWithEnv(kv) })
}

// KillProcsWithEnvPrefixNow is KillProcsWithEnvNow for every process with
// an environment entry starting with prefix.
func KillProcsWithEnvPrefixNow(prefix string) error {
	return killNow(prefix, func() []int { return ProcsWithEnvPrefix(prefix) })
}

func killNow(kv string, find func() []int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := find()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v (%s) still alive after SIGKILL", pids, kv)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGSTOP)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// A child forked before its parent stopped is found next round.
		time.Sleep(10 * time.Millisecond)
	}
}

// Alive reports whether pid is a process that has not exited: one that
// exists and is neither a zombie nor dead. It is how callers wait for a
// process they signalled but did not start (and so cannot Wait for).
func Alive(pid int) bool {
	// kill(0) and kill(-1) address process groups, not one process.
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name, which may itself hold ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	return b[i+2] != 'Z' && b[i+2] != 'X'
}

// WaitGone polls until pid is no longer Alive and reports whether that
// happened within timeout.
func WaitGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for Alive(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

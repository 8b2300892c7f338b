package local

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
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte(kv)
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
			if bytes.Equal(entry, want) {
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

package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/agent/agentapi"
)

// TestRankWriterRedactsSecrets: a secret the job prints reaches neither
// the rank's own file nor run.log, even when it arrives split across two
// writes, while the rest of the line is kept.
func TestRankWriterRedactsSecrets(t *testing.T) {
	dir := t.TempDir()
	lg, err := openJobLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	lg.withSecrets(map[string]string{"TOKEN": "tok-5e3b9a", "SHORT": "x"})
	f, err := os.Create(filepath.Join(dir, "tasks", "run.log"))
	if err != nil {
		t.Fatal(err)
	}
	w := &rankWriter{log: lg, file: f, label: func(int) string { return "(task, pid=1) " }, prefix: "(task, pid=1) "}
	w.Write([]byte("token is tok-5e"))
	w.Write([]byte("3b9a here\n"))
	f.Close()
	lg.close()
	for _, name := range []string{"run.log", "tasks/run.log"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("tok-5e3b9a")) || !bytes.Contains(b, []byte("token is <redacted> here\n")) {
			t.Errorf("%s = %q, want the secret redacted and the line kept", name, b)
		}
		info, _ := os.Stat(filepath.Join(dir, name))
		if name == "run.log" && info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, info.Mode().Perm())
		}
	}
}

// TestEndedJobForgetsSecrets: once a job ends, its secrets are gone from
// the job table, its WAL included, and the table files are owner-only;
// the rest of the spec stays.
func TestEndedJobForgetsSecrets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "jobs.db")
	st, err := openStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	const secret = "tablesecret-Zr81q"
	spec := agentapi.JobSpec{Run: "echo hi", Secrets: map[string]string{"S": secret}}
	id, _, err := st.insert(ctx, &jobRow{Job: agentapi.Job{Status: agentapi.StatusPending, NumNodes: 1}, Spec: spec, RunTS: "ts", LogDir: "/tmp/x"}, "")
	if err != nil {
		t.Fatal(err)
	}
	running, err := st.get(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if running.Spec.Secrets["S"] != secret {
		t.Fatalf("a pending job lost its secrets: %+v", running.Spec)
	}
	now := time.Now()
	if ok, err := st.transition(ctx, id, []agentapi.Status{agentapi.StatusPending}, update{to: agentapi.StatusRunning, startAt: &now}); err != nil || !ok {
		t.Fatalf("to RUNNING: %v %v", ok, err)
	}
	if r, _ := st.get(ctx, id, true); r.Spec.Secrets["S"] != secret {
		t.Fatalf("a running job lost its secrets: %+v", r.Spec)
	}
	if ok, err := st.transition(ctx, id, []agentapi.Status{agentapi.StatusRunning}, update{to: agentapi.StatusSucceeded, endAt: &now, returnCodes: []int{0}}); err != nil || !ok {
		t.Fatalf("to SUCCEEDED: %v %v", ok, err)
	}
	ended, err := st.get(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(ended.Spec.Secrets) != 0 || ended.Spec.Run != "echo hi" {
		t.Errorf("ended job's spec = %+v, want its run kept and no secrets", ended.Spec)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		b, err := os.ReadFile(p)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s still holds the ended job's secret", p)
		}
		info, _ := os.Stat(p)
		if m := info.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %v, want 0600", p, m)
		}
	}
}

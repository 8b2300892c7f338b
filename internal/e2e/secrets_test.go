package e2e

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretsNeverStored launches a job with a secret from each source (the
// YAML's secrets:, --secret K=V, --secret-file) that prints all three and
// also writes them to a file of its own, runs exec, logs, status and the
// listing commands, then looks for the values everywhere SkyGo writes or
// prints: every -o json output, every command's output, and every file
// under the test HOME (server state and its WAL, request logs, the nodes'
// job tables and logs). Only the job's own file may hold them.
func TestSecretsNeverStored(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	const (
		yamlVal = "yamlsecret-7Qm2xv"
		flagVal = "flagsecret-K9pL3z"
		fileVal = "filesecret-W4nT8c"
	)
	vals := []string{yamlVal, flagVal, fileVal}
	// The job's own file is the one place the values may be; it lives in
	// the node's HOME under this name.
	const ownFile = "job-own-output.txt"
	run := `echo "run $YAML_SECRET $FLAG_SECRET $FILE_SECRET"; echo "$YAML_SECRET $FLAG_SECRET $FILE_SECRET" > ~/` + ownFile
	yaml := writeFile(t, "task.yaml", "name: sec\nsecrets:\n  YAML_SECRET: "+yamlVal+
		"\nsetup: echo \"setup $YAML_SECRET $FLAG_SECRET $FILE_SECRET\"\nrun: |\n  "+run+"\n")
	secretFile := writeFile(t, "secrets.env", "FILE_SECRET="+fileVal+"\n")
	secretArgs := []string{"--secret", "FLAG_SECRET=" + flagVal, "--secret-file", secretFile}

	var outputs []result
	record := func(r result) result {
		outputs = append(outputs, r)
		return r
	}
	r := record(e.must(append([]string{"launch", "-y", "-c", "sec"}, append(secretArgs, yaml)...)...))
	// The job really had the values: the redaction must not come from a
	// job that never saw them.
	if !strings.Contains(r.out(), "run <redacted> <redacted> <redacted>") {
		t.Fatalf("the launch stream does not show the job's redacted line:\n%s", r)
	}
	record(e.must(append([]string{"exec", "sec"}, append(secretArgs, yaml)...)...))
	record(e.must("exec", "sec", "--secret=FLAG_SECRET="+flagVal, "--", "echo exec-inline $FLAG_SECRET"))
	record(e.must(append([]string{"validate"}, append(secretArgs, yaml)...)...))
	record(e.must("logs", "sec", "1"))
	record(e.must("logs", "sec", "2"))
	record(e.must("logs", "sec", "--no-follow"))
	record(e.must("status", "-v"))
	record(e.must("status", "-o", "json"))
	record(e.must("status", "-v", "-o", "json"))
	record(e.must("queue", "sec", "-o", "json"))
	record(e.must("api", "status", "-a", "-o", "json"))
	record(e.must("api", "status", "-a", "-v"))
	record(e.must("cost-report", "-o", "json"))

	for _, r := range outputs {
		for _, v := range vals {
			if strings.Contains(r.out(), v) {
				t.Errorf("the output of sky %s holds secret %q:\n%s", strings.Join(r.args, " "), v, r.out())
			}
		}
	}

	own := 0
	err := filepath.WalkDir(e.home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		if d.Name() == ownFile {
			own++
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("reading %s: %v", path, err)
			return nil
		}
		for _, v := range vals {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds secret %q", path, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The job did write its file: a scan that finds nothing because the
	// job never ran would prove nothing.
	if own == 0 {
		t.Errorf("the job's own %s was not found under %s", ownFile, e.home)
	}
	e.must("down", "-y", "sec")
}

// TestSecretFilesOwnerOnly checks that every file under ~/.sky/skygo
// that can hold a secret or a credential (the state database with its
// -wal and -shm, request and server logs, node job tables with theirs, job
// logs, agent configs) is readable by its owner only once a server has run
// a job. Only lock and pid files, which hold nothing, and the local
// infrastructure's cluster.json (names and node addresses) may be wider.
func TestSecretFilesOwnerOnly(t *testing.T) {
	parallel(t)
	e := newEnv(t)
	e.must("launch", "-y", "-c", "mode", "--secret", "S=modesecret-1", "--", "echo hi")
	e.must("status", "-o", "json")
	root := filepath.Join(e.home, ".sky", "skygo")
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return err
		}
		base := d.Name()
		if base == "lock" || base == "cluster.json" || strings.HasSuffix(base, ".lock") || strings.HasSuffix(base, ".pid") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		seen[filepath.Ext(base)] = true
		if m := info.Mode().Perm(); m&0o077 != 0 {
			t.Errorf("%s has mode %v, want 0600", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The walk must have met the files the issue is about, or a layout
	// change would make this pass by finding nothing.
	for _, ext := range []string{".db", ".db-wal", ".db-shm", ".log"} {
		if !seen[ext] {
			t.Errorf("no %s file found under %s", ext, root)
		}
	}
	e.must("down", "-y", "mode")
}

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/upload"
)

// TestTaskYAMLBodies drives the bodies the Python SDK sends (docs/api.md,
// "Tasks as YAML") against a real server on the local infra: a task as
// task_yaml with an uploaded workdir runs, exec does too, bad YAML and
// relative paths fail the request with the loader's message, and a
// pipeline sent as dag_yaml runs as managed jobs.
func TestTaskYAMLBodies(t *testing.T) {
	parallel(t)
	e := managedEnv(t)
	e.must("check")
	c, err := client.New(client.Options{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", e.port), Home: e.home})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "hello.txt"), []byte("hi from the client"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Upload(ctx, upload.Roots(api.TaskSpec{Workdir: work}, false))
	if err != nil {
		t.Fatal(err)
	}
	const secret = "tok-7f3a9c-sdk"
	taskYAML := fmt.Sprintf(`name: sdk
workdir: %s
resources: {infra: local, cpus: 1+}
envs: {GREETING: hi from the client}
secrets: {TOKEN: %s}
run: |
  test "$(cat hello.txt)" = "$GREETING"
  test "$TOKEN" = %s
`, work, secret, secret)
	body := map[string]any{"task_yaml": taskYAML, "upload_id": rep.ID, "cluster_name": "sdk",
		"entrypoint_command": "python train.py --token " + secret}
	id, err := sdkSubmit(ctx, c, apiop.Launch, body)
	if err != nil {
		t.Fatal(err)
	}
	var res api.LaunchResult
	if err := c.Wait(ctx, id, &res); err != nil {
		t.Fatalf("launch with task_yaml: %v\n%s", err, e.serverLogTail())
	}
	if res.ClusterName != "sdk" || res.JobID != 1 || res.Status != "SUCCEEDED" {
		t.Fatalf("launch result %+v", res)
	}
	rec, err := c.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(rec.RequestBody, secret) || !strings.Contains(rec.RequestBody, "task_yaml") {
		t.Errorf("the request record keeps the secret or lost the YAML: %s", rec.RequestBody)
	}
	st := e.status(false)
	if c, ok := st["sdk"]; !ok || c.Status != "UP" {
		t.Errorf("status after the launch: %+v", st)
	}

	execYAML := fmt.Sprintf("workdir: %s\nrun: test \"$(cat hello.txt)\" = 'hi from the client'\n", work)
	if res, err = sdkCall(ctx, c, apiop.Exec, map[string]any{"task_yaml": execYAML, "upload_id": rep.ID, "cluster_name": "sdk"}); err != nil || res.Status != "SUCCEEDED" || res.JobID != 2 {
		t.Fatalf("exec with task_yaml: %+v %v", res, err)
	}

	fail := func(name string, err error, wantType, wantMsg string) {
		t.Helper()
		var re *client.RequestError
		if !errors.As(err, &re) || re.Type != wantType || !strings.Contains(re.Message, wantMsg) {
			t.Errorf("%s: %v, want %s containing %q", name, err, wantType, wantMsg)
		}
	}
	_, err = sdkCall(ctx, c, apiop.Launch, map[string]any{"task_yaml": "run: echo\nresources:\n  cpus: [\n", "cluster_name": "bad"})
	fail("launch with bad YAML", err, "InvalidSkyPilotConfigError", "<task_yaml>:")
	_, err = sdkCall(ctx, c, apiop.Launch, map[string]any{"task_yaml": "workdir: rel/dir\nrun: ls\n", "cluster_name": "bad"})
	fail("launch with a relative workdir", err, "ValueError", `workdir "rel/dir" is not an absolute path`)
	_, err = sdkCall(ctx, c, apiop.Exec, map[string]any{"task_yaml": "name: p\n---\nrun: a\n---\nrun: b\n", "cluster_name": "sdk"})
	fail("exec of a pipeline", err, "ValueError", "dag_yaml")
	_, err = sdkCall(ctx, c, apiop.JobsLaunch, map[string]any{"dag_yaml": "name: p\n---\nfile_mounts: {/d: data}\nrun: a\n"})
	fail("jobs.launch with a relative mount source", err, "ValueError", "not an absolute path")

	if vr, err := sdkCall(ctx, c, apiop.Validate, map[string]any{"dag_yaml": "name: p\n---\nname: a\nrun: a\n---\nrun: b\nnum_nodes: 2\n"}); err != nil || len(vr.Tasks) != 2 || vr.Tasks[1].NumNodes != 2 {
		t.Errorf("validate dag_yaml: %+v %v", vr, err)
	}
	if _, err := sdkCall(ctx, c, apiop.Optimize, map[string]any{"dag_yaml": "name: p\n---\nrun: a\n---\nrun: b\n", "cluster_name": "p"}); err != nil {
		t.Errorf("optimize dag_yaml: %v", err)
	}

	pipe := `name: sdkpipe
---
name: first
resources: {infra: local}
run: echo one
---
resources: {infra: local}
run: echo two
`
	jr, err := sdkCall(ctx, c, apiop.JobsLaunch, map[string]any{"dag_yaml": pipe, "upload_ids": []string{"", ""}})
	if err != nil || len(jr.JobIDs) != 1 || jr.Name != "sdkpipe" {
		t.Fatalf("jobs.launch with dag_yaml: %+v %v", jr, err)
	}
	q := e.waitManaged(jr.JobIDs, 120*time.Second, "ended", ended)
	first, second := q[mkey{jr.JobIDs[0], 0}], q[mkey{jr.JobIDs[0], 1}]
	if first.TaskName != "first" || second.TaskName != "sdkpipe-1" || first.Status != "SUCCEEDED" || second.Status != "SUCCEEDED" || first.JobName != "sdkpipe" {
		t.Errorf("pipeline tasks: %v / %v", first, second)
	}
}

// sdkSubmit submits the operation d describes with body as the Python
// SDK encodes it: the SDK's keys, not what a B would encode to.
func sdkSubmit[B, R any](ctx context.Context, c *client.Client, d op.Desc[B, R], body map[string]any) (string, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return "", err
	}
	return client.SubmitEncoded(ctx, c, d, raw)
}

// sdkCall is sdkSubmit that waits for the result.
func sdkCall[B, R any](ctx context.Context, c *client.Client, d op.Desc[B, R], body map[string]any) (R, error) {
	var res R
	id, err := sdkSubmit(ctx, c, d, body)
	if err != nil {
		return res, err
	}
	err = c.Wait(ctx, id, &res)
	return res, err
}

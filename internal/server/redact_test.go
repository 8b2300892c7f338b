package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestRedactCommand: whatever client sent the command line, the body the
// operation runs and the record keeps hold no secret, be it a --secret
// value or one the task carries; the task's own secrets still reach the
// operation, and a body without secrets is kept byte for byte.
func TestRedactCommand(t *testing.T) {
	body := []byte(`{"cluster_name":"c","task":{"num_nodes":1,"secrets":{"A":"filesecret-91x","B":"flagsecret-22y"}},` +
		`"entrypoint_command":"sky launch -c c --secret B=flagsecret-22y --secret-file s.env -- echo filesecret-91x","idle_minutes_to_autostop":12345678901234567}`)
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	out := redactCommand(fields, body)
	var got struct {
		Task struct {
			Secrets map[string]string `json:"secrets"`
		} `json:"task"`
		Command string          `json:"entrypoint_command"`
		Idle    json.RawMessage `json:"idle_minutes_to_autostop"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if want := "sky launch -c c --secret B=<redacted> --secret-file s.env -- echo <redacted>"; got.Command != want {
		t.Errorf("command = %q, want %q", got.Command, want)
	}
	if got.Task.Secrets["A"] != "filesecret-91x" || got.Task.Secrets["B"] != "flagsecret-22y" {
		t.Errorf("the task's secrets must still reach the node, got %v", got.Task.Secrets)
	}
	if string(got.Idle) != "12345678901234567" {
		t.Errorf("other fields must be kept as sent, idle = %s", got.Idle)
	}
	rec := redactSecrets(fields, out)
	for _, v := range []string{"filesecret-91x", "flagsecret-22y"} {
		if strings.Contains(rec, v) {
			t.Errorf("the request record holds %q: %s", v, rec)
		}
	}

	plain := []byte(`{"cluster_name":"c","entrypoint_command":"sky exec c -- echo hi"}`)
	var pf map[string]any
	_ = json.Unmarshal(plain, &pf)
	if out := redactCommand(pf, plain); string(out) != string(plain) {
		t.Errorf("a body with nothing to hide changed: %s", out)
	}
}

// TestRecordRedactsYAMLSecrets: `sky validate` sends the user's YAML as
// written, so the record must hide its secrets: values, in every document
// and wherever the value recurs in the text, and keep the rest readable.
func TestRecordRedactsYAMLSecrets(t *testing.T) {
	y := "name: a\nsecrets:\n  TOKEN: yamlsecret-p0q\nrun: echo yamlsecret-p0q\n---\nname: b\nsecrets:\n  K: \"other-secret-9\"\n"
	body, _ := json.Marshal(map[string]any{"name": "t.yaml", "yaml": y, "secrets": map[string]string{"F": "flag-secret-3"}})
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	rec := redactSecrets(fields, body)
	for _, v := range []string{"yamlsecret-p0q", "other-secret-9", "flag-secret-3"} {
		if strings.Contains(rec, v) {
			t.Errorf("the record holds %q: %s", v, rec)
		}
	}
	if !strings.Contains(rec, `run: echo \u003credacted\u003e`) && !strings.Contains(rec, "run: echo <redacted>") {
		t.Errorf("the rest of the YAML should stay readable: %s", rec)
	}
	if got := redactYAMLSecrets("{not: [yaml"); got != "{not: [yaml" {
		t.Errorf("text that is not YAML changed: %q", got)
	}
}

// A task sent as YAML (the SDK's task_yaml, dag_yaml) carries its secrets
// in the text: the recorded body and command line hold none of them, and
// the op still gets the YAML as sent.
func TestRedactTaskYAML(t *testing.T) {
	dag := "name: p\n---\nsecrets: {TOKEN: dagsecret-41q}\nrun: echo\n---\nrun: echo\n"
	body, _ := json.Marshal(map[string]any{
		"task_yaml":          "secrets:\n  KEY: yamlsecret-83z\nrun: echo\n",
		"dag_yaml":           dag,
		"entrypoint_command": "python run.py yamlsecret-83z dagsecret-41q",
	})
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		t.Fatal(err)
	}
	out := redactCommand(fields, body)
	var got struct {
		Command string `json:"entrypoint_command"`
		DAG     string `json:"dag_yaml"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Command != "python run.py <redacted> <redacted>" || got.DAG != dag {
		t.Errorf("command %q, dag_yaml %q", got.Command, got.DAG)
	}
	rec := redactSecrets(fields, out)
	if strings.Contains(rec, "yamlsecret-83z") || strings.Contains(rec, "dagsecret-41q") || !strings.Contains(rec, "run: echo") {
		t.Errorf("recorded body: %s", rec)
	}
}

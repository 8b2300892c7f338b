package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestOpenAPIIsCurrent keeps docs/openapi.json the document the code
// describes: a changed body or result type, or a new op, fails it until
// the file is regenerated.
func TestOpenAPIIsCurrent(t *testing.T) {
	doc, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../../docs/openapi.json")
	if err != nil {
		t.Fatalf("docs/openapi.json: %v; create it with `make openapi`", err)
	}
	if !bytes.Equal(doc, committed) {
		t.Fatal("docs/openapi.json is stale (the API's Go types changed): regenerate it with `make openapi` and commit it")
	}
}

// TestPythonOpsIsCurrent keeps the Python SDK's operation table the one
// docs/openapi.json makes.
func TestPythonOpsIsCurrent(t *testing.T) {
	doc, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	want, err := pythonOps(doc)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../../python/sky/client/_ops.py")
	if err != nil {
		t.Fatalf("python/sky/client/_ops.py: %v; create it with `make openapi`", err)
	}
	if !bytes.Equal(want, committed) {
		t.Fatal("python/sky/client/_ops.py is stale (an operation was added, renamed or rescheduled): regenerate it with `make openapi` and commit it")
	}
}

func TestPythonOps(t *testing.T) {
	doc := `{"paths": {
		"/jobs/pool_sync-down-logs": {"post": {"operationId": "jobs.pool_sync-down-logs", "x-skygo-schedule": "short"}},
		"/launch": {"post": {"operationId": "launch", "x-skygo-schedule": "long"}},
		"/api/get": {"get": {"operationId": "api.get"}}}}`
	got, err := pythonOps([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"JOBS_POOL_SYNC_DOWN_LOGS = Op('jobs.pool_sync-down-logs', '/jobs/pool_sync-down-logs', 'short')\nLAUNCH = Op('launch', '/launch', 'long')\n",
		"OPS: Dict[str, Op] = {op.name: op for op in (\n    JOBS_POOL_SYNC_DOWN_LOGS,\n    LAUNCH,\n)}\n",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "api.get") {
		t.Errorf("a server route that is no operation made the table:\n%s", got)
	}
	for _, c := range []struct{ name, doc, want string }{
		{"no operations", `{"paths": {}}`, "describes no operations"},
		{"not JSON", `{`, "reading the OpenAPI document"},
		{"two names, one constant", `{"paths": {
			"/a/b": {"post": {"operationId": "a.b", "x-skygo-schedule": "short"}},
			"/a_b": {"post": {"operationId": "a_b", "x-skygo-schedule": "short"}}}}`, "both make the Python name A_B"},
	} {
		if _, err := pythonOps([]byte(c.doc)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// TestAPIDocListsEveryRoute keeps docs/api.md's endpoint tables complete:
// every route of the description has its row.
func TestAPIDocListsEveryRoute(t *testing.T) {
	doc, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	prose, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for path, methods := range d.Paths {
		for m := range methods {
			row := "| `" + strings.ToUpper(m) + " " + path + "` |"
			if !strings.Contains(string(prose), row) {
				t.Errorf("docs/api.md has no row %s", row)
			}
		}
	}
}

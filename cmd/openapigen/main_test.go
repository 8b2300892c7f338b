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

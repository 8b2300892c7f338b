package main

import (
	"bytes"
	"os"
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

package server

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
)

// Every fixed route the server registers is described, and nothing else.
func TestOpenAPIFixedRoutes(t *testing.T) {
	s := newTestServer(t, Options{})
	var described []string
	for _, rt := range fixedRoutes() {
		described = append(described, rt.method+" "+rt.path)
	}
	slices.Sort(described)
	got := slices.Clone(s.patterns)
	slices.Sort(got)
	if !slices.Equal(got, described) {
		t.Fatalf("routes() registers\n  %v\nfixedRoutes() describes\n  %v", got, described)
	}
}

// GET /api/openapi.json describes the server's ops, each with its body,
// its result and the request-id header.
func TestOpenAPIServed(t *testing.T) {
	s := newTestServer(t, Options{})
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, httptest.NewRequest("GET", PathOpenAPI, nil))
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s", PathOpenAPI, w.Code, w.Body)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Info    struct{ Version string }             `json:"info"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	sleep := doc.Paths["/debug/sleep"]["post"]
	if doc.OpenAPI != "3.0.3" || doc.Info.Version != "2" || sleep == nil || sleep["x-skygo-schedule"] != "long" {
		t.Fatalf("document: %s", w.Body.String()[:min(2000, w.Body.Len())])
	}
	if !strings.Contains(w.Body.String(), `"`+api.HeaderRequestID+`"`) || doc.Paths["/api/get"]["get"] == nil {
		t.Errorf("no request-id header or /api/get in %s", w.Body)
	}
}

func TestOpenAPISchemas(t *testing.T) {
	type inner struct {
		N int `json:"n"`
	}
	type embedded struct {
		E string `json:"e"`
	}
	type sample struct {
		embedded
		Req    string            `json:"req"`
		Opt    string            `json:"opt,omitempty"`
		Skip   string            `json:"-"`
		Ptr    *inner            `json:"ptr"`
		List   []inner           `json:"list,omitempty"`
		Map    map[string]int    `json:"map"`
		Raw    json.RawMessage   `json:"raw"`
		Any    any               `json:"any"`
		Iv     api.Interval      `json:"iv"`
		Nested map[string][]bool `json:"nested"`
	}
	g := &schemaGen{defs: map[string]any{}, seen: map[reflect.Type]string{}}
	if _, err := g.of(sample{}); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(g.defs["Sample"])
	got := string(b)
	for _, want := range []string{
		`"e":{"type":"string"}`, `"opt":{"type":"string"}`, `"ptr":{"allOf":[{"$ref":"#/components/schemas/Inner"}],"nullable":true}`,
		`"list":{"items":{"$ref":"#/components/schemas/Inner"},"type":"array"}`, `"map":{"additionalProperties":{"type":"integer"},"type":"object"}`,
		`"raw":{"description":"any JSON value"}`, `"iv":{"description":"[start, end]`,
		`"required":["any","e","iv","map","nested","ptr","raw","req"]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("schema lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Skip") {
		t.Errorf("schema has a skipped field: %s", got)
	}
	// A self-encoding type without a schema, and an op without types, fail.
	type custom struct{ json.Marshaler }
	if _, err := (&schemaGen{defs: map[string]any{}, seen: map[reflect.Type]string{}}).of(custom{}); err == nil {
		t.Error("a json.Marshaler without OpenAPISchema was described")
	}
	if _, err := OpenAPI([]op.Op{{Name: "x", Body: op.NoBody{}}}); err == nil || !strings.Contains(err.Error(), "op x has no Body or Result") {
		t.Errorf("op without a Result: %v", err)
	}
}

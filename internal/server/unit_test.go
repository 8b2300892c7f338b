package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/state"
)

func TestTailOffset(t *testing.T) {
	for _, tc := range []struct {
		content string
		n       int
		want    string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"", 3, ""},
		{"only\n", 1, "only\n"},
		{strings.Repeat("x", 70000) + "\nlast\n", 1, "last\n"},
	} {
		p := filepath.Join(t.TempDir(), "log")
		os.WriteFile(p, []byte(tc.content), 0o600)
		f, _ := os.Open(p)
		off, err := tailOffset(f, tc.n)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got := tc.content[off:]; got != tc.want {
			t.Errorf("tail %d of %q = %q, want %q", tc.n, tc.content[:min(len(tc.content), 20)], got, tc.want)
		}
	}
}

func newTestServer(t *testing.T, opts Options, ops ...op.Op) *Server {
	t.Helper()
	opts.Home = t.TempDir()
	s, err := New(opts, ops)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestSkyLogPath(t *testing.T) {
	s := newTestServer(t, Options{})
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"run.log", true},
		{"sky-2024/run.log", true},
		{"~/sky_logs/x.log", true},
		{"../.sky/state.db", false},
		{"/etc/passwd", false},
		{filepath.Join(s.paths.SkyLogs, "a.log"), true},
	} {
		_, err := s.skyLogPath(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("skyLogPath(%q) err = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func TestNewValidation(t *testing.T) {
	run := func(context.Context, *op.Request) (any, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		opts Options
		ops  []op.Op
		want string
	}{
		{"public without auth", Options{Host: "0.0.0.0"}, nil, "without authentication"},
		{"deploy without auth", Options{Deploy: true}, nil, "without authentication"},
		{"duplicate op", Options{}, []op.Op{{Name: "x", Run: run}, {Name: "x", Run: run}}, "registered twice"},
		{"slash in name", Options{}, []op.Op{{Name: "a/b", Run: run}}, "dotted name"},
		{"clash with builtin", Options{}, []op.Op{{Name: "debug.sleep", Run: run}}, "registered twice"},
		{"bad initial admin", Options{BasicAuth: true, InitialBasicAuth: "nopassword"}, nil, "USER:PASSWORD"},
	} {
		tc.opts.Home = t.TempDir()
		s, err := New(tc.opts, tc.ops)
		if err == nil {
			s.Close()
			t.Errorf("%s: New succeeded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestVersionAndHealth(t *testing.T) {
	s := newTestServer(t, Options{})
	for _, tc := range []struct {
		apiVersion string
		wantCode   int
	}{
		{"", 200}, {"1", 200}, {"999", 200}, {"0", 400}, {"abc", 400},
	} {
		req := httptest.NewRequest("GET", "/api/health", nil)
		if tc.apiVersion != "" {
			req.Header.Set(api.HeaderAPIVersion, tc.apiVersion)
		}
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		if w.Code != tc.wantCode {
			t.Errorf("client API version %q: HTTP %d, want %d (%s)", tc.apiVersion, w.Code, tc.wantCode, w.Body)
		}
		if w.Header().Get(api.HeaderAPIVersion) == "" || w.Header().Get(api.HeaderVersion) == "" {
			t.Errorf("version headers missing")
		}
		if tc.wantCode == 400 && !strings.Contains(w.Body.String(), "version_mismatch") {
			t.Errorf("mismatch body = %s", w.Body)
		}
	}
}

func TestOpErrorsAndPanics(t *testing.T) {
	s := newTestServer(t, Options{},
		op.Op{Name: "boom", Run: func(context.Context, *op.Request) (any, error) { panic("kaboom") }},
		op.Op{Name: "typed", Run: func(context.Context, *op.Request) (any, error) {
			return nil, fmt.Errorf("wrapped: %w", &op.Error{Type: "ClusterNotUpError", Message: "cluster dev is not up"})
		}},
		op.Op{Name: "jobs.echo", Run: func(_ context.Context, r *op.Request) (any, error) {
			var b struct{ Msg string }
			if err := r.Decode(&b); err != nil {
				return nil, err
			}
			fmt.Fprintln(r.Log, b.Msg)
			return map[string]string{"echo": b.Msg, "user": r.User.Name, "cluster": r.ClusterName}, nil
		}},
	)
	for _, tc := range []struct {
		path, body, wantStatus, wantType, wantRet string
	}{
		{"/boom", "", "FAILED", "InternalError", ""},
		{"/typed", "{}", "FAILED", "ClusterNotUpError", ""},
		{"/jobs/echo", `{"msg":"hi","cluster_name":"c1"}`, "SUCCEEDED", "", `"echo":"hi"`},
	} {
		req := httptest.NewRequest("POST", tc.path, strings.NewReader(tc.body))
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, req)
		id := w.Header().Get(api.HeaderRequestID)
		if w.Code != 200 || id == "" || strings.TrimSpace(w.Body.String()) != "null" {
			t.Fatalf("POST %s: %d %q id=%q", tc.path, w.Code, w.Body, id)
		}
		rec, err := s.waitFinal(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if string(rec.Status) != tc.wantStatus || !strings.Contains(rec.Error, tc.wantType) || !strings.Contains(rec.ReturnValue, tc.wantRet) {
			t.Errorf("%s: %s error=%s return=%s", tc.path, rec.Status, rec.Error, rec.ReturnValue)
		}
	}
	recs, _ := s.store.ListRequests(context.Background(), state.RequestFilter{AllStatuses: true, Name: "sky.jobs.echo"})
	if len(recs) != 1 || recs[0].ClusterName != "c1" {
		t.Fatalf("jobs.echo record = %+v", recs)
	}
	req := httptest.NewRequest("POST", "/jobs/echo", strings.NewReader(`[1,2]`))
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("non-object body: HTTP %d", w.Code)
	}
}

// TestBodyLimit: an operation's body past maxBody is refused with a 413
// that names the limit, before it is queued; one at the limit is taken.
func TestBodyLimit(t *testing.T) {
	s := newTestServer(t, Options{},
		op.Op{Name: "jobs.echo", Run: func(_ context.Context, r *op.Request) (any, error) { return len(r.Body), nil }})
	pad := func(n int) string {
		const head, tail = `{"msg":"`, `"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	req := httptest.NewRequest("POST", "/jobs/echo", strings.NewReader(pad(maxBody+1)))
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "limit of 32 MiB") {
		t.Errorf("a body of maxBody+1 bytes: %d %s", w.Code, w.Body)
	}
	if recs, _ := s.store.ListRequests(context.Background(), state.RequestFilter{AllStatuses: true}); len(recs) != 0 {
		t.Errorf("the refused body was recorded as %d request(s)", len(recs))
	}
	req = httptest.NewRequest("POST", "/jobs/echo", strings.NewReader(pad(maxBody)))
	w = httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	id := w.Header().Get(api.HeaderRequestID)
	if w.Code != 200 || id == "" {
		t.Fatalf("a body of maxBody bytes: %d %s", w.Code, w.Body)
	}
	if rec, err := s.waitFinal(context.Background(), id); err != nil || rec.Status != api.RequestSucceeded {
		t.Errorf("a body of maxBody bytes: %+v %v", rec, err)
	}
}

func TestJSONValues(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int
	}{
		{``, 0},
		{`{}`, 1},
		{`{"a":1,"b":[1,2,3]}`, 5},
		{`{"task_yaml":"run: echo {[,,,]}\n","x":"\"{,"}`, 2},
		{`{"s":"a\\","t":[{}]}`, 4},
		{strings.Repeat("{},", 1000), 2000},
	} {
		if got := jsonValues([]byte(tc.body)); got != tc.want {
			t.Errorf("jsonValues(%.40q) = %d, want %d", tc.body, got, tc.want)
		}
	}
}

// TestBodyValuesLimit: a small body that would decode into millions of
// values is refused with a 413 before it is decoded or recorded.
func TestBodyValuesLimit(t *testing.T) {
	s := newTestServer(t, Options{},
		op.Op{Name: "jobs.echo", Run: func(_ context.Context, r *op.Request) (any, error) { return len(r.Body), nil }})
	body := `{"tasks":[` + strings.Repeat("{},", maxBodyValues) + `{}]}`
	req := httptest.NewRequest("POST", "/jobs/echo", strings.NewReader(body))
	w := httptest.NewRecorder()
	s.Handler().ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "limit of 250000 per request") {
		t.Errorf("a body of %d maps: %d %s", maxBodyValues, w.Code, w.Body)
	}
	if recs, _ := s.store.ListRequests(context.Background(), state.RequestFilter{AllStatuses: true}); len(recs) != 0 {
		t.Errorf("the refused body was recorded as %d request(s)", len(recs))
	}
}

package op

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

type testBody struct {
	N int `json:"n"`
}

type testResult struct {
	Twice int `json:"twice"`
}

var testDesc = Desc[testBody, testResult]{Name: "test.twice", Schedule: Long, CancelWhenUnfollowed: true}

func twice(_ context.Context, _ *Request, b testBody) (testResult, error) {
	if b.N < 0 {
		return testResult{}, &Error{Type: "ValueError", Message: "n must not be negative"}
	}
	return testResult{Twice: 2 * b.N}, nil
}

func TestHandle(t *testing.T) {
	o := Handle(testDesc, twice)
	if o.Name != "test.twice" || o.Schedule != Long || !o.CancelWhenUnfollowed || o.AdminOnly != "" {
		t.Errorf("op = %+v: name, schedule and rules must be the descriptor's", o)
	}
	if reflect.TypeOf(o.Body) != reflect.TypeOf(testBody{}) || reflect.TypeOf(o.Result) != reflect.TypeOf(testResult{}) {
		t.Errorf("Body %T, Result %T: the API description needs the descriptor's types", o.Body, o.Result)
	}
	for _, c := range []struct {
		name     string
		body     string
		want     any
		wantType string // the error's type, "" for none
		wantMsg  string
	}{
		{"result handed on", `{"n": 3}`, testResult{Twice: 6}, "", ""},
		{"empty body is the zero body", ``, testResult{}, "", ""},
		{"unknown fields are ignored", `{"n": 1, "other": true}`, testResult{Twice: 2}, "", ""},
		{"bad body", `{"n": "three"}`, nil, "ValueError", "request body of sky.test.twice: "},
		{"handler's error kept", `{"n": -1}`, nil, "ValueError", "n must not be negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := o.Run(context.Background(), &Request{Name: "sky.test.twice", Body: json.RawMessage(c.body)})
			if c.wantType == "" {
				if err != nil || got != c.want {
					t.Fatalf("Run = %#v, %v; want %#v", got, err, c.want)
				}
				return
			}
			var oe *Error
			if !errors.As(err, &oe) || oe.Type != c.wantType || !strings.Contains(oe.Message, c.wantMsg) {
				t.Fatalf("Run error = %v; want a %s containing %q", err, c.wantType, c.wantMsg)
			}
			if got != nil {
				t.Errorf("Run result = %#v with an error; want none", got)
			}
		})
	}
}

func TestHandleNull(t *testing.T) {
	// An op whose return_value is always null records null, not {}.
	o := Handle(Desc[NoBody, Null]{Name: "test.null"}, func(context.Context, *Request, NoBody) (Null, error) { return Null{}, nil })
	got, err := o.Run(context.Background(), &Request{Name: "sky.test.null", Body: json.RawMessage(`{}`)})
	if err != nil || got != nil {
		t.Fatalf("Run = %#v, %v; want nil, nil", got, err)
	}
	raw, _ := json.Marshal(got)
	if string(raw) != "null" {
		t.Errorf("recorded as %s, want null", raw)
	}
}

func TestPermit(t *testing.T) {
	open := Handle(testDesc, twice)
	admins := Handle(Desc[testBody, testResult]{Name: "test.shared", AdminOnly: "`sky test shared`"}, twice)
	for _, c := range []struct {
		name string
		o    Op
		role string
		ok   bool
	}{
		{"open op, user", open, "user", true},
		{"open op, admin", open, api.RoleAdmin, true},
		{"admin op, admin", admins, api.RoleAdmin, true},
		{"admin op, user", admins, "user", false},
		{"admin op, no role", admins, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.o.Permit(&Request{User: api.User{Name: "u", Role: c.role}})
			if c.ok {
				if err != nil {
					t.Fatalf("Permit = %v, want allowed", err)
				}
				return
			}
			var oe *Error
			if !errors.As(err, &oe) || oe.Type != "PermissionError" || !strings.Contains(oe.Message, "`sky test shared`") ||
				!strings.Contains(oe.Message, "only an admin may run it") {
				t.Fatalf("Permit = %v; want a PermissionError naming the command", err)
			}
		})
	}
}

func TestHandleStream(t *testing.T) {
	o := HandleStream(testDesc, twice, func(_ context.Context, _ *Request, b testBody, emit func(testResult) error) error {
		for i := 1; i <= b.N; i++ {
			if err := emit(testResult{Twice: 2 * i}); err != nil {
				return err
			}
		}
		return nil
	})
	if o.Run == nil || o.Name != testDesc.Name {
		t.Fatalf("op = %+v: want the descriptor's op, with Run", o)
	}
	var got []any
	collect := func(v any) error { got = append(got, v); return nil }
	if err := o.Stream(context.Background(), &Request{Name: "sky.test.twice", Body: json.RawMessage(`{"n": 2}`)}, collect); err != nil {
		t.Fatal(err)
	}
	if want := []any{testResult{Twice: 2}, testResult{Twice: 4}}; !reflect.DeepEqual(got, want) {
		t.Errorf("streamed %#v, want %#v", got, want)
	}
	got = nil
	err := o.Stream(context.Background(), &Request{Name: "sky.test.twice", Body: json.RawMessage(`{"n": "two"}`)}, collect)
	var oe *Error
	if !errors.As(err, &oe) || oe.Type != "ValueError" || len(got) != 0 {
		t.Errorf("bad body: %v after %d records; want a ValueError before any", err, len(got))
	}
}

// TestPath: an operation is served at its name with dots as slashes; a
// request name's "sky." is not part of it.
func TestPath(t *testing.T) {
	for in, want := range map[string]string{"launch": "/launch", "jobs.launch": "/jobs/launch", "sky.serve.up": "/serve/up"} {
		if got := Path(in); got != want {
			t.Errorf("Path(%q) = %q, want %q", in, got, want)
		}
	}
	if got := testDesc.Path(); got != "/test/twice" {
		t.Errorf("testDesc.Path() = %q", got)
	}
}

package op

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	var b struct {
		N int `json:"n"`
	}
	if err := (&Request{Name: "sky.x"}).Decode(&b); err != nil || b.N != 0 {
		t.Fatalf("empty body: %v, %+v", err, b)
	}
	if err := (&Request{Name: "sky.x", Body: []byte(`{"n": 3}`)}).Decode(&b); err != nil || b.N != 3 {
		t.Fatalf("body: %v, %+v", err, b)
	}
	err := (&Request{Name: "sky.x", Body: []byte(`{"n": "three"}`)}).Decode(&b)
	var oe *Error
	if !errors.As(err, &oe) || oe.ErrorType() != "ValueError" {
		t.Fatalf("bad body: %v, want a ValueError", err)
	}
}

func TestScheduleNames(t *testing.T) {
	// The names are recorded as the request's schedule_type.
	// Follow only picks a pool; SkyPilot clients know two schedule types.
	if Short.String() != "short" || Long.String() != "long" || Follow.String() != "short" {
		t.Errorf("Short, Long, Follow = %q, %q, %q", Short, Long, Follow)
	}
}

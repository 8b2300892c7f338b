package backend

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

func TestToSweep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		remnants []string
		recorded map[string]bool
		want     []string
	}{
		{"nothing anywhere", nil, nil, []string{}},
		{"remains of a recorded cluster are its own", []string{"a"}, map[string]bool{"a": false}, []string{}},
		{"remains no record holds are swept", []string{"a", "b"}, map[string]bool{"a": false}, []string{"b"}},
		{"a teardown cut short is finished, remains or not", []string{"a"}, map[string]bool{"a": true, "c": true}, []string{"a", "c"}},
		{"a record without remains is left alone", nil, map[string]bool{"a": false}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := toSweep(tc.remnants, tc.recorded); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("toSweep(%v, %v) = %v, want %v", tc.remnants, tc.recorded, got, tc.want)
			}
		})
	}
}

func TestInterruptLaunch(t *testing.T) {
	b := &Backend{}
	for _, tc := range []struct {
		name      string
		owner     string
		caller    string
		allUsers  bool
		interrupt bool
	}{
		{"the owner", "alice", "alice", false, true},
		{"another user", "alice", "bob", false, false},
		{"another user with the right to all", "alice", "bob", true, true},
		{"a controller (no user)", "alice", "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			forget := b.startLaunch("c", tc.owner, cancel)
			defer forget()
			if got := b.interruptLaunch("c", tc.caller, tc.allUsers); got != tc.interrupt {
				t.Fatalf("interruptLaunch = %v, want %v", got, tc.interrupt)
			}
			if tc.interrupt != errors.Is(context.Cause(ctx), errInterrupted) {
				t.Errorf("launch context cause %v after interruptLaunch = %v", context.Cause(ctx), tc.interrupt)
			}
			if err := interruptedError(ctx, "c", context.Canceled); tc.interrupt && !errors.As(err, new(*ClusterError)) {
				t.Errorf("an interrupted launch returns %v, want a ClusterError saying so", err)
			}
		})
	}
	if b.interruptLaunch("none", "", true) {
		t.Errorf("interrupted a launch that does not exist")
	}
}

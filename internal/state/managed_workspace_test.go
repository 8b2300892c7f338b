package state

import (
	"context"
	"reflect"
	"testing"
)

// TestManagedFilterHiddenWorkspaces: jobs of a hidden workspace are left
// out of a listing, on both dialects; "default" also hides jobs recorded
// before workspaces were.
func TestManagedFilterHiddenWorkspaces(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		for _, ws := range []string{"default", "secret", "team"} {
			j := &ManagedJob{Name: "in-" + ws, UserHash: "u1", UserName: "alice", Workspace: ws}
			if err := s.CreateManagedJobs(ctx, []*ManagedJob{j}, []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		names := func(f ManagedFilter) []string {
			t.Helper()
			js, err := s.ListManagedJobs(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, j := range js {
				out = append(out, j.Name)
			}
			return out
		}
		if got := names(ManagedFilter{HiddenWorkspaces: []string{"secret"}}); !reflect.DeepEqual(got, []string{"in-team", "in-default"}) {
			t.Errorf("secret hidden: %v", got)
		}
		if got := names(ManagedFilter{HiddenWorkspaces: []string{"secret", "default"}}); !reflect.DeepEqual(got, []string{"in-team"}) {
			t.Errorf("secret and default hidden: %v", got)
		}
		if got := names(ManagedFilter{}); len(got) != 3 {
			t.Errorf("nothing hidden: %v", got)
		}
	})
}

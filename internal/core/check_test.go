package core

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/skygo/skygo/internal/state"
)

// TestPartialChecksAtOnceBothLand: `sky check hyperbolic` and `sky check
// vast` at the same time, on two servers of one database, each keep the
// other's verdict: the enabled set is one conditional read-modify-write.
func TestPartialChecksAtOnceBothLand(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	for _, f := range []string{".hyperbolic/api_key", ".config/vastai/vast_api_key"} {
		p := filepath.Join(home, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("key\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	db := filepath.Join(home, "state.db")
	var envs []*Env
	for range 2 {
		st, err := state.OpenSQLite(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		e, err := New(Options{Home: home, Store: st, Sky: "/bin/true"})
		if err != nil {
			t.Fatal(err)
		}
		envs = append(envs, e)
	}
	// A first full check stores the baseline (nothing but local).
	if _, err := envs[0].runCheck(ctx, nil, false); err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		// Forget both, then check both at once.
		if err := envs[0].Store.UpdateDocument(ctx, docEnabledInfras, func([]byte) ([]byte, bool, error) {
			return []byte(`["local"]`), true, nil
		}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, infra := range []string{"hyperbolic", "vast"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = envs[i].runCheck(ctx, []string{infra}, false)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		got, ok := envs[0].storedEnabled(ctx)
		if !ok || !slices.Contains(got, "hyperbolic") || !slices.Contains(got, "vast") {
			t.Fatalf("round %d: enabled set after two partial checks at once = %v (stored %v)", round, got, ok)
		}
	}
}

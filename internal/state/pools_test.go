package state

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/skygo/skygo/internal/api"
)

// TestPools: a pool is created once, every move is a conditional update
// of its row (concurrent moves all land, none lost), and a delete only
// removes the row at the version its caller read.
func TestPools(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		two := 2
		p := &Pool{RowMeta: RowMeta{Name: "mp", UserHash: "u1", UserName: "alice"}, SpecVersion: 1,
			Specs: map[int]*PoolSpecVersion{1: {Task: api.TaskSpec{Setup: "echo hi"}, Policy: api.PoolPolicy{Workers: &two}}}}
		if err := s.CreatePool(ctx, p); err != nil {
			t.Fatal(err)
		}
		if err := s.CreatePool(ctx, &Pool{RowMeta: RowMeta{Name: "mp"}}); !errors.Is(err, ErrExists) {
			t.Fatalf("second create: %v, want ErrExists", err)
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.UpdatePool(ctx, "mp", func(n *Pool) error {
					n.NextWorkerID++
					n.Workers = append(n.Workers, &PoolWorker{ID: n.NextWorkerID, Status: api.WorkerPending})
					return nil
				}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, err := s.GetPool(ctx, "mp")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Workers) != 8 || got.NextWorkerID != 8 || got.Worker(8) == nil || got.Specs[1].Task.Setup != "echo hi" || *got.Specs[1].Policy.Workers != 2 {
			t.Fatalf("after 8 concurrent adds: %+v", got)
		}
		if got.UserName != "alice" || got.Workspace != "default" || got.Version != 9 {
			t.Fatalf("row columns: %+v", got)
		}
		same, err := s.UpdatePool(ctx, "mp", func(*Pool) error { return ErrNoChange })
		if err != nil || same.Version != 9 {
			t.Fatalf("no-change update: %v, version %d", err, same.Version)
		}
		if err := s.DeletePool(ctx, "mp", 8); !errors.Is(err, ErrConflict) {
			t.Fatalf("delete at a stale version: %v, want ErrConflict", err)
		}
		if err := s.DeletePool(ctx, "mp", 9); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetPool(ctx, "mp"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if ps, err := s.ListPools(ctx); err != nil || len(ps) != 0 {
			t.Fatalf("list after delete: %v %v", ps, err)
		}
	})
}

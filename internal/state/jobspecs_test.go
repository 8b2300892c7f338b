package state

import (
	"context"
	"errors"
	"testing"
)

func TestClusterJobSpecs(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		s := open()
		ctx := context.Background()
		first := ClusterJobSpec{ClusterHash: "h1", ClusterName: "c", JobID: 1, TaskYAML: "run: a\n", Entrypoint: "sky launch a.yaml"}
		if err := s.PutClusterJobSpec(ctx, first); err != nil {
			t.Fatal(err)
		}
		// A repeated submit of the same job keeps the first record.
		again := first
		again.TaskYAML = "run: b\n"
		if err := s.PutClusterJobSpec(ctx, again); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetClusterJobSpec(ctx, "h1", 1)
		if err != nil || got.TaskYAML != "run: a\n" || got.Entrypoint != "sky launch a.yaml" || got.ClusterName != "c" {
			t.Fatalf("GetClusterJobSpec = %+v, %v", got, err)
		}
		// Job 1 of another launch of a cluster with the same name is
		// another job.
		if _, err := s.GetClusterJobSpec(ctx, "h2", 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("job 1 of cluster hash h2: %v, want ErrNotFound", err)
		}
	})
}

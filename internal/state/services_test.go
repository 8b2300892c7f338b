package state

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestServicePorts: a service's load balancer port is reserved with its
// row: no second service gets it, not even two creating at once, and it
// is free again only once the service's row is gone.
func TestServicePorts(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		svc := func(name string, port int) *Service {
			v := &Service{RowMeta: RowMeta{Name: name, UserHash: "u1", UserName: "alice"}, Latest: 1}
			v.LB.Port = port
			return v
		}
		if err := s.CreateService(ctx, svc("a", 30001)); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateService(ctx, svc("b", 30001)); !errors.Is(err, ErrPortTaken) {
			t.Fatalf("second service on port 30001: %v, want ErrPortTaken", err)
		}
		if err := s.CreateService(ctx, svc("a", 30002)); !errors.Is(err, ErrExists) {
			t.Fatalf("second service named a: %v, want ErrExists", err)
		}
		// Concurrent creates on one port: exactly one wins.
		var wg sync.WaitGroup
		errs := make([]error, 6)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.CreateService(ctx, svc(fmt.Sprintf("c%d", i), 30005))
			}()
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrPortTaken):
				t.Errorf("concurrent create: %v", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d services got port 30005 at once: %v", won, errs)
		}
		// A row without a port (from before ports were reserved) claims
		// one; a claim does not move a port already held.
		if err := s.CreateService(ctx, svc("old", 0)); err != nil {
			t.Fatal(err)
		}
		if p, err := s.ServicePort(ctx, "old"); err != nil || p != 0 {
			t.Fatalf("port of a row without one: %d %v", p, err)
		}
		if _, err := s.ReserveServicePort(ctx, "old", 30001); !errors.Is(err, ErrPortTaken) {
			t.Fatalf("claiming service a's port: %v, want ErrPortTaken", err)
		}
		if p, err := s.ReserveServicePort(ctx, "old", 30009); err != nil || p != 30009 {
			t.Fatalf("claim: %d %v", p, err)
		}
		if p, err := s.ReserveServicePort(ctx, "old", 30010); err != nil || p != 30009 {
			t.Fatalf("second claim: %d %v, want the port kept (30009)", p, err)
		}
		if _, err := s.ServicePort(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("port of a missing service: %v", err)
		}
		ports, err := s.ServicePorts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != 3 || ports[30001] != "a" || ports[30009] != "old" || ports[30005] == "" {
			t.Fatalf("reserved ports %v", ports)
		}
		// Gone with the row.
		a, err := s.GetService(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteService(ctx, "a", a.Version); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateService(ctx, svc("b", 30001)); err != nil {
			t.Fatalf("port 30001 after its service is gone: %v", err)
		}
	})
}

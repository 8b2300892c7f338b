package state

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
)

// TestVolumes: a volume's record round-trips; names and names on the
// cloud are unique; concurrent attaches all land (CAS, no lost update);
// the last detach makes it READY; a delete check sees the current row.
func TestVolumes(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		ctx := context.Background()
		s := open()
		v := &Volume{Name: "data", Type: "host-dir", Cloud: "local", NameOnCloud: "data-u1-abc123", UserHash: "u1",
			UserName: "alice", Config: []byte(`{"host_path":"/x"}`), CreationYAML: "name: data\n"}
		if err := s.CreateVolume(ctx, v); err != nil {
			t.Fatal(err)
		}
		if err := s.CreateVolume(ctx, &Volume{Name: "data", Type: "host-dir", NameOnCloud: "other"}); !errors.Is(err, ErrExists) {
			t.Fatalf("same name: %v", err)
		}
		if err := s.CreateVolume(ctx, &Volume{Name: "alias", Type: "host-dir", Cloud: "local", NameOnCloud: "data-u1-abc123"}); !errors.Is(err, ErrExists) {
			t.Fatalf("same name on the cloud: %v", err)
		}
		got, err := s.GetVolume(ctx, "data")
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != VolumeReady || got.Workspace != "default" || got.UserName != "alice" || string(got.Config) != `{"host_path":"/x"}` ||
			got.UsedByClusters == nil && len(got.UsedByClusters) != 0 || got.Version != 1 {
			t.Fatalf("read back: %+v", got)
		}
		var wg sync.WaitGroup
		for _, c := range []string{"c1", "c2", "c3", "c4"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := s.UpdateVolume(ctx, "data", func(v *Volume) error { v.Attach(c, 1); return nil }); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, _ = s.GetVolume(ctx, "data")
		if !reflect.DeepEqual(got.UsedByClusters, []string{"c1", "c2", "c3", "c4"}) || got.Status != VolumeInUse || got.Version != 5 {
			t.Fatalf("after 4 concurrent attaches: %+v", got)
		}
		refuse := errors.New("in use")
		if _, err := s.DeleteVolume(ctx, "data", func(v *Volume) error {
			if len(v.UsedByClusters) > 0 {
				return refuse
			}
			return nil
		}); !errors.Is(err, refuse) {
			t.Fatalf("delete of a used volume: %v", err)
		}
		for _, c := range []string{"c1", "c2", "c3", "c4"} {
			if _, err := s.UpdateVolume(ctx, "data", func(v *Volume) error { v.Detach(c); return nil }); err != nil {
				t.Fatal(err)
			}
		}
		got, _ = s.GetVolume(ctx, "data")
		if len(got.UsedByClusters) != 0 || got.Status != VolumeReady {
			t.Fatalf("after detaching all: %+v", got)
		}
		if cur, err := s.UpdateVolume(ctx, "data", func(*Volume) error { return ErrNoChange }); err != nil || cur.Version != got.Version {
			t.Fatalf("ErrNoChange: %+v %v", cur, err)
		}
		if ok, err := s.DeleteVolume(ctx, "data", nil); !ok || err != nil {
			t.Fatalf("delete: %v %v", ok, err)
		}
		if _, err := s.GetVolume(ctx, "data"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		if _, err := s.UpdateVolume(ctx, "data", func(*Volume) error { return nil }); !errors.Is(err, ErrNotFound) {
			t.Fatalf("update of a missing volume: %v", err)
		}
		unlock, err := s.LockVolume(ctx, "data")
		if err != nil {
			t.Fatal(err)
		}
		unlock()
	})
}

package state

import (
	"context"
	"errors"
	"testing"
)

func TestStorageRecords(t *testing.T) {
	dialects(t, func(t *testing.T, open func() *Store) {
		s := open()
		ctx := context.Background()
		if err := s.PutStorage(ctx, Storage{Name: "b1", Handle: `{"stores":[]}`, LastUse: "sky launch x"}); err != nil {
			t.Fatal(err)
		}
		// Compare-and-set: only the construction that holds INIT moves it.
		if ok, err := s.SetStorageStatus(ctx, "b1", []string{StorageInit}, StorageReady); err != nil || !ok {
			t.Fatalf("INIT -> READY: %v %v", ok, err)
		}
		if ok, _ := s.SetStorageStatus(ctx, "b1", []string{StorageInit}, StorageUploadFailed); ok {
			t.Error("a second INIT -> UPLOAD_FAILED won over READY")
		}
		got, err := s.GetStorage(ctx, "b1")
		if err != nil || got.Status != StorageReady || got.LastUse != "sky launch x" || got.LaunchedAt == 0 {
			t.Fatalf("get: %+v %v", got, err)
		}
		// A new construction takes the record back to INIT with its command.
		if err := s.PutStorage(ctx, Storage{Name: "b1", Handle: "{}", LastUse: "sky launch y"}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutStorage(ctx, Storage{Name: "a0", Handle: "{}"}); err != nil {
			t.Fatal(err)
		}
		list, err := s.ListStorage(ctx)
		if err != nil || len(list) != 2 || list[0].Name != "a0" || list[1].Status != StorageInit || list[1].LastUse != "sky launch y" {
			t.Fatalf("list: %+v %v", list, err)
		}
		if ok, err := s.RemoveStorage(ctx, "b1"); !ok || err != nil {
			t.Fatalf("remove: %v %v", ok, err)
		}
		if ok, _ := s.RemoveStorage(ctx, "b1"); ok {
			t.Error("removed twice")
		}
		if _, err := s.GetStorage(ctx, "b1"); !errors.Is(err, ErrNotFound) {
			t.Errorf("get removed: %v", err)
		}
	})
}

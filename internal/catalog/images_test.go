package catalog

import (
	"context"
	"testing"
)

func TestImageFromEmbeddedSnapshot(t *testing.T) {
	c := New(Options{CacheDir: t.TempDir(), BaseURLs: []string{"http://127.0.0.1:1"}})
	for _, tag := range []string{"skypilot:custom-cpu-ubuntu", "custom-cpu-ubuntu"} {
		id, ok, err := c.Image(context.Background(), "aws", tag, "us-east-1")
		if err != nil || !ok || len(id) < 5 || id[:4] != "ami-" {
			t.Fatalf("Image(%q, us-east-1) = %q %v %v; want an AMI id", tag, id, ok, err)
		}
	}
	if _, ok, err := c.Image(context.Background(), "aws", "skypilot:custom-cpu-ubuntu", "nowhere-1"); err != nil || ok {
		t.Fatalf("a region the catalog lacks: found=%v err=%v; want not found", ok, err)
	}
}

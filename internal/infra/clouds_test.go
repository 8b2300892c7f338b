package infra

import (
	"slices"
	"testing"

	"github.com/skygo/skygo/internal/catalog"
	"github.com/skygo/skygo/internal/check"
	"github.com/skygo/skygo/internal/optimizer"
)

// Every cloud with a price catalog can be enabled by `sky check` and has
// the name SkyPilot prints, so the optimizer can price it.
func TestEveryCatalogCloudIsChecked(t *testing.T) {
	names := check.Names()
	for _, c := range catalog.Clouds {
		if !slices.Contains(names, c) {
			t.Errorf("catalog cloud %s is unknown to sky check", c)
		}
		if optimizer.DisplayName(c) == c {
			t.Errorf("catalog cloud %s has no display name", c)
		}
	}
}

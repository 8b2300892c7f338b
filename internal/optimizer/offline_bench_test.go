package optimizer

import (
	"context"
	"testing"

	"github.com/skygo/skygo/internal/catalog"
)

// BenchmarkPriceDisabledH100: pricing 8x H100 on every catalog cloud of the
// built-in snapshot (the offline dry run's report), catalog already loaded.
func BenchmarkPriceDisabledH100(b *testing.B) {
	b.Setenv(catalog.EnvDir, "")
	cat := catalog.New(catalog.Options{BaseURLs: []string{"http://127.0.0.1:1"}, CacheDir: b.TempDir()})
	cat.Preload(context.Background())
	in := Input{Tasks: []Task{{Options: []Request{{AccName: "H100", AccCount: 8}}}}, Enabled: []string{"local"},
		Catalog: cat, PriceDisabled: true}
	for b.Loop() {
		_, err := Optimize(context.Background(), in)
		if err == nil {
			b.Fatal("want no candidates on local")
		}
	}
}

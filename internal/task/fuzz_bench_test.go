package task

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/testutil"
)

// FuzzLoad feeds arbitrary bytes to the loader: it may reject them, but it
// must never panic, and every rejection must be an error value.
// The seeds are the project's example files, and the SkyPilot corpus too
// where the shared folder exists.
func FuzzLoad(f *testing.F) {
	var seeds []string
	for _, sub := range []string{"tasks", "tasks/invalid", "volumes"} {
		seeds = append(seeds, corpusFiles(f, testutil.Testdata(), sub)...)
	}
	if dir, ok := testutil.SharedPath(); ok {
		for _, sub := range []string{"yamls", "templates", "invalid", "volumes"} {
			seeds = append(seeds, corpusFiles(f, filepath.Join(dir, "corpus"), sub)...)
		}
	}
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("a: &a [*a]"))
	f.Add([]byte("<<: {x: 1}\nrun: x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dag, err := LoadBytes("fuzz.yaml", data, LoadOptions{Env: []string{"A=1"}, Secrets: []string{"S=secret"}})
		if err == nil {
			for _, tk := range dag.Tasks {
				_ = ValidateForLaunch(tk)
				if _, err := tk.ToYAML(); err != nil {
					t.Errorf("ToYAML of a loaded task failed: %v", err)
				}
			}
		}
		_, _ = LoadVolumeSpecBytes("fuzz.yaml", data)
	})
}

// BenchmarkLoadCorpus measures load+validate per SkyPilot corpus file and
// reports the median and the slowest file; it needs the shared folder.
func BenchmarkLoadCorpus(b *testing.B) {
	dir := testutil.Shared(b, "corpus")
	index := corpusIndex(b, dir)
	type input struct {
		data []byte
		opts LoadOptions
	}
	var inputs []input
	for _, p := range corpusFiles(b, dir, "yamls") {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		var opts LoadOptions
		if hasClass(index["yamls/"+baseName(p)], "env_required") {
			opts.Env = nullEnvOverrides(b, data)
		}
		inputs = append(inputs, input{data, opts})
	}
	per := make([][]time.Duration, len(inputs))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, in := range inputs {
			start := time.Now()
			dag, err := LoadBytes("bench.yaml", in.data, in.opts)
			if err != nil {
				b.Fatal(err)
			}
			for _, tk := range dag.Tasks {
				_ = ValidateForLaunch(tk)
			}
			per[j] = append(per[j], time.Since(start))
		}
	}
	b.StopTimer()
	// Per file, take its median over iterations; then report the median
	// and the max across files.
	medians := make([]float64, len(per))
	for j, ds := range per {
		sort.Slice(ds, func(a, c int) bool { return ds[a] < ds[c] })
		medians[j] = float64(ds[len(ds)/2].Microseconds())
	}
	sort.Float64s(medians)
	b.ReportMetric(medians[len(medians)/2], "median-µs/file")
	b.ReportMetric(medians[len(medians)-1], "max-µs/file")
	b.ReportMetric(0, "ns/op")
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

//go:build ignore

// gen.go refreshes the catalog snapshot embedded in the sky binary: every
// <cloud>/vms.csv, common/accelerators.csv, aws/images.csv and kubernetes/images.csv of a v8 catalog, each gzipped
// on its own so that a query about one cloud inflates only that cloud's file.
//
//	go run gen.go -from ../../../../shared/catalog/v8      (a local copy)
//	go run gen.go -from https://raw.githubusercontent.com/skypilot-org/skypilot-catalog/master/catalogs/v8
//
// (`make catalog-snapshot` runs it with CATALOG_FROM, default ../shared/catalog/v8.)
// Bytes are copied unchanged; only the compression is ours. Update
// README.md's source and date afterwards.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// clouds is every cloud of the v8 catalog with a vms.csv.
var clouds = []string{
	"aws", "azure", "cudo", "daytona", "gcp", "hyperbolic", "hyperstack", "jarvislabs",
	"lambda", "lium", "mithril", "nebius", "oci", "primeintellect", "runpod", "seeweb",
	"shadeform", "spheron", "vast", "verda", "yotta",
}

func main() {
	from := flag.String("from", "", "a v8 catalog directory or base URL")
	to := flag.String("to", "v8", "output directory")
	flag.Parse()
	if *from == "" {
		log.Fatal("-from is required")
	}
	// aws/images.csv: the AMIs the EC2 provisioner launches by default;
	// kubernetes/images.csv: the default images of pods.
	files := []string{"common/accelerators.csv", "aws/images.csv", "kubernetes/images.csv"}
	for _, c := range clouds {
		files = append(files, c+"/vms.csv")
	}
	if err := os.RemoveAll(*to); err != nil {
		log.Fatal(err)
	}
	var in, out int
	for _, f := range files {
		data, err := read(*from, f)
		if err != nil {
			log.Fatal(err)
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Name = filepath.Base(f)
		zw.ModTime = time.Unix(0, 0) // reproducible output
		if _, err := zw.Write(data); err != nil {
			log.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			log.Fatal(err)
		}
		dest := filepath.Join(*to, f+".gz")
		if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(dest, buf.Bytes(), 0o644); err != nil {
			log.Fatal(err)
		}
		in, out = in+len(data), out+buf.Len()
	}
	fmt.Printf("%d files, %d bytes -> %d bytes gzipped\n", len(files), in, out)
}

func read(from, file string) ([]byte, error) {
	if !strings.HasPrefix(from, "http://") && !strings.HasPrefix(from, "https://") {
		return os.ReadFile(filepath.Join(from, file))
	}
	resp, err := http.Get(strings.TrimRight(from, "/") + "/" + file)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", file, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

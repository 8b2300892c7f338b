// Package embedded holds the snapshot of SkyPilot's v8 price catalog that is
// built into the sky binary, so that pricing works offline and on a fresh
// machine. Each file is gzipped separately (<cloud>/vms.csv.gz): a query
// about one cloud inflates only that cloud's file. README.md says where the
// data comes from; gen.go refreshes it.
package embedded

import (
	"compress/gzip"
	"embed"
	"io"
)

//go:generate go run gen.go -from ../../../../shared/catalog/v8

//go:embed v8
var files embed.FS

// Version is the catalog schema version of the snapshot.
const Version = "v8"

// Source says where the snapshot comes from, for messages.
const Source = "the catalog snapshot built into this binary (SkyPilot catalog v8, 2026)"

// Open returns the uncompressed content of <cloud>/<file> (e.g. "aws",
// "vms.csv"), or an error when the snapshot has no such file.
func Open(cloud, file string) (io.ReadCloser, error) {
	f, err := files.Open(Version + "/" + cloud + "/" + file + ".gz")
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &gzFile{Reader: zr, f: f}, nil
}

type gzFile struct {
	*gzip.Reader
	f io.Closer
}

func (g *gzFile) Close() error {
	err := g.Reader.Close()
	if cerr := g.f.Close(); err == nil {
		err = cerr
	}
	return err
}

package catalog

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
)

// accelNames maps lower-case accelerator names to SkyPilot's canonical
// spelling, from common/accelerators.csv.
type accelNames struct {
	byLower map[string]string
	clouds  map[string][]string // canonical name -> clouds (lower case)
}

func parseAccelerators(r io.Reader) (*accelNames, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("accelerators.csv: reading header: %w", err)
	}
	nameCol, cloudsCol := -1, -1
	for i, h := range header {
		switch strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")) {
		case "AcceleratorName":
			nameCol = i
		case "Clouds":
			cloudsCol = i
		}
	}
	if nameCol < 0 {
		return nil, fmt.Errorf("accelerators.csv: no AcceleratorName column")
	}
	a := &accelNames{byLower: map[string]string{}, clouds: map[string][]string{}}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return a, nil
		}
		if err != nil {
			return nil, fmt.Errorf("accelerators.csv: %w", err)
		}
		name := strings.TrimSpace(rec[nameCol])
		if name == "" {
			continue
		}
		a.byLower[strings.ToLower(name)] = name
		if cloudsCol >= 0 && cloudsCol < len(rec) {
			// A Python list literal: "['AWS', 'GCP']".
			for _, c := range strings.Split(strings.Trim(rec[cloudsCol], "[] "), ",") {
				c = strings.ToLower(strings.Trim(strings.TrimSpace(c), `'"`))
				if c != "" {
					a.clouds[name] = append(a.clouds[name], c)
				}
			}
		}
	}
}

// Canonical returns SkyPilot's spelling of an accelerator name, matched
// case-insensitively ("h100" -> "H100"). TPU names are lower case by
// convention. Names the catalog does not know are returned unchanged, and
// ok is false.
func (c *Catalog) Canonical(ctx context.Context, name string) (canonical string, ok bool) {
	lower := strings.ToLower(strings.TrimSpace(name))
	if strings.HasPrefix(lower, "tpu-") {
		return lower, true
	}
	if n, found := c.accelerators(ctx).byLower[lower]; found {
		return n, true
	}
	return name, false
}

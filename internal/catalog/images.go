package catalog

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strings"
)

// Image returns the image id a cloud's images.csv gives for tag (e.g.
// "skypilot:custom-cpu-ubuntu") in region. The tag may be written with or
// without its "skypilot:" prefix. found is false when the catalog has the
// tag but not in that region, or not at all: the candidate cannot launch
// there and failover moves on.
func (c *Catalog) Image(ctx context.Context, cloud, tag, region string) (id string, found bool, err error) {
	f, src, err := c.open(ctx, strings.ToLower(cloud), "images.csv")
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	if !strings.Contains(tag, ":") {
		tag = "skypilot:" + tag
	}
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", src.name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(h)] = i
	}
	ti, ok1 := col["Tag"]
	ri, ok2 := col["Region"]
	ii, ok3 := col["ImageId"]
	if !ok1 || !ok2 || !ok3 {
		return "", false, fmt.Errorf("%s: want columns Tag, Region and ImageId", src.name)
	}
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("%s: %w", src.name, err)
		}
		if len(rec) > max(ti, ri, ii) && rec[ti] == tag && rec[ri] == region {
			return rec[ii], true, nil
		}
	}
}

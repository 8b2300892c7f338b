package optimizer

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
)

// unsupported says why infra cannot serve req's non-instance features, or "".
func unsupported(infra string, req Request) string {
	f := infrakind.DefaultFeatures
	if k, ok := infrakind.Lookup(infra); ok {
		f = k.Feats()
	}
	switch {
	case req.UseSpot && !f.Spot:
		return "spot instances are not supported"
	case req.DiskTier != "" && req.DiskTier != "best" && !slices.Contains(f.DiskTiers, req.DiskTier):
		if len(f.DiskTiers) == 0 {
			return "disk_tier " + req.DiskTier + " is not supported (only the default tier)"
		}
		return "disk_tier " + req.DiskTier + " is not supported (supported: " + strings.Join(f.DiskTiers, ", ") + ", best)"
	case len(req.Ports) > 0 && !f.Ports:
		return "opening ports is not supported"
	case req.ImageID != "" && strings.HasPrefix(req.ImageID, "docker:") && !f.Docker:
		return "docker images are not supported"
	case req.ImageID != "" && !strings.HasPrefix(req.ImageID, "docker:") && !f.VMImage:
		return "custom image_id is not supported (use a docker: image or none)"
	case req.DiskSize > 0 && f.FixedDisk:
		return fmt.Sprintf("disk_size %d is not supported (the nodes' disks cannot be resized; drop --disk-size/disk_size)", req.DiskSize)
	case req.LocalDisk != "" && f.FixedDisk:
		return "local_disk " + req.LocalDisk + " is not supported (drop --local-disk/local_disk)"
	case req.NetworkTier == "best" && f.FixedDisk:
		return "network_tier best is not supported (only the machine's own network)"
	}
	return ""
}

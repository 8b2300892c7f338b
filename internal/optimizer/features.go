package optimizer

import (
	"fmt"
	"slices"
	"strings"
)

// features is what one infra can do beyond picking an instance. Spot
// availability on catalog clouds comes from the catalog's spot prices, so
// it is not listed here; Spot=false rules spot out before asking.
type features struct {
	spot      bool
	diskTiers []string // tiers other than "best" (best always means "the best you have")
	ports     bool
	vmImage   bool // a custom machine image id (not docker:)
	docker    bool // image_id: docker:<image>
	// fixedDisk: the nodes' disks are what they are (this machine, a node
	// pool's hosts, a Slurm node), so disk_size and local_disk cannot be
	// honoured; neither can network_tier: best, which picks faster NICs.
	fixedDisk bool
}

var allTiers = []string{"low", "medium", "high", "ultra"}

// featureTable is per infra; clouds not listed get defaultFeatures. The
// entries follow SkyPilot's unsupported-feature lists (spec/infra-*.md):
// Kubernetes has no custom disk tier; Slurm has no spot, ports or disk
// tiers; local runs on this machine only.
var featureTable = map[string]features{
	"aws":        {spot: true, diskTiers: allTiers, ports: true, vmImage: true, docker: true},
	"gcp":        {spot: true, diskTiers: allTiers, ports: true, vmImage: true, docker: true},
	"azure":      {spot: true, diskTiers: []string{"low", "medium", "high"}, ports: true, vmImage: true, docker: true},
	"oci":        {spot: true, diskTiers: []string{"low", "medium", "high"}, ports: true, vmImage: true, docker: true},
	"kubernetes": {spot: true, ports: true, vmImage: true, docker: true}, // images run as containers; spot if the cluster has spot nodes
	"ssh":        {ports: true, vmImage: true, docker: true, fixedDisk: true},
	"slurm":      {docker: true, fixedDisk: true}, // docker images need Pyxis: the infra's Feasible checks
	"local":      {ports: true, fixedDisk: true},
}

var defaultFeatures = features{spot: true, ports: true, docker: true}

// unsupported says why infra cannot serve req's non-instance features, or "".
func unsupported(infra string, req Request) string {
	f, ok := featureTable[infra]
	if !ok {
		f = defaultFeatures
	}
	switch {
	case req.UseSpot && !f.spot:
		return "spot instances are not supported"
	case req.DiskTier != "" && req.DiskTier != "best" && !slices.Contains(f.diskTiers, req.DiskTier):
		if len(f.diskTiers) == 0 {
			return "disk_tier " + req.DiskTier + " is not supported (only the default tier)"
		}
		return "disk_tier " + req.DiskTier + " is not supported (supported: " + strings.Join(f.diskTiers, ", ") + ", best)"
	case len(req.Ports) > 0 && !f.ports:
		return "opening ports is not supported"
	case req.ImageID != "" && strings.HasPrefix(req.ImageID, "docker:") && !f.docker:
		return "docker images are not supported"
	case req.ImageID != "" && !strings.HasPrefix(req.ImageID, "docker:") && !f.vmImage:
		return "custom image_id is not supported (use a docker: image or none)"
	case req.DiskSize > 0 && f.fixedDisk:
		return fmt.Sprintf("disk_size %d is not supported (the nodes' disks cannot be resized; drop --disk-size/disk_size)", req.DiskSize)
	case req.LocalDisk != "" && f.fixedDisk:
		return "local_disk " + req.LocalDisk + " is not supported (drop --local-disk/local_disk)"
	case req.NetworkTier == "best" && f.fixedDisk:
		return "network_tier best is not supported (only the machine's own network)"
	}
	return ""
}

package resources

import (
	"fmt"
	"github.com/skygo/skygo/internal/infrakind"
	"strings"
)

// Clouds is every infrastructure name accepted as a cloud (sorted): the
// kinds of the registry (internal/infrakind), SkyPilot's list plus
// "local", SkyGo's embedded infrastructure that runs clusters on this
// machine. Aliases ("k8s") are accepted as input too and become the kind's
// name ("kubernetes").
func Clouds() []string { return infrakind.Names() }

// regionPrefix is what a kind puts before the region the user names:
// `ssh/gpus` is Infra{Cloud: "ssh", Region: "ssh-gpus"}, the way SkyPilot
// names the pool's Kubernetes context.
func regionPrefix(cloud string) string {
	k, _ := infrakind.Lookup(cloud)
	return k.RegionPrefix
}

// Infra says where resources may run. An empty field means "any".
//
// How the infra string maps onto the fields:
//
//	aws/us-east-1/us-east-1a          Cloud=aws Region=us-east-1 Zone=us-east-1a
//	aws/*/us-east-1a                  Cloud=aws Zone=us-east-1a
//	k8s/my-ctx (or kubernetes/...)    Cloud=kubernetes Region=my-ctx (the context; never a zone)
//	ssh/my-pool                       Cloud=ssh Region=ssh-my-pool
//	slurm/my-cluster/my-partition     Cloud=slurm Region=my-cluster Zone=my-partition
//	local                             Cloud=local (no regions or zones)
type Infra struct {
	Cloud  string
	Region string
	Zone   string
}

// IsZero reports whether no part of the infra is pinned.
func (i Infra) IsZero() bool { return i == Infra{} }

// SSHPool is the node pool name of an ssh infra, or "".
func (i Infra) SSHPool() string {
	if i.Cloud != "ssh" {
		return ""
	}
	return strings.TrimPrefix(i.Region, regionPrefix(i.Cloud))
}

// String is the canonical infra string, which ParseInfra reads back to the
// same Infra: "" when nothing is pinned, "*" for a part that is any.
func (i Infra) String() string {
	if i.IsZero() {
		return ""
	}
	cloud := i.Cloud
	if cloud == "" {
		cloud = "*"
	}
	switch i.Cloud {
	case "kubernetes":
		if i.Region == "" {
			return cloud
		}
		return cloud + "/" + i.Region
	case "ssh":
		if i.Region == "" {
			return cloud
		}
		return cloud + "/" + i.SSHPool()
	}
	parts := []string{cloud}
	if i.Region != "" || i.Zone != "" {
		parts = append(parts, orStar(i.Region))
	}
	if i.Zone != "" {
		parts = append(parts, i.Zone)
	}
	return strings.Join(parts, "/")
}

func orStar(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

// ParseInfra reads an infra string: <cloud>[/<region>[/<zone>]] with `*`
// for any part, k8s|kubernetes[/<context>] where the context is everything
// after the first slash, ssh/<pool>, slurm/<cluster>[/<partition>] and
// local. The cloud part is case-insensitive. An empty string (or "*") is
// the zero Infra: run anywhere.
func ParseInfra(s string) (Infra, error) {
	trimmed := strings.Trim(strings.TrimSpace(s), "/")
	if trimmed == "" || trimmed == "*" {
		return Infra{}, nil
	}
	first, rest, _ := strings.Cut(trimmed, "/")
	cloud, err := normalizeCloud(first)
	if err != nil {
		return Infra{}, fmt.Errorf("infra %q: %w", s, err)
	}
	if cloud == "kubernetes" {
		// A context name may contain slashes and colons (EKS ARNs), so it
		// is taken whole rather than split.
		if strings.HasPrefix(rest, "/") {
			return Infra{}, fmt.Errorf("infra %q: empty Kubernetes context after %q; write k8s or k8s/<context>", s, first+"/")
		}
		if rest == "*" {
			rest = ""
		}
		return Infra{Cloud: cloud, Region: rest}, nil
	}
	parts := strings.Split(trimmed, "/")
	for _, p := range parts {
		if strings.TrimSpace(p) == "" {
			return Infra{}, fmt.Errorf("infra %q has an empty segment between slashes; expected <cloud>[/<region>[/<zone>]]", s)
		}
	}
	if len(parts) > 3 {
		return Infra{}, fmt.Errorf("infra %q has %d parts; expected at most <cloud>/<region>/<zone> (only a Kubernetes context may contain slashes)", s, len(parts))
	}
	inf := Infra{Cloud: cloud}
	if len(parts) > 1 && parts[1] != "*" {
		inf.Region = parts[1]
	}
	if len(parts) > 2 && parts[2] != "*" {
		inf.Zone = parts[2]
	}
	switch cloud {
	case "ssh":
		if len(parts) > 2 {
			return Infra{}, fmt.Errorf("infra %q: an SSH node pool is written ssh/<pool>, with no zone", s)
		}
		if inf.Region != "" {
			inf.Region = regionPrefix(cloud) + inf.Region
		}
	case "local":
		if len(parts) > 1 {
			return Infra{}, fmt.Errorf("infra %q: local infrastructure has no regions or zones; write just local", s)
		}
	}
	return inf, nil
}

// normalizeCloud lower-cases a cloud name, maps k8s to kubernetes, keeps
// "*" as "" (any), and rejects unknown names with a suggestion.
func normalizeCloud(name string) (string, error) {
	c := strings.ToLower(strings.TrimSpace(name))
	if c == "*" {
		return "", nil
	}
	if k := infrakind.Canonical(c); k != "" {
		return k, nil
	}
	clouds := infrakind.Names()
	msg := fmt.Sprintf("unknown cloud %q", name)
	if s := suggest(c, clouds); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return "", fmt.Errorf("%s (known: %s, k8s, or * for any)", msg, strings.Join(clouds, ", "))
}

// legacyInfra builds an Infra from the old cloud/region/zone fields and
// brings it into the same shape ParseInfra gives, so both spellings
// compare equal and print the same infra string. On error it also names
// the field at fault.
func legacyInfra(cloud, region, zone string) (Infra, string, error) {
	c := ""
	if cloud != "" {
		var err error
		if c, err = normalizeCloud(cloud); err != nil {
			return Infra{}, "cloud", err
		}
	}
	return checkInfraShape(Infra{Cloud: c, Region: strings.TrimSpace(region), Zone: strings.TrimSpace(zone)})
}

// checkInfraShape enforces what the infra string grammar cannot express,
// for infra assembled from separate parts (legacy fields, CLI flags). On
// error it names the part at fault: "region" or "zone".
func checkInfraShape(inf Infra) (Infra, string, error) {
	switch inf.Cloud {
	case "kubernetes":
		if inf.Zone != "" {
			return Infra{}, "zone", fmt.Errorf("kubernetes has no zones (zone %q); the context goes in region, or use infra: k8s/<context>", inf.Zone)
		}
		return inf, "", nil
	case "local":
		if inf.Region != "" {
			return Infra{}, "region", fmt.Errorf("local infrastructure has no regions (region %q)", inf.Region)
		}
		if inf.Zone != "" {
			return Infra{}, "zone", fmt.Errorf("local infrastructure has no zones (zone %q)", inf.Zone)
		}
		return inf, "", nil
	case "ssh":
		if inf.Zone != "" {
			return Infra{}, "zone", fmt.Errorf("SSH node pools have no zones (zone %q); the pool name goes in region, or use infra: ssh/<pool>", inf.Zone)
		}
		if p := regionPrefix(inf.Cloud); inf.Region != "" && !strings.HasPrefix(inf.Region, p) {
			inf.Region = p + inf.Region
		}
	}
	if strings.Contains(inf.Region, "/") {
		return Infra{}, "region", fmt.Errorf("region %q may not contain '/' (only a Kubernetes context may)", inf.Region)
	}
	if strings.Contains(inf.Zone, "/") {
		return Infra{}, "zone", fmt.Errorf("zone %q may not contain '/'", inf.Zone)
	}
	return inf, "", nil
}

package resources

import (
	"fmt"
	"slices"
	"strings"

	"github.com/skygo/skygo/internal/infrakind"
)

// Clouds is every infrastructure name accepted as a cloud (sorted): the
// kinds of the registry (internal/infrakind), SkyPilot's list plus
// SkyGo's embedded infrastructure that runs clusters on this machine.
// A kind's aliases are accepted as input too and become its name.
func Clouds() []string { return infrakind.Names() }

// Infra says where resources may run. An empty field means "any".
//
// How the infra string maps onto the fields depends on the kind's Place
// (infrakind.Place):
//
//	<kind>/<region>/<zone>   RegionZone: Cloud=<kind> Region=<region> Zone=<zone>
//	<kind>/*/<zone>          RegionZone: Cloud=<kind> Zone=<zone>
//	<kind>/<context>         Context: Region=<context>, slashes and all; never a zone
//	<kind>/<pool>            Pool: Region=<RegionPrefix><pool>
//	<kind>                   Here: no regions or zones
//
// The README lists each infrastructure's spelling.
type Infra struct {
	Cloud  string
	Region string
	Zone   string
}

// IsZero reports whether no part of the infra is pinned.
func (i Infra) IsZero() bool { return i == Infra{} }

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
	if k, _ := infrakind.Lookup(i.Cloud); k.Place == infrakind.Context || k.Place == infrakind.Pool {
		if i.Region == "" {
			return cloud
		}
		return cloud + "/" + strings.TrimPrefix(i.Region, k.RegionPrefix)
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
// for any part, shaped by the kind's Place (a context is everything after
// the first slash; a pool or a kind placed Here takes no zone). The cloud
// part (a kind's name or alias) is case-insensitive. An empty string (or "*") is
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
	k, _ := infrakind.Lookup(cloud)
	if k.Place == infrakind.Context {
		// A context name may contain slashes and colons (EKS ARNs), so it
		// is taken whole rather than split.
		if strings.HasPrefix(rest, "/") {
			return Infra{}, fmt.Errorf("infra %q: empty %s %s after %q; write %s or %s/<%s>", s, k.Display, k.RegionNoun, first+"/", k.Short(), k.Short(), k.RegionNoun)
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
		return Infra{}, fmt.Errorf("infra %q has %d parts; expected at most <cloud>/<region>/<zone> (%s contain slashes)", s, len(parts), slashesIn())
	}
	inf := Infra{Cloud: cloud}
	if len(parts) > 1 && parts[1] != "*" {
		inf.Region = parts[1]
	}
	if len(parts) > 2 && parts[2] != "*" {
		inf.Zone = parts[2]
	}
	switch k.Place {
	case infrakind.Pool:
		if len(parts) > 2 {
			return Infra{}, fmt.Errorf("infra %q: %s %s is written %s/<%s>, with no zone", s, article(k.Display), k.Display+" "+k.RegionNoun, k.Short(), lastWord(k.RegionNoun))
		}
		if inf.Region != "" {
			inf.Region = k.RegionPrefix + inf.Region
		}
	case infrakind.Here:
		if len(parts) > 1 {
			return Infra{}, fmt.Errorf("infra %q: %s infrastructure has no regions or zones; write just %s", s, k.Name, k.Name)
		}
	}
	return inf, nil
}

// slashesIn says which regions may hold slashes: "only a <Display>
// <RegionNoun> may" (the kinds whose region is a context, taken whole).
func slashesIn() string {
	var which []string
	for _, k := range infrakind.All() {
		if k.Place == infrakind.Context {
			which = append(which, article(k.Display)+" "+k.Display+" "+k.RegionNoun)
		}
	}
	if len(which) == 0 {
		return "no region may"
	}
	return "only " + strings.Join(which, " or ") + " may"
}

// article is "a" or "an" before name, by how it is said: an acronym
// ("SSH") by its first letter's name.
func article(name string) string {
	if name == "" {
		return "a"
	}
	first := name[0]
	vowels := "aeiouAEIOU"
	if len(name) > 1 && strings.ToUpper(name) == name {
		vowels = "AEFHILMNORSX" // letters whose names start with a vowel sound
	}
	if strings.IndexByte(vowels, first) >= 0 {
		return "an"
	}
	return "a"
}

func lastWord(s string) string { return s[strings.LastIndex(s, " ")+1:] }

// normalizeCloud lower-cases a cloud name, maps an alias to its kind, keeps
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
	known := append(clouds, shortAliases()...)
	return "", fmt.Errorf("%s (known: %s, or * for any)", msg, strings.Join(known, ", "))
}

// shortAliases are the aliases that abbreviate their kind's name (users
// write them more than the name), which the unknown-cloud message lists
// after the names; the longer spellings are only accepted.
func shortAliases() []string {
	var out []string
	for _, k := range infrakind.All() {
		for _, a := range k.Aliases {
			if len(a) < len(k.Name) {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out
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
	k, _ := infrakind.Lookup(inf.Cloud)
	switch k.Place {
	case infrakind.Context:
		if inf.Zone != "" {
			return Infra{}, "zone", fmt.Errorf("%s has no zones (zone %q); the %s goes in region, or use infra: %s/<%s>", k.Name, inf.Zone, k.RegionNoun, k.Short(), k.RegionNoun)
		}
		return inf, "", nil
	case infrakind.Here:
		if inf.Region != "" {
			return Infra{}, "region", fmt.Errorf("%s infrastructure has no regions (region %q)", k.Name, inf.Region)
		}
		if inf.Zone != "" {
			return Infra{}, "zone", fmt.Errorf("%s infrastructure has no zones (zone %q)", k.Name, inf.Zone)
		}
		return inf, "", nil
	case infrakind.Pool:
		if inf.Zone != "" {
			return Infra{}, "zone", fmt.Errorf("%s %ss have no zones (zone %q); the %s name goes in region, or use infra: %s/<%s>",
				k.Display, k.RegionNoun, inf.Zone, lastWord(k.RegionNoun), k.Short(), lastWord(k.RegionNoun))
		}
		if inf.Region != "" && !strings.HasPrefix(inf.Region, k.RegionPrefix) {
			inf.Region = k.RegionPrefix + inf.Region
		}
	}
	if strings.Contains(inf.Region, "/") {
		return Infra{}, "region", fmt.Errorf("region %q may not contain '/' (%s)", inf.Region, slashesIn())
	}
	if strings.Contains(inf.Zone, "/") {
		return Infra{}, "zone", fmt.Errorf("zone %q may not contain '/'", inf.Zone)
	}
	return inf, "", nil
}

package resources

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
)

// Overrides are the resource flags of sky launch / exec / jobs launch /
// serve up. An empty string (nil for UseSpot and Ports) means the flag
// was not given; the string "none" (any case) resets the field to unset.
// Values are validated by the same code that parses the YAML field.
type Overrides struct {
	Infra        string // --infra
	Cloud        string // --cloud (legacy)
	Region       string // --region (legacy)
	Zone         string // --zone (legacy)
	GPUs         string // --gpus
	CPUs         string // --cpus
	Memory       string // --memory
	InstanceType string // --instance-type
	UseSpot      *bool  // --use-spot / --no-use-spot
	DiskSize     string // --disk-size (GB, units allowed)
	DiskTier     string // --disk-tier
	NetworkTier  string // --network-tier
	LocalDisk    string // --local-disk
	Ports        []string
	ImageID      string // --image-id
	// Priority is an integer -1000..1000 (sets priority) or a priority
	// class name (sets priority_class); "none" clears both.
	Priority string
}

// IsZero reports whether no flag was given.
func (o Overrides) IsZero() bool {
	return o.Infra == "" && o.Cloud == "" && o.Region == "" && o.Zone == "" &&
		o.GPUs == "" && o.CPUs == "" && o.Memory == "" && o.InstanceType == "" &&
		o.UseSpot == nil && o.DiskSize == "" && o.DiskTier == "" && o.NetworkTier == "" &&
		o.LocalDisk == "" && o.Ports == nil && o.ImageID == "" && o.Priority == ""
}

func isNone(s string) bool { return strings.EqualFold(strings.TrimSpace(s), "none") }

// Apply returns a copy of r with the flags applied; r is not changed.
// A flag beats the YAML everywhere: it sets the base field and clears the
// same field in every any_of/ordered item, so each alternative inherits
// the flag's value. --cloud changing the cloud drops the YAML's region and
// zone unless --region/--zone are given too, since they belonged to the
// old cloud.
func (r *Resources) Apply(o Overrides) (*Resources, error) {
	out := r.Copy()
	items := append(append([]*Resources(nil), out.AnyOf...), out.Ordered...)

	if err := applyInfra(out, items, o); err != nil {
		return nil, err
	}
	steps := []error{
		override(out, items, "--gpus", o.GPUs,
			func(s string) (Accelerators, error) { return parseAccelerators(s, "gpus") },
			func(r *Resources) *Accelerators { return &r.Accelerators }),
		override(out, items, "--cpus", o.CPUs,
			func(s string) (*Quantity, error) { return parseCPUs(s, "cpus") },
			func(r *Resources) **Quantity { return &r.CPUs }),
		override(out, items, "--memory", o.Memory,
			func(s string) (*Quantity, error) { return parseMemory(s, "memory") },
			func(r *Resources) **Quantity { return &r.Memory }),
		override(out, items, "--instance-type", o.InstanceType,
			func(s string) (string, error) { return parseNonEmpty(s, "instance_type", "instance_type") },
			func(r *Resources) *string { return &r.InstanceType }),
		override(out, items, "--disk-size", o.DiskSize,
			func(s string) (int, error) { return parseSizeGB(s, "disk_size", "disk_size") },
			func(r *Resources) *int { return &r.DiskSize }),
		override(out, items, "--disk-tier", o.DiskTier,
			func(s string) (string, error) { return parseDiskTier(s, "disk_tier") },
			func(r *Resources) *string { return &r.DiskTier }),
		override(out, items, "--network-tier", o.NetworkTier,
			func(s string) (string, error) { return parseNetworkTier(s, "network_tier") },
			func(r *Resources) *string { return &r.NetworkTier }),
		override(out, items, "--local-disk", o.LocalDisk,
			func(s string) (*LocalDisk, error) { return parseLocalDisk(s, "local_disk") },
			func(r *Resources) **LocalDisk { return &r.LocalDisk }),
		override(out, items, "--image-id", o.ImageID,
			func(s string) (*ImageID, error) { return parseImageID(s, "image_id") },
			func(r *Resources) **ImageID { return &r.ImageID }),
	}
	for _, err := range steps {
		if err != nil {
			return nil, err
		}
	}
	if o.UseSpot != nil {
		v := *o.UseSpot
		out.UseSpot = &v
		for _, it := range items {
			it.UseSpot = nil
		}
	}
	if o.Ports != nil {
		raw := strings.Join(o.Ports, ",")
		if err := override(out, items, "--ports", raw,
			func(s string) ([]string, error) { return parsePorts(s, "ports") },
			func(r *Resources) *[]string { return &r.Ports }); err != nil {
			return nil, err
		}
	}
	if err := applyPriority(out, items, o.Priority); err != nil {
		return nil, err
	}
	if err := out.validate(); err != nil {
		return nil, fmt.Errorf("after applying the command-line flags: %w", err)
	}
	return out, nil
}

// override applies one flag: parse the value (or reset on "none") into
// the base field and clear the field in every item.
func override[T any](base *Resources, items []*Resources, flag, raw string, parse func(string) (T, error), field func(*Resources) *T) error {
	if raw == "" {
		return nil
	}
	var zero T
	if isNone(raw) {
		*field(base) = zero
	} else {
		v, err := parse(raw)
		if err != nil {
			return flagError(flag, raw, err)
		}
		*field(base) = v
	}
	for _, it := range items {
		*field(it) = zero
	}
	return nil
}

// flagError rewords a field error for a flag: the user typed a flag, not
// a YAML path.
func flagError(flag, raw string, err error) error {
	msg := err.Error()
	if fe, ok := err.(*fielderr.Error); ok {
		msg = fe.Msg
	}
	return fmt.Errorf("invalid %s %q: %s", flag, raw, msg)
}

func applyInfra(out *Resources, items []*Resources, o Overrides) error {
	legacy := o.Cloud != "" || o.Region != "" || o.Zone != ""
	if o.Infra != "" && legacy {
		return fmt.Errorf("cannot specify both --infra and --cloud, --region, or --zone; use --infra alone, e.g. --infra aws/us-east-1")
	}
	if o.Infra == "" && !legacy {
		return nil
	}
	if o.Infra != "" {
		inf := Infra{}
		if !isNone(o.Infra) {
			var err error
			if inf, err = ParseInfra(o.Infra); err != nil {
				return flagError("--infra", o.Infra, err)
			}
		}
		out.Infra = inf
	} else {
		inf := out.Infra
		if o.Cloud != "" {
			cloud := ""
			if !isNone(o.Cloud) {
				var err error
				if cloud, err = normalizeCloud(o.Cloud); err != nil {
					return flagError("--cloud", o.Cloud, err)
				}
			}
			if cloud != inf.Cloud {
				inf = Infra{Cloud: cloud}
			}
		}
		if o.Region != "" {
			inf.Region = ""
			if !isNone(o.Region) {
				inf.Region = strings.TrimSpace(o.Region)
			}
		}
		if o.Zone != "" {
			inf.Zone = ""
			if !isNone(o.Zone) {
				inf.Zone = strings.TrimSpace(o.Zone)
			}
		}
		fixed, key, err := checkInfraShape(inf)
		if err != nil {
			bad := o.Region
			if key == "zone" {
				bad = o.Zone
			}
			return flagError("--"+key, bad, err)
		}
		out.Infra = fixed
	}
	for _, it := range items {
		it.Infra = Infra{}
	}
	return nil
}

func applyPriority(out *Resources, items []*Resources, raw string) error {
	if raw == "" {
		return nil
	}
	clearItems := func(both bool) {
		for _, it := range items {
			it.Priority = nil
			if both {
				it.PriorityClass = ""
			}
		}
	}
	switch {
	case isNone(raw):
		out.Priority, out.PriorityClass = nil, ""
		clearItems(true)
	default:
		if n, err := strconv.Atoi(strings.TrimSpace(raw)); err == nil {
			p, err := parsePriority(n, "priority")
			if err != nil {
				return flagError("--priority", raw, err)
			}
			out.Priority = p
			clearItems(false)
			return nil
		}
		out.PriorityClass = strings.TrimSpace(raw)
		for _, it := range items {
			it.PriorityClass = ""
		}
	}
	return nil
}

package resources

import (
	"fmt"
	"math"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
)

// Quantity is a cpus or memory request: exactly Value, or at least Value
// when AtLeast ("4+"). For memory, PerCPU means at least Value GB per vCPU
// of the chosen instance ("4x"), a form SkyGo writes for controllers and
// default resources.
type Quantity struct {
	Value   float64
	AtLeast bool
	PerCPU  bool
}

// String is the canonical string form: "4", "4+", "0.5", "4x".
func (q Quantity) String() string {
	s := formatNumber(q.Value)
	if q.PerCPU {
		s += "x"
	}
	if q.AtLeast {
		s += "+"
	}
	return s
}

// Satisfied reports whether an offer of have units meets the request.
// A PerCPU memory request needs the offer's vCPU count to be judged, so
// callers must resolve it first (Value*cpus) and it never matches here.
func (q Quantity) Satisfied(have float64) bool {
	switch {
	case q.PerCPU:
		return false
	case q.AtLeast:
		return have >= q.Value
	default:
		return have == q.Value
	}
}

const cpusHint = `The "cpus" field should be either a number or a string "<number>+" (e.g. 4 or "4+")`

// parseCPUs reads cpus: a number, "<n>" or "<n>+", greater than zero.
func parseCPUs(v any, path string) (*Quantity, error) {
	var q Quantity
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if strings.HasSuffix(s, "+") {
			q.AtLeast = true
			s = strings.TrimSpace(strings.TrimSuffix(s, "+"))
		}
		n, ok := parseNumber(s)
		if !ok {
			return nil, fielderr.New(path, fmt.Sprintf("%s; got %q", cpusHint, x))
		}
		q.Value = n
	default:
		n, ok := toFloat(v)
		if !ok {
			return nil, fielderr.New(path, fmt.Sprintf("%s; got %s", cpusHint, kindOf(v)))
		}
		q.Value = n
	}
	if q.Value <= 0 {
		return nil, fielderr.New(path, fmt.Sprintf("cpus must be greater than 0, got %s", q))
	}
	return &q, nil
}

// sizeUnits are the accepted memory/disk suffixes and their size in GB.
// Like SkyPilot, the decimal-looking names are binary multiples too.
var sizeUnits = map[string]float64{
	"kb": 1.0 / (1024 * 1024), "ki": 1.0 / (1024 * 1024),
	"mb": 1.0 / 1024, "mi": 1.0 / 1024,
	"gb": 1, "gi": 1,
	"tb": 1024, "ti": 1024,
	"pb": 1024 * 1024, "pi": 1024 * 1024,
}

const unitList = "KB, KI, MB, MI, GB, GI, TB, TI, PB, PI"

// splitUnit splits "16GB" into 16 and the unit's size in GB (1 when no
// unit is given).
func splitUnit(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	mult := 1.0
	if len(s) > 2 {
		if m, ok := sizeUnits[strings.ToLower(s[len(s)-2:])]; ok {
			mult = m
			s = strings.TrimSpace(s[:len(s)-2])
		}
	}
	n, ok := parseNumber(s)
	if !ok {
		return 0, false
	}
	return n * mult, true
}

// parseMemory reads memory in GB: a number, "<n>", "<n>+", "<n><unit>",
// and the internal "<n>x" (GB per vCPU). Zero is checked later, against
// the cloud (infrakind.Kind.ZeroMemory).
func parseMemory(v any, path string) (*Quantity, error) {
	hint := `memory should be a number of GB or a string like "16", "16+", "32GB+" or "512MB" (units: ` + unitList + `)`
	var q Quantity
	switch x := v.(type) {
	case string:
		s := strings.TrimSpace(x)
		if strings.HasSuffix(s, "+") {
			q.AtLeast = true
			s = strings.TrimSpace(strings.TrimSuffix(s, "+"))
		}
		if strings.HasSuffix(s, "x") {
			q.PerCPU = true
			n, ok := parseNumber(strings.TrimSuffix(s, "x"))
			if !ok {
				return nil, fielderr.New(path, fmt.Sprintf("%s; got %q", hint, x))
			}
			q.Value = n
		} else {
			n, ok := splitUnit(s)
			if !ok {
				return nil, fielderr.New(path, fmt.Sprintf("%s; got %q", hint, x))
			}
			q.Value = n
		}
	default:
		n, ok := toFloat(v)
		if !ok {
			return nil, fielderr.New(path, fmt.Sprintf("%s; got %s", hint, kindOf(v)))
		}
		q.Value = n
	}
	if q.Value < 0 {
		return nil, fielderr.New(path, fmt.Sprintf("memory must be greater than 0, got %s", q))
	}
	return &q, nil
}

// parseSizeGB reads disk sizes: an integer number of GB, or a string with
// an optional unit ("100", "1TB", "500Gi"), converted to whole GB > 0.
func parseSizeGB(v any, path, what string) (int, error) {
	hint := fmt.Sprintf(`%s should be a whole number of GB or a string like "256", "1TB" or "500Gi" (units: %s)`, what, unitList)
	var gb float64
	switch x := v.(type) {
	case string:
		n, ok := splitUnit(x)
		if !ok {
			return 0, fielderr.New(path, fmt.Sprintf("%s; got %q", hint, x))
		}
		gb = n
	default:
		n, ok := toFloat(v)
		if !ok {
			return 0, fielderr.New(path, fmt.Sprintf("%s; got %s", hint, kindOf(v)))
		}
		gb = n
	}
	if gb <= 0 {
		return 0, fielderr.New(path, fmt.Sprintf("%s must be greater than 0 GB, got %v", what, v))
	}
	if gb != math.Trunc(gb) || gb > math.MaxInt32 {
		return 0, fielderr.New(path, fmt.Sprintf("%s must be a whole number of GB; %v is %s GB", what, v, formatNumber(gb)))
	}
	return int(gb), nil
}

// LocalDisk is a local (instance store) disk requirement: Mode is nvme or
// ssd, SizeGB the total over all disks, AtLeast for "size+".
type LocalDisk struct {
	Mode    string
	SizeGB  float64
	AtLeast bool
}

// String is the normalised mode:size[+] form.
func (l LocalDisk) String() string {
	s := l.Mode + ":" + formatNumber(l.SizeGB)
	if l.AtLeast {
		s += "+"
	}
	return s
}

// parseLocalDisk reads "mode:size[+]", "mode" (size 100+) or "size[+]"
// (mode nvme).
func parseLocalDisk(v any, path string) (*LocalDisk, error) {
	s, ok := v.(string)
	if !ok {
		if n, isNum := toFloat(v); isNum {
			s = formatNumber(n)
		} else {
			return nil, fielderr.New(path, fmt.Sprintf(`local_disk should be a string "[nvme|ssd:]size[+]" or "nvme"/"ssd", got %s`, kindOf(v)))
		}
	}
	raw := s
	s = strings.TrimSpace(s)
	ld := LocalDisk{Mode: "nvme", SizeGB: 100, AtLeast: true}
	mode, size, hasColon := strings.Cut(s, ":")
	if !hasColon {
		if _, isNum := parseNumber(strings.TrimSuffix(s, "+")); isNum {
			mode, size = "", s
		} else {
			mode, size = s, ""
		}
	}
	if mode != "" {
		m := strings.ToLower(strings.TrimSpace(mode))
		if m != "nvme" && m != "ssd" {
			return nil, fielderr.New(path, fmt.Sprintf(`local_disk mode must be nvme or ssd, got %q in %q`, mode, raw))
		}
		ld.Mode = m
	}
	if size != "" || hasColon {
		size = strings.TrimSpace(size)
		ld.AtLeast = strings.HasSuffix(size, "+")
		n, ok := parseNumber(strings.TrimSuffix(size, "+"))
		if !ok || n <= 0 {
			return nil, fielderr.New(path, fmt.Sprintf(`local_disk size must be a number of GB greater than 0 (optionally with + for "at least"), got %q in %q`, size, raw))
		}
		ld.SizeGB = n
	}
	return &ld, nil
}

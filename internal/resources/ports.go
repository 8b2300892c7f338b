package resources

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/skygo/skygo/internal/fielderr"
)

// portRange is an inclusive range of ports.
type portRange struct{ lo, hi int }

// parsePorts reads ports: an int, a string (comma-separated ports and
// from-to ranges), or a list of those. The result is sorted with
// overlapping and adjacent ranges merged, as strings: [8080, "8081",
// "9000-9002,9003"] gives ["8080-8081", "9000-9003"]. Nothing -> nil.
func parsePorts(v any, path string) ([]string, error) {
	var ranges []portRange
	add := func(item any, p string) error {
		rs, err := parsePortItem(item, p)
		ranges = append(ranges, rs...)
		return err
	}
	if l, ok := asList(v); ok {
		for i, item := range l {
			if err := add(item, index(path, i)); err != nil {
				return nil, err
			}
		}
	} else if err := add(v, path); err != nil {
		return nil, err
	}
	return formatPortRanges(mergePortRanges(ranges)), nil
}

func parsePortItem(v any, path string) ([]portRange, error) {
	if s, ok := v.(string); ok {
		var out []portRange
		for _, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			r, err := parsePortString(part)
			if err != nil {
				return nil, fielderr.New(path, err.Error())
			}
			out = append(out, r)
		}
		return out, nil
	}
	n, ok := toInt(v)
	if !ok {
		return nil, fielderr.New(path, fmt.Sprintf("a port must be an integer 1..65535 or a string like \"8080\", \"8000-8010\" or \"8080,9090\"; got %s", kindOf(v)))
	}
	if err := checkPort(n); err != nil {
		return nil, fielderr.New(path, err.Error())
	}
	return []portRange{{n, n}}, nil
}

func parsePortString(s string) (portRange, error) {
	from, to, isRange := strings.Cut(s, "-")
	lo, err := strconv.Atoi(strings.TrimSpace(from))
	if err != nil {
		return portRange{}, fmt.Errorf("invalid port %q: expected a number 1..65535 or a range from-to", s)
	}
	hi := lo
	if isRange {
		if hi, err = strconv.Atoi(strings.TrimSpace(to)); err != nil {
			return portRange{}, fmt.Errorf("invalid port range %q: expected from-to with two numbers, e.g. 8000-8010", s)
		}
	}
	if err := checkPort(lo); err != nil {
		return portRange{}, err
	}
	if err := checkPort(hi); err != nil {
		return portRange{}, err
	}
	if lo > hi {
		return portRange{}, fmt.Errorf("invalid port range %q: the start is after the end", s)
	}
	return portRange{lo, hi}, nil
}

func checkPort(n int) error {
	if n < 1 || n > 65535 {
		return fmt.Errorf("port %d is out of range: ports must be 1..65535", n)
	}
	return nil
}

func mergePortRanges(rs []portRange) []portRange {
	if len(rs) == 0 {
		return nil
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	out := []portRange{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if r.lo <= last.hi+1 {
			last.hi = max(last.hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return out
}

func formatPortRanges(rs []portRange) []string {
	if len(rs) == 0 {
		return nil
	}
	out := make([]string, len(rs))
	for i, r := range rs {
		if r.lo == r.hi {
			out[i] = strconv.Itoa(r.lo)
		} else {
			out[i] = fmt.Sprintf("%d-%d", r.lo, r.hi)
		}
	}
	return out
}

// PortNumbers expands normalised ports ("8080", "9000-9002") into each
// port number, in order.
func PortNumbers(ports []string) []int {
	var out []int
	for _, p := range ports {
		lo, hi, isRange := strings.Cut(p, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			continue
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil {
				continue
			}
		}
		for n := a; n <= b; n++ {
			out = append(out, n)
		}
	}
	return out
}

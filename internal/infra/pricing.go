package infra

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Pricing is an infrastructure's pricing config (slurm.pricing,
// kubernetes.pricing): hourly rates per CPU, per GB of memory and per
// accelerator (by name), for machines no catalog prices.
type Pricing struct {
	CPU, Memory  float64
	Accelerators map[string]float64
}

// Overlay merges a pricing config value ({cpu, memory, accelerators})
// over p: the keys it sets replace p's, accelerators by name. nil leaves
// p as it is.
func (p *Pricing) Overlay(v any) error {
	if v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("must be a mapping {cpu, memory, accelerators}, got %T", v)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "cpu", "memory":
			f, ok := rate(m[k])
			if !ok {
				return fmt.Errorf("%s must be a number >= 0, got %v", k, m[k])
			}
			if k == "cpu" {
				p.CPU = f
			} else {
				p.Memory = f
			}
		case "accelerators":
			am, ok := m[k].(map[string]any)
			if !ok && m[k] != nil {
				return fmt.Errorf("accelerators must be a mapping of name to hourly price, got %T", m[k])
			}
			if p.Accelerators == nil {
				p.Accelerators = map[string]float64{}
			}
			for name, rv := range am {
				f, ok := rate(rv)
				if !ok {
					return fmt.Errorf("accelerators.%s must be a number >= 0, got %v", name, rv)
				}
				p.Accelerators[name] = f
			}
		default:
			return fmt.Errorf("unknown key %q (want cpu, memory, accelerators)", k)
		}
	}
	return nil
}

func rate(v any) (float64, bool) {
	var f float64
	switch t := v.(type) {
	case int:
		f = float64(t)
	case int64:
		f = float64(t)
	case float64:
		f = t
	default:
		return 0, false
	}
	return f, f >= 0
}

// Hourly is the hourly cost of one machine: with an accelerator, count x
// its rate (CPU and memory are not charged; an unlisted accelerator costs
// 0); otherwise CPUs x cpu + GB x memory.
func (p Pricing) Hourly(cpus, memoryGB float64, acc string, count float64) float64 {
	if count > 0 {
		r, ok := p.Accelerators[acc]
		if !ok {
			for _, k := range slices.Sorted(maps.Keys(p.Accelerators)) {
				if strings.EqualFold(k, acc) {
					r = p.Accelerators[k]
					break
				}
			}
		}
		return count * r
	}
	return cpus*p.CPU + memoryGB*p.Memory
}

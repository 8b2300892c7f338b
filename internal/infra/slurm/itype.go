package slurm

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// InstanceType names a virtual instance type: "4CPU--16GB",
// "0.5CPU--1.5GB", "4CPU--16GB--H100:1". Figures are written without
// trailing zeros (rounded to 3 decimals); spaces in the GPU name become `_`.
func InstanceType(cpus, memGB float64, gpu string, n int) string {
	s := formatFigure(cpus) + "CPU--" + formatFigure(memGB) + "GB"
	if gpu != "" && n > 0 {
		s += "--" + strings.ReplaceAll(gpu, " ", "_") + ":" + strconv.Itoa(n)
	}
	return s
}

func formatFigure(f float64) string {
	return strconv.FormatFloat(math.Round(f*1000)/1000, 'f', -1, 64)
}

// ParseInstanceType reads an InstanceType name back.
func ParseInstanceType(s string) (cpus, memGB float64, gpu string, n int, err error) {
	bad := func() (float64, float64, string, int, error) {
		return 0, 0, "", 0, fmt.Errorf("invalid Slurm instance type %q: want <cpus>CPU--<memory>GB[--<gpu>:<count>], e.g. 4CPU--16GB--H100:1", s)
	}
	parts := strings.Split(s, "--")
	if len(parts) != 2 && len(parts) != 3 {
		return bad()
	}
	c, ok := strings.CutSuffix(parts[0], "CPU")
	if !ok {
		return bad()
	}
	m, ok := strings.CutSuffix(parts[1], "GB")
	if !ok {
		return bad()
	}
	if cpus, err = strconv.ParseFloat(c, 64); err != nil || !(cpus > 0) || math.IsInf(cpus, 0) {
		return bad()
	}
	if memGB, err = strconv.ParseFloat(m, 64); err != nil || !(memGB >= 0) || math.IsInf(memGB, 0) {
		return bad()
	}
	if len(parts) == 3 {
		name, count, ok := strings.Cut(parts[2], ":")
		if !ok || name == "" {
			return bad()
		}
		if n, err = strconv.Atoi(count); err != nil || n <= 0 {
			return bad()
		}
		gpu = name
	}
	return cpus, memGB, gpu, n, nil
}

package slurm

import (
	"strings"
	"testing"
)

func TestInstanceType(t *testing.T) {
	cases := []struct {
		cpus, mem float64
		gpu       string
		n         int
		want      string
	}{
		{4, 16, "", 0, "4CPU--16GB"},
		{0.5, 1.5, "", 0, "0.5CPU--1.5GB"},
		{4, 16, "H100", 1, "4CPU--16GB--H100:1"},
		{8, 0, "RTX 4090", 2, "8CPU--0GB--RTX_4090:2"},
		{1.0 / 3, 2, "", 0, "0.333CPU--2GB"},
		{2, 4, "H100", 0, "2CPU--4GB"}, // no count, no GPU part
	}
	for _, c := range cases {
		got := InstanceType(c.cpus, c.mem, c.gpu, c.n)
		if got != c.want {
			t.Errorf("InstanceType(%v, %v, %q, %d) = %q, want %q", c.cpus, c.mem, c.gpu, c.n, got, c.want)
			continue
		}
		cpus, mem, gpu, n, err := ParseInstanceType(got)
		if err != nil {
			t.Errorf("ParseInstanceType(%q): %v", got, err)
			continue
		}
		if InstanceType(cpus, mem, gpu, n) != got {
			t.Errorf("round trip of %q gave %v %v %q %d", got, cpus, mem, gpu, n)
		}
	}
}

func TestParseInstanceTypeErrors(t *testing.T) {
	for _, s := range []string{"", "4CPU", "4CPU-16GB", "4--16GB", "4CPU--16", "xCPU--16GB", "0CPU--1GB", "-1CPU--1GB",
		"4CPU---1GB", "NaNCPU--1GB", "4CPU--16GB--H100", "4CPU--16GB--H100:0", "4CPU--16GB--:1", "4CPU--16GB--H100:1--x"} {
		if _, _, _, _, err := ParseInstanceType(s); err == nil || !strings.Contains(err.Error(), "<cpus>CPU--<memory>GB") {
			t.Errorf("ParseInstanceType(%q) = %v, want an error", s, err)
		}
	}
	cpus, mem, gpu, n, err := ParseInstanceType("4CPU--16GB--nvidia_h100_80gb_hbm3:8")
	if err != nil || cpus != 4 || mem != 16 || gpu != "nvidia_h100_80gb_hbm3" || n != 8 {
		t.Fatalf("%v %v %q %d %v", cpus, mem, gpu, n, err)
	}
}

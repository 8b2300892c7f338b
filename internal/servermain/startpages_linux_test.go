package servermain

import (
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMappings(t *testing.T) {
	const exe = "/opt/sky/bin/sky-server"
	smaps := `00400000-0162d000 r-xp 00000000 00:2a 1234 /opt/sky/bin/sky-server
Size:              18612 kB
Rss:               14900 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
0162d000-0284c000 r--p 0122d000 00:2a 1234 /opt/sky/bin/sky-server
Rss:               12988 kB
Anonymous:             0 kB
VmFlags: rd mr mw me
0284c000-02922000 rw-p 0244c000 00:2a 1234 /opt/sky/bin/sky-server
Rss:                 600 kB
Anonymous:           120 kB
02a00000-02b00000 r-xp 00000000 00:2a 99 /opt/sky/bin/sky-server
Rss:                  64 kB
Anonymous:             4 kB
7f0000000000-7f0000010000 r--p 00000000 00:2a 77 /usr/lib/other.so
Anonymous:             0 kB
7f0000020000-7f0000030000 r--s 00000000 00:2a 1234 /opt/sky/bin/sky-server
Anonymous:             0 kB
114f19400000-114f1a000000 rw-p 00000000 00:00 0 
Anonymous:          5940 kB
`
	got := readOnlyMappings(strings.NewReader(smaps), exe)
	// The code and the read-only data; not the data (writable), not a
	// mapping with a written page (a breakpoint), not another file, not a
	// shared mapping, not anonymous memory.
	want := []mapping{{0x400000, 0x162d000}, {0x162d000, 0x284c000}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("readOnlyMappings = %x, want %x", got, want)
	}
}

// exeRSS is the resident KiB of this process's mappings of its own binary.
func exeRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	kb, in := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && len(f[1]) == 4 && strings.Contains(f[0], "-") {
			in = len(f) == 6 && f[5] == exe
			continue
		}
		if in && len(f) >= 2 && f[0] == "Rss:" {
			n, _ := strconv.Atoi(f[1])
			kb += n
		}
	}
	return kb
}

// The release is real: this test binary's own code and read-only data
// stop being resident, and the program goes on running (code it calls
// afterwards is mapped back).
func TestReleaseStartupPages(t *testing.T) {
	before := exeRSS(t)
	released := releaseStartupPages()
	after := exeRSS(t)
	if released == 0 {
		t.Fatal("nothing released: no read-only mapping of the test binary found in /proc/self/smaps")
	}
	if after >= before {
		t.Fatalf("resident KiB of the binary: %d before, %d after releasing %d bytes", before, after, released)
	}
	// Code that start-up alone ran works when called again.
	if _, err := strconv.ParseFloat("1.5e3", 64); err != nil || !reflect.DeepEqual([]int{1}, []int{1}) {
		t.Fatal("the standard library stopped working")
	}
	t.Logf("resident KiB of the binary: %d before, %d after (%d bytes released)", before, after, released)
}

package servermain

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseStartupPages unmaps the pages of this program's code and
// read-only data, so that what stays mapped is what the server goes on to
// use. Start-up (some 280 package inits, most of them the AWS SDK's, and
// the server's wiring) touches code all over the 40 MB binary, and the
// kernel maps 64 KiB around each page touched: 28 MiB of an idle server's
// 37 MiB RSS was pages of the binary that nothing touched again.
//
// MADV_DONTNEED on a private file mapping that was never written drops
// the page table entries only: the pages stay in the page cache, and code
// that runs later maps them back with a minor fault. A mapping that holds
// a written (copy-on-write) page, a debugger's breakpoint say, is left
// alone, since dropping it would lose the write. It returns the bytes
// released.
func releaseStartupPages() int {
	exe, err := os.Executable()
	if err != nil {
		return 0
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0
	}
	defer f.Close()
	released := 0
	for _, r := range readOnlyMappings(f, exe) {
		// The raw call: the range is not Go memory, so no slice over it.
		if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, r.lo, r.hi-r.lo, syscall.MADV_DONTNEED); e == 0 {
			released += int(r.hi - r.lo)
		}
	}
	return released
}

type mapping struct{ lo, hi uintptr }

// readOnlyMappings are the private, unwritable mappings of file path in
// smaps (proc(5)) that hold no anonymous (written) page.
func readOnlyMappings(smaps io.Reader, path string) []mapping {
	var out []mapping
	keep := false
	var cur mapping
	flush := func() {
		if keep {
			out = append(out, cur)
		}
		keep = false
	}
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && len(f[1]) == 4 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			flush()
			lo, hi, _ := strings.Cut(f[0], "-")
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			perms := f[1]
			keep = err1 == nil && err2 == nil && len(f) == 6 && f[5] == path && perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p'
			cur = mapping{uintptr(l), uintptr(h)}
			continue
		}
		if len(f) >= 2 && f[0] == "Anonymous:" && f[1] != "0" {
			keep = false
		}
	}
	flush()
	if sc.Err() != nil {
		return nil // a partial reading might have missed a written page
	}
	return out
}

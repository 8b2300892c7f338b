//go:build linux

package main

import (
	"bufio"
	"bytes"
	"cmp"
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skygo/skygo/internal/server"
	"github.com/skygo/skygo/internal/testutil"
)

// TestIdleRSSAttribution says where an idle API server's resident memory
// is: it starts sky-server built with its symbols (the loaded segments
// are laid out as in the stripped build `make build` makes), runs `sky
// check` against it as bench-queued does, lets it settle and asks for a
// GC that returns free memory (/debug/memstats), then reads which
// pages of the binary are resident (/proc/PID/pagemap) and charges each
// resident byte to the symbol that holds it: code and data by the ELF
// symbol table, type descriptors by the DWARF entries that name them,
// the function table (.gopclntab) by the function each record describes.
// It prints resident KiB per section, per Go package and per module, and
// the anonymous memory beside the runtime's own account of it.
//
// It measures, it does not judge: SKYGO_RSS_ATTRIB=1 runs it
// (SKYGO_TEST_BINARY names the sky used for `sky check`; SKYGO_RSS_BINARY
// an unstripped sky-server to attribute instead of building this tree's;
// SKYGO_RSS_TOP how many rows, default 40).
func TestIdleRSSAttribution(t *testing.T) {
	if os.Getenv("SKYGO_RSS_ATTRIB") == "" {
		t.Skip("set SKYGO_RSS_ATTRIB=1 to attribute an idle server's resident pages")
	}
	top := 40
	if n, err := strconv.Atoi(os.Getenv("SKYGO_RSS_TOP")); err == nil && n > 0 {
		top = n
	}
	bin := os.Getenv("SKYGO_RSS_BINARY")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "sky-server")
		cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building sky-server: %v\n%s", err, out)
		}
	}
	pid, debugPort := startIdleServer(t, bin)
	// As bench-queued and bench-idle measure: after a GC that returns free
	// memory to the system.
	ms, msErr := memStats(debugPort)

	res, err := residentPages(pid, bin)
	if err != nil {
		t.Fatal(err)
	}
	img, err := loadImage(bin)
	if err != nil {
		t.Fatal(err)
	}
	var resident int
	for _, r := range res {
		resident += r.pages * pageSize
	}
	charged := img.charge(res)

	rollup := smapsRollup(t, pid)
	t.Logf("sky-server pid %d: RSS %d KiB, anonymous %d KiB, the binary's pages %d KiB (of them charged to a symbol or table: %d KiB)",
		pid, rollup["Rss"], rollup["Anonymous"], resident/1024, sum(charged)/1024)

	// By section.
	bySection := map[string]int{}
	for _, c := range charged {
		bySection[c.section] += c.bytes
	}
	t.Logf("resident KiB by section (size of the section in KiB):")
	for _, s := range img.sections {
		if bySection[s.name] > 0 {
			t.Logf("  %-14s %8d  (%d)", s.name, bySection[s.name]/1024, s.size/1024)
		}
	}
	// By kind within a section, for the tables without per-symbol names.
	byKind := map[string]int{}
	for _, c := range charged {
		byKind[c.section+" "+c.kind] += c.bytes
	}
	t.Logf("resident KiB by what holds it:")
	for _, kv := range sortedDesc(byKind) {
		if kv.v >= 16*1024 {
			t.Logf("  %-40s %8d", kv.k, kv.v/1024)
		}
	}

	byPkg, byMod := map[string]int{}, map[string]int{}
	byPkgSec := map[string]map[string]int{}
	for _, c := range charged {
		byPkg[c.pkg] += c.bytes
		byMod[moduleOf(c.pkg)] += c.bytes
		if byPkgSec[c.pkg] == nil {
			byPkgSec[c.pkg] = map[string]int{}
		}
		byPkgSec[c.pkg][c.section] += c.bytes
	}
	t.Logf("top %d packages by resident KiB (text / pclntab / rodata / data):", top)
	for i, kv := range sortedDesc(byPkg) {
		if i == top {
			break
		}
		s := byPkgSec[kv.k]
		t.Logf("  %6d  %5d %5d %5d %5d  %s", kv.v/1024, s[".text"]/1024, s[".gopclntab"]/1024, s[".rodata"]/1024,
			(s[".data"]+s[".noptrdata"]+s[".bss"]+s[".noptrbss"])/1024, kv.k)
	}
	t.Logf("by module:")
	for i, kv := range sortedDesc(byMod) {
		if i == top {
			break
		}
		t.Logf("  %6d  %s", kv.v/1024, kv.k)
	}

	// The anonymous side: the largest anonymous mappings and the
	// runtime's account (heap in use after a GC, stacks).
	t.Logf("anonymous mappings over 256 KiB:")
	for _, m := range anonMappings(t, pid) {
		if m.rss >= 256 {
			t.Logf("  %-40s %6d KiB", m.name, m.rss)
		}
	}
	if msErr == nil {
		t.Logf("runtime: heap in use %d KiB (allocated %d KiB), stacks %d KiB, Sys %d KiB, %d goroutines, %d GCs",
			ms.HeapInuse/1024, ms.HeapAlloc/1024, ms.StackInuse/1024, ms.Sys/1024, ms.Goroutines, ms.NumGC)
	} else {
		t.Logf("no runtime figures: %v", msErr)
	}
}

const pageSize = 4096

// startIdleServer starts bin as the API server in a fresh HOME, runs `sky
// check` against it and waits for it to settle; it returns its pid and the
// port of its debug listener.
func startIdleServer(t *testing.T, bin string) (pid, debugPort int) {
	t.Helper()
	sky := testutil.SkyBinary(t)
	home := t.TempDir()
	port, debugPort := testutil.FreePort(t), testutil.FreePort(t)
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "USER=root", "LANG=C.UTF-8",
		fmt.Sprintf("SKYPILOT_API_SERVER_LOCAL_PORT=%d", port),
		"SKYGO_CATALOG_URL=http://127.0.0.1:1", // the built-in catalog, the hosted one out of reach
		fmt.Sprintf("%s=127.0.0.1:%d", server.EnvDebugAddr, debugPort),
	}
	srv := exec.Command(bin, "api", "start", "--foreground", "--port", strconv.Itoa(port))
	srv.Env = env
	var log bytes.Buffer
	srv.Stdout, srv.Stderr = &log, &log
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = srv.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = srv.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/health", port))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not answer on port %d in 30 s\n%s", port, log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	check := exec.Command(sky, "check")
	check.Env = env
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("sky check: %v\n%s", err, out)
	}
	time.Sleep(2 * time.Second)
	return srv.Process.Pid, debugPort
}

// residentRange is a run of a mapping of the binary with its resident
// pages: present[i] is page i of [start, end).
type residentRange struct {
	start, end uint64
	present    []bool
	pages      int
}

// residentPages reads /proc/PID/maps for the mappings of bin's file and
// the anonymous mapping just after its last one (bss), and
// /proc/PID/pagemap for which of their pages are present.
func residentPages(pid int, bin string) ([]residentRange, error) {
	abs, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return nil, err
	}
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	pm, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pm.Close()
	var out []residentRange
	var lastEnd uint64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		var lo, hi uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			return nil, err
		}
		mine := len(f) >= 6 && f[5] == abs
		bss := len(f) == 5 && lo == lastEnd && lastEnd != 0 // the binary's bss follows its data
		if !mine && !bss {
			continue
		}
		if mine {
			lastEnd = hi
		} else {
			lastEnd = 0
		}
		n := int((hi - lo) / pageSize)
		buf := make([]byte, 8*n)
		if _, err := pm.ReadAt(buf, int64(lo/pageSize*8)); err != nil && err != io.EOF {
			return nil, fmt.Errorf("pagemap: %w", err)
		}
		r := residentRange{start: lo, end: hi, present: make([]bool, n)}
		for i := range n {
			if binary.LittleEndian.Uint64(buf[8*i:])&(1<<63) != 0 {
				r.present[i] = true
				r.pages++
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no mapping of %s in pid %d", abs, pid)
	}
	return out, nil
}

// span is a labelled range of the image.
type span struct {
	lo, hi  uint64
	section string
	kind    string // "code", "type", "string", "func record", ...
	pkg     string
}

// charge is resident bytes of one span.
type charge struct {
	section, kind, pkg string
	bytes              int
}

type section struct {
	name     string
	addr     uint64
	size     int
	contents []byte
}

type image struct {
	sections []section
	spans    []span // sorted by lo, not overlapping
}

func sum(cs []charge) int {
	n := 0
	for _, c := range cs {
		n += c.bytes
	}
	return n
}

// charge splits the resident pages over the spans; bytes of a resident
// page that no span covers go to its section as "unlabelled".
func (img *image) charge(res []residentRange) []charge {
	var out []charge
	for _, r := range res {
		for i, ok := range r.present {
			if !ok {
				continue
			}
			lo := r.start + uint64(i)*pageSize
			hi := lo + pageSize
			covered := uint64(0)
			// First span ending after lo.
			k, _ := slices.BinarySearchFunc(img.spans, lo, func(s span, a uint64) int { return cmp.Compare(s.hi, a+1) })
			for ; k < len(img.spans) && img.spans[k].lo < hi; k++ {
				s := img.spans[k]
				o := min(s.hi, hi) - max(s.lo, lo)
				if s.hi <= lo || o == 0 {
					continue
				}
				covered += o
				out = append(out, charge{s.section, s.kind, s.pkg, int(o)})
			}
			if covered < pageSize {
				out = append(out, charge{img.sectionAt(lo), "unlabelled", "<unlabelled>", int(pageSize - covered)})
			}
		}
	}
	return out
}

func (img *image) sectionAt(a uint64) string {
	for _, s := range img.sections {
		if a >= s.addr && a < s.addr+uint64(s.size) {
			return s.name
		}
	}
	return "<between sections>"
}

// loadImage labels the binary's loaded bytes.
func loadImage(bin string) (*image, error) {
	f, err := elf.Open(bin)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img := &image{}
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Size == 0 {
			continue
		}
		sec := section{name: s.Name, addr: s.Addr, size: int(s.Size)}
		if s.Type != elf.SHT_NOBITS {
			if sec.contents, err = s.Data(); err != nil {
				return nil, err
			}
		}
		img.sections = append(img.sections, sec)
	}
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s has no symbol table: build it without -s (SKYGO_RSS_BINARY): %w", bin, err)
	}
	symAddr := map[string]uint64{}
	var spans []span
	for _, s := range syms {
		symAddr[s.Name] = s.Value
		if s.Size == 0 || s.Section == elf.SHN_UNDEF || int(s.Section) >= len(f.Sections) {
			continue
		}
		sec := f.Sections[s.Section].Name
		kind := "code"
		if sec != ".text" {
			kind = "data"
		}
		if sec == ".gopclntab" {
			continue // labelled record by record below
		}
		spans = append(spans, span{s.Value, s.Value + s.Size, sec, kind, pkgOf(s.Name)})
	}
	// The aggregate symbols: type descriptors and string bytes carry no
	// symbol of their own in the table.
	typesLo, stringsLo, stringsHi := symAddr["type:*"], symAddr["go:string.*"], symAddr["go:funcdesc"]
	if stringsLo != 0 && stringsHi > stringsLo {
		spans = append(spans, span{stringsLo, stringsHi, ".rodata", "string bytes", "<strings>"})
	}
	if typesLo != 0 && stringsLo > typesLo {
		ts, err := typeSpans(f, typesLo, stringsLo)
		if err != nil {
			return nil, err
		}
		spans = append(spans, ts...)
	}
	ps, err := pclnSpans(img, symAddr)
	if err != nil {
		return nil, err
	}
	spans = append(spans, ps...)
	// Spans do not overlap but for markers and outer symbols: where they
	// do, a byte goes to the span that starts first.
	slices.SortStableFunc(spans, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
	var clean []span
	for _, s := range spans {
		if n := len(clean); n > 0 && clean[n-1].hi > s.lo {
			if clean[n-1].hi >= s.hi {
				continue
			}
			s.lo = clean[n-1].hi
		}
		clean = append(clean, s)
	}
	img.spans = clean
	return img, nil
}

// typeSpans labels the type descriptors in [lo, hi) by the DWARF entries
// whose DW_AT_go_runtime_type points at them; a descriptor extends to the
// next one.
func typeSpans(f *elf.File, lo, hi uint64) ([]span, error) {
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("no DWARF (build without -w): %w", err)
	}
	const attrGoRuntimeType = dwarf.Attr(0x2904)
	type typ struct {
		addr uint64
		name string
	}
	var ts []typ
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		// The attribute holds the offset from runtime.types.
		v, ok := e.Val(attrGoRuntimeType).(uint64)
		v += lo
		if !ok || v >= hi {
			continue
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		ts = append(ts, typ{v, name})
	}
	slices.SortFunc(ts, func(a, b typ) int { return cmp.Compare(a.addr, b.addr) })
	ts = slices.CompactFunc(ts, func(a, b typ) bool { return a.addr == b.addr })
	var out []span
	for i, t := range ts {
		end := hi
		if i+1 < len(ts) {
			end = ts[i+1].addr
		}
		out = append(out, span{t.addr, end, ".rodata", "type", pkgOf(t.name)})
	}
	return out, nil
}

// pclnSpans labels .gopclntab: each function's record (_func with its
// pcdata and funcdata offsets), name, pc-value tables and funcdata (stack
// maps, inlining trees in go:func.*) are charged to the function's package.
func pclnSpans(img *image, symAddr map[string]uint64) ([]span, error) {
	var pcln section
	for _, s := range img.sections {
		if s.name == ".gopclntab" {
			pcln = s
		}
	}
	if pcln.contents == nil {
		return nil, fmt.Errorf("no .gopclntab")
	}
	b := pcln.contents
	u64 := func(o int) uint64 { return binary.LittleEndian.Uint64(b[o:]) }
	u32 := func(o int) uint32 { return binary.LittleEndian.Uint32(b[o:]) }
	// pcHeader: magic, pads, minLC, ptrSize (8 bytes); nfunc, nfiles,
	// (unused), funcnameOffset, cuOffset, filetabOffset, pctabOffset,
	// pclnOffset.
	nfunc := int(u64(8))
	nameOff, cuOff, fileOff, pctabOff, pclnOff := int(u64(32)), int(u64(40)), int(u64(48)), int(u64(56)), int(u64(64))
	gofunc := symAddr["go:func.*"]
	base := pcln.addr
	var out []span
	add := func(lo, hi int, kind, pkg string) {
		if hi > lo {
			out = append(out, span{base + uint64(lo), base + uint64(hi), ".gopclntab", kind, pkg})
		}
	}
	add(0, nameOff, "header", "<pclntab>")
	add(cuOff, pctabOff, "file tables", "<pclntab files>")
	_ = fileOff

	type ref struct {
		off int
		pkg string
	}
	var names, pcs, fds, recs []ref
	ftab := pclnOff
	for i := range nfunc {
		foff := pclnOff + int(u32(ftab+8*i+4))
		recs = append(recs, ref{foff, ""})
		nOff := int(int32(u32(foff + 4)))
		nameStart := nameOff + nOff
		end := bytes.IndexByte(b[nameStart:], 0)
		name := string(b[nameStart : nameStart+end])
		pkg := pkgOf(name)
		recs[len(recs)-1].pkg = pkg
		names = append(names, ref{nameStart, pkg})
		for _, o := range []int{16, 20, 24} { // pcsp, pcfile, pcln
			if v := u32(foff + o); v != 0 {
				pcs = append(pcs, ref{pctabOff + int(v), pkg})
			}
		}
		npcdata := int(u32(foff + 28))
		nfuncdata := int(b[foff+43])
		for j := range npcdata {
			if v := u32(foff + 44 + 4*j); v != 0 {
				pcs = append(pcs, ref{pctabOff + int(v), pkg})
			}
		}
		for j := range nfuncdata {
			if v := u32(foff + 44 + 4*npcdata + 4*j); v != ^uint32(0) && gofunc != 0 {
				fds = append(fds, ref{int(gofunc-base) + int(v), pkg})
			}
		}
	}
	add(pclnOff, pclnOff+8*(nfunc+1), "function index", "<pclntab index>")
	// Each referenced offset extends to the next one (the tables are
	// packed; a shared table goes to the first function that names it).
	spread := func(rs []ref, limit int, kind string) {
		slices.SortStableFunc(rs, func(a, b ref) int { return cmp.Compare(a.off, b.off) })
		rs = slices.CompactFunc(rs, func(a, b ref) bool { return a.off == b.off })
		for i, r := range rs {
			end := limit
			if i+1 < len(rs) {
				end = rs[i+1].off
			}
			add(r.off, min(end, limit), kind, r.pkg)
		}
	}
	spread(names, cuOff, "func names")
	spread(pcs, pclnOff, "pc tables")
	findfunc := int(symAddr["runtime.findfunctab"] - base)
	if gofunc != 0 {
		spread(recs, int(gofunc-base), "func records")
		spread(fds, findfunc, "funcdata")
	} else {
		spread(recs, findfunc, "func records")
	}
	add(findfunc, pcln.size, "findfunctab", "<pclntab index>")
	return out, nil
}

// pkgOf is the Go package of a symbol or type name.
func pkgOf(name string) string {
	s := name
	for _, p := range []string{"type:", "go:itab.", "go:info.", "go:cuinfo.", "gclocals·", "go:"} {
		s = strings.TrimPrefix(s, p)
	}
	for {
		t := strings.TrimLeft(s, "*[]0123456789")
		t = strings.TrimPrefix(t, "map[")
		t = strings.TrimPrefix(t, "chan ")
		t = strings.TrimPrefix(t, "noalg.")
		if t == s {
			break
		}
		s = t
	}
	if strings.HasPrefix(s, "func(") || strings.HasPrefix(s, "struct {") || strings.HasPrefix(s, "interface {") {
		return "<unnamed " + strings.Fields(s)[0] + ">"
	}
	// The path ends at the last slash before any bracket; the package
	// name at the first dot after it.
	head := s
	if i := strings.IndexAny(head, "[("); i >= 0 {
		head = head[:i]
	}
	slash := strings.LastIndex(head, "/")
	dot := strings.Index(s[slash+1:], ".")
	if dot < 0 {
		return "<" + name + ">"
	}
	return s[:slash+1+dot]
}

// moduleOf groups packages: the standard library, a module's service
// packages (AWS), or a path's first three elements.
func moduleOf(pkg string) string {
	if strings.HasPrefix(pkg, "<") {
		return pkg
	}
	parts := strings.Split(pkg, "/")
	if !strings.Contains(parts[0], ".") {
		if parts[0] == "vendor" {
			return "std (vendor)"
		}
		return "std"
	}
	if len(parts) >= 5 && parts[1] == "aws" && parts[2] == "aws-sdk-go-v2" && parts[3] == "service" {
		return strings.Join(parts[:5], "/")
	}
	if len(parts) > 3 {
		parts = parts[:3]
	}
	if parts[0] == "github.com" && parts[1] == "skygo" {
		return strings.Join(strings.Split(pkg, "/")[:min(4, len(strings.Split(pkg, "/")))], "/")
	}
	return strings.Join(parts, "/")
}

type kv struct {
	k string
	v int
}

func sortedDesc(m map[string]int) []kv {
	var out []kv
	for k, v := range m {
		out = append(out, kv{k, v})
	}
	slices.SortFunc(out, func(a, b kv) int { return cmp.Or(cmp.Compare(b.v, a.v), cmp.Compare(a.k, b.k)) })
	return out
}

func smapsRollup(t *testing.T, pid int) map[string]int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			out[strings.TrimSuffix(f[0], ":")], _ = strconv.Atoi(f[1])
		}
	}
	return out
}

type mapping struct {
	name string
	rss  int // KiB
}

// anonMappings lists the anonymous mappings of pid with their RSS.
func anonMappings(t *testing.T, pid int) []mapping {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []mapping
	var cur *mapping
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			cur = nil
			if len(f) == 5 || (len(f) == 6 && strings.HasPrefix(f[5], "[")) {
				out = append(out, mapping{name: strings.Join(append([]string{f[0]}, f[5:]...), " ")})
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur != nil && f[0] == "Rss:" {
			cur.rss, _ = strconv.Atoi(f[1])
		}
	}
	slices.SortFunc(out, func(a, b mapping) int { return cmp.Compare(b.rss, a.rss) })
	return out
}

func memStats(port int) (server.MemStats, error) {
	var m server.MemStats
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/memstats", port))
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	return m, json.NewDecoder(resp.Body).Decode(&m)
}

package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/skygo/skygo/internal/api"
)

// EnvDebugAddr names a loopback address (127.0.0.1:6061) where the server
// also answers memory questions for benchmarks and investigations:
// GET /debug/memstats (runtime.MemStats after a GC, JSON) and
// GET /debug/heap (a pprof heap profile after a GC) and
// GET /debug/profile?seconds=N (a CPU profile), which `go tool pprof`
// reads, and GET /debug/goroutines (every goroutine's stack, as text). It is a developer's switch, not a setting: there is no config key,
// and an address that is not loopback is refused, since a heap profile
// shows what the server holds.
const EnvDebugAddr = "SKYGO_DEBUG_ADDR"

// MemStats is what GET /debug/memstats answers, in bytes.
type MemStats struct {
	HeapInuse  uint64 `json:"heap_inuse"`
	HeapAlloc  uint64 `json:"heap_alloc"`
	HeapSys    uint64 `json:"heap_sys"`
	StackInuse uint64 `json:"stack_inuse"`
	Sys        uint64 `json:"sys"`
	NumGC      uint32 `json:"num_gc"`
	Goroutines int    `json:"goroutines"`
}

// debugListen checks addr and listens on it.
func debugListen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: want host:port, e.g. 127.0.0.1:6061", EnvDebugAddr, addr)
	}
	if !api.IsLoopback(host) {
		return nil, fmt.Errorf("%s=%q: the debug listener only binds a loopback address (127.0.0.1, ::1 or localhost)", EnvDebugAddr, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvDebugAddr, err)
	}
	return ln, nil
}

// serveDebug answers the debug endpoints on ln until ctx ends.
func serveDebug(ctx context.Context, ln net.Listener, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/memstats", func(w http.ResponseWriter, r *http.Request) {
		// Two collections and a scavenge: the figure asked for is the
		// live heap, not what the last cycle had not yet swept.
		runtime.GC()
		debug.FreeOSMemory()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(MemStats{HeapInuse: m.HeapInuse, HeapAlloc: m.HeapAlloc, HeapSys: m.HeapSys,
			StackInuse: m.StackInuse, Sys: m.Sys, NumGC: m.NumGC, Goroutines: runtime.NumGoroutine()})
	})
	mux.HandleFunc("GET /debug/heap", func(w http.ResponseWriter, r *http.Request) {
		runtime.GC()
		w.Header().Set("Content-Type", "application/octet-stream")
		_ = pprof.Lookup("heap").WriteTo(w, 0)
	})
	mux.HandleFunc("GET /debug/goroutines", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = pprof.Lookup("goroutine").WriteTo(w, 1)
	})
	mux.HandleFunc("GET /debug/profile", func(w http.ResponseWriter, r *http.Request) {
		secs, err := strconv.Atoi(r.URL.Query().Get("seconds"))
		if err != nil || secs <= 0 || secs > 120 {
			http.Error(w, "want ?seconds=N, 1 to 120", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		if err := pprof.StartCPUProfile(w); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		select {
		case <-time.After(time.Duration(secs) * time.Second):
		case <-r.Context().Done():
		}
		pprof.StopCPUProfile()
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	log.Info("debug listener", "addr", ln.Addr().String())
	if err := hs.Serve(ln); err != nil && err != http.ErrServerClosed {
		log.Warn("debug listener stopped", "error", err)
	}
}

// debugAddr is the debug listener's address from the environment; "" when
// there is none.
func debugAddr() string { return os.Getenv(EnvDebugAddr) }

package lb

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// controlServer answers the controller on the unix socket.
type controlServer struct {
	b        *Balancer
	listen   string
	shutdown chan struct{} // closed by POST /shutdown
	once     sync.Once
}

func (c *controlServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /replicas", func(w http.ResponseWriter, r *http.Request) {
		var rs ReplicaSet
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&rs); err != nil {
			http.Error(w, "bad replica set: "+err.Error(), http.StatusBadRequest)
			return
		}
		if err := c.b.SetReplicas(rs); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		st := c.b.State()
		st.PID = os.Getpid()
		st.Listen = c.listen
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(st)
	})
	mux.HandleFunc("POST /shutdown", func(w http.ResponseWriter, r *http.Request) {
		c.once.Do(func() { close(c.shutdown) })
		w.WriteHeader(http.StatusOK)
	})
	return mux
}

// listenControl takes the control socket: a stale socket file (its load
// balancer is gone) is replaced, a live one is left alone.
func listenControl(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		if conn, err := net.DialTimeout("unix", path, time.Second); err == nil {
			conn.Close()
			return nil, fmt.Errorf("control socket %s is in use by another load balancer: stop it first", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	// The socket steers the service's traffic: only its owner may use it.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

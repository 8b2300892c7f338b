// Command replica is the service the SkyServe end-to-end tests run on
// their replicas: a small HTTP server whose answers say which replica and
// which version of the service gave them, so a test reading the answers
// through the load balancer can tell where each request went.
//
// Environment: PORT (default 8080), SKYPILOT_SERVE_REPLICA_ID (set by the
// controller), VERSION (from the task's envs), HEALTH_FAIL=1 (/health
// never passes) or HEALTH_FAIL_FILE (/health fails while that file
// exists), STARTUP_DELAY (a Go duration to wait before listening, as a
// server loading a model would), BIND_NODE_ADDR=1 (listen on the node's
// own address, the first of SKYPILOT_NODE_IPS, instead of 0.0.0.0: local
// nodes sharing the machine's network cannot all bind 0.0.0.0:PORT).
//
// Paths: / (the identity line), /health, /slow?ms=N (the identity line
// after N ms), /sse?n=N&ms=M (N server-sent events M ms apart), /ws (a
// WebSocket echo), /echo (method and body back, for any method).
package main

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	id := os.Getenv("SKYPILOT_SERVE_REPLICA_ID")
	ident := fmt.Sprintf("replica=%s version=%s", id, os.Getenv("VERSION"))

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Replica", id)
		fmt.Fprintln(w, ident)
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		if healthFails() {
			http.Error(w, "unhealthy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		select {
		case <-time.After(time.Duration(ms) * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		fmt.Fprintln(w, ident)
	})
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		ms, _ := strconv.Atoi(r.URL.Query().Get("ms"))
		if n <= 0 {
			n = 3
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		fl, _ := w.(http.Flusher)
		for i := range n {
			if i > 0 {
				select {
				case <-time.After(time.Duration(ms) * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, "id: %d\ndata: %s event=%d\n\n", i, ident, i)
			if fl != nil {
				fl.Flush()
			}
		}
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s\n", r.Method, ident, body)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) { wsEcho(w, r, ident) })

	if d, err := time.ParseDuration(os.Getenv("STARTUP_DELAY")); err == nil {
		time.Sleep(d)
	}
	host := "0.0.0.0"
	if os.Getenv("BIND_NODE_ADDR") == "1" {
		if f := strings.Fields(os.Getenv("SKYPILOT_NODE_IPS")); len(f) > 0 {
			host = f[0]
		}
	}
	addr := net.JoinHostPort(host, port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatalf("replica %s: %v", id, err)
	}
	// The line `sky serve logs SERVICE ID` is expected to show.
	fmt.Printf("%s listening on %s\n", ident, addr)
	log.Fatal(http.Serve(ln, mux))
}

func healthFails() bool {
	if os.Getenv("HEALTH_FAIL") == "1" {
		return true
	}
	if f := os.Getenv("HEALTH_FAIL_FILE"); f != "" {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	return false
}

// wsEcho is a WebSocket server (RFC 6455) for text and binary messages
// of one frame each, enough to prove the load balancer passes an upgrade
// through: it greets with the identity line, then echoes every message.
func wsEcho(w http.ResponseWriter, r *http.Request, ident string) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || r.Header.Get("Sec-WebSocket-Key") == "" {
		http.Error(w, "websocket upgrade expected", http.StatusBadRequest)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "no hijack", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
		base64.StdEncoding.EncodeToString(sum[:]))
	if err := writeFrame(rw.Writer, 1, []byte(ident)); err != nil {
		return
	}
	for {
		op, payload, err := readFrame(rw.Reader)
		if err != nil {
			return
		}
		switch op {
		case 8: // close
			_ = writeFrame(rw.Writer, 8, nil)
			return
		case 9: // ping
			op = 10
		}
		if err := writeFrame(rw.Writer, op, payload); err != nil {
			return
		}
	}
}

func readFrame(r *bufio.Reader) (byte, []byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[0]&0x80 == 0 {
		return 0, nil, errors.New("fragmented frames are not supported")
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return 0, nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	if n > 1<<20 {
		return 0, nil, errors.New("frame too large")
	}
	var mask [4]byte
	masked := h[1]&0x80 != 0
	if masked {
		if _, err := io.ReadFull(r, mask[:]); err != nil {
			return 0, nil, err
		}
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, nil, err
	}
	if masked {
		for i := range p {
			p[i] ^= mask[i%4]
		}
	}
	return h[0] & 0x0f, p, nil
}

func writeFrame(w *bufio.Writer, op byte, p []byte) error {
	_ = w.WriteByte(0x80 | op)
	switch {
	case len(p) < 126:
		_ = w.WriteByte(byte(len(p)))
	case len(p) <= 0xffff:
		_ = w.WriteByte(126)
		_ = binary.Write(w, binary.BigEndian, uint16(len(p)))
	default:
		_ = w.WriteByte(127)
		_ = binary.Write(w, binary.BigEndian, uint64(len(p)))
	}
	_, _ = w.Write(p)
	return w.Flush()
}

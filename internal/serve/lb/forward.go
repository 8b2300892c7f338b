package lb

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
)

// The common request (HTTP/1.x, no protocol upgrade, no request
// trailers) is forwarded here without httputil.ReverseProxy: the request
// goes on the wire straight from the client's, with no clone of it nor of
// its headers, and the answer's headers are handed to the client as they
// came. ReverseProxy keeps the rest (WebSocket and other upgrades,
// HTTP/2 clients, trailers), where its generality is worth its cost.

// plain reports whether r takes the direct path.
func plain(r *http.Request) bool {
	return r.ProtoMajor == 1 && len(r.Trailer) == 0 && r.Method != http.MethodConnect &&
		r.Header["Upgrade"] == nil
}

// hopHeader reports the headers that belong to one connection, not to
// the request or response (RFC 9110 7.6.1), besides those that
// Connection names.
func hopHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// listed reports whether Connection header values list k.
func listed(conn []string, k string) bool {
	for _, v := range conn {
		for v != "" {
			var tok string
			tok, v, _ = strings.Cut(v, ",")
			if strings.EqualFold(strings.TrimSpace(tok), k) {
				return true
			}
		}
	}
	return false
}

// forward proxies a plain request, its attempts through send.
func (b *Balancer) forward(w http.ResponseWriter, r *http.Request, rq *request) {
	res, err := b.send(rq, func(be *backend) (*http.Response, error) {
		return be.roundTrip(r.Context(), r, false, rq, b.streamTimeout, func(bw *bufio.Writer) error {
			return writeRequest(bw, r, be, rq)
		})
	})
	if err != nil {
		b.fail(w, r, rq.client, err)
		return
	}
	defer res.Body.Close()
	h := w.Header()
	conn := res.Header["Connection"]
	for k, vv := range res.Header {
		if hopHeader(k) || (conn != nil && listed(conn, k)) {
			continue
		}
		h[k] = vv
	}
	if len(res.Trailer) > 0 {
		keys := make([]string, 0, len(res.Trailer))
		for k := range res.Trailer {
			keys = append(keys, k)
		}
		h["Trailer"] = keys
	}
	w.WriteHeader(res.StatusCode)
	// A stream (no length, or server-sent events) goes out write by
	// write; an answer of known length leaves with the handler's end, in
	// one write when it is small.
	stream := res.ContentLength < 0 || strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")
	flusher, _ := w.(http.Flusher)
	if stream && flusher != nil {
		flusher.Flush()
	}
	buf := bufPool{}.Get()
	defer bufPool{}.Put(buf)
	for {
		n, rerr := res.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				// The client is gone; the deferred Close drops the
				// replica connection too.
				b.log.printf("499 client closed the connection during the response: %s %s", r.Method, r.URL.Path)
				b.count(499) // after the log line: whoever sees the count finds the line
				return
			}
			if stream && flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			// The answer broke off: abort, so the client sees a cut
			// response rather than a complete one (ServeHTTP says why).
			if !rq.timedOut && rq.client.Err() == nil {
				b.log.printf("replica %d cut the response to %s %s: %v", rq.served.info.ID, r.Method, r.URL.Path, rerr)
			}
			panic(http.ErrAbortHandler)
		}
	}
	for k, vv := range res.Trailer {
		h[k] = vv
	}
}

// writeRequest writes r as the request to replica be: the client's
// method, target and end-to-end headers, the replica as Host, the
// client in X-Forwarded-*, and the body (from the buffer when there is
// one, so every attempt sends it whole).
func writeRequest(bw *bufio.Writer, r *http.Request, be *backend, rq *request) error {
	bw.WriteString(r.Method)
	bw.WriteByte(' ')
	uri := r.RequestURI
	if uri == "" || uri[0] != '/' {
		uri = r.URL.RequestURI() // absolute-form target
	}
	bw.WriteString(be.path)
	bw.WriteString(uri)
	bw.WriteString(" HTTP/1.1\r\nHost: ")
	bw.WriteString(be.host)
	bw.WriteString("\r\n")
	conn := r.Header["Connection"]
	for k, vv := range r.Header {
		switch {
		case hopHeader(k), conn != nil && listed(conn, k),
			k == "Content-Length", k == "X-Forwarded-For", k == "X-Forwarded-Host", k == "X-Forwarded-Proto":
			if k == "Te" && listed(vv, "trailers") {
				bw.WriteString("Te: trailers\r\n")
			}
			continue
		}
		for _, v := range vv {
			bw.WriteString(k)
			bw.WriteString(": ")
			bw.WriteString(v)
			bw.WriteString("\r\n")
		}
	}
	bw.WriteString("X-Forwarded-For: ")
	for _, v := range r.Header["X-Forwarded-For"] {
		bw.WriteString(v)
		bw.WriteString(", ")
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		bw.WriteString(ip)
	} else {
		bw.WriteString(r.RemoteAddr)
	}
	bw.WriteString("\r\nX-Forwarded-Host: ")
	bw.WriteString(r.Host)
	if r.TLS != nil {
		bw.WriteString("\r\nX-Forwarded-Proto: https\r\n")
	} else {
		bw.WriteString("\r\nX-Forwarded-Proto: http\r\n")
	}
	switch {
	case rq.body != nil:
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.Itoa(len(rq.body)))
		bw.WriteString("\r\n\r\n")
		_, err := bw.Write(rq.body)
		return err
	case r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0:
		if r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
			bw.WriteString("Content-Length: 0\r\n")
		}
		_, err := bw.WriteString("\r\n")
		return err
	case r.ContentLength > 0:
		bw.WriteString("Content-Length: ")
		bw.WriteString(strconv.FormatInt(r.ContentLength, 10))
		bw.WriteString("\r\n\r\n")
		_, err := io.CopyN(bw, r.Body, r.ContentLength)
		return err
	default:
		// A large body of unknown length streams through chunked.
		bw.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		cw := httputil.NewChunkedWriter(bw)
		if _, err := io.Copy(cw, r.Body); err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
		_, err := bw.WriteString("\r\n")
		return err
	}
}

package server

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
)

// jobsQueueOp is the op whose result is also served as a stream (POST
// /jobs/queue/stream): a listing of every managed job is the one result
// that grows without bound.
const jobsQueueOp = "jobs.queue"

// streamHandler serves POST <op path>/stream: the op's Stream runs at
// once, in a slot of the short pool like the op's requests, and writes
// each value it emits as one line of JSON (application/x-ndjson) while
// it reads them. Unlike the op's request, nothing is stored: no record,
// no return value re-read and re-encoded by GET /api/get, and the
// client decodes each value once. An error before the first value is
// an ordinary error answer; one after it ends the body with the
// X-SkyGo-Stream-Error trailer, which a client must check, as it must
// check that the body ended cleanly.
func (s *Server) streamHandler(name string) handler {
	return func(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
		o, ok := s.ops["sky."+name]
		if !ok || o.Stream == nil {
			return nil, errf(http.StatusNotFound, "this API server does not stream %s", name)
		}
		// Whoever may not list by the op may not list by its stream.
		asOp := r.WithContext(r.Context())
		asOp.URL = &url.URL{Path: opPath(name)}
		if err := s.authorize(asOp, u.Role); err != nil {
			return nil, err
		}
		if err := o.Permit(&op.Request{User: u}); err != nil {
			return nil, errf(http.StatusForbidden, "%s", err.Error())
		}
		body, _, err := readOpBody(w, r)
		if err != nil {
			return nil, err
		}
		if err := s.exec.short.acquire(r.Context(), u.ID); err != nil {
			return nil, err
		}
		defer s.exec.short.release(u.ID)
		s.exec.short.busy.Add(1)
		defer s.exec.short.busy.Add(-1)
		// A client that stops reading (its output piped to a pager left
		// open) would hold the slot for as long: each write must be
		// taken within streamStall, or the stream ends.
		rc := http.NewResponseController(w)
		defer rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // the connection may be gone
		dst := &stallWriter{w: w, rc: rc, stall: s.streamStall}
		out := &ndjsonWriter{w: w, dst: dst}
		err = o.Stream(r.Context(), &op.Request{Name: "sky." + name, User: u, Body: body, Log: io.Discard}, out.emit)
		if err == nil && !out.started {
			out.start() // no value at all: an empty body
		}
		if !out.started {
			var oe *op.Error
			if errors.As(err, &oe) {
				return nil, errf(http.StatusBadRequest, "%s", oe.Message)
			}
			return nil, err
		}
		if err == nil {
			err = out.buf.Flush()
		}
		if err != nil {
			if dst.err != nil || clientGone(r, err) {
				// Nobody is reading any more: nothing to tell.
				s.log.Info("client went away or stopped reading before the end of its stream", "path", r.URL.Path, "reason", err.Error())
				return nil, nil
			}
			s.log.Error("stream ended early", "path", r.URL.Path, "err", err)
			_ = out.buf.Flush()
			w.Header().Set(api.HeaderStreamError, err.Error())
		}
		return nil, nil
	}
}

// streamStall is how long a streamed op's client may take no bytes
// before the server ends the stream.
const streamStall = 30 * time.Second

// stallWriter writes to a response, each write bounded by a deadline
// (where the connection takes one), and keeps the first write error.
type stallWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
	err   error
}

func (s *stallWriter) Write(p []byte) (int, error) {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.stall)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
		return 0, err
	}
	n, err := s.w.Write(p)
	if err != nil && s.err == nil {
		s.err = err
	}
	return n, err
}

// ndjsonWriter writes values as lines of JSON, buffered; the header is
// sent with the first.
type ndjsonWriter struct {
	w       http.ResponseWriter
	dst     io.Writer
	buf     *bufio.Writer
	enc     *json.Encoder
	started bool
}

func (n *ndjsonWriter) start() {
	n.w.Header().Set("Content-Type", "application/x-ndjson")
	n.w.Header().Set("Trailer", api.HeaderStreamError)
	n.w.WriteHeader(http.StatusOK)
	n.buf = bufio.NewWriterSize(n.dst, 64<<10)
	n.enc = json.NewEncoder(n.buf)
	// As the CLI prints JSON: '<', '>' and '&' as they are, so that it
	// can print a value without decoding and encoding it again.
	n.enc.SetEscapeHTML(false)
	n.started = true
}

func (n *ndjsonWriter) emit(v any) error {
	if !n.started {
		n.start()
	}
	return n.enc.Encode(v)
}

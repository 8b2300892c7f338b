package lb

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// The proxy's upstream side is its own small HTTP/1.1 client rather than
// http.Transport: the request is written and the answer read on the
// handler's goroutine, where http.Transport hands every request to a
// write goroutine and the answer back from a read goroutine. On a small
// machine whose cores the replicas share, those hand-offs cost more than
// the proxying itself.

const (
	maxIdlePerReplica = 1024
	idleTimeout       = 90 * time.Second
	dialTimeout       = 5 * time.Second
)

// upConn is one kept-alive connection to a replica.
type upConn struct {
	nc       net.Conn
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
}

// connPool keeps a replica's idle connections, most recently used last.
type connPool struct {
	mu     sync.Mutex
	idle   []*upConn
	closed bool
}

func (p *connPool) get(now time.Time) *upConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle[len(p.idle)-1] = nil
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(c.lastUsed) < idleTimeout {
			return c
		}
		c.nc.Close()
	}
	return nil
}

func (p *connPool) put(c *upConn) {
	c.lastUsed = time.Now()
	p.mu.Lock()
	if p.closed || len(p.idle) >= maxIdlePerReplica {
		p.mu.Unlock()
		c.nc.Close()
		return
	}
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

// close drops the idle connections and makes later puts close theirs:
// the replica left the ready set.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.nc.Close()
	}
}

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}
var writerPool = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 4096) }}

func (b *backend) dial(ctx context.Context) (*upConn, error) {
	d := net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", b.host)
	if err != nil {
		return nil, err
	}
	if b.scheme == "https" {
		host, _, _ := net.SplitHostPort(b.host)
		tc := tls.Client(nc, &tls.Config{ServerName: host, NextProtos: []string{"http/1.1"}})
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	br := readerPool.Get().(*bufio.Reader)
	br.Reset(nc)
	bw := writerPool.Get().(*bufio.Writer)
	bw.Reset(nc)
	return &upConn{nc: nc, br: br, bw: bw}, nil
}

// closeConn closes c for good, returning its buffers.
func closeConn(c *upConn) {
	c.nc.Close()
	c.br.Reset(nil)
	readerPool.Put(c.br)
	c.bw.Reset(nil)
	writerPool.Put(c.bw)
}

// errStreamTimeout is a response that outlived the stream timeout.
var errStreamTimeout = errors.New("stream timeout")

// roundTrip sends a request (write puts it on the wire, a fresh body
// each call) to the replica on a kept-alive connection or a new one, and
// returns its answer, whose body gives the connection back once read to
// the end. A kept-alive connection the replica closed meanwhile fails
// without an answer; the request then goes again on a new connection,
// when its body can be sent again. in is the request as the client sent
// it (its method says whether the answer has a body).
func (b *backend) roundTrip(ctx context.Context, in *http.Request, upgrade bool, rq *request, timeout time.Duration, write func(*bufio.Writer) error) (*http.Response, error) {
	for try := 0; ; try++ {
		var c *upConn
		// A body that cannot be sent twice goes on a new connection: a
		// kept-alive one may turn out closed, and then the body is spent.
		if rq.replay {
			c = b.pool.get(time.Now())
		}
		reused := c != nil
		if c == nil {
			var err error
			if c, err = b.dial(ctx); err != nil {
				return nil, err
			}
		}
		res, err := b.exchange(ctx, c, in, upgrade, rq, timeout, write)
		if err == nil {
			return res, nil
		}
		closeConn(c)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if !reused || try > 0 || !rq.replay {
			return nil, err
		}
	}
}

func (b *backend) exchange(ctx context.Context, c *upConn, in *http.Request, upgrade bool, rq *request, timeout time.Duration, write func(*bufio.Writer) error) (*http.Response, error) {
	if timeout > 0 && !upgrade {
		_ = c.nc.SetDeadline(time.Now().Add(timeout))
	}
	// The client leaving (or the context ending otherwise) unblocks the
	// reads and writes below and those of the body later.
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	fail := func(err error) (*http.Response, error) {
		stop()
		if errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
			return nil, errStreamTimeout
		}
		return nil, err
	}
	if err := write(c.bw); err != nil {
		return fail(err)
	}
	if err := c.bw.Flush(); err != nil {
		return fail(err)
	}
	var res *http.Response
	for {
		var err error
		if res, err = http.ReadResponse(c.br, in); err != nil {
			return fail(err)
		}
		// Informational answers (100 Continue, 103 Early Hints) precede
		// the real one; the client is not waiting for them.
		if res.StatusCode < 100 || res.StatusCode >= 200 || res.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	if res.StatusCode == http.StatusSwitchingProtocols {
		// The connection now belongs to the upgraded protocol: the proxy
		// copies both ways until one side closes.
		_ = c.nc.SetDeadline(time.Time{})
		res.Body = &upgraded{c: c, stop: stop}
		return res, nil
	}
	ub := &upBody{c: c, body: res.Body, pool: &b.pool, stop: stop, rq: rq, keep: !res.Close}
	if res.Body == http.NoBody {
		ub.finish(true)
		return res, nil
	}
	res.Body = ub
	return res, nil
}

var aLongTimeAgo = time.Unix(1, 0)

// upBody is a response body that gives its connection back to the pool
// once read to the end, and closes it when abandoned before.
type upBody struct {
	c    *upConn
	body io.ReadCloser
	pool *connPool
	stop func() bool
	rq   *request
	keep bool
	done bool
}

func (u *upBody) Read(p []byte) (int, error) {
	if u.done {
		return 0, io.EOF
	}
	n, err := u.body.Read(p)
	switch {
	case err == io.EOF:
		u.finish(true)
	case err != nil:
		if errors.Is(err, os.ErrDeadlineExceeded) && u.rq.client.Err() == nil {
			u.rq.timedOut = true
			err = errStreamTimeout
		}
		u.finish(false)
	}
	return n, err
}

func (u *upBody) Close() error {
	if !u.done {
		u.finish(false)
	}
	return nil
}

func (u *upBody) finish(ok bool) {
	u.done = true
	// stop reports false when the deadline was already poisoned.
	if u.stop() && ok && u.keep {
		_ = u.c.nc.SetDeadline(time.Time{})
		u.pool.put(u.c)
		return
	}
	closeConn(u.c)
}

// upgraded is the replica's side of an upgraded connection (a WebSocket),
// as the ReverseProxy wants it: readable, writable, closable.
type upgraded struct {
	c    *upConn
	stop func() bool
	once sync.Once
}

func (u *upgraded) Read(p []byte) (int, error)  { return u.c.br.Read(p) }
func (u *upgraded) Write(p []byte) (int, error) { return u.c.nc.Write(p) }
func (u *upgraded) Close() error {
	u.once.Do(func() {
		u.stop()
		u.c.nc.Close()
	})
	return nil
}

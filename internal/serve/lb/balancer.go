package lb

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Policies, as the service YAML's load_balancing_policy names them.
const (
	RoundRobin             = "round_robin"
	LeastLoad              = "least_load"
	InstanceAwareLeastLoad = "instance_aware_least_load"
)

// NoReadyReplicas is the body of the 503 a request gets when no replica
// is ready (and the service does not hold requests, or the hold ran out).
const NoReadyReplicas = `No ready replicas. Use "sky serve status [SERVICE_NAME]" to check the status of the replicas.`

const (
	maxAttempts = 3
	// downFor is how long a replica that refused or reset a connection is
	// passed over: long enough that steady traffic during a replica kill
	// stops paying a failed dial per request, short enough that a replica
	// that only blipped is back before the controller would notice.
	downFor = 2 * time.Second
	// maxReplayBody is the largest request body kept in memory so the
	// request can be retried on another replica.
	maxReplayBody = 1 << 20
)

var (
	errNoReplicas = errors.New("no ready replicas")
	errMaxRetries = fmt.Errorf("max retries %d exceeded", maxAttempts)
)

// backend is one replica as the proxy uses it. The same object lives on
// across pushes of the ready set for as long as the replica keeps its id
// and URL, and a request holds the object it was sent to, so its in-flight
// counter is decremented on the object it was incremented on whatever the
// controller pushes meanwhile (a counter keyed by id in a map that a push
// replaces is how such counters leak or go negative).
type backend struct {
	info      Replica
	scheme    string
	host      string
	path      string // the URL's path prefix, "" for a bare host:port
	inflight  atomic.Int64
	downUntil atomic.Int64 // unix nanoseconds
	pool      connPool
}

// set is one ready set, never changed once published. The set New
// starts with (generation 0, before any push) holds.
type set struct {
	gen      int64
	hold     bool
	known    bool       // a push made this set
	backends []*backend // shuffled once, for round_robin
	// changed is closed when a newer set replaces this one, waking the
	// requests held for a replica.
	changed chan struct{}
}

// Options configure a Balancer.
type Options struct {
	Policy        string
	StreamTimeout time.Duration // 0: responses are not bounded
	HoldTimeout   time.Duration
	Log           io.Writer // errors and ready-set changes; nil discards
}

// Balancer is the proxy: an http.Handler sending each request to a ready
// replica chosen by the policy.
type Balancer struct {
	policy        string
	streamTimeout time.Duration
	holdTimeout   time.Duration
	log           *rateLog

	cur     atomic.Pointer[set]
	rr      atomic.Uint64
	counts  counts
	waiting atomic.Int64
	closing chan struct{}
	closed  sync.Once

	mu      sync.Mutex // serialises SetReplicas; guards retired
	retired []*backend // left the ready set with requests still in flight

	failed [6]atomic.Int64 // statusIndex

	proxy *httputil.ReverseProxy
}

// New returns a Balancer whose replicas are not known yet: requests wait
// (up to the hold timeout) for the first SetReplicas.
func New(o Options) (*Balancer, error) {
	p, err := ParsePolicy(o.Policy)
	if err != nil {
		return nil, err
	}
	b := &Balancer{
		policy:        p,
		streamTimeout: o.StreamTimeout,
		holdTimeout:   o.HoldTimeout,
		log:           newRateLog(o.Log),
		closing:       make(chan struct{}),
	}
	// Until the controller's first push the replicas are unknown, not
	// absent: a load balancer just (re)started holds requests for them
	// rather than answering 503 for the moments before the push.
	b.cur.Store(&set{hold: true, changed: make(chan struct{})})
	b.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The replica sees its own address as Host (the transport sets
			// the URL per attempt) and the client's in X-Forwarded-*.
			pr.Out.Host = ""
			pr.SetXForwarded()
		},
		Transport: (*attempts)(b),
		// 0 still flushes every write of a stream (no length, or
		// server-sent events): ReverseProxy does so by itself. An answer
		// of known length then leaves in one write instead of two.
		FlushInterval: 0,
		BufferPool:    bufPool{},
		ErrorHandler:  b.proxyError,
		ErrorLog:      b.log.std(),
	}
	return b, nil
}

// ParsePolicy returns the canonical name of a load-balancing policy, ""
// meaning the default.
func ParsePolicy(p string) (string, error) {
	switch strings.ToLower(p) {
	case "", LeastLoad:
		return LeastLoad, nil
	case RoundRobin:
		return RoundRobin, nil
	case InstanceAwareLeastLoad:
		return InstanceAwareLeastLoad, nil
	}
	return "", fmt.Errorf("unknown load balancing policy %q: use %s, %s or %s", p, RoundRobin, LeastLoad, InstanceAwareLeastLoad)
}

// SetReplicas publishes a new ready set. Replicas keeping their id and
// URL keep their backend object (and with it their in-flight count and
// passive health).
func (b *Balancer) SetReplicas(rs ReplicaSet) error {
	parsed := make([]*backend, 0, len(rs.Replicas))
	for _, r := range rs.Replicas {
		u, err := url.Parse(r.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("replica %d: URL %q is not http(s)://host:port", r.ID, r.URL)
		}
		parsed = append(parsed, &backend{info: r, scheme: u.Scheme, host: u.Host, path: strings.TrimSuffix(u.Path, "/")})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	old := b.cur.Load()
	keep := map[string]*backend{}
	for _, o := range old.backends {
		keep[backendKey(o.info)] = o
	}
	for i, n := range parsed {
		if o, ok := keep[backendKey(n.info)]; ok {
			o.info = n.info // Version, TargetQPS may change in place
			parsed[i] = o
			delete(keep, backendKey(n.info))
		}
	}
	for _, o := range keep {
		o.pool.close()
		b.retired = append(b.retired, o)
	}
	b.pruneRetired()
	rand.Shuffle(len(parsed), func(i, j int) { parsed[i], parsed[j] = parsed[j], parsed[i] })
	next := &set{gen: rs.Generation, hold: rs.Hold, known: true, backends: parsed, changed: make(chan struct{})}
	b.cur.Store(next)
	close(old.changed)
	if len(old.backends) != len(parsed) || len(keep) > 0 || old.hold != next.hold {
		var ids []string
		for _, p := range parsed {
			ids = append(ids, fmt.Sprintf("%d=%s", p.info.ID, p.info.URL))
		}
		b.log.printf("ready replicas (generation %d, hold %v): %s", rs.Generation, rs.Hold, strings.Join(ids, " "))
	}
	return nil
}

func backendKey(r Replica) string { return fmt.Sprint(r.ID, " ", r.URL) }

// pruneRetired drops retired backends whose requests have all finished.
// Called with b.mu held.
func (b *Balancer) pruneRetired() {
	kept := b.retired[:0]
	for _, r := range b.retired {
		if r.inflight.Load() != 0 {
			kept = append(kept, r)
		}
	}
	clear(b.retired[len(kept):])
	b.retired = kept
}

// Close wakes every held request (they get the 503) and closes the idle
// connections to the replicas.
func (b *Balancer) Close() {
	b.closed.Do(func() { close(b.closing) })
	for _, r := range b.cur.Load().backends {
		r.pool.close()
	}
}

// pick chooses a replica of s by the policy, passing over those in tried
// and those recently found down, unless nothing else is left.
func (b *Balancer) pick(s *set, tried []*backend, now int64) *backend {
	n := len(s.backends)
	if n == 0 {
		return nil
	}
	if n == 1 {
		return s.backends[0]
	}
	var best, fallback *backend
	start := int(b.rr.Add(1) % uint64(n))
	for k := 0; k < n; k++ {
		c := s.backends[(start+k)%n]
		if contains(tried, c) {
			continue
		}
		if c.downUntil.Load() > now {
			if fallback == nil {
				fallback = c
			}
			continue
		}
		if b.policy == RoundRobin {
			return c
		}
		if best == nil || lighter(b.policy, c, best) {
			best = c
		}
	}
	if best != nil {
		return best
	}
	if fallback != nil {
		return fallback
	}
	// Every replica was tried: go round again rather than fail a request
	// that the set can still serve.
	return s.backends[start]
}

// lighter reports whether a carries less load than b.
func lighter(policy string, a, b *backend) bool {
	ia, ib := a.inflight.Load(), b.inflight.Load()
	if policy == InstanceAwareLeastLoad {
		// ia/qa < ib/qb without dividing.
		return float64(ia)*qps(b) < float64(ib)*qps(a)
	}
	return ia < ib
}

func qps(b *backend) float64 {
	if b.info.TargetQPS > 0 {
		return b.info.TargetQPS
	}
	return 1
}

func contains(list []*backend, b *backend) bool {
	for _, x := range list {
		if x == b {
			return true
		}
	}
	return false
}

// await returns once a replica is ready: at once, or, when the set says
// to hold, when one arrives within the hold timeout (and the client still
// waits).
func (b *Balancer) await(ctx context.Context) error {
	s := b.cur.Load()
	if len(s.backends) > 0 {
		return nil
	}
	if !s.hold {
		return errNoReplicas
	}
	b.waiting.Add(1)
	defer b.waiting.Add(-1)
	timer := time.NewTimer(b.holdTimeout)
	defer timer.Stop()
	for {
		select {
		case <-s.changed:
		case <-timer.C:
			return errNoReplicas
		case <-ctx.Done():
			return ctx.Err()
		case <-b.closing:
			return errNoReplicas
		}
		s = b.cur.Load()
		if len(s.backends) > 0 {
			return nil
		}
		if !s.hold {
			return errNoReplicas
		}
	}
}

// request is what one proxied request carries through the ReverseProxy
// to the transport and back: it rides in the request's context.
type request struct {
	context.Context
	client   context.Context // the client's context (Context, but for Value)
	served   *backend        // the replica whose counter this request holds
	body     []byte          // the buffered body, when it can be replayed
	replay   bool
	attempts int
	timedOut bool // the stream timeout cut the response
}

type requestKey struct{}

func (r *request) Value(k any) any {
	if k == (requestKey{}) {
		return r
	}
	return r.Context.Value(k)
}

func (b *Balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.counts.hit(time.Now().Unix())
	if err := b.await(r.Context()); err != nil {
		b.fail(w, r, r.Context(), err)
		return
	}
	rq := &request{client: r.Context(), replay: true}
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		if err := rq.buffer(r); err != nil {
			b.fail(w, r, r.Context(), err)
			return
		}
	}
	rq.Context = r.Context()
	defer func() {
		if rq.served != nil {
			rq.served.inflight.Add(-1)
		}
		if v := recover(); v != nil {
			// The response was cut short after its headers went out
			// (forward and ReverseProxy abort the handler): say why, once.
			if v == http.ErrAbortHandler {
				switch {
				case rq.client.Err() != nil:
					b.log.printf("499 client closed the connection during the response: %s %s", r.Method, r.URL.Path)
					b.count(499) // after the log line: whoever sees the count finds the line
				case rq.timedOut:
					b.count(504)
					b.log.printf("stream timeout (%s) cut the response short: %s %s", b.streamTimeout, r.Method, r.URL.Path)
				}
			}
			panic(v)
		}
	}()
	if plain(r) {
		b.forward(w, r, rq)
		return
	}
	b.proxy.ServeHTTP(w, r.WithContext(rq))
}

// buffer reads a small body into memory so the request can be sent again
// to another replica; a larger one is streamed and not retried.
func (rq *request) buffer(r *http.Request) error {
	if r.ContentLength > maxReplayBody {
		rq.replay = false
		return nil
	}
	buf := bytes.NewBuffer(make([]byte, 0, max(r.ContentLength, 512)))
	n, err := io.CopyN(buf, r.Body, maxReplayBody+1)
	if err != nil && err != io.EOF {
		return &bodyError{err}
	}
	if n > maxReplayBody {
		rq.replay = false
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf.Bytes()), r.Body), r.Body}
		return nil
	}
	body := buf.Bytes()
	rq.body = body
	// A chunked body, now whole, goes on with its length.
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r.Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// bodyError is a request body the client did not send whole.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading the request body: " + e.err.Error() }

// attempts is the proxy's transport: it picks the replica for each
// attempt and sends the request on to another one when a connection to
// the first fails before any of the response arrived.
type attempts Balancer

func (t *attempts) RoundTrip(req *http.Request) (*http.Response, error) {
	b := (*Balancer)(t)
	rq, _ := req.Context().Value(requestKey{}).(*request)
	if rq == nil {
		return nil, errors.New("request did not come through the balancer")
	}
	path, rawPath := req.URL.Path, req.URL.RawPath
	upgrade := req.Header.Get("Upgrade") != ""
	return b.send(rq, func(r *backend) (*http.Response, error) {
		cp := *req
		u := *req.URL
		u.Scheme, u.Host = r.scheme, r.host
		if r.path != "" {
			u.Path = r.path + path
			if rawPath != "" {
				u.RawPath = r.path + rawPath
			}
		}
		cp.URL = &u
		first := true
		write := func(bw *bufio.Writer) error {
			if !first {
				cp.Body = nil
				if rq.body != nil {
					cp.Body = io.NopCloser(bytes.NewReader(rq.body))
				}
			}
			first = false
			return cp.Write(bw)
		}
		if rq.attempts > 0 && rq.body != nil {
			first = false // the body of the first attempt is spent
		}
		return r.roundTrip(req.Context(), req, upgrade, rq, b.streamTimeout, write)
	})
}

// send picks a replica for each attempt and sends the request there
// with one, until one answers: a replica that could not be reached (or
// dropped the connection before answering) is passed over for a while
// and the request goes to another, if its body can be sent again.
func (b *Balancer) send(rq *request, one func(*backend) (*http.Response, error)) (*http.Response, error) {
	var tried [maxAttempts]*backend
	var lastErr error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 && !rq.replay {
			return nil, lastErr
		}
		now := time.Now().UnixNano()
		r := b.pick(b.cur.Load(), tried[:attempt], now)
		if r == nil {
			return nil, errNoReplicas
		}
		tried[attempt] = r
		r.inflight.Add(1)
		res, err := one(r)
		rq.attempts = attempt + 1
		if err == nil {
			rq.served = r
			return res, nil
		}
		r.inflight.Add(-1)
		if rq.client.Err() != nil || !connectionFailed(err) {
			return nil, err
		}
		r.downUntil.Store(now + int64(downFor))
		b.log.printf("replica %d (%s): %v; passing it over for %s", r.info.ID, r.info.URL, err, downFor)
		lastErr = err
	}
	return nil, errMaxRetries
}

// connectionFailed reports whether err means the replica could not be
// reached or dropped the connection before answering: the request never
// reached a handler that answered, so another replica may take it.
func connectionFailed(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// proxyError answers a request the proxy could not complete.
func (b *Balancer) proxyError(w http.ResponseWriter, r *http.Request, err error) {
	rq, _ := r.Context().Value(requestKey{}).(*request)
	client := r.Context()
	if rq != nil {
		client = rq.client
	}
	b.fail(w, r, client, err)
}

func (b *Balancer) fail(w http.ResponseWriter, r *http.Request, client context.Context, err error) {
	switch {
	case errors.Is(err, errNoReplicas):
		b.count(http.StatusServiceUnavailable)
		http.Error(w, NoReadyReplicas, http.StatusServiceUnavailable)
	case client.Err() != nil:
		// Nobody reads this answer; the status is for the record.
		b.log.printf("499 client closed the connection: %s %s", r.Method, r.URL.Path)
		b.count(499) // after the log line: whoever sees the count finds the line
		w.WriteHeader(499)
	case errors.As(err, new(*bodyError)):
		http.Error(w, err.Error(), http.StatusBadRequest)
	case errors.Is(err, errMaxRetries):
		b.count(http.StatusInternalServerError)
		http.Error(w, "Max retries 3 exceeded", http.StatusInternalServerError)
	case errors.Is(err, errStreamTimeout):
		b.count(http.StatusGatewayTimeout)
		b.log.printf("stream timeout (%s): %s %s", b.streamTimeout, r.Method, r.URL.Path)
		http.Error(w, "Stream timeout", http.StatusGatewayTimeout)
	default:
		b.count(http.StatusBadGateway)
		b.log.printf("502 %s %s: %v", r.Method, r.URL.Path, err)
		http.Error(w, "Bad gateway: "+err.Error(), http.StatusBadGateway)
	}
}

// The statuses the load balancer answers itself, counted for State.
var statusIndex = map[int]int{499: 0, 500: 1, 502: 2, 503: 3, 504: 4}

func (b *Balancer) count(status int) {
	if i, ok := statusIndex[status]; ok {
		b.failed[i].Add(1)
	}
}

// State reports what GET /state returns, less the process fields.
func (b *Balancer) State() State {
	s := b.cur.Load()
	st := State{
		Generation: s.gen,
		Known:      s.known,
		Requests:   b.counts.snapshot(time.Now().Unix()),
		Waiting:    int(b.waiting.Load()),
		InFlight:   map[int]int64{},
		Answered:   map[int]int64{},
	}
	for _, r := range s.backends {
		st.InFlight[r.info.ID] += r.inflight.Load()
	}
	b.mu.Lock()
	b.pruneRetired()
	for _, r := range b.retired {
		st.InFlight[r.info.ID] += r.inflight.Load()
	}
	b.mu.Unlock()
	for status, i := range statusIndex {
		if n := b.failed[i].Load(); n > 0 {
			st.Answered[status] = n
		}
	}
	return st
}

// bufPool lends the proxy its copy buffers.
type bufPool struct{}

var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func (bufPool) Get() []byte  { return *(copyBufs.Get().(*[]byte)) }
func (bufPool) Put(b []byte) { copyBufs.Put(&b) }

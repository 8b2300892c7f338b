// Package server is the SkyGo API server: every `sky` command is a client
// of it. Operations are registered by the caller; the server records each
// request in the state database, runs it on a bounded worker pool (long or
// short), and lets clients wait for it, stream its log, list and cancel
// requests (spec/api.md).
package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"golang.org/x/crypto/bcrypt"
	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/task"
	"github.com/skygo/skygo/internal/upload"
	"github.com/skygo/skygo/internal/version"
)

// DefaultHost is where a local server listens; --deploy binds 0.0.0.0.
const DefaultHost = "127.0.0.1"

// MinCompatibleAPIVersion is the oldest client API version served.
const MinCompatibleAPIVersion = 1

// RestartedError is the error message of requests a dead server left behind.
const RestartedError = "the API server was restarted while this request was running; run the command again"

// Paths are the server's files under ~/.sky/skygo/api_server.
type Paths struct {
	Dir         string
	Log         string // server.log
	PID         string // server.pid
	RequestLogs string // request_logs/<id>.log
	// RequestFiles holds request_files/<id>/: files an op left for its
	// client (op.Request.Files), served by GET /api/download.
	RequestFiles string
	AdminToken   string // admin_token (token-only servers, 0600)
	SkyLogs      string // ~/sky_logs, the only tree /api/stream serves by path
}

// PathsFor returns the server paths under a home directory.
func PathsFor(home string) Paths {
	dir := paths.ServerDir(home)
	return Paths{
		Dir:          dir,
		Log:          filepath.Join(dir, "server.log"),
		PID:          filepath.Join(dir, "server.pid"),
		RequestLogs:  filepath.Join(dir, "request_logs"),
		RequestFiles: filepath.Join(dir, "request_files"),
		AdminToken:   filepath.Join(dir, "admin_token"),
		SkyLogs:      filepath.Join(home, "sky_logs"),
	}
}

// Options configure a server. Zero values mean the defaults.
type Options struct {
	Host   string // 127.0.0.1; --deploy binds 0.0.0.0
	Port   int    // 46580 or SKYPILOT_API_SERVER_LOCAL_PORT
	Deploy bool   // team server: use the machine fully, bind all addresses
	// BasicAuth (--enable-basic-auth, ENABLE_BASIC_AUTH=true) and
	// ServiceAccounts (ENABLE_SERVICE_ACCOUNTS=true) are the auth modes.
	BasicAuth       bool
	ServiceAccounts bool
	// InitialBasicAuth is "user:password" for the first admin
	// (SKYPILOT_INITIAL_BASIC_AUTH).
	InitialBasicAuth string
	Home             string       // default $HOME
	Store            *state.Store // default: opened from DBURI
	DBURI            string       // `db` config; SKYPILOT_DB_CONNECTION_URI wins
	LongWorkers      int          // default from CPUs and memory
	ShortWorkers     int
	FollowWorkers    int          // log followers (op.Follow); default 64, 256 with Deploy
	Logger           *slog.Logger // default: JSON lines to server.log
	// WritePIDFile makes Serve write server.pid (what `sky api stop`
	// reads) and remove it on exit.
	WritePIDFile bool
	// UploadLimit bounds the files of one upload (default 4 GiB;
	// SKYGO_UPLOAD_LIMIT, e.g. 10GiB). UploadMaxAge is how long unused
	// uploads are kept (default 24h; the server program sets it from its
	// SKYGO_UPLOAD_MAX_AGE test knob).
	UploadLimit  int64
	UploadMaxAge time.Duration
	// Controllers builds the operations' long-lived loops (status
	// refresh, autostop, ...), given the controller metrics on the
	// server's registry and its logger. Serve runs them, beside the
	// server's own, and stops them on shutdown.
	Controllers func(m *controller.Metrics, log *slog.Logger) ([]*controller.Controller, error)
}

// EnvUploadLimit is the environment variable of the upload store's size
// limit.
const EnvUploadLimit = upload.EnvLimit

// ApplyEnv fills unset options from the environment, the way `sky api
// start` is configured in SkyPilot.
func (o *Options) ApplyEnv() error {
	if o.Port == 0 {
		p, err := api.PortFromEnv()
		if err != nil {
			return err
		}
		o.Port = p
	}
	basic, sa := api.AuthFromEnv()
	o.BasicAuth = o.BasicAuth || basic
	o.ServiceAccounts = o.ServiceAccounts || sa
	if o.InitialBasicAuth == "" {
		o.InitialBasicAuth = os.Getenv("SKYPILOT_INITIAL_BASIC_AUTH")
	}
	if v := os.Getenv(EnvUploadLimit); v != "" && o.UploadLimit == 0 {
		n, err := ParseByteSize(v)
		if err != nil {
			return fmt.Errorf("%s: %w", EnvUploadLimit, err)
		}
		o.UploadLimit = n
	}
	return nil
}

// Server is one API server.
type Server struct {
	opts Options
	// streamStall is how long a streamed op's client may take no bytes
	// before the stream is ended (streamHandler).
	streamStall time.Duration
	paths       Paths
	store       *state.Store
	ownStore    bool
	log         *slog.Logger
	logFile     *os.File
	ops         map[string]op.Op // by request name
	exec        *executor
	metrics     *metrics
	uploads     *upload.Store
	upMetrics   *uploadMetrics
	auth        authCache
	localUser   api.User
	// dummyHash is compared against for unknown users (see auth.go).
	dummyHash func() []byte
	mux       http.Handler
	closing   atomic.Bool
	stopExec  context.CancelFunc
	closeOnce sync.Once
	loops     *controller.Runner
	// id names this server among those sharing a database: host:port, so
	// the same server restarted recognises the requests it left behind.
	id string
	// openapi is the API description, built on first GET /api/openapi.json.
	openapi struct {
		once sync.Once
		doc  []byte
		err  error
	}
	// patterns are the fixed routes routes() registered, which the API
	// description must all describe.
	patterns []string
	// rbacCache holds the rbac: section of the server's config.
	rbacCache rbacCache
}

// New builds a server: it opens the store, checks the auth rules, fails
// requests a previous server left unfinished, and registers ops plus the
// built-in ones. It does not listen yet (see Serve).
func New(opts Options, ops []op.Op) (*Server, error) {
	ctx := context.Background()
	if opts.Home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("find home directory: %w", err)
		}
		opts.Home = h
	}
	if opts.Port == 0 {
		opts.Port = api.DefaultPort
	}
	if opts.Host == "" {
		opts.Host = DefaultHost
		if opts.Deploy {
			opts.Host = "0.0.0.0"
		}
	}
	if err := opts.CheckExposure(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, paths: PathsFor(opts.Home), ops: map[string]op.Op{}, localUser: LocalUser(), id: serverID(opts.Port),
		streamStall: streamStall}
	s.auth.m = map[string]authEntry{}
	for _, d := range []string{s.paths.Dir, s.paths.RequestLogs} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	s.log = opts.Logger
	if s.log == nil {
		f, err := os.OpenFile(s.paths.Log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open server log: %w", err)
		}
		s.logFile = f
		s.log = slog.New(slog.NewJSONHandler(f, nil))
	}
	s.store = opts.Store
	if s.store == nil {
		st, err := state.Open(ctx, state.ResolveURI(opts.DBURI), state.DefaultSQLitePath(opts.Home))
		if err != nil {
			s.closeLog()
			return nil, err
		}
		s.store, s.ownStore = st, true
	}
	fail := func(err error) (*Server, error) {
		s.Close()
		return nil, err
	}
	// Made on first use: a bcrypt hash costs ~50 ms of CPU, which every
	// server start (the first command of a session) would otherwise pay
	// whether or not anyone logs in with a password.
	s.dummyHash = sync.OnceValue(func() []byte {
		h, _ := bcrypt.GenerateFromPassword([]byte(randomHex(8)), bcrypt.DefaultCost)
		return h
	})

	long, short := defaultWorkers(opts.Deploy)
	if opts.LongWorkers > 0 {
		long = opts.LongWorkers
	}
	if opts.ShortWorkers > 0 {
		short = opts.ShortWorkers
	}
	follow := defaultFollowers(opts.Deploy)
	if opts.FollowWorkers > 0 {
		follow = opts.FollowWorkers
	}
	execCtx, stop := context.WithCancel(context.Background())
	s.stopExec = stop
	// Short requests (status, queues, logs) must answer at once whoever
	// else is busy, so on a server with users no one user may take all of
	// their slots; long ones take minutes whatever happens and share by
	// turns only. Without auth every caller is the same trusted party (the
	// name is whatever the client says), and a cap would only keep that
	// one user's own 49th log tail waiting while slots stand free.
	capped := func(n int) int {
		if s.authEnabled() {
			return perUserLimit(n)
		}
		return n
	}
	s.exec = &executor{store: s.store, log: s.log, logDir: s.paths.RequestLogs,
		long: newPool("long", long), short: newFairPool("short", short, capped(short)),
		follow:  newFairPool("follow", follow, capped(follow)),
		writes:  newFairPool("record-writes", recordWriteSlots, capped(recordWriteSlots)),
		baseCtx: execCtx, jobs: map[string]*job{}, attachGrace: defaultAttachGrace}
	s.exec.unfollowed = func(id, why string) {
		if _, err := s.cancel(context.Background(), id, "request cancelled: "+why, "reason", why); err != nil {
			s.log.Error("cancel unfollowed request", "request_id", id, "err", err)
		}
	}
	s.metrics = newMetrics(s.exec.long, s.exec.short, s.exec.follow)
	s.metrics.countCredentialChecks(s.auth.checks.Load)
	s.uploads = upload.NewStore(paths.Uploads(opts.Home), opts.UploadLimit)
	if opts.UploadMaxAge > 0 {
		s.uploads.MaxAge = opts.UploadMaxAge
	}
	s.upMetrics = newUploadMetrics(s.metrics.reg)
	s.exec.metrics = s.metrics
	s.store.SetObserver(s.metrics.observeDB)
	cm, err := controller.NewMetrics(s.metrics.reg)
	if err != nil {
		return fail(err)
	}
	cs := s.collectors(cm)
	if opts.Controllers != nil {
		more, err := opts.Controllers(cm, s.log)
		if err != nil {
			return fail(fmt.Errorf("controllers: %w", err))
		}
		cs = append(cs, more...)
	}
	s.loops = controller.NewRunner(cs...)

	for _, o := range append(builtinOps(), ops...) {
		if o.Name == "" || o.Run == nil || strings.ContainsAny(o.Name, "/ ") {
			return fail(fmt.Errorf("operation %q: needs a dotted name without slashes and a Run func", o.Name))
		}
		name := "sky." + o.Name
		if _, dup := s.ops[name]; dup {
			return fail(fmt.Errorf("operation %q registered twice", o.Name))
		}
		s.ops[name] = o
	}
	if err := s.ensureInitialAdmin(ctx); err != nil {
		return fail(err)
	}
	if err := s.ensureAdminToken(ctx); err != nil {
		return fail(err)
	}
	if ids, err := s.store.FailActiveRequests(ctx, s.id, encodeError(&op.Error{Type: "ServerRestarted", Message: RestartedError})); err != nil {
		return fail(fmt.Errorf("mark abandoned requests: %w", err))
	} else if len(ids) > 0 {
		s.log.Warn("marked requests of a previous server FAILED", "count", len(ids), "request_ids", ids)
	}
	routes := s.routes()
	// Every answer names its server, so a SkyGo client never mistakes a
	// SkyPilot server on the same port for its own.
	s.mux = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Server", version.ServerHeader())
		routes.ServeHTTP(w, r)
	})
	return s, nil
}

// Store is the server's database.
func (s *Server) Store() *state.Store { return s.store }

// Paths are the server's files.
func (s *Server) Paths() Paths { return s.paths }

// Addr is host:port the server is configured for.
func (s *Server) Addr() string {
	return net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
}

// Listen opens the configured address, with an error that says what to do
// when the port is taken.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.Addr())
	if err != nil {
		if errors.Is(err, syscallEADDRINUSE) {
			return nil, fmt.Errorf("cannot listen on %s: the port is already in use (another API server?); stop it with `sky api stop` or choose another port with --port or %s", s.Addr(), api.EnvPort)
		}
		return nil, fmt.Errorf("cannot listen on %s: %w", s.Addr(), err)
	}
	return ln, nil
}

// Handler is the HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.mux }

// Serve answers on ln until ctx is done, then shuts down: new calls get
// 503, running requests are cancelled and recorded FAILED, and the
// listener closes. It returns nil after a clean shutdown.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.opts.WritePIDFile {
		if err := os.WriteFile(s.paths.PID, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600); err != nil {
			return fmt.Errorf("write pid file: %w", err)
		}
		defer func() {
			// Remove it only if it is still ours (a new server may have
			// replaced it).
			if b, err := os.ReadFile(s.paths.PID); err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
				os.Remove(s.paths.PID)
			}
		}()
	}
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: 30 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	s.log.Info("API server listening", "addr", ln.Addr().String(), "pid", os.Getpid(), "version", version.Version,
		"db", s.store.Where(), "long_workers", s.exec.long.size, "short_workers", s.exec.short.size,
		"follow_workers", s.exec.follow.size, "short_per_user", s.exec.short.perUser, "follow_per_user", s.exec.follow.perUser,
		"basic_auth", s.opts.BasicAuth, "service_accounts", s.opts.ServiceAccounts)
	if err := s.loops.Start(ctx); err != nil {
		return err
	}
	if addr := debugAddr(); addr != "" {
		dln, err := debugListen(addr)
		if err != nil {
			s.stopLoops()
			return err
		}
		dctx, dstop := context.WithCancel(ctx)
		defer dstop()
		go serveDebug(dctx, dln, s.log)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.stopLoops()
		return err
	case <-ctx.Done():
	}
	s.closing.Store(true)
	s.log.Info("API server shutting down")
	s.stopLoops()
	s.abortRunning("the API server was stopped while this request was running; run the command again")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		hs.Close() // streams in follow mode do not end by themselves
	}
	return nil
}

// stopLoops cancels the controllers and waits for their reconciles,
// within the shutdown bound.
func (s *Server) stopLoops() {
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.loops.Stop(sctx); err != nil {
		s.log.Warn("stopping controllers", "err", err)
	}
}

// abortRunning records every active request of this process FAILED and
// cancels it.
func (s *Server) abortRunning(msg string) {
	errJSON := encodeError(&op.Error{Type: "ServerShutdown", Message: msg})
	for _, id := range s.exec.active() {
		_, _ = s.store.SetRequestStatus(context.Background(), id, state.ActiveRequestStatuses, api.RequestFailed, state.RequestUpdate{Error: &errJSON})
		s.exec.cancelAndWait(id, 5*time.Second)
	}
}

// Close stops workers and releases the store (if the server opened it).
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.stopLoops()
		if s.stopExec != nil {
			s.stopExec()
		}
		if s.exec != nil {
			s.exec.wg.Wait()
		}
		if s.ownStore {
			err = s.store.Close()
		}
		s.closeLog()
	})
	return err
}

func (s *Server) closeLog() {
	if s.logFile != nil {
		s.logFile.Close()
	}
}

// httpError is an error with an HTTP status and a public message.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func errf(code int, format string, a ...any) error {
	return &httpError{code: code, msg: fmt.Sprintf(format, a...)}
}

// handler is what routes implement: return a value to encode as JSON, or
// an error; writeErr maps it to a status.
type handler func(w http.ResponseWriter, r *http.Request, u api.User) (any, error)

func (s *Server) writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var he *httpError
	var ae *authError
	switch {
	case errors.As(err, &ae):
		if s.opts.BasicAuth {
			w.Header().Set("WWW-Authenticate", `Basic realm="SkyPilot API server"`)
		}
		s.writeJSON(w, http.StatusUnauthorized, map[string]string{"detail": ae.msg})
	case errors.As(err, &he):
		s.writeJSON(w, he.code, map[string]string{"detail": he.msg})
	case errors.Is(err, state.ErrNotFound):
		s.writeJSON(w, http.StatusNotFound, map[string]string{"detail": err.Error()})
	case errors.Is(err, state.ErrAmbiguous):
		s.writeJSON(w, http.StatusBadRequest, map[string]string{"detail": err.Error()})
	case clientGone(r, err):
		// A client that hangs up (Ctrl-C, a timeout, a killed script) is
		// normal on a busy server, not a fault of ours: no one is left to
		// answer, and an ERROR line would hide real ones.
		s.log.Info("client went away before its answer", "path", r.URL.Path, "reason", err.Error())
	default:
		s.log.Error("internal error", "path", r.URL.Path, "err", err)
		s.writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "internal server error: " + err.Error()})
	}
}

// clientGone says whether err comes from the client having closed its
// connection: the request's context ended (Go ends it when the
// connection closes), or the connection broke under a read or write.
func clientGone(r *http.Request, err error) bool {
	if r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return true
	}
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// wrap adds versioning, shutdown, authentication and error mapping.
func (s *Server) wrap(h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.checkVersion(w, r) {
			return
		}
		if s.closing.Load() {
			s.writeJSON(w, http.StatusServiceUnavailable, map[string]string{"detail": "Server is shutting down, please try again later."})
			return
		}
		u, err := s.authenticate(r)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if err := s.authorize(r, u.Role); err != nil {
			s.writeErr(w, r, err)
			return
		}
		v, err := h(w, r, u)
		if err != nil {
			s.writeErr(w, r, err)
			return
		}
		if v != nil {
			s.writeJSON(w, http.StatusOK, v)
		}
	})
}

// checkVersion sets the server's version headers and rejects clients
// older than MinCompatibleAPIVersion (400 version_mismatch).
func (s *Server) checkVersion(w http.ResponseWriter, r *http.Request) bool {
	w.Header().Set(api.HeaderAPIVersion, strconv.Itoa(version.APIVersion))
	w.Header().Set(api.HeaderVersion, version.Version)
	v := r.Header.Get(api.HeaderAPIVersion)
	if v == "" {
		return true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < MinCompatibleAPIVersion {
		s.writeJSON(w, http.StatusBadRequest, map[string]string{"error": "version_mismatch",
			"message": fmt.Sprintf("client API version %q is not supported by this server (API version %d, oldest supported %d); upgrade the client",
				v, version.APIVersion, MinCompatibleAPIVersion)})
		return false
	}
	return true
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	for name, o := range s.ops {
		mux.Handle("POST "+opPath(name), s.wrap(s.submitHandler(name, o)))
	}
	s.handle(mux, "GET /api/health", http.HandlerFunc(s.handleHealth))
	s.handle(mux, "GET "+PathOpenAPI, s.wrap(s.handleOpenAPI))
	s.handle(mux, "GET /api/get", s.wrap(s.handleGet))
	s.handle(mux, "GET /api/stream", s.wrap(s.handleStream))
	s.handle(mux, "GET /api/status", s.wrap(s.handleStatus))
	s.handle(mux, "GET /api/download", s.wrap(s.handleDownload))
	s.handle(mux, "POST /api/cancel", s.wrap(s.handleCancel))
	s.handle(mux, "POST "+opPath(jobsQueueOp)+"/stream", s.wrap(s.streamHandler(jobsQueueOp)))
	s.handle(mux, "GET /metrics", s.wrap(func(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
		s.metrics.handler().ServeHTTP(w, r)
		return nil, nil
	}))
	s.uploadRoutes(mux)
	s.handle(mux, "GET /users", s.wrap(s.handleListUsers))
	s.handle(mux, "POST /users/create", s.wrap(s.handleCreateUser))
	s.handle(mux, "POST /users/delete", s.wrap(s.handleDeleteUser))
	s.handle(mux, "GET /users/service-account-tokens", s.wrap(s.handleListTokens))
	s.handle(mux, "POST /users/service-account-tokens", s.wrap(s.handleCreateToken))
	s.handle(mux, "POST /users/service-account-tokens/delete", s.wrap(s.handleDeleteToken))
	return mux
}

// handle registers a fixed route (not an op) and remembers its pattern.
func (s *Server) handle(mux *http.ServeMux, pattern string, h http.Handler) {
	s.patterns = append(s.patterns, pattern)
	mux.Handle(pattern, h)
}

// maxBody bounds the body of every operation's POST: tasks travel as
// YAML strings (a task with thousands of envs is well under 1 MiB), the
// workdir and file mounts as uploads, which have their own limit. A body
// is read whole before it is queued, so the bound is what one request can
// make the server hold.
const maxBody = 32 << 20

// maxBodyValues bounds the JSON values of a body. A body is decoded
// (to redact it, then into the op's type) before any op can check what
// it asks for, and a value costs far more decoded than its bytes: 32 MiB
// of "{}," is eleven million maps, gigabytes. A real body holds a few
// thousand (a pipeline of 100 tasks with 1000 envs each: 100,000).
const maxBodyValues = 250_000

// jsonValues counts the values of a JSON text, about: the objects and
// arrays it opens and the commas between elements, outside strings. It
// reads the bytes once and allocates nothing.
func jsonValues(body []byte) int {
	n, inString, escaped := 0, false, false
	for _, c := range body {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[', ',':
			n++
		}
	}
	return n
}

func (s *Server) submitHandler(name string, o op.Op) handler {
	return func(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
		body, fields, err := readOpBody(w, r)
		if err != nil {
			return nil, err
		}
		body = redactCommand(fields, body)
		var decoded any
		if o.Decode != nil {
			if decoded, err = o.Decode(body); err != nil {
				return nil, errf(http.StatusBadRequest, "the body of POST %s: %v", r.URL.Path, err)
			}
		}
		cluster, _ := fields["cluster_name"].(string)
		if names, _ := fields["cluster_names"].([]any); cluster == "" && len(names) == 1 {
			// start/stop/down of one cluster are about it as much as a
			// launch is: `sky api status -c` and `sky logs --provision`
			// find them by it.
			cluster, _ = names[0].(string)
		}
		entry, _ := fields["entrypoint"].(string)
		rec := &api.Request{
			RequestID: uuid.NewString(), Name: name, Entrypoint: entry, RequestBody: redactSecrets(fields, body),
			Status: api.RequestPending, UserID: u.ID, UserName: u.Name,
			ScheduleType: o.Schedule.String(), ClusterName: cluster, ServerID: s.id,
		}
		logFile, err := os.OpenFile(filepath.Join(s.paths.RequestLogs, rec.RequestID+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create request log: %w", err)
		}
		if err := s.exec.writeRecord(r.Context(), u.ID, func() error { return s.store.CreateRequest(r.Context(), rec) }); err != nil {
			logFile.Close()
			return nil, err
		}
		req := &op.Request{ID: rec.RequestID, Name: name, User: u, Body: body, Decoded: decoded, ClusterName: cluster, Log: logFile,
			Files: filepath.Join(s.paths.RequestFiles, rec.RequestID)}
		s.exec.submit(rec, o, req, logFile)
		w.Header().Set(api.HeaderRequestID, rec.RequestID)
		w.Header().Set("Access-Control-Expose-Headers", api.HeaderRequestID)
		s.writeJSON(w, http.StatusOK, nil)
		return nil, nil
	}
}

// readOpBody reads the JSON object POSTed to an op, within the bounds
// every op has, and its top-level fields.
func readOpBody(w http.ResponseWriter, r *http.Request) ([]byte, map[string]any, error) {
	// MaxBytesReader, not a LimitReader: past the limit it stops
	// reading and has the connection closed instead of draining it.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, nil, errf(http.StatusRequestEntityTooLarge, "the body of POST %s is larger than the API server's limit of %d MiB per request; "+
			"put large data in files (workdir, file_mounts), which are uploaded, rather than in the task's envs or commands", r.URL.Path, maxBody>>20)
	}
	if err != nil {
		return nil, nil, errf(http.StatusBadRequest, "reading request body: %v", err)
	}
	if n := jsonValues(body); n > maxBodyValues {
		return nil, nil, errf(http.StatusRequestEntityTooLarge, "the body of POST %s holds about %d JSON values, more than the API server's limit of %d per request; "+
			"send fewer tasks, ids or names at a time", r.URL.Path, n, maxBodyValues)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		body = []byte("{}")
	}
	var fields map[string]any
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, nil, errf(http.StatusBadRequest, "the body of POST %s must be a JSON object: %v", r.URL.Path, err)
	}
	return body, fields, nil
}

// CheckExposure refuses a non-loopback address without authentication
// (api.CheckExposure, which `sky api start` checks before spawning a
// server, so the refusal is said once, by the command the user ran).
func (o Options) CheckExposure() error {
	return api.CheckExposure(o.Host, o.Deploy, o.BasicAuth || o.ServiceAccounts)
}

// isAdmin says whether u may see and touch everyone's requests. Without
// auth every caller is the machine's own user.
func (s *Server) isAdmin(u api.User) bool {
	return !s.authEnabled() || u.Role == state.RoleAdmin
}

// lookup finds a request the caller may see.
func (s *Server) lookup(ctx context.Context, u api.User, idOrPrefix string) (*api.Request, error) {
	rec, err := s.store.GetRequest(ctx, idOrPrefix)
	if err != nil {
		return nil, err
	}
	if !s.isAdmin(u) && rec.UserID != u.ID {
		// Say "not found", not "forbidden": ids of others are not theirs
		// to probe.
		return nil, fmt.Errorf("request %s: %w", idOrPrefix, state.ErrNotFound)
	}
	return rec, nil
}

// waitFinal blocks until the request is final or ctx ends.
func (s *Server) waitFinal(ctx context.Context, id string) (*api.Request, error) {
	for {
		if j := s.exec.jobFor(id); j != nil {
			select {
			case <-j.done:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		rec, err := s.store.GetRequest(ctx, id)
		if err != nil {
			return nil, err
		}
		if rec.Status.Final() {
			return rec, nil
		}
		// Not ours (or between states): poll.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	id := r.URL.Query().Get("request_id")
	if id == "" {
		return nil, errf(http.StatusBadRequest, "request_id is required")
	}
	rec, err := s.lookup(r.Context(), u, id)
	if err != nil {
		return nil, err
	}
	leave := s.exec.followRequest(rec.RequestID)
	rec, err = s.waitFinal(r.Context(), rec.RequestID)
	leave(err != nil && r.Context().Err() != nil)
	if err != nil {
		return nil, err
	}
	if rec.Status == api.RequestFailed {
		// SkyPilot's shape: 500 with the encoded request as detail.
		s.writeJSON(w, http.StatusInternalServerError, map[string]any{"detail": rec})
		return nil, nil
	}
	return rec, nil
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	q := r.URL.Query()
	f := state.RequestFilter{ClusterName: q.Get("cluster_name"), AllStatuses: parseBool(q.Get("all_status"))}
	for _, v := range q["request_ids"] {
		for _, id := range strings.Split(v, ",") {
			if id = strings.TrimSpace(id); id != "" {
				f.IDPrefixes = append(f.IDPrefixes, id)
			}
		}
	}
	if len(f.IDPrefixes) > 0 {
		f.AllStatuses = true // asking by id means "whatever its status"
	}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return nil, errf(http.StatusBadRequest, "limit=%q: want a non-negative integer", l)
		}
		f.Limit = n
	}
	f.UserID = q.Get("user_id")
	switch {
	case !s.authEnabled():
	case !s.isAdmin(u):
		if f.UserID != "" && f.UserID != u.ID {
			return nil, errf(http.StatusForbidden, "Forbidden: only admins can list other users' requests")
		}
		f.UserID = u.ID
	case !parseBool(q.Get("all_users")) && f.UserID == "":
		f.UserID = u.ID // admins see their own unless they ask for all
	}
	recs, err := s.store.ListRequests(r.Context(), f)
	if err != nil {
		return nil, err
	}
	if recs == nil {
		recs = []*api.Request{}
	}
	return recs, nil
}

// requestCancelBody is the body of POST /api/cancel.
type requestCancelBody struct {
	RequestIDs []string `json:"request_ids"`
	AllUsers   bool     `json:"all_users"`
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, u api.User) (any, error) {
	var b requestCancelBody
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&b); err != nil && !errors.Is(err, io.EOF) {
		return nil, errf(http.StatusBadRequest, "cancel body: %v", err)
	}
	if len(b.RequestIDs) > 0 && b.AllUsers {
		return nil, errf(http.StatusBadRequest, "give request_ids or all_users, not both")
	}
	ctx := r.Context()
	var targets []*api.Request
	if len(b.RequestIDs) > 0 {
		for _, id := range b.RequestIDs {
			// Another user's request is "not found", as /api/get says:
			// a non-admin learns nothing about ids that are not theirs.
			rec, err := s.lookup(ctx, u, id)
			if err != nil {
				return nil, err
			}
			targets = append(targets, rec)
		}
	} else {
		f := state.RequestFilter{UserID: u.ID}
		if b.AllUsers && s.isAdmin(u) {
			f.UserID = "" // a non-admin asking for all users cancels their own
		}
		recs, err := s.store.ListRequests(ctx, f)
		if err != nil {
			return nil, err
		}
		targets = recs
	}
	cancelled := []string{}
	for _, rec := range targets {
		ok, err := s.cancel(ctx, rec.RequestID, "request cancelled by "+u.Name, "by", u.Name)
		if err != nil {
			return nil, err
		}
		if ok {
			cancelled = append(cancelled, rec.RequestID)
		}
	}
	return cancelled, nil
}

// cancel records an active request CANCELLED with msg as its error, then
// stops its job and waits (bounded) for it, so that its processes are
// gone when the caller hears back. Recording first makes the outcome
// CANCELLED rather than the FAILED a killed operation would report. It
// says whether the request was still active; logArgs explain who asked.
func (s *Server) cancel(ctx context.Context, id, msg string, logArgs ...any) (bool, error) {
	errJSON := encodeError(&op.Error{Type: "RequestCancelled", Message: msg})
	ok, err := s.store.SetRequestStatus(ctx, id, state.ActiveRequestStatuses, api.RequestCancelled, state.RequestUpdate{Error: &errJSON})
	if err != nil || !ok {
		return false, err
	}
	s.exec.cancelAndWait(id, 10*time.Second)
	s.log.Info("request cancelled", append([]any{"request_id", id}, logArgs...)...)
	return true, nil
}

// handleHealth never touches the worker pools and, for authenticated
// callers, only the auth cache after the first call, so it answers at
// once however busy the server is.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if !s.checkVersion(w, r) {
		return
	}
	if s.closing.Load() {
		s.writeJSON(w, http.StatusServiceUnavailable, api.Health{Status: "unhealthy"})
		return
	}
	u, err := s.authenticate(r)
	if err != nil {
		if r.Header.Get(api.HeaderAPIVersion) == "" {
			// Orchestrator probes carry no version: just say we are up.
			s.writeJSON(w, http.StatusOK, api.Health{Status: "healthy"})
			return
		}
		s.writeJSON(w, http.StatusOK, api.Health{Status: "needs_auth", APIVersion: strconv.Itoa(version.APIVersion), Version: version.Version,
			BasicAuthEnabled: &s.opts.BasicAuth, ServiceAccountsEnabled: &s.opts.ServiceAccounts})
		return
	}
	s.writeJSON(w, http.StatusOK, api.Health{
		Status: "healthy", APIVersion: strconv.Itoa(version.APIVersion), Version: version.Version,
		VersionOnDisk: version.Version, Commit: version.Commit,
		BasicAuthEnabled: &s.opts.BasicAuth, ServiceAccountsEnabled: &s.opts.ServiceAccounts,
		User: &api.User{ID: u.ID, Name: u.Name, Role: u.Role},
	})
}

func parseBool(v string) bool {
	b, _ := strconv.ParseBool(v)
	return b
}

// redactCommand returns body with its entrypoint_command (the client's
// command line, kept as the cluster's last use and shown by status and
// the request list) cleared of secret values: those of --secret K=V and
// any the body's task carries. A client of any version, not only this
// CLI, may send it in clear, so the server does not trust it to. fields
// is updated to match. The other fields are kept byte for byte.
func redactCommand(fields map[string]any, body []byte) []byte {
	cmd, ok := fields["entrypoint_command"].(string)
	if !ok || cmd == "" {
		return body
	}
	var vals []string
	walkBody(fields, func(_ map[string]any, k string, sub any) bool {
		if y, ok := sub.(string); ok && yamlKeys[k] {
			vals = append(vals, yamlSecretValues(y)...)
			return true
		}
		m, ok := sub.(map[string]any)
		if !ok || k != "secrets" {
			return false
		}
		for _, val := range m {
			if str, ok := val.(string); ok {
				vals = append(vals, str)
			}
		}
		return true
	})
	clean := task.RedactCommandLine(cmd, vals...)
	if clean == cmd {
		return body
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return body
	}
	enc, err := json.Marshal(clean)
	if err != nil {
		return body
	}
	raw["entrypoint_command"] = enc
	out, err := json.Marshal(raw)
	if err != nil {
		return body
	}
	fields["entrypoint_command"] = clean
	return out
}

// walkBody calls visit on every key of every object in a decoded request
// body, at any depth; visit returns true when it dealt with the value, so
// the walk does not descend into it.
func walkBody(v any, visit func(parent map[string]any, key string, sub any) bool) {
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			if !visit(t, k, sub) {
				walkBody(sub, visit)
			}
		}
	case []any:
		for _, sub := range t {
			walkBody(sub, visit)
		}
	}
}

// yamlKeys are the body fields that hold a task YAML as the client sent
// it: `sky validate`'s file, the SDK's task_yaml and dag_yaml.
var yamlKeys = map[string]bool{"yaml": true, "task_yaml": true, "dag_yaml": true}

// redactYAMLSecrets returns a task YAML as a client sent it (`sky
// validate` sends the user's file unresolved) with the values of its
// secrets: sections replaced wherever they appear in the text. Text that
// is not YAML has no section to find and is kept.
func redactYAMLSecrets(y string) string {
	return task.NewRedactor(yamlSecretValues(y)...).Redact(y)
}

// yamlSecretValues are the values of the secrets: sections of every
// document of a task YAML.
func yamlSecretValues(y string) []string {
	var vals []string
	dec := yaml.NewDecoder(strings.NewReader(y))
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			break
		}
		if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			continue
		}
		top := doc.Content[0].Content
		for i := 0; i+1 < len(top); i += 2 {
			if top[i].Value != "secrets" || top[i+1].Kind != yaml.MappingNode {
				continue
			}
			sec := top[i+1].Content
			for j := 1; j < len(sec); j += 2 {
				if sec[j].Kind == yaml.ScalarNode {
					vals = append(vals, sec[j].Value)
				}
			}
		}
	}
	return vals
}

// redactSecrets is the body as it is recorded: every value under a
// "secrets" key (a task's secrets travel in the body so they can reach the
// nodes) is replaced, so request records never hold them.
func redactSecrets(fields map[string]any, body []byte) string {
	if !strings.Contains(string(body), `secrets`) {
		return string(body)
	}
	walkBody(fields, func(parent map[string]any, k string, sub any) bool {
		if m, ok := sub.(map[string]any); ok && k == "secrets" {
			for name := range m {
				m[name] = "<redacted>"
			}
			return true
		}
		if y, ok := sub.(string); ok && yamlKeys[k] {
			parent[k] = redactYAMLSecrets(y)
			return true
		}
		return false
	})
	out, err := json.Marshal(fields)
	if err != nil {
		return "{}"
	}
	return string(out)
}

// serverID is host:port of a server on this machine.
func serverID(port int) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

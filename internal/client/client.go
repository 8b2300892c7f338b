// Package client is the Go SDK for the SkyGo API server: submit a request,
// wait for it, stream its log. Every CLI command goes through it.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/version"
)

// Environment variables the client reads (SkyPilot's names); the local
// port is api.EnvPort.
const (
	EnvEndpoint = "SKYPILOT_API_SERVER_ENDPOINT"
	EnvToken    = "SKYPILOT_SERVICE_ACCOUNT_TOKEN"
)

// Options configure a client. Zero values mean "resolve as the CLI does".
type Options struct {
	// Endpoint overrides env SKYPILOT_API_SERVER_ENDPOINT and the endpoint
	// stored by `sky api login`.
	Endpoint string
	// Token is a service-account token; default env
	// SKYPILOT_SERVICE_ACCOUNT_TOKEN, then the one stored by login.
	Token string
	// NoStoredToken leaves out the token `sky api login` stored: a login
	// proves itself with the credentials it was given.
	NoStoredToken bool
	// Home is where ~/.sky lives; default $HOME.
	Home string
	// AutoStart starts a local server in the background when the endpoint
	// is local and nothing answers.
	AutoStart bool
	// StartCommand is the program and arguments that start a server in
	// the foreground; default: ServerBinary with `api start --foreground`.
	StartCommand []string
	// ServerBinary finds the server program (sky-server) when a server
	// must be started; it is asked only then. Default: this executable,
	// for a program that is itself a server binary.
	ServerBinary func() (string, error)
	// ServerEnv is added to the environment of a server started here.
	ServerEnv []string
	// HTTPClient defaults to one without an overall timeout (waits and
	// streams are long).
	HTTPClient *http.Client
}

// Client talks to one API server endpoint.
type Client struct {
	// Endpoint is the server URL without credentials.
	Endpoint string
	// Local is true when the endpoint is the default local server (which
	// the client may start).
	Local bool
	auth  string // Authorization header value, never printed
	home  string
	opts  Options
	hc    *http.Client
	base  *url.URL
	// ownChecked is set once a local endpoint proved to be a SkyGo
	// server; until then no operation is sent there.
	ownChecked atomic.Bool
}

// LoginConfig is the part of ~/.sky/config.yaml that `sky api login`
// writes.
type LoginConfig struct {
	Endpoint string
	Token    string
	// Source is the file ReadLogin found them in ("" when none).
	Source string
}

// ConfigPath is ~/.sky/config.yaml under home: the user's config, shared
// with SkyPilot, which SkyGo reads but never writes.
func ConfigPath(home string) string { return paths.Config(home) }

// LoginPath is where `sky api login` keeps the endpoint and token:
// SkyGo's own file, so a login never rewrites SkyPilot's config.yaml.
func LoginPath(home string) string { return filepath.Join(paths.Root(home), "login.yaml") }

// loginDoc is the shape of both files: SkyPilot's api_server keys.
type loginDoc struct {
	APIServer struct {
		Endpoint string `yaml:"endpoint"`
		Token    string `yaml:"service_account_token"`
	} `yaml:"api_server"`
}

// ReadLogin reads api_server.endpoint and api_server.service_account_token
// from SkyGo's login file when `sky api login` or `logout` wrote one,
// else from ~/.sky/config.yaml, so a SkyPilot user's endpoint carries
// over until they log in or out with SkyGo. Missing files are not errors.
func ReadLogin(home string) (LoginConfig, error) {
	for _, path := range []string{LoginPath(home), ConfigPath(home)} {
		b, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return LoginConfig{}, err
		}
		var doc loginDoc
		if err := yaml.Unmarshal(b, &doc); err != nil {
			return LoginConfig{}, fmt.Errorf("%s: %w", path, err)
		}
		return LoginConfig{Endpoint: doc.APIServer.Endpoint, Token: doc.APIServer.Token, Source: path}, nil
	}
	return LoginConfig{}, nil
}

// WriteLogin stores the endpoint and token in SkyGo's login file; a zero
// LoginConfig records a logout (which also stops the fallback to
// config.yaml). The file is 0600 because it may hold a token.
func WriteLogin(home string, lc LoginConfig) error {
	var doc loginDoc
	doc.APIServer.Endpoint, doc.APIServer.Token = lc.Endpoint, lc.Token
	out, err := yaml.Marshal(doc)
	if err != nil {
		return err
	}
	path := LoginPath(home)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, out, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// LocalEndpoint is http://127.0.0.1:<SKYPILOT_API_SERVER_LOCAL_PORT or 46580>.
func LocalEndpoint() (string, error) {
	port, err := api.PortFromEnv()
	if err != nil {
		return "", err
	}
	return "http://127.0.0.1:" + strconv.Itoa(port), nil
}

// New resolves the endpoint and credentials. It does not contact the
// server.
func New(opts Options) (*Client, error) {
	home := opts.Home
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("find home directory: %w", err)
		}
		home = h
	}
	login, err := ReadLogin(home)
	if err != nil {
		return nil, err
	}
	endpoint, local := opts.Endpoint, false
	if endpoint == "" {
		endpoint = strings.TrimSpace(os.Getenv(EnvEndpoint))
	}
	if endpoint == "" {
		endpoint = login.Endpoint
	}
	if endpoint == "" {
		if endpoint, err = LocalEndpoint(); err != nil {
			return nil, err
		}
		local = true
	}
	u, err := url.Parse(strings.TrimRight(endpoint, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("API server endpoint %q is not an http(s):// URL; fix %s or run `sky api login -e URL`", redact(endpoint), EnvEndpoint)
	}
	c := &Client{Local: local, home: home, opts: opts, hc: opts.HTTPClient}
	// user:password in the URL means basic auth; keep it out of Endpoint
	// so it is never printed.
	if u.User != nil {
		pw, _ := u.User.Password()
		c.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))
		u.User = nil
	}
	token := opts.Token
	if token == "" {
		token = os.Getenv(EnvToken)
	}
	if token == "" && !opts.NoStoredToken {
		token = login.Token
	}
	if token != "" {
		c.auth = "Bearer " + token
	}
	c.base, c.Endpoint = u, u.String()
	if c.hc == nil {
		c.hc = &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	return c, nil
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = url.User(u.User.Username())
	return u.String()
}

// HasCredentials reports whether the client will authenticate.
func (c *Client) HasCredentials() bool { return c.auth != "" }

// APIError is a non-2xx answer from the server.
type APIError struct {
	Status int
	Detail string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("API server answered %d: %s", e.Status, e.Detail)
}

// RequestError is a request that ended FAILED or CANCELLED.
type RequestError struct {
	RequestID string
	Status    string // FAILED or CANCELLED
	Type      string
	Message   string
}

func (e *RequestError) Error() string {
	if e.Status == "CANCELLED" {
		return fmt.Sprintf("request %s was cancelled", e.RequestID)
	}
	return fmt.Sprintf("%s: %s", e.Type, e.Message)
}

// ConnectionError is a server that could not be reached. Its message is
// one sentence naming the endpoint once: the transport's own error
// (`Post "URL/path": dial tcp ...`) repeats the URL, so only its cause
// is kept.
type ConnectionError struct {
	Endpoint string
	Err      error
}

func (e *ConnectionError) Error() string {
	return fmt.Sprintf("Could not connect to SkyPilot API server at %s (%s). Please ensure that the server is running. Try: curl %s/api/health",
		e.Endpoint, connCause(e.Err), e.Endpoint)
}

func (e *ConnectionError) Unwrap() error { return e.Err }

// connCause is the innermost useful text of a transport error: the
// syscall's words ("connection refused"), else the error without the
// request line url.Error puts in front.
func connCause(err error) string {
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// ErrServerNotRunning means nothing answers at a local endpoint (and the
// client was not allowed to start a server).
var ErrServerNotRunning = errors.New("SkyPilot API server is not running")

// ErrForeignServer means the local endpoint is answered by a server that
// is not SkyGo's (an installed SkyPilot's, most likely): SkyGo never sends
// it requests, since the two keep separate state.
var ErrForeignServer = errors.New("another API server answers on SkyGo's local port")

// checkOwnServer refuses a response on the local endpoint that did not
// come from a SkyGo server.
func (c *Client) checkOwnServer(resp *http.Response) error {
	if !c.Local {
		return nil
	}
	if strings.HasPrefix(resp.Header.Get("Server"), version.ServerHeaderPrefix) {
		c.ownChecked.Store(true)
		return nil
	}
	resp.Body.Close()
	port := c.base.Port()
	return fmt.Errorf("%w: a SkyPilot API server is running at %s. Stop it with SkyPilot's `sky api stop`, or give SkyGo another port: export %s=%d",
		ErrForeignServer, c.Endpoint, api.EnvPort, nextPort(port))
}

func nextPort(p string) int {
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n >= 65535 {
		return api.DefaultPort + 1
	}
	return n + 1
}

func (c *Client) newRequest(ctx context.Context, method, path string, q url.Values, body io.Reader) (*http.Request, error) {
	u := *c.base
	u.Path = strings.TrimRight(u.Path, "/") + path
	if q != nil {
		u.RawQuery = q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header.Set(api.HeaderAPIVersion, strconv.Itoa(version.APIVersion))
	req.Header.Set(api.HeaderVersion, version.Version)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	} else if name := osUserName(); name != "" {
		req.Header.Set(api.HeaderUserName, name)
	}
	return req, nil
}

// do sends one call; on a local endpoint with AutoStart it starts the
// server first if the connection is refused.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any) (*http.Response, error) {
	var data []byte
	raw, isRaw := body.(rawBody)
	switch {
	case isRaw:
		data = raw
	case body != nil:
		var err error
		if data, err = json.Marshal(body); err != nil {
			return nil, fmt.Errorf("encode request body: %w", err)
		}
	}
	send := func() (*http.Response, error) {
		var rd io.Reader
		if data != nil {
			rd = bytes.NewReader(data)
		}
		req, err := c.newRequest(ctx, method, path, q, rd)
		if err != nil {
			return nil, err
		}
		if isRaw {
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		return c.hc.Do(req)
	}
	if c.Local && !c.ownChecked.Load() {
		// A SkyPilot server on the port must never receive an operation
		// (it would run it against SkyPilot's state): ask who it is first.
		if _, err := c.Health(ctx); err != nil && !errors.Is(err, ErrServerNotRunning) {
			return nil, err
		}
	}
	resp, err := send()
	if err != nil && c.Local && isConnRefused(err) {
		if !c.opts.AutoStart {
			return nil, fmt.Errorf("%w at %s; start it with `sky api start`", ErrServerNotRunning, c.Endpoint)
		}
		if err := c.ensureServer(ctx); err != nil {
			return nil, err
		}
		resp, err = send()
	} else if err != nil && c.Local && c.opts.AutoStart && isConnReset(err) {
		// A reset call got no answer, so it is sent once more, after
		// waiting (under the start lock) for a server that answers.
		if err := c.ensureServer(ctx); err != nil {
			return nil, err
		}
		resp, err = send()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &ConnectionError{Endpoint: c.Endpoint, Err: err}
	}
	if err := c.checkOwnServer(resp); err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, decodeAPIError(resp)
	}
	return resp, nil
}

func decodeAPIError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var v struct {
		Detail  json.RawMessage `json:"detail"`
		Error   string          `json:"error"`
		Message string          `json:"message"`
	}
	detail := strings.TrimSpace(string(b))
	if json.Unmarshal(b, &v) == nil {
		switch {
		case v.Error == "version_mismatch":
			detail = v.Message
		case len(v.Detail) > 0:
			var s string
			if json.Unmarshal(v.Detail, &s) == nil {
				detail = s
			} else {
				detail = string(v.Detail)
			}
		}
	}
	if resp.StatusCode == http.StatusUnauthorized {
		detail += " (log in with `sky api login -e URL --token sky_...` or set " + EnvToken + ")"
	}
	return &APIError{Status: resp.StatusCode, Detail: detail}
}

// Do is a raw JSON call for endpoints without a typed method: body (if not
// nil) is sent as JSON and the answer decoded into out (if not nil).
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, nil, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

// An OpOption changes how one operation is sent.
type OpOption func(*opSettings)

type opSettings struct {
	config map[string]any
}

// WithConfig sends cfg with the operation as the client's config
// (SkyPilot's override_skypilot_config: --config, -w, the client's
// config files), which the server lays over its own for this request.
// A nil cfg sends none.
func WithConfig(cfg map[string]any) OpOption {
	return func(s *opSettings) { s.config = cfg }
}

// configKey is where a request body carries the client's config.
const configKey = "override_skypilot_config"

// opBody is body as sent for an operation: an empty object for none
// (JSON null), with the client's config added when there is one.
func opBody(body any, opts []OpOption) (json.RawMessage, error) {
	var s opSettings
	for _, o := range opts {
		o(&s)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode request body: %w", err)
	}
	if string(raw) == "null" {
		raw = []byte("{}")
	}
	if s.config == nil {
		return raw, nil
	}
	m := map[string]any{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("request body is not a JSON object: %w", err)
	}
	m[configKey] = s.config
	return json.Marshal(m)
}

// Submit starts the operation d describes (internal/apiop) with body and
// returns its request id at once.
func Submit[B, R any](ctx context.Context, c *Client, d op.Desc[B, R], body B, opts ...OpOption) (string, error) {
	return c.submit(ctx, d.Name, body, opts)
}

// SubmitEncoded is Submit with the body already encoded, as another
// client (the Python SDK) sends it: for a caller that must send the
// wire's exact keys rather than what a B encodes to.
func SubmitEncoded[B, R any](ctx context.Context, c *Client, d op.Desc[B, R], body json.RawMessage) (string, error) {
	return c.submit(ctx, d.Name, body, nil)
}

// Call submits the operation d describes and waits for its result.
func Call[B, R any](ctx context.Context, c *Client, d op.Desc[B, R], body B, opts ...OpOption) (R, error) {
	var res R
	id, err := c.submit(ctx, d.Name, body, opts)
	if err != nil {
		return res, err
	}
	err = c.Wait(ctx, id, &res)
	return res, err
}

func (c *Client) submit(ctx context.Context, name string, body any, opts []OpOption) (string, error) {
	data, err := opBody(body, opts)
	if err != nil {
		return "", err
	}
	resp, err := c.do(ctx, http.MethodPost, op.Path(name), nil, data)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	id := resp.Header.Get(api.HeaderRequestID)
	if id == "" {
		return "", fmt.Errorf("API server at %s accepted %s but sent no request id", c.Endpoint, name)
	}
	return id, nil
}

// Get blocks until the request is final and returns its record. A FAILED
// or CANCELLED request is returned together with a *RequestError.
func (c *Client) Get(ctx context.Context, id string) (*api.Request, error) {
	resp, err := c.do(ctx, http.MethodGet, "/api/get", url.Values{"request_id": {id}}, nil)
	var rec api.Request
	if err != nil {
		// FAILED comes back as 500 with the record as detail.
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusInternalServerError && json.Unmarshal([]byte(ae.Detail), &rec) == nil && rec.RequestID != "" {
			return &rec, requestError(&rec)
		}
		return nil, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&rec); err != nil {
		return nil, fmt.Errorf("decode request %s: %w", id, err)
	}
	return &rec, requestError(&rec)
}

func requestError(r *api.Request) error {
	if r.Status != api.RequestFailed && r.Status != api.RequestCancelled {
		return nil
	}
	e := &RequestError{RequestID: r.RequestID, Status: string(r.Status), Type: "RequestCancelled", Message: "cancelled"}
	if r.Error != "" {
		var v struct{ Type, Message string }
		if json.Unmarshal([]byte(r.Error), &v) == nil {
			e.Type, e.Message = v.Type, v.Message
		}
	}
	return e
}

// Wait blocks until the request is final and decodes its return value into
// result (if not nil).
func (c *Client) Wait(ctx context.Context, id string, result any) error {
	rec, err := c.Get(ctx, id)
	if err != nil {
		return err
	}
	if result != nil && rec.ReturnValue != "" {
		if err := json.Unmarshal([]byte(rec.ReturnValue), result); err != nil {
			return fmt.Errorf("decode result of request %s: %w", id, err)
		}
	}
	return nil
}

// StreamOptions control Stream. Tail < 0 (or 0 when unset via the zero
// value, see TailAll) shows the whole log.
type StreamOptions struct {
	Follow bool
	Tail   int // lines from the end; 0 with AllLines unset means all
	// ServerLogs streams the server log instead of a request log.
	ServerLogs bool
	// LogPath streams a file under the server's ~/sky_logs instead (what
	// SkyPilot's `sky api logs -l` reads: a provision log, a job log).
	LogPath string
}

// Stream copies a request's log to w; with Follow it returns when the
// request is final. An empty id means the caller's latest request. It
// returns the id of the request streamed.
func (c *Client) Stream(ctx context.Context, id string, w io.Writer, opts StreamOptions) (string, error) {
	q := url.Values{"follow": {strconv.FormatBool(opts.Follow)}}
	if id != "" {
		q.Set("request_id", id)
	}
	if opts.LogPath != "" {
		q.Set("log_path", opts.LogPath)
	}
	if opts.Tail > 0 {
		q.Set("tail", strconv.Itoa(opts.Tail))
	}
	if opts.ServerLogs {
		q.Set("server_logs", "true")
	}
	resp, err := c.do(ctx, http.MethodGet, "/api/stream", q, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	got := resp.Header.Get(api.HeaderStreamRequestID)
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctx.Err() != nil {
			return got, ctx.Err()
		}
		return got, streamLost(got, id, err)
	}
	return got, nil
}

// Download writes one file a request left on the server (the files of
// `sky logs --sync-down`) to w.
func (c *Client) Download(ctx context.Context, requestID, path string, w io.Writer) error {
	resp, err := c.do(ctx, http.MethodGet, "/api/download", url.Values{"request_id": {requestID}, "path": {path}}, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("downloading %s of request %s: %w", path, requestID, err)
	}
	return nil
}

// streamLost explains a stream cut by the server: a bare "unexpected EOF"
// tells the user neither what happened nor that the request can be
// followed again once a server is back.
func streamLost(got, id string, err error) error {
	if got == "" {
		got = id
	}
	short := got
	if len(short) > 8 {
		short = short[:8]
	}
	return fmt.Errorf("the API server stopped (or the connection to it broke) while streaming the log of request %s (%w). "+
		"Start it again with `sky api start` (any sky command also starts a local one), "+
		"then re-attach with `sky api logs %s`", got, err, short)
}

// StatusOptions filter Status.
type StatusOptions struct {
	IDs         []string // ids or prefixes; any status
	AllStatus   bool     // include finished requests
	Limit       int
	ClusterName string
	AllUsers    bool // admins: everyone's requests
}

// Status lists requests, newest first.
func (c *Client) Status(ctx context.Context, o StatusOptions) ([]api.Request, error) {
	q := url.Values{}
	for _, id := range o.IDs {
		q.Add("request_ids", id)
	}
	if o.AllStatus {
		q.Set("all_status", "true")
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.ClusterName != "" {
		q.Set("cluster_name", o.ClusterName)
	}
	if o.AllUsers {
		q.Set("all_users", "true")
	}
	resp, err := c.do(ctx, http.MethodGet, "/api/status", q, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []api.Request
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode request list: %w", err)
	}
	return out, nil
}

// Cancel cancels the given requests, or with no ids all of the caller's
// (allUsers: everyone's, for admins). It returns the ids cancelled.
func (c *Client) Cancel(ctx context.Context, ids []string, allUsers bool) ([]string, error) {
	body := map[string]any{"request_ids": ids, "all_users": allUsers}
	if len(ids) == 0 {
		body["request_ids"] = nil
	}
	var out []string
	err := c.Do(ctx, http.MethodPost, "/api/cancel", body, &out)
	return out, err
}

// Health asks the server how it is (it never auto-starts one).
func (c *Client) Health(ctx context.Context) (*api.Health, error) {
	req, err := c.newRequest(ctx, http.MethodGet, "/api/health", nil, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if c.Local && (isConnRefused(err) || isConnReset(err)) {
			return nil, fmt.Errorf("%w at %s", ErrServerNotRunning, c.Endpoint)
		}
		return nil, &ConnectionError{Endpoint: c.Endpoint, Err: err}
	}
	if err := c.checkOwnServer(resp); err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, decodeAPIError(resp)
	}
	var h api.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return nil, fmt.Errorf("decode health of %s: %w", c.Endpoint, err)
	}
	return &h, nil
}

// ErrNoOpStream says the API server does not stream the operation (one
// from before POST <op path>/stream): ask for its pages instead.
var ErrNoOpStream = errors.New("the API server does not stream this operation")

// StreamOp runs the operation d describes at once as a stream (POST
// <its path>/stream) and hands each value of the answer, one line of
// JSON, to each, in order; a line is only valid until each returns. It
// fails with ErrNoOpStream, before any value, when the server does not
// stream d, and with the server's reason when the stream ended early.
func StreamOp[B, R any](ctx context.Context, c *Client, d op.Desc[B, R], body B, each func(line []byte) error, opts ...OpOption) error {
	return c.streamOp(ctx, d.Name, body, opts, each)
}

func (c *Client) streamOp(ctx context.Context, name string, body any, opts []OpOption, each func(line []byte) error) error {
	data, err := opBody(body, opts)
	if err != nil {
		return err
	}
	resp, err := c.do(ctx, http.MethodPost, op.Path(name)+"/stream", nil, data)
	if err != nil {
		var ae *APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return ErrNoOpStream
		}
		return err
	}
	defer resp.Body.Close()
	rd := bufio.NewReaderSize(resp.Body, 64<<10)
	var long []byte
	for {
		line, err := rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A value longer than the buffer: gather it.
			long = append(long, line...)
			continue
		}
		if long != nil {
			line, long = append(long, line...), nil
		}
		if err == io.EOF && len(line) == 0 {
			break
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // a value cut off without its newline
			}
			return fmt.Errorf("the stream of %s from %s broke off: %w", name, c.Endpoint, err)
		}
		if err := each(line[:len(line)-1]); err != nil {
			return err
		}
	}
	if msg := resp.Trailer.Get(api.HeaderStreamError); msg != "" {
		return fmt.Errorf("%s: the API server stopped: %s", name, msg)
	}
	return nil
}

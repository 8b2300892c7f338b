package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/apiop"
	"github.com/skygo/skygo/internal/client"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/proc"
	"github.com/skygo/skygo/internal/version"
)

// newAPICmd is the `sky api` group: start/stop the local server, inspect
// and cancel requests, log in to a remote server.
func newAPICmd(f *Factory) *cobra.Command {
	g := newGroupCmd("api", "Manage the SkyPilot API server.",
		newAPIStartCmd(f), newAPIStopCmd(f), newAPIStatusCmd(f), newAPIInfoCmd(f),
		newAPILogsCmd(f), newAPICancelCmd(f), newAPILoginCmd(f), newAPILogoutCmd(f),
		newAPIDebugSleepCmd(f))
	return g
}

// apiClient builds a client. Only commands that run work start a local
// server; `sky api status/info/logs/cancel` report that none runs instead,
// as SkyPilot's do.
func apiClient(f *Factory, autoStart bool) (*client.Client, error) {
	if autoStart && f.Client != nil {
		if c, err := f.Client(); err == nil && c != nil {
			return c, nil
		}
	}
	return client.New(client.Options{AutoStart: autoStart})
}

func homeDir() (string, error) {
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find home directory: %w", err)
	}
	return h, nil
}

// ---- sky api start ----

type apiStartOptions struct {
	Deploy, Foreground, BasicAuth bool
	Host                          string
	Port                          int
	// settings are the given flags that shape the server (--deploy,
	// --host, --enable-basic-auth): a server already running keeps its own.
	settings []string
}

func newAPIStartCmd(f *Factory) *cobra.Command {
	o := &apiStartOptions{}
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start the SkyPilot API server locally.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Port < 0 || o.Port > 65535 {
				return flagErrorf("--port %d: want 1-65535", o.Port)
			}
			for _, n := range []string{"deploy", "host", "enable-basic-auth"} {
				if cmd.Flags().Changed(n) {
					o.settings = append(o.settings, "--"+n)
				}
			}
			if o.Foreground {
				return runAPIServer(cmd.Context(), f, o)
			}
			return startAPIServerBackground(cmd.Context(), f, o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.Deploy, "deploy", false, "Deploy a team server: use the whole machine and listen on all addresses (needs an auth mode).")
	fl.StringVar(&o.Host, "host", "", "Address to listen on (default 127.0.0.1; a non-loopback address needs an auth mode).")
	fl.IntVar(&o.Port, "port", 0, "Port to listen on (default $SKYPILOT_API_SERVER_LOCAL_PORT or 46580).")
	fl.BoolVar(&o.Foreground, "foreground", false, "Run the server in this process instead of in the background.")
	fl.BoolVar(&o.BasicAuth, "enable-basic-auth", false, "Require HTTP basic auth (users from SKYPILOT_INITIAL_BASIC_AUTH and /users/create).")
	return cmd
}

// settings are the server's address and auth as the flags and the
// environment give them (SKYPILOT_API_SERVER_LOCAL_PORT, ENABLE_BASIC_AUTH,
// ENABLE_SERVICE_ACCOUNTS), which the server reads the same way.
type apiStartSettings struct {
	Host       string
	Port       int
	Deploy     bool
	Auth       bool
	ServerArgs []string // for `sky-server api start --foreground`
}

func (o *apiStartOptions) resolve() (apiStartSettings, error) {
	st := apiStartSettings{Host: o.Host, Port: o.Port, Deploy: o.Deploy}
	if st.Port == 0 {
		p, err := api.PortFromEnv()
		if err != nil {
			return st, err
		}
		st.Port = p
	}
	basic, sa := api.AuthFromEnv()
	st.Auth = o.BasicAuth || basic || sa
	if o.Deploy && st.Host == "" {
		st.Host = "0.0.0.0"
	}
	st.ServerArgs = []string{"api", "start", "--foreground", "--port", strconv.Itoa(st.Port)}
	if o.Host != "" {
		st.ServerArgs = append(st.ServerArgs, "--host", o.Host)
	}
	if o.Deploy {
		st.ServerArgs = append(st.ServerArgs, "--deploy")
	}
	if o.BasicAuth {
		st.ServerArgs = append(st.ServerArgs, "--enable-basic-auth")
	}
	return st, nil
}

// runAPIServer runs the API server program in this process's place: it
// is what `sky api start --foreground` was (same pid, signals and
// output), and it checks the settings itself.
func runAPIServer(_ context.Context, f *Factory, o *apiStartOptions) error {
	st, err := o.resolve()
	if err != nil {
		return err
	}
	exe, err := f.serverBinary()
	if err != nil {
		return err
	}
	return syscall.Exec(exe, append([]string{exe}, st.ServerArgs...), append(os.Environ(), serverEnv()...))
}

// localURL is where a server started with these settings answers locally.
func (st apiStartSettings) localURL() string {
	host := st.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return "http://" + host + ":" + strconv.Itoa(st.Port)
}

func startAPIServerBackground(ctx context.Context, f *Factory, o *apiStartOptions) error {
	st, err := o.resolve()
	if err != nil {
		return err
	}
	if err := api.CheckExposure(st.Host, st.Deploy, st.Auth); err != nil {
		return err
	}
	url := st.localURL()
	c, err := client.New(client.Options{Endpoint: url})
	if err != nil {
		return err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if _, err := c.Health(ctx); err == nil {
		if len(o.settings) > 0 {
			return fmt.Errorf("the SkyPilot API server is already running at %s, and %s cannot change a running server: run `sky api stop`, then `sky api start` with them", url, strings.Join(o.settings, ", "))
		}
		fmt.Fprintf(f.IO.Out, "SkyPilot API server is already running at %s.\n", url)
		return nil
	}
	exe, err := f.serverBinary()
	if err != nil {
		return err
	}
	home, err := homeDir()
	if err != nil {
		return err
	}
	dir := paths.ServerDir(home)
	logPath := filepath.Join(dir, "server.log")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open server log: %w", err)
	}
	defer logf.Close()
	// The log is appended to across starts: an error shown from it must be
	// this start's, not a line an earlier attempt left.
	logStart, _ := logf.Seek(0, io.SeekEnd)
	child := exec.Command(exe, st.ServerArgs...)
	child.Env = append(os.Environ(), serverEnv()...)
	child.Stdout, child.Stderr = logf, logf
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlive this shell
	if err := child.Start(); err != nil {
		return fmt.Errorf("start API server: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- child.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		if _, err := c.Health(ctx); err == nil {
			fmt.Fprintf(f.IO.Out, "SkyPilot API server started at %s.\nLogs: %s\n", url, logPath)
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("the API server exited at start (%v):\n%s", err, tailFile(logPath, logStart, 10))
		case <-deadline:
			return fmt.Errorf("the API server did not answer at %s within 30s; see %s", url, logPath)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tailFile returns the last n lines of a file written after offset from
// (for error messages).
func tailFile(path string, from int64, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if from > 0 && from <= int64(len(b)) {
		b = b[from:]
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ---- sky api stop ----

func newAPIStopCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the local SkyPilot API server.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := client.New(client.Options{})
			if err != nil {
				return err
			}
			if !c.Local && !loopbackEndpoint(c.Endpoint) {
				return fmt.Errorf("the API server at %s is remote; `sky api stop` only stops a local server (use `sky api logout` to disconnect)", c.Endpoint)
			}
			home, err := homeDir()
			if err != nil {
				return err
			}
			stopped, err := stopLocalServer(filepath.Join(paths.ServerDir(home), "server.pid"))
			if err != nil {
				return err
			}
			if !stopped {
				fmt.Fprintln(f.IO.Out, "SkyPilot API server is not running.")
				return nil
			}
			fmt.Fprintln(f.IO.Out, "SkyPilot API server stopped.")
			return nil
		},
	}
}

// loopbackEndpoint is an endpoint on this machine, however it was given
// (`sky api login -e http://user:pw@127.0.0.1:PORT` makes the client
// non-local, yet the server it names is this HOME's own).
func loopbackEndpoint(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// stopLocalServer stops the process named in the pid file, after checking
// that it really is a sky API server (a stale file may name a reused pid).
// It never looks processes up by name.
func stopLocalServer(pidFile string) (bool, error) {
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return false, fmt.Errorf("%s does not hold a pid (%q); remove it", pidFile, strings.TrimSpace(string(b)))
	}
	if !proc.Alive(pid) {
		os.Remove(pidFile)
		return false, nil
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	args := strings.Split(string(cmdline), "\x00")
	if len(cmdline) > 0 && !(slices.Contains(args, "api") && slices.Contains(args, "start")) {
		return false, fmt.Errorf("pid %d in %s is not a sky API server (%s); remove the stale file", pid, pidFile, strings.Join(args, " "))
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return false, fmt.Errorf("stop API server (pid %d): %w", pid, err)
	}
	if !proc.WaitGone(pid, 15*time.Second) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return true, nil
}

// ---- sky api status ----

// defaultRequestLimit is how many requests `sky api status` lists unless
// told otherwise (SkyPilot's default).
const defaultRequestLimit = 50

type apiStatusOptions struct {
	All, Verbose, AllUsers bool
	Limit                  string
	Cluster                string
	Output                 string
}

// parseRequestLimit reads -l/--limit: a count, or "none"/"all" for no
// limit (0).
func parseRequestLimit(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "none", "all":
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, flagErrorf("--limit %q: want a non-negative number, \"none\" or \"all\"", s)
	}
	return n, nil
}

func newAPIStatusCmd(f *Factory) *cobra.Command {
	o := &apiStatusOptions{}
	cmd := &cobra.Command{
		Use:   "status [REQUEST_IDS]...",
		Short: "List requests on the SkyPilot API server.",
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.Output, err = parseOutput(o.Output); err != nil {
				return err
			}
			limit, err := parseRequestLimit(o.Limit)
			if err != nil {
				return err
			}
			c, err := apiClient(f, false)
			if err != nil {
				return err
			}
			recs, err := c.Status(ctxOf(cmd), client.StatusOptions{IDs: args, AllStatus: o.All, Limit: limit, AllUsers: o.AllUsers, ClusterName: o.Cluster})
			if errors.Is(err, client.ErrServerNotRunning) {
				// Not an error, as in SkyPilot: "is a server up?" is the
				// question this command answers.
				w := f.IO.Out
				if o.Output == "json" {
					w = f.IO.ErrOut
				}
				fmt.Fprintln(w, "SkyPilot API server is not running.")
				recs, err = nil, nil
			}
			if err != nil {
				return err
			}
			if o.Output == "json" {
				if recs == nil {
					recs = []api.Request{}
				}
				// started_at is not among SkyPilot's fields of this output.
				for i := range recs {
					recs[i].StartedAt = nil
				}
				return printJSON(f.IO.Out, recs)
			}
			return renderRequests(f, recs, o.Verbose, limit)
		},
	}
	fl := cmd.Flags()
	fl.BoolVarP(&o.All, "all-status", "a", false, "Show requests of all statuses, including finished ones (SUCCEEDED, FAILED, CANCELLED); by default only PENDING and RUNNING ones.")
	fl.StringVarP(&o.Limit, "limit", "l", strconv.Itoa(defaultRequestLimit), `Number of requests to show; "none" or "all" shows all.`)
	fl.StringVarP(&o.Cluster, "cluster", "c", "", "Show only the requests about this cluster.")
	fl.BoolVarP(&o.Verbose, "verbose", "v", false, "Show more details (the cluster of each request).")
	fl.BoolVarP(&o.AllUsers, "all-users", "u", false, "Show every user's requests (admins).")
	addOutputFlag(cmd, &o.Output)
	return cmd
}

func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

// renderRequests prints SkyPilot's request table: with no requests (or
// no server) a row of dashes under the header, so a reader always finds
// the columns; when the limit cut the list, a line saying how to see all.
func renderRequests(f *Factory, recs []api.Request, verbose bool, limit int) error {
	headers := []string{"ID", "User", "Name"}
	if verbose {
		headers = append(headers, "Cluster")
	}
	headers = append(headers, "Created", "Status")
	t := newTable(f.IO.Bold, headers...)
	now := time.Now()
	if f.Now != nil {
		now = f.Now()
	}
	for _, r := range recs {
		row := []string{r.RequestID, orDash(r.UserName), r.Name}
		if verbose {
			row = append(row, orDash(r.ClusterName))
		}
		t.addRow(append(row, ago(now, r.CreatedAt), string(r.Status))...)
	}
	if len(recs) == 0 {
		dashes := make([]string, len(headers))
		for i := range dashes {
			dashes[i] = "-"
		}
		t.addRow(dashes...)
	}
	if err := t.render(f.IO.Out); err != nil {
		return err
	}
	if limit > 0 && len(recs) >= limit {
		fmt.Fprintf(f.IO.Out, "\nShowing %d requests. Use \"-l none\" or \"-l all\" to show all requests.\n", limit)
	}
	return nil
}

// ago formats an epoch time relative to now: "just now", "5 secs ago", ...
func ago(now time.Time, epoch float64) string {
	d := now.Sub(time.Unix(0, int64(epoch*1e9)))
	plural := func(n int64, unit string) string {
		if n == 1 {
			return fmt.Sprintf("1 %s ago", unit)
		}
		return fmt.Sprintf("%d %ss ago", n, unit)
	}
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return plural(int64(d/time.Second), "sec")
	case d < time.Hour:
		return plural(int64(d/time.Minute), "min")
	case d < 24*time.Hour:
		return plural(int64(d/time.Hour), "hr")
	default:
		return plural(int64(d/(24*time.Hour)), "day")
	}
}

// ---- sky api info ----

// apiInfo is `sky api info -o json` (spec/cli-output.md).
type apiInfo struct {
	Client apiInfoClient `json:"client"`
	Server apiInfoServer `json:"server"`
	User   string        `json:"user"`
}

type apiInfoClient struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
}

type apiInfoServer struct {
	URL        string `json:"url"`
	Status     string `json:"status"`
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	APIVersion string `json:"api_version"`
}

func newAPIInfoCmd(f *Factory) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "info",
		Short: "Show the SkyPilot API server URL and status.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "table" && output != "json" {
				return flagErrorf("--output %q: choose table or json", output)
			}
			c, err := apiClient(f, false)
			if err != nil {
				return err
			}
			if output != "json" {
				fmt.Fprintf(f.IO.Out, "SkyPilot client version: %s, commit: %s\n", version.Version, version.Commit)
			}
			h, err := c.Health(ctxOf(cmd))
			if err != nil {
				// As SkyPilot's: an answer, not a failure, so scripts
				// and agents read the hint from stdout.
				if c.Local && errors.Is(err, client.ErrServerNotRunning) {
					fmt.Fprintf(f.IO.Out, "No SkyPilot API server is connected\n├── To connect to an existing API server: sky api login\n└── To start a local API server: sky api start\n")
					return nil
				}
				var ce *client.ConnectionError
				if !errors.As(err, &ce) {
					return err
				}
				fmt.Fprintf(f.IO.Out, "Could not connect to SkyPilot API server at %s\n├── To re-login to the API server: sky api login --relogin -e %s\n└── To logout the server: sky api logout\n", c.Endpoint, c.Endpoint)
				return nil
			}
			info := apiInfo{
				Client: apiInfoClient{Version: version.Version, Commit: version.Commit},
				Server: apiInfoServer{URL: c.Endpoint, Status: h.Status, Version: h.Version, Commit: h.Commit, APIVersion: h.APIVersion},
			}
			if h.User != nil {
				info.User = h.User.Name
			}
			if output == "json" {
				return printJSON(f.IO.Out, info)
			}
			w := f.IO.Out
			fmt.Fprintf(w, "Using SkyPilot API server: %s\n", c.Endpoint)
			fmt.Fprintf(w, "├── Status: %s, commit: %s, version: %s\n", h.Status, h.Commit, h.Version)
			user := "-"
			if h.User != nil {
				user = fmt.Sprintf("%s (%s)", h.User.Name, h.User.ID)
			}
			fmt.Fprintf(w, "├── User: %s\n", user)
			fmt.Fprintf(w, "└── %s\n", endpointSource(c))
			if h.Status == "needs_auth" {
				fmt.Fprintf(f.IO.ErrOut, "The server needs credentials: run `sky api login -e %s --token sky_...`.\n", c.Endpoint)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "Output format: table or json.")
	return cmd
}

// endpointSource says where the endpoint in use was configured, as
// SkyPilot's `sky api info` does.
func endpointSource(c *client.Client) string {
	if strings.TrimSpace(os.Getenv(client.EnvEndpoint)) != "" {
		return "Endpoint set via the environment variable " + client.EnvEndpoint
	}
	if !c.Local {
		if home, err := homeDir(); err == nil {
			if lc, err := client.ReadLogin(home); err == nil && lc.Source != "" {
				return "Endpoint set via " + lc.Source
			}
		}
	}
	return "Endpoint set to default local API server."
}

// ---- sky api logs ----

func newAPILogsCmd(f *Factory) *cobra.Command {
	var tail int
	var follow, noFollow, serverLogs bool
	var logPath string
	cmd := &cobra.Command{
		Use:   "logs [REQUEST_ID]",
		Short: "Stream the log of a request (default: your latest), a log file of the server, or the server log.",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			given := 0
			for _, set := range []bool{len(args) > 0, serverLogs, logPath != ""} {
				if set {
					given++
				}
			}
			if given > 1 {
				return flagErrorf("give one of REQUEST_ID, --server-logs and --log-path")
			}
			if cmd.Flags().Changed("follow") && cmd.Flags().Changed("no-follow") && follow == noFollow {
				return flagErrorf("give --follow or --no-follow, not both")
			}
			if cmd.Flags().Changed("no-follow") {
				follow = !noFollow
			}
			c, err := apiClient(f, false)
			if err != nil {
				return err
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return streamRequest(ctxOf(cmd), f, c, id, client.StreamOptions{Follow: follow, Tail: tail, ServerLogs: serverLogs, LogPath: logPath})
		},
	}
	cmd.Flags().IntVar(&tail, "tail", 0, "Show only the last N lines (0: all).")
	cmd.Flags().BoolVar(&follow, "follow", true, "Follow the log until its request ends (the default).")
	cmd.Flags().BoolVar(&noFollow, "no-follow", false, "Print what is there and exit instead of following.")
	cmd.Flags().BoolVar(&serverLogs, "server-logs", false, "Stream the API server's own log (admins).")
	cmd.Flags().StringVarP(&logPath, "log-path", "l", "", "Print a log file under the server's ~/sky_logs (admins on a server with users), e.g. the path `View logs:` names.")
	return cmd
}

// streamRequest streams a log; Ctrl-C detaches (the request keeps
// running) and says how to re-attach. With Follow on a request log it
// then reports the request's outcome, so a failure exits non-zero.
func streamRequest(parent context.Context, f *Factory, c *client.Client, id string, so client.StreamOptions) error {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt)
	defer stop()
	out := newStreamWriter(f.IO.Out, f.IO.IsTTY)
	got, err := c.Stream(ctx, id, out, so)
	out.Close()
	if got == "" {
		got = id
	}
	if ctx.Err() != nil && parent.Err() == nil {
		if got != "" {
			fmt.Fprintf(f.IO.ErrOut, "\nDetached from request %s; it keeps running. Re-attach with: sky api logs %s\n", got, got)
		}
		return nil
	}
	if err != nil {
		if errors.Is(err, client.ErrServerNotRunning) {
			fmt.Fprintln(f.IO.Out, "SkyPilot API server is not running.")
			return &ExitError{Code: exitError}
		}
		return err
	}
	if !so.Follow || so.ServerLogs || got == "" {
		return nil
	}
	return c.Wait(ctx, got, nil)
}

// ---- sky api cancel ----

func newAPICancelCmd(f *Factory) *cobra.Command {
	var all, allUsers, yes bool
	cmd := &cobra.Command{
		Use:   "cancel [REQUEST_IDS]...",
		Short: "Cancel requests on the SkyPilot API server.",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !all && !allUsers {
				return flagErrorf("give REQUEST_IDS, --all (your requests) or --all-users")
			}
			if len(args) > 0 && (all || allUsers) {
				return flagErrorf("give REQUEST_IDS or --all/--all-users, not both")
			}
			_ = yes // cancelling requests is cheap to redo; no prompt, flag kept for SkyPilot compatibility
			c, err := apiClient(f, false)
			if err != nil {
				return err
			}
			ids, err := c.Cancel(ctxOf(cmd), args, allUsers)
			if errors.Is(err, client.ErrServerNotRunning) {
				fmt.Fprintln(f.IO.Out, "SkyPilot API server is not running.")
				return &ExitError{Code: exitError}
			}
			if err != nil {
				return err
			}
			if len(ids) == 0 {
				fmt.Fprintln(f.IO.Out, "No requests to cancel.")
				return nil
			}
			noun := "requests"
			if len(ids) == 1 {
				noun = "request"
			}
			fmt.Fprintf(f.IO.Out, "Cancelled %d %s: %s\n", len(ids), noun, strings.Join(ids, ", "))
			return nil
		},
	}
	cmd.Flags().BoolVarP(&all, "all", "a", false, "Cancel all your requests.")
	cmd.Flags().BoolVarP(&allUsers, "all-users", "u", false, "Cancel all requests of all users (admins; others cancel only their own).")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "Skip confirmation prompt.")
	return cmd
}

// ---- sky api login / logout ----

type apiLoginOptions struct {
	Endpoint, Token    string
	Relogin, NoBrowser bool
}

func newAPILoginCmd(f *Factory) *cobra.Command {
	o := &apiLoginOptions{}
	cmd := &cobra.Command{
		Use:   "login",
		Short: "Log into a SkyPilot API server (stores the endpoint and token in ~/.sky/skygo/login.yaml).",
		Long: `Log into a SkyPilot API server: every later sky command uses it.

The server may need credentials: a service-account token (--token sky_...,
from the server's admin) or user:password in the URL for basic auth. SkyGo's
server has no browser (OAuth2) login; with --no-browser the token is read
from the terminal instead of the command line, so it stays out of the shell
history. Without -e, the endpoint in use now is logged into again.`,
		Example: `  sky api login -e https://api.example.com --token sky_abc123...
  sky api login -e https://api.example.com --no-browser
  sky api login --relogin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAPILogin(cmd, f, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.Endpoint, "endpoint", "e", "", "The SkyPilot API server endpoint, e.g. http://1.2.3.4:46580 (default: the one in use).")
	fl.BoolVar(&o.Relogin, "relogin", false, "Log in afresh: forget the credentials stored for this endpoint instead of reusing them.")
	fl.StringVarP(&o.Token, "token", "t", "", "Service account token for authentication (starts with sky_).")
	fl.StringVar(&o.Token, "service-account-token", "", "Same as --token.")
	fl.BoolVar(&o.NoBrowser, "no-browser", false, "Do not open a browser; when the server needs credentials, paste the service-account token at the prompt.")
	return cmd
}

func runAPILogin(cmd *cobra.Command, f *Factory, o *apiLoginOptions) error {
	home, err := homeDir()
	if err != nil {
		return err
	}
	stored, err := client.ReadLogin(home)
	if err != nil {
		return err
	}
	endpoint := strings.TrimRight(o.Endpoint, "/")
	if endpoint == "" {
		endpoint = strings.TrimRight(cmp.Or(strings.TrimSpace(os.Getenv(client.EnvEndpoint)), stored.Endpoint), "/")
	}
	if endpoint == "" {
		return flagErrorf("--endpoint/-e is required (no API server is configured), e.g. sky api login -e http://1.2.3.4:46580")
	}
	token := o.Token
	// Logging into the stored endpoint again keeps its token unless asked
	// to start afresh: a repeated login must not log the user out.
	if token == "" && !o.Relogin && sameEndpoint(endpoint, stored.Endpoint) {
		token = stored.Token
	}
	if token != "" && !strings.HasPrefix(token, api.TokenPrefix) {
		return flagErrorf("--token: a service-account token starts with %q", api.TokenPrefix)
	}
	ctx := ctxOf(cmd)
	h, c, err := loginHealth(ctx, endpoint, token)
	if err != nil {
		return err
	}
	if h.Status == "needs_auth" && o.NoBrowser && o.Token == "" {
		fmt.Fprintf(f.IO.Out, "The API server at %s needs credentials. Ask its admin for a service-account token.\nPaste the token (sky_...): ", c.Endpoint)
		line, rerr := readLine(f.IO.In)
		if f.IO.InTTY {
			fmt.Fprintln(f.IO.Out)
		}
		token = strings.TrimSpace(line)
		if rerr != nil || token == "" {
			return errAborted
		}
		if !strings.HasPrefix(token, api.TokenPrefix) {
			return fmt.Errorf("a service-account token starts with %q", api.TokenPrefix)
		}
		if h, c, err = loginHealth(ctx, endpoint, token); err != nil {
			return err
		}
	}
	if h.Status == "needs_auth" {
		what := "pass --token sky_... (a service-account token from its admin), paste one with --no-browser, or put user:password in the URL"
		if token != "" {
			what = "the token was not accepted; ask the admin for a new one and run `sky api login --relogin -e " + c.Endpoint + " --token sky_...`"
		}
		return fmt.Errorf("the API server at %s needs credentials: %s", c.Endpoint, what)
	}
	if err := client.WriteLogin(home, client.LoginConfig{Endpoint: endpoint, Token: token}); err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	if o.Relogin {
		_ = os.Remove(paths.Cookies(home))
	}
	fmt.Fprintf(f.IO.Out, "Logged into SkyPilot API server at: %s", c.Endpoint)
	if h.User != nil {
		fmt.Fprintf(f.IO.Out, " as %s", h.User.Name)
	}
	fmt.Fprintln(f.IO.Out)
	return nil
}

// loginHealth asks the server at endpoint how it sees these credentials.
func loginHealth(ctx context.Context, endpoint, token string) (*api.Health, *client.Client, error) {
	c, err := client.New(client.Options{Endpoint: endpoint, Token: token, NoStoredToken: true})
	if err != nil {
		return nil, nil, err
	}
	h, err := c.Health(ctx)
	if err != nil {
		var ce *client.ConnectionError
		if errors.As(err, &ce) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("log into %s: %w", c.Endpoint, err)
	}
	return h, c, nil
}

// sameEndpoint compares endpoints ignoring a trailing slash and the
// credentials a URL may carry.
func sameEndpoint(a, b string) bool {
	norm := func(s string) string {
		u, err := url.Parse(strings.TrimRight(s, "/"))
		if err != nil {
			return s
		}
		u.User = nil
		return u.String()
	}
	return a != "" && b != "" && norm(a) == norm(b)
}

func newAPILogoutCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Forget the API server endpoint and credentials stored by `sky api login`.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			home, err := homeDir()
			if err != nil {
				return err
			}
			lc, err := client.ReadLogin(home)
			if err != nil {
				return err
			}
			if err := client.WriteLogin(home, client.LoginConfig{}); err != nil {
				return err
			}
			_ = os.Remove(paths.Cookies(home))
			if lc.Endpoint == "" {
				fmt.Fprintln(f.IO.Out, "Not logged into any SkyPilot API server.")
				return nil
			}
			fmt.Fprintf(f.IO.Out, "Logged out of SkyPilot API server at %s.\n", lc.Endpoint)
			return nil
		},
	}
}

// ---- sky api debug-sleep (hidden) ----

// newAPIDebugSleepCmd submits the built-in debug.sleep operation. It is a
// real request (auto-starting a local server like any command that runs
// work), used by tests and to check a deployment end to end.
func newAPIDebugSleepCmd(f *Factory) *cobra.Command {
	var detach bool
	cmd := &cobra.Command{
		Use:    "debug-sleep SECONDS",
		Short:  "Submit a request that sleeps (for testing the server).",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			secs, err := strconv.ParseFloat(args[0], 64)
			if err != nil || secs < 0 {
				return flagErrorf("SECONDS %q: want a non-negative number", args[0])
			}
			c, err := apiClient(f, true)
			if err != nil {
				return err
			}
			ctx := ctxOf(cmd)
			id, err := client.Submit(ctx, c, apiop.DebugSleep, api.DebugSleepBody{Seconds: secs})
			if err != nil {
				return err
			}
			if detach {
				fmt.Fprintln(f.IO.Out, id)
				return nil
			}
			fmt.Fprintf(f.IO.ErrOut, "Request ID: %s\n", id)
			return streamRequest(ctx, f, c, id, client.StreamOptions{Follow: true})
		},
	}
	cmd.Flags().BoolVarP(&detach, "detach", "d", false, "Print the request id and return without waiting.")
	return cmd
}

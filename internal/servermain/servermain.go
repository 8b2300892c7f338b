// Package servermain is the sky-server program: the API server process
// and the hidden verbs that need the server side's heavy packages (the
// verbs the infrastructures register, infra.RegisterVerb; SkyPilot's
// SQLite state). The node agent is
// sky-node's and the load balancer sky-lb's.
// The sky CLI, which links none of them, starts this program for
// `sky api start` and hands these verbs over to it with the same
// arguments, so a command line, a generated ssh config or a node's call
// works whichever binary it names.
package servermain

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/skygo/skygo/internal/core"
	"github.com/skygo/skygo/internal/infra"
	_ "github.com/skygo/skygo/internal/infra/all" // every infrastructure of this build: only the server program links them
	"github.com/skygo/skygo/internal/infrakind"
	_ "github.com/skygo/skygo/internal/infrakind/all" // what every infrastructure is, those this build leaves out too
	"github.com/skygo/skygo/internal/jobs"
	"github.com/skygo/skygo/internal/paths"
	"github.com/skygo/skygo/internal/serve"
	"github.com/skygo/skygo/internal/server"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/version"
)

// The verbs of this program. The CLI hands the infrastructures' verbs
// (infrakind.Kind.Verbs) over as they are; it runs `api start` itself with
// the flags it checked, and asks SkyPilotClustersVerb only when
// SkyPilot's state file exists.
const (
	SkyPilotClustersVerb = "skypilot-clusters"
)

// Main runs args (without the program name) and returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx := context.Background()
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	switch args[0] {
	case "api":
		if len(args) < 2 || args[1] != "start" {
			fmt.Fprintln(stderr, usage)
			return 2
		}
		return exit(stderr, runAPIServer(ctx, args[2:], stderr))
	case SkyPilotClustersVerb:
		return exit(stderr, skyPilotClusters(ctx, stdout))
	case "--version", "version":
		fmt.Fprintf(stdout, "sky-server %s (commit %s)\n", version.Version, version.Commit)
		return 0
	}
	if main, ok := infra.Verb(args[0]); ok { // an infrastructure's (infrakind.Kind.Verbs)
		return main(args[1:], stdin, stdout, stderr)
	}
	fmt.Fprintf(stderr, "sky-server: unknown command %q\n%s\n", args[0], usage)
	return 2
}

var usage = usageText()

// usageText lists, after the server's own command, the verbs the
// infrastructures declare (infrakind.Kind.Verbs), which sky hands over.
func usageText() string {
	s := "usage: sky-server api start --foreground [--port N] [--host H] [--deploy] [--enable-basic-auth]\n"
	for _, k := range infrakind.All() {
		for _, v := range k.Verbs {
			s += "       sky-server " + v + " ARGS...   (what sky hands over)\n"
		}
	}
	return s + "sky-server is started by sky (`sky api start`, or any command that needs a local server)."
}

func exit(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "Error: %v\n", err)
	return 1
}

// runAPIServer serves the core operations in this process. The store is
// opened here because the operations share it with the server.
func runAPIServer(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("sky-server api start", flag.ContinueOnError)
	fs.SetOutput(stderr)
	so := server.Options{WritePIDFile: true}
	fs.Bool("foreground", true, "run in this process (always: the CLI makes the background)")
	fs.BoolVar(&so.Deploy, "deploy", false, "team server: use the whole machine, listen on all addresses")
	fs.StringVar(&so.Host, "host", "", "address to listen on")
	fs.IntVar(&so.Port, "port", 0, "port to listen on")
	fs.BoolVar(&so.BasicAuth, "enable-basic-auth", false, "require HTTP basic auth")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err := so.ApplyEnv(); err != nil {
		return err
	}
	knobs, err := readTestKnobs(os.Getenv)
	if err != nil {
		return err
	}
	so.UploadMaxAge = knobs.uploadMaxAge
	if so.Deploy && so.Host == "" {
		so.Host = "0.0.0.0"
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("find home directory: %w", err)
	}
	so.Home = home
	so.DBURI = configDB(home)
	// Read once; the server's environment is what its children start
	// from, and the first admin's password has no business there. (Jobs
	// cannot read this process's /proc/PID/environ, the initial block, at
	// all: a local node has a PID namespace of its own.)
	_ = os.Unsetenv("SKYPILOT_INITIAL_BASIC_AUTH")
	if err := adoptLegacyState(ctx, so.Home); err != nil {
		return err
	}
	st, err := state.Open(ctx, state.ResolveURI(so.DBURI), state.DefaultSQLitePath(so.Home))
	if err != nil {
		return err
	}
	defer st.Close()
	so.Store = st
	env, err := core.New(core.Options{Home: so.Home, Store: st, Port: so.Port, Host: so.Host, Auth: so.BasicAuth || so.ServiceAccounts,
		CLI: cliPath(), JobTimings: knobs.jobs, ServeTimings: knobs.serve})
	if err != nil {
		return err
	}
	so.Controllers = env.Controllers
	srv, err := server.New(so, env.Ops())
	if err != nil {
		return err
	}
	defer srv.Close()
	ln, err := srv.Listen()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stderr, "SkyPilot API server is running at http://%s (pid %d). Log: %s\n", ln.Addr(), os.Getpid(), srv.Paths().Log)
	return srv.Serve(ctx, ln)
}

// Test knobs: variables of the server's environment that shorten the
// controllers' waits, so that end-to-end tests see a retry, an autoscaler
// decision or an upload's expiry in seconds. Each is a Go duration (2s,
// 90m). They are read here, once, and handed to the controllers; no
// other package reads them.
const (
	// EnvJobsRetryGap replaces the first 60 s gap between launch
	// attempts of a managed job or a pool worker.
	EnvJobsRetryGap = "SKYGO_JOBS_RETRY_GAP"
	// EnvServeDecisionInterval replaces the autoscaler's 20 s (5 s at
	// zero replicas) decision interval.
	EnvServeDecisionInterval = "SKYGO_SERVE_DECISION_INTERVAL"
	// EnvServeQPSWindow replaces the 60 s window the request rate is
	// measured over.
	EnvServeQPSWindow = "SKYGO_SERVE_QPS_WINDOW"
	// EnvServeRetryGap replaces the first 60 s gap between launch
	// attempts of a service replica.
	EnvServeRetryGap = "SKYGO_SERVE_RETRY_GAP"
	// EnvUploadMaxAge replaces the 24 h an unused upload is kept.
	EnvUploadMaxAge = "SKYGO_UPLOAD_MAX_AGE"
)

// testKnobs are the test knobs' values (zero: unset).
type testKnobs struct {
	jobs         jobs.Timings
	serve        serve.Timings
	uploadMaxAge time.Duration
}

// readTestKnobs reads the test knobs from getenv. A value that is set
// but not a positive duration is an error, not ignored: a test that
// misspells one would otherwise wait out SkyPilot's minutes.
func readTestKnobs(getenv func(string) string) (testKnobs, error) {
	var k testKnobs
	for _, v := range []struct {
		name string
		to   *time.Duration
	}{
		{EnvJobsRetryGap, &k.jobs.RetryGap},
		{EnvServeDecisionInterval, &k.serve.DecisionInterval},
		{EnvServeQPSWindow, &k.serve.QPSWindow},
		{EnvServeRetryGap, &k.serve.RetryGap},
		{EnvUploadMaxAge, &k.uploadMaxAge},
	} {
		raw := getenv(v.name)
		if raw == "" {
			continue
		}
		d, err := time.ParseDuration(raw)
		if err != nil || d <= 0 {
			return testKnobs{}, fmt.Errorf("%s=%q: want a positive duration such as 2s or 90m, or unset it", v.name, raw)
		}
		*v.to = d
	}
	return k, nil
}

// EnvCLI names the sky command line that started this server; the CLI
// sets it. Callbacks on this machine that are CLI commands (autostop's
// `sky stop`) run it.
const EnvCLI = "SKYGO_CLI"

// cliPath is the sky command line for callbacks: EnvCLI, else a sky beside
// this program (bin/ after `make build`), else "" (the backend's default).
func cliPath() string {
	if p := os.Getenv(EnvCLI); p != "" {
		return p
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "sky")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// configDB reads the `db` key of ~/.sky/config.yaml (SKYPILOT_DB_CONNECTION_URI
// still wins, in the state package).
func configDB(home string) string {
	b, err := os.ReadFile(filepath.Join(home, ".sky", "config.yaml"))
	if err != nil {
		return ""
	}
	var doc struct {
		DB string `yaml:"db"`
	}
	_ = yaml.Unmarshal(b, &doc)
	return doc.DB
}

// adoptLegacyState moves what an earlier SkyGo build kept at SkyPilot's
// paths (~/.sky/state.db and the local clusters' ~/.sky/local) into
// ~/.sky/skygo, so an upgrade keeps its clusters. A SkyPilot state.db is
// recognised and left alone.
func adoptLegacyState(ctx context.Context, home string) error {
	moved, err := state.AdoptLegacySQLite(ctx, paths.SkyPilotStateDB(home), paths.StateDB(home))
	if err != nil || !moved {
		return err
	}
	legacyLocal := filepath.Join(paths.SkyDir(home), "local")
	if _, err := os.Stat(filepath.Join(legacyLocal, "clusters")); err == nil {
		if _, err := os.Stat(paths.LocalInfra(home)); errors.Is(err, os.ErrNotExist) {
			if err := os.Rename(legacyLocal, paths.LocalInfra(home)); err != nil {
				return fmt.Errorf("move the local clusters to %s: %w", paths.LocalInfra(home), err)
			}
		}
	}
	return nil
}

// skyPilotClusters prints, one a line, the clusters SkyPilot's own state
// lists (read immutably), for the CLI's note that SkyGo leaves them alone.
func skyPilotClusters(ctx context.Context, out io.Writer) error {
	home, err := os.UserHomeDir()
	if err != nil {
		return fmt.Errorf("find home directory: %w", err)
	}
	names, err := state.SkyPilotClusters(ctx, paths.SkyPilotStateDB(home))
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Fprintln(out, n)
	}
	return nil
}

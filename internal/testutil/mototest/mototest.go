// Package mototest gives tests a real moto server (the AWS API emulator,
// every service on one endpoint) on a free port, started from the Python
// that testinfra/moto-python.sh finds and stopped by its pid. State is in
// memory, so every server starts empty; the account is moto's 123456789012.
//
// A server can listen on a host set's bridge address (Options.Host) so the
// namespace hosts of internal/testutil/sshhosts and ec2hosts reach it too,
// as nodes reach S3. Without moto the tests that ask for it are skipped,
// unless SKYGO_REQUIRE_MOTO=1 (CI sets it): then they fail.
package mototest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/skygo/skygo/internal/awsx"
	"github.com/skygo/skygo/internal/testutil"
)

// The fixed parts of every server.
const (
	AccountID = "123456789012" // moto's default account
	Region    = awsx.DefaultRegion
	// Secret is moto's dummy access key, secret and session token.
	Secret = "testing"
)

// Options says where a server listens and how it is set up.
type Options struct {
	// Host is the address to listen on, 127.0.0.1 when empty.
	Host string
	// Env are extra NAME=VALUE settings for the server (moto's MOTO_*).
	Env []string
}

// Server is a running moto server.
type Server struct {
	Endpoint string // http://Host:Port
	Host     string
	Port     int
	PID      int
	Log      string // the server's output

	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

var (
	pyOnce sync.Once
	pyPath string
	pyErr  error
)

// Python is the interpreter that runs moto's server, as
// testinfra/moto-python.sh finds it (once per process).
func Python() (string, error) {
	pyOnce.Do(func() {
		var stderr bytes.Buffer
		c := exec.Command("bash", filepath.Join(testutil.Root(), "testinfra", "moto-python.sh"))
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			pyErr = fmt.Errorf("%s", strings.TrimSpace(stderr.String()))
			if stderr.Len() == 0 {
				pyErr = fmt.Errorf("testinfra/moto-python.sh: %v", err)
			}
			return
		}
		pyPath = strings.TrimSpace(string(out))
	})
	return pyPath, pyErr
}

// Require skips the test when moto cannot run here, or fails it when
// SKYGO_REQUIRE_MOTO=1, and returns the interpreter otherwise.
func Require(t testing.TB) string {
	t.Helper()
	py, err := Python()
	if err != nil {
		if os.Getenv("SKYGO_REQUIRE_MOTO") == "1" {
			t.Fatalf("moto is required (SKYGO_REQUIRE_MOTO=1) but cannot run: %v", err)
		}
		t.Skipf("skipping a test against moto (AWS emulator): %v", err)
	}
	return py
}

// Start starts a server for the test and stops it when the test ends.
// MOTO_IAM_LOAD_MANAGED_POLICIES=true, so AWS managed policies such as
// AmazonEC2FullAccess exist, as the provisioner's IAM role expects.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	py := Require(t)
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	logPath := filepath.Join(t.TempDir(), "moto.log")
	var lastErr error
	// A free port found by binding and closing can be taken before moto
	// binds it: try a few.
	for range 3 {
		s, err := start(py, o, logPath)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("moto server: %v", lastErr)
	return nil
}

func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start(py string, o Options, logPath string) (*Server, error) {
	port, err := freePort(o.Host)
	if err != nil {
		return nil, fmt.Errorf("no free port on %s: %v", o.Host, err)
	}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	c := exec.Command(py, "-m", "moto.server", "-H", o.Host, "-p", strconv.Itoa(port))
	c.Env = append(append(os.Environ(), "MOTO_IAM_LOAD_MANAGED_POLICIES=true"), o.Env...)
	c.Stdout, c.Stderr = logf, logf
	// Own process group, so the stop reaches whatever the server forks; the
	// parent-death signal ends it with a test binary that is killed.
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		return nil, err
	}
	s := &Server{Host: o.Host, Port: port, PID: c.Process.Pid, Log: logPath, cmd: c, done: make(chan struct{}),
		Endpoint: "http://" + net.JoinHostPort(o.Host, strconv.Itoa(port))}
	go func() { c.Wait(); close(s.done) }()
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("exited at start (%s):\n%s", c.ProcessState, tail(out))
		default:
		}
		if resp, err := client.Get(s.Endpoint + "/moto-api/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Stop()
	out, _ := os.ReadFile(logPath)
	return nil, fmt.Errorf("no answer on %s within 60s:\n%s", s.Endpoint, tail(out))
}

func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop ends the server by its pid (TERM, then KILL after 5 s).
func (s *Server) Stop() {
	s.once.Do(func() {
		syscall.Kill(-s.PID, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-s.PID, syscall.SIGKILL)
			<-s.done
		}
	})
}

// Env is the environment that points an AWS SDK or CLI (a sky API server)
// at the server.
func (s *Server) Env() []string { return EnvFor(s.Endpoint) }

// EnvFor is Env for another endpoint in front of a server (a proxy).
func EnvFor(endpoint string) []string {
	return []string{
		"AWS_ENDPOINT_URL=" + endpoint,
		"AWS_ACCESS_KEY_ID=" + Secret, "AWS_SECRET_ACCESS_KEY=" + Secret, "AWS_SESSION_TOKEN=" + Secret,
		"AWS_DEFAULT_REGION=" + Region, "AWS_REGION=" + Region,
		// no instance metadata service to ask for credentials here
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Config is an SDK configuration (awsx.Load's, with its retries) that
// reaches the server in region ("" = us-east-1) with the dummy
// credentials, whatever this process's environment says.
func (s *Server) Config(t testing.TB, region string) aws.Config {
	return ConfigFor(t, s.Endpoint, region)
}

// ConfigFor is Config for another endpoint in front of a server.
func ConfigFor(t testing.TB, endpoint, region string) aws.Config {
	t.Helper()
	cfg, err := awsx.Load(context.Background(), awsx.Options{Home: t.TempDir(), Region: region})
	if err != nil {
		t.Fatal(err)
	}
	cfg.BaseEndpoint = aws.String(endpoint)
	cfg.Credentials = aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: Secret, SecretAccessKey: Secret, SessionToken: Secret, Source: "mototest"}, nil
	})
	return cfg
}

// Reset drops everything the server holds (moto-api/reset).
func (s *Server) Reset(t testing.TB) {
	t.Helper()
	resp, err := http.Post(s.Endpoint+"/moto-api/reset", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("moto reset: %s", resp.Status)
	}
}

package serve

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/infra"
	"github.com/skygo/skygo/internal/serve/lb"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

// The load balancer process of a service: started detached (a session of
// its own, so a signal to the API server's process group does not reach
// it), found again after a restart through its control socket, stopped by
// asking it and, should it not go, by its PID once its command line shows
// it is this service's.

// First port tried for load balancers (spec/service.md: 30001-30020 on
// the controller; further ones when those are taken).
const firstLBPort = 30001

// socketPath is the service's control socket. Unix socket paths are
// limited to 107 bytes; a deep HOME gets one under /tmp named by a hash
// of the long path.
func socketPath(home, service string) string {
	p := filepath.Join(ServiceDir(home, service), "lb.sock")
	if len(p) < 100 {
		return p
	}
	h := sha256.Sum256([]byte(p))
	return filepath.Join(os.TempDir(), "skygo-lb-"+hex.EncodeToString(h[:8])+".sock")
}

// lbState asks the service's load balancer for its state; an error means
// none answered within a second.
func (e *Env) lbState(ctx context.Context, s *state.Service) (*lb.State, error) {
	return e.lbStateWithin(ctx, s, time.Second)
}

func (e *Env) lbStateWithin(ctx context.Context, s *state.Service, d time.Duration) (*lb.State, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	st, err := e.lbClient(s.Name).State(ctx)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// lbClient is the (kept) client of the service's control socket.
func (e *Env) lbClient(name string) *lb.Client {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.lbClients[name]; ok {
		return c
	}
	if e.lbClients == nil {
		e.lbClients = map[string]*lb.Client{}
	}
	c := lb.Dial(socketPath(e.Home, name))
	e.lbClients[name] = c
	return c
}

// Supervision. A load balancer is started again only when it is dead:
// no process of it lives. A control call that goes unanswered says
// nothing about that (under CPU load a healthy load balancer may take
// seconds to answer, and one stopped by a debugger answers when it is
// continued), so a live one that does not answer is waited for, each
// call given longer than the last. Only one that has answered none of
// lbWedgedTries calls in a row over lbWedgedAfter is taken for wedged
// and killed; its replacement binds the same port (the service's for
// life), so clients never follow it elsewhere.
const (
	lbWedgedAfter = 3 * time.Minute
	lbWedgedTries = 6
)

// errLBWaiting says the load balancer lives but has not answered yet
// (starting, or slow): the service's reconcile comes back later.
var errLBWaiting = errors.New("the load balancer has not answered yet")

// controlTimeout is how long the control call after failures unanswered
// ones in a row may take: 2 s, doubling, at most 16 s.
func controlTimeout(failures int) time.Duration {
	return 2 * time.Second << min(failures, 3)
}

// lbSeen is what the controller saw of a service's load balancer.
type lbSeen struct {
	answered bool // GET /state on its control socket answered
	live     int  // processes of it alive (when it did not answer)
	// silent counts the calls in a row that went unanswered, this one
	// included, and silentFor is the time since the first of them.
	silent    int
	silentFor time.Duration
}

// lbAction is what supervision does about it.
type lbAction int

const (
	lbAdopt   lbAction = iota // it answers: use it
	lbWait                    // alive, not answering: leave it alone
	lbStart                   // none alive: start one
	lbReplace                 // alive but wedged: kill it, then start one
)

func (a lbAction) String() string {
	return [...]string{"adopt", "wait", "start", "replace"}[a]
}

// superviseLB decides what to do about a service's load balancer.
func superviseLB(s lbSeen) lbAction {
	switch {
	case s.answered:
		return lbAdopt
	case s.live == 0:
		return lbStart
	case s.silent >= lbWedgedTries && s.silentFor >= lbWedgedAfter:
		return lbReplace
	}
	return lbWait
}

// silence is a run of unanswered control calls to a service's load
// balancer. It lives in memory only: a restarted server starts counting
// again, which can only delay a kill, never hasten one.
type silence struct {
	since time.Time
	calls int
}

// silent records one more unanswered call and returns the run so far.
func (e *Env) silent(name string) silence {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.lbSilence == nil {
		e.lbSilence = map[string]*silence{}
	}
	r := e.lbSilence[name]
	if r == nil {
		r = &silence{since: e.clock()}
		e.lbSilence[name] = r
	}
	r.calls++
	return *r
}

// silentCalls is how many calls in a row went unanswered.
func (e *Env) silentCalls(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.lbSilence[name]; r != nil {
		return r.calls
	}
	return 0
}

// resetSilence ends the run: the load balancer answered, or a new one
// was started (its run begins at its start).
func (e *Env) resetSilence(name string, started bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.lbSilence, name)
	if started {
		if e.lbSilence == nil {
			e.lbSilence = map[string]*silence{}
		}
		e.lbSilence[name] = &silence{since: e.clock()}
	}
}

// ensureLB returns the state of the service's load balancer, starting
// one when none lives; errLBWaiting while a live one does not answer.
func (e *Env) ensureLB(ctx context.Context, s *state.Service) (*lb.State, *state.Service, error) {
	s, port, err := e.reservedPort(ctx, s)
	if err != nil {
		return nil, s, err
	}
	sock := socketPath(e.Home, s.Name)
	timeout := controlTimeout(e.silentCalls(s.Name))
	st, err := e.lbStateWithin(ctx, s, timeout)
	seen := lbSeen{answered: err == nil}
	var pids []int
	var run silence
	if err != nil {
		if ctx.Err() != nil {
			return nil, s, ctx.Err()
		}
		pids = lbPIDs(s.Name, sock)
		run = e.silent(s.Name)
		seen.live, seen.silent, seen.silentFor = len(pids), run.calls, e.clock().Sub(run.since)
	}
	switch superviseLB(seen) {
	case lbAdopt:
		e.resetSilence(s.Name, false)
		if st.PID != s.LB.PID {
			// Started by a reconcile cut off before it recorded the PID,
			// or by another server: its ready set is pushed again.
			s, err = e.Store.UpdateService(ctx, s.Name, func(n *state.Service) error {
				n.LB.PID, n.LB.Pushed = st.PID, ""
				return nil
			})
		}
		return st, s, err
	case lbWait:
		if run.calls == 1 || run.calls == lbWedgedTries {
			e.note(s.Name, "Load balancer (pid %s) is alive but did not answer on its control socket within %s (%d call(s) in a row): waiting for it; a live load balancer is not restarted.",
				pidList(pids), timeout, run.calls)
		}
		return nil, s, errLBWaiting
	case lbReplace:
		e.note(s.Name, "Load balancer (pid %s) answered none of %d calls on its control socket over %s: it is wedged; killing it and starting another on port %d.",
			pidList(pids), run.calls, seen.silentFor.Round(time.Second), port)
		for _, pid := range pids {
			e.killLB(s.Name, pid)
		}
		if left := lbPIDs(s.Name, sock); len(left) > 0 {
			return nil, s, fmt.Errorf("the wedged load balancer (pid %s) has not exited yet", pidList(left))
		}
	}
	return e.startOn(ctx, s, port)
}

// startOn starts the service's load balancer on its port and waits a
// little for it to answer.
func (e *Env) startOn(ctx context.Context, s *state.Service, port int) (*lb.State, *state.Service, error) {
	latest := s.Versions[s.Latest]
	if latest == nil {
		return nil, s, fmt.Errorf("service %s has no version %d", s.Name, s.Latest)
	}
	if !portFree(e.lbHost(), port) {
		return nil, s, fmt.Errorf("port %d, the service's for as long as it exists, is in use by another process; its load balancer starts there once the port is free", port)
	}
	pid, err := e.startLB(s.Name, port, latest.Service)
	if err != nil {
		return nil, s, err
	}
	e.resetSilence(s.Name, true)
	s, err = e.Store.UpdateService(ctx, s.Name, func(n *state.Service) error {
		n.LB.PID, n.LB.Port, n.LB.Host, n.LB.Pushed = pid, port, e.lbHost(), ""
		n.LB.Starts++
		return nil
	})
	if err != nil {
		return nil, s, err
	}
	e.note(s.Name, "Load balancer started (pid %d) on %s.", pid, net.JoinHostPort(e.lbHost(), strconv.Itoa(port)))
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := e.lbState(ctx, s); err == nil && st.PID == pid {
			e.resetSilence(s.Name, false)
			return st, s, nil
		}
		if !processAlive(pid) {
			return nil, s, fmt.Errorf("the load balancer exited at start; see sky serve logs --load-balancer %s", s.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Alive and not answering yet: a slow start, not a failure.
	return nil, s, errLBWaiting
}

func pidList(pids []int) string {
	if len(pids) == 0 {
		return "none"
	}
	parts := make([]string, len(pids))
	for i, p := range pids {
		parts[i] = strconv.Itoa(p)
	}
	return strings.Join(parts, ", ")
}

func (e *Env) lbHost() string {
	if e.LBHost == "" {
		return "127.0.0.1"
	}
	return e.LBHost
}

// Ports. A service's port is chosen once, when it is created, and
// reserved in its row (state.CreateService): its load balancer, however
// often restarted, binds that one, and no other service is given it
// while the service exists.

// lbPortRange is how many ports from firstLBPort are tried.
const lbPortRange = 1000

// choosePort is the first port from firstLBPort that no service holds
// and free says nothing on this machine listens on.
func choosePort(held map[int]string, free func(int) bool) (int, error) {
	for p := firstLBPort; p < firstLBPort+lbPortRange; p++ {
		if _, taken := held[p]; !taken && free(p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port for the load balancer from %d to %d: every one is held by a service or in use on this machine", firstLBPort, firstLBPort+lbPortRange-1)
}

// createService inserts the service with a port of its own: another
// request creating a service at the same moment may take the port chosen
// first, and then the next is tried.
func (e *Env) createService(ctx context.Context, s *state.Service) error {
	for range 50 {
		held, err := e.Store.ServicePorts(ctx)
		if err != nil {
			return err
		}
		port, err := choosePort(held, func(p int) bool { return portFree(e.lbHost(), p) })
		if err != nil {
			return err
		}
		s.LB.Port = port
		err = e.Store.CreateService(ctx, s)
		if !errors.Is(err, state.ErrPortTaken) {
			return err
		}
	}
	return fmt.Errorf("no port could be reserved for service %s: other services took each one tried", s.Name)
}

// reservedPort returns the service's port. A service created before
// ports were reserved claims the port its load balancer has (its clients
// know it), or a new one when another service holds that.
func (e *Env) reservedPort(ctx context.Context, s *state.Service) (*state.Service, int, error) {
	port, err := e.Store.ServicePort(ctx, s.Name)
	if err != nil {
		return s, 0, err
	}
	for try := 0; port == 0; try++ {
		want := s.LB.Port
		if want == 0 || try > 0 {
			held, err := e.Store.ServicePorts(ctx)
			if err != nil {
				return s, 0, err
			}
			if want, err = choosePort(held, func(p int) bool { return portFree(e.lbHost(), p) }); err != nil {
				return s, 0, err
			}
		}
		port, err = e.Store.ReserveServicePort(ctx, s.Name, want)
		if errors.Is(err, state.ErrPortTaken) && try < 50 {
			port = 0
			continue
		}
		if err != nil {
			return s, 0, err
		}
	}
	if s.LB.Port != port {
		s, err = e.Store.UpdateService(ctx, s.Name, func(n *state.Service) error {
			n.LB.Port = port
			return nil
		})
	}
	return s, port, err
}

func portFree(host string, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// startLB starts `sky-lb serve-lb` for the service, detached, its output
// appended to the load balancer log. It gets no environment of the
// server's beyond PATH: the server's may hold credentials.
func (e *Env) startLB(name string, port int, spec api.ServiceSpec) (int, error) {
	sock := socketPath(e.Home, name)
	_ = os.Remove(sock)
	if err := os.MkdirAll(ServiceDir(e.Home, name), 0o700); err != nil {
		return 0, err
	}
	policy := spec.LoadBalancingPolicy
	if policy == "" {
		policy = api.PolicyLeastLoad
	}
	stream := spec.StreamTimeoutSeconds
	if stream <= 0 {
		stream = 120
	}
	args := []string{"serve-lb", "--service", name, "--listen", net.JoinHostPort(e.lbHost(), strconv.Itoa(port)),
		"--control", sock, "--watch", ServiceDir(e.Home, name), "--policy", policy, "--stream-timeout", strconv.FormatFloat(stream, 'f', -1, 64)}
	if spec.TLS != nil {
		args = append(args, "--tls-cert", spec.TLS.Certfile, "--tls-key", spec.TLS.Keyfile)
	}
	logf, err := ux.OpenAppend(LBLogPath(e.Home, name))
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	lbBin, err := infra.LBBinaryBeside(e.Sky)
	if err != nil {
		return 0, fmt.Errorf("starting the load balancer: %w", err)
	}
	cmd := exec.Command(lbBin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting the load balancer: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reaped here; adopted by init after a restart
	return cmd.Process.Pid, nil
}

// stopLB asks the service's load balancer to go, then makes sure it did.
func (e *Env) stopLB(ctx context.Context, s *state.Service) {
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	_ = e.lbClient(s.Name).Shutdown(sctx)
	cancel()
	e.mu.Lock()
	delete(e.lbClients, s.Name)
	e.mu.Unlock()
	if s.LB.PID != 0 {
		deadline := time.Now().Add(6 * time.Second)
		for time.Now().Before(deadline) && isOurLB(s.LB.PID, s.Name, socketPath(e.Home, s.Name)) {
			time.Sleep(50 * time.Millisecond)
		}
		e.killLB(s.Name, s.LB.PID)
	}
	_ = os.Remove(socketPath(e.Home, s.Name))
}

// killLB kills pid if it is this service's load balancer (a PID the
// record kept may belong to another process by now).
func (e *Env) killLB(name string, pid int) {
	if isOurLB(pid, name, socketPath(e.Home, name)) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// isOurLB says whether pid runs `sky-lb serve-lb --service name --control
// sock`: the socket tells this server's load balancer from one of a
// service of the same name under another HOME.
func isOurLB(pid int, name, sock string) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return lbCmdline(raw, name, sock)
}

// lbCmdline says whether a /proc cmdline is `serve-lb` of service
// name on control socket sock. A zombie's is empty: it is not alive.
func lbCmdline(raw []byte, name, sock string) bool {
	args := bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0})
	serveLB, svc, ctl := false, false, false
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = string(args[i+1])
		}
		switch string(a) {
		case "serve-lb":
			serveLB = true
		case "--service":
			svc = svc || next == name
		case "--control":
			ctl = ctl || next == sock
		}
	}
	return serveLB && svc && ctl
}

// lbPIDs lists the live processes of the service's load balancer, found
// by their command line: one whose PID the record lacks (a reconcile cut
// off before writing it) is found as well.
func lbPIDs(name, sock string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err == nil && lbCmdline(raw, name, sock) {
			out = append(out, pid)
		}
	}
	return out
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

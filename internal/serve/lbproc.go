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
	"syscall"
	"time"

	"github.com/skygo/skygo/internal/api"
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
// none answers.
func (e *Env) lbState(ctx context.Context, s *state.Service) (*lb.State, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
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

// ensureLB returns the state of the service's load balancer, starting
// one when none answers (or one answers that is not the recorded one).
func (e *Env) ensureLB(ctx context.Context, s *state.Service) (*lb.State, *state.Service, error) {
	st, err := e.lbState(ctx, s)
	if err == nil && (s.LB.PID == 0 || st.PID == s.LB.PID) {
		if s.LB.PID == 0 {
			// Started by a reconcile cut off before it recorded the PID.
			s, err = e.Store.UpdateService(ctx, s.Name, func(n *state.Service) error {
				n.LB.PID, n.LB.Pushed = st.PID, ""
				return nil
			})
		}
		return st, s, err
	}
	if s.LB.PID != 0 {
		e.killLB(s.Name, s.LB.PID)
	}
	latest := s.Versions[s.Latest]
	if latest == nil {
		return nil, s, fmt.Errorf("service %s has no version %d", s.Name, s.Latest)
	}
	port, err := e.pickPort(ctx, s)
	if err != nil {
		return nil, s, err
	}
	pid, err := e.startLB(s.Name, port, latest.Service)
	if err != nil {
		return nil, s, err
	}
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
			return st, s, nil
		}
		if !processAlive(pid) {
			return nil, s, fmt.Errorf("the load balancer exited at start; see sky serve logs --load-balancer %s", s.Name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, s, fmt.Errorf("the load balancer (pid %d) did not answer on its control socket within 5 s", pid)
}

func (e *Env) lbHost() string {
	if e.LBHost == "" {
		return "127.0.0.1"
	}
	return e.LBHost
}

// pickPort keeps the service's port when it is free (clients know it),
// else takes the first free one from 30001 that no other service holds.
func (e *Env) pickPort(ctx context.Context, s *state.Service) (int, error) {
	if s.LB.Port != 0 && portFree(e.lbHost(), s.LB.Port) {
		return s.LB.Port, nil
	}
	held := map[int]bool{}
	if all, err := e.Store.ListServices(ctx); err == nil {
		for _, o := range all {
			if o.Name != s.Name && o.LB.Port != 0 {
				held[o.LB.Port] = true
			}
		}
	}
	for p := firstLBPort; p < firstLBPort+1000; p++ {
		if !held[p] && portFree(e.lbHost(), p) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("no free port for the load balancer from %d to %d", firstLBPort, firstLBPort+999)
}

func portFree(host string, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// startLB starts `sky serve-lb` for the service, detached, its output
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
	cmd := exec.Command(e.Sky, args...)
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
		for time.Now().Before(deadline) && isOurLB(s.LB.PID, s.Name) {
			time.Sleep(50 * time.Millisecond)
		}
		e.killLB(s.Name, s.LB.PID)
	}
	_ = os.Remove(socketPath(e.Home, s.Name))
}

// killLB kills pid if it is this service's load balancer (a PID the
// record kept may belong to another process by now).
func (e *Env) killLB(name string, pid int) {
	if isOurLB(pid, name) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// isOurLB says whether pid runs `sky serve-lb --service name`.
func isOurLB(pid int, name string) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := bytes.Split(bytes.TrimRight(raw, "\x00"), []byte{0})
	serveLB, svc := false, false
	for i, a := range args {
		if string(a) == "serve-lb" {
			serveLB = true
		}
		if string(a) == "--service" && i+1 < len(args) && string(args[i+1]) == name {
			svc = true
		}
	}
	return serveLB && svc
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

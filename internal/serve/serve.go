// Package serve is SkyServe: services whose replicas are clusters
// <service>-<replica id> running the service task, behind one load
// balancer per service, scaled on load and updated without downtime.
//
// It runs inside the API server as two reconcilers on the server's
// controller runner, and its only state is the database (one row per
// service, state.Service):
//
//   - the service controller (one key per service) decides how many
//     replicas the service wants (the autoscaler), which replicas to add
//     and which to retire (scale-down, rolling and blue-green updates,
//     with max_replicas as a hard cap on replicas of every version), keeps
//     the service's load balancer process running and pushes it the ready
//     set whenever that changes;
//   - the replica controller (one key per replica) takes one step of one
//     replica: launch its cluster, follow its job, probe its readiness,
//     drain and tear it down.
//
// Every move is one conditional update of the service's row. Names are
// deterministic (cluster <service>-<id>, the replica's job tagged
// serve/<service>/<id>/<attempt>), so a reconcile killed at any
// instruction and run again finds what it made. The load balancer is a
// process of its own (`sky-lb serve-lb`, internal/serve/lb), outside the API
// server's process group: traffic keeps flowing while the server
// restarts, and the restarted controller adopts it through its control
// socket.
package serve

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skygo/skygo/internal/api"
	"github.com/skygo/skygo/internal/backend"
	"github.com/skygo/skygo/internal/controller"
	"github.com/skygo/skygo/internal/op"
	"github.com/skygo/skygo/internal/replicaset"
	"github.com/skygo/skygo/internal/serve/lb"
	"github.com/skygo/skygo/internal/state"
	"github.com/skygo/skygo/internal/ux"
)

// Env is what the service controllers need from the server.
type Env struct {
	Home    string
	Store   *state.Store
	Backend *backend.Backend
	// Plan returns the optimizer call for a launch body, printing plans
	// to log (the core owns the enabled infras and the catalog).
	Plan func(ctx context.Context, body api.LaunchBody, log io.Writer) (backend.Planner, error)
	// Redact wraps a writer so the given secret values never pass it (a
	// replica may print its secrets; its log must not show them).
	Redact func(w io.Writer, secrets map[string]string) io.Writer
	// Sky is the sky binary; the load balancer (sky-lb, which links no
	// SDK and stays small) is looked for beside it.
	Sky string
	// LBHost is the address load balancers listen on: the API server's
	// own bind host, so a service is reachable wherever its server is.
	LBHost string
	// Timings are the intervals the controller decides by; zero values
	// are spec/service.md's.
	Timings Timings
	// Clock is the controller's time (nil: the machine's). Every
	// decision that depends on time (the autoscaler's, a probe's initial
	// delay and failure timeout, a drain's limit, a wedged load
	// balancer) and every time the rows record read it, so a test can
	// set the instant it decides at. Waits inside one step (a load
	// balancer to start or exit, an endpoint to listen) are paced by
	// real timers and keep the machine's clock.
	Clock func() time.Time

	mu        sync.Mutex
	services  *controller.Controller
	replicas  *controller.Controller
	lbClients map[string]*lb.Client
	lbSilence map[string]*silence
}

// Timings are the service controller's intervals. The server sets the
// first three from its test knobs (servermain); a test sets any of them
// on its Env. A zero field is the default named beside it
// (spec/service.md's where the spec has one).
type Timings struct {
	// DecisionInterval is the autoscaler's decision interval (0: 20 s,
	// and 5 s while the target is 0).
	DecisionInterval time.Duration
	// QPSWindow is how far back the request rate is measured (0: 60 s).
	QPSWindow time.Duration
	// RetryGap is the first gap between launch attempts of a replica (0:
	// 60 s); later gaps grow from it.
	RetryGap time.Duration
	// ResyncEvery is how often every service and replica is looked at
	// again, whatever events were missed (0: 5 s).
	ResyncEvery time.Duration
	// DrainLimit bounds how long a retired replica waits for its
	// in-flight requests before its cluster goes (0: 30 s).
	DrainLimit time.Duration
}

// withDefaults fills the zero fields the controller reads through it
// with their defaults (the autoscaler's interval depends on the target:
// decideEvery; RetryGap is controller.LaunchBackoff's to fill).
func (t Timings) withDefaults() Timings {
	t.QPSWindow = cmp.Or(t.QPSWindow, 60*time.Second)
	t.ResyncEvery = cmp.Or(t.ResyncEvery, 5*time.Second)
	t.DrainLimit = cmp.Or(t.DrainLimit, 30*time.Second)
	return t
}

// timings are the Env's intervals, defaults filled in.
func (e *Env) timings() Timings { return e.Timings.withDefaults() }

// keepFailed is how many failed replicas a service keeps listed (with
// why) once their clusters are gone.
const keepFailed = 5

// decideEvery is the autoscaler's decision interval: 20 s, 5 s while the
// target is 0 (a service scaled to zero comes back faster); a configured
// interval replaces both.
func decideEvery(configured time.Duration, target int) time.Duration {
	switch {
	case configured > 0:
		return configured
	case target == 0:
		return 5 * time.Second
	}
	return 20 * time.Second
}

// retryGap is the wait before launch attempt tries+1 of a replica.
func (e *Env) retryGap(tries int) time.Duration {
	return controller.LaunchBackoff(tries, e.Timings.RetryGap)
}

// clock is the controller's time (Env.Clock, else the machine's).
func (e *Env) clock() time.Time {
	if e.Clock != nil {
		return e.Clock()
	}
	return time.Now()
}

// now is the controller's time in unix seconds, as the service rows
// keep it.
func (e *Env) now() float64 { return unixSeconds(e.clock()) }

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Controllers builds the service and replica controllers.
func (e *Env) Controllers(m *controller.Metrics, log *slog.Logger) []*controller.Controller {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.services = controller.New(controller.ReconcilerFunc(e.reconcileService), controller.Options{
		Name: "services", Workers: 8, Logger: log, Metrics: m, Timeout: 5 * time.Minute,
		BaseBackoff: time.Second, MaxBackoff: 30 * time.Second,
		Resync: e.serviceKeys, ResyncEvery: e.timings().ResyncEvery,
	})
	e.replicas = controller.New(controller.ReconcilerFunc(e.reconcileReplica), controller.Options{
		Name: "service-replicas", Workers: 32, Logger: log, Metrics: m, Timeout: 30 * time.Minute,
		BaseBackoff: time.Second, MaxBackoff: 30 * time.Second,
		Resync: e.replicaKeys, ResyncEvery: e.timings().ResyncEvery,
	})
	return []*controller.Controller{e.services, e.replicas}
}

func (e *Env) pokeService(name string) {
	e.mu.Lock()
	c := e.services
	e.mu.Unlock()
	if c != nil {
		c.Enqueue(name)
	}
}

func (e *Env) pokeReplica(service string, id int) {
	e.mu.Lock()
	c := e.replicas
	e.mu.Unlock()
	if c != nil {
		c.Enqueue(replicaset.Key(service, id))
	}
}

func (e *Env) serviceKeys(ctx context.Context) ([]string, error) {
	ss, err := e.Store.ListServices(ctx)
	if err != nil {
		return nil, err
	}
	keys := make([]string, len(ss))
	for i, s := range ss {
		keys[i] = s.Name
	}
	return keys, nil
}

func (e *Env) replicaKeys(ctx context.Context) ([]string, error) {
	ss, err := e.Store.ListServices(ctx)
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, s := range ss {
		for _, r := range s.Replicas {
			keys = append(keys, replicaset.Key(s.Name, r.ID))
		}
	}
	return keys, nil
}

// replicaCluster is replica id's cluster: <service>-<id>.
func replicaCluster(service string, id int) string { return fmt.Sprintf("%s-%d", service, id) }

// replicaCommand is the creation command recorded on a service's replica
// clusters, by which the service tells its own from a cluster that only
// has a replica's name.
func replicaCommand(service string) string { return "sky serve up -n " + service }

// replicaTag tags a replica's job.
func replicaTag(service string, id, attempt int) string {
	return fmt.Sprintf("serve/%s/%d/%d", service, id, attempt)
}

// ServiceDir is the service's directory on the server:
// ~/.sky/serve/<service with - as _>/ (spec/service.md), holding its
// logs, its load balancer's socket and its versions' kept files.
func ServiceDir(home, service string) string {
	return filepath.Join(home, ".sky", "serve", strings.ReplaceAll(service, "-", "_"))
}

// ControllerLogPath is `sky serve logs --controller`'s file.
func ControllerLogPath(home, service string) string {
	return filepath.Join(ServiceDir(home, service), "controller.log")
}

// LBLogPath is `sky serve logs --load-balancer`'s file.
func LBLogPath(home, service string) string {
	return filepath.Join(ServiceDir(home, service), "load_balancer.log")
}

// ReplicaLogPath is a replica's launch log.
func ReplicaLogPath(home, service string, id int) string {
	return filepath.Join(ServiceDir(home, service), fmt.Sprintf("replica_%d.log", id))
}

// filesDir holds a version's own copy of its uploaded files.
func filesDir(home, service string, version int) string {
	return filepath.Join(ServiceDir(home, service), "files", "v"+strconv.Itoa(version))
}

// note writes one timestamped line to a service's controller log.
func (e *Env) note(service, format string, args ...any) {
	ux.Note(ControllerLogPath(e.Home, service), format, args...)
}

// redacted wraps w so that no secret of the replica's version passes.
func (e *Env) redacted(s *state.Service, r *state.Replica, w io.Writer) io.Writer {
	v := s.Versions[r.Version]
	if e.Redact == nil || v == nil || len(v.Task.Secrets) == 0 {
		return w
	}
	return e.Redact(w, v.Task.Secrets)
}

func owner(s *state.Service) backend.User {
	return backend.User{Name: s.UserName, Hash: s.UserHash}
}

func valueErr(format string, args ...any) error {
	return &op.Error{Type: "ValueError", Message: fmt.Sprintf(format, args...)}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// live says whether a replica counts toward the service's size: it is
// on its way up or serving.
func live(s string) bool { return replicaset.PhaseOf(s).Live() }

// Status derives a service's status from its replicas (service.md).
func Status(s *state.Service) string {
	if s.Down != nil {
		return api.ServiceShuttingDown
	}
	if s.Failure != "" {
		return api.ServiceControllerFailed
	}
	failed, alive := false, 0
	for _, r := range s.Replicas {
		switch {
		case r.Status == api.ReplicaReady:
			return api.ServiceReady
		case api.ReplicaFailedStatus(r.Status):
			failed = true
		case live(r.Status):
			alive++
		}
	}
	switch {
	case failed:
		return api.ServiceFailed
	case alive == 0 && s.LB.PID == 0:
		return api.ServiceControllerInit
	case alive == 0:
		return api.ServiceNoReplica
	}
	return api.ServiceReplicaInit
}

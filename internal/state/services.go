package state

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"github.com/skygo/skygo/internal/api"
)

// Service is one SkyServe service: its row's columns, and the rest
// (versions, autoscaler state, replicas, load balancer) as one JSON
// document (docrows.go).
type Service struct {
	RowMeta

	// Latest is the newest version (1 on up); Versions holds each
	// version some replica still runs, the newest included.
	Latest   int                     `json:"latest"`
	Versions map[int]*ServiceVersion `json:"versions"`
	// UpdateMode is how replicas of older versions are replaced.
	UpdateMode string `json:"update_mode,omitempty"`
	// Target is the replica count the autoscaler wants now (before
	// overprovision); UpCount/DownCount are the consecutive decisions
	// that wanted more/fewer (hysteresis).
	Target         int        `json:"target"`
	UpCount        int        `json:"up_count,omitempty"`
	DownCount      int        `json:"down_count,omitempty"`
	LastDecisionAt float64    `json:"last_decision_at,omitempty"`
	QPS            float64    `json:"qps,omitempty"`
	NextReplicaID  int        `json:"next_replica_id"`
	Replicas       []*Replica `json:"replicas"`
	// Active is the version traffic goes to in a blue-green update
	// (0: every ready replica serves).
	Active int          `json:"active,omitempty"`
	LB     LoadBalancer `json:"lb"`
	// Down is set once `serve down` asked for the service to go.
	Down   *ServiceDown `json:"down,omitempty"`
	Uptime float64      `json:"uptime,omitempty"` // when a replica was first READY
	// ReadyVersion is the newest version a replica of which was READY:
	// a newer version whose replica failed before any was READY is not
	// launched again (service.md).
	ReadyVersion int    `json:"ready_version,omitempty"`
	Failure      string `json:"failure,omitempty"`
}

// ServiceVersion is one version of the service's task and spec.
type ServiceVersion struct {
	Task    api.TaskSpec    `json:"task"`
	Service api.ServiceSpec `json:"service"`
	At      float64         `json:"at"`
}

// LoadBalancer is the service's load balancer process.
type LoadBalancer struct {
	Host string `json:"host"`
	Port int    `json:"port"`
	PID  int    `json:"pid,omitempty"`
	// Generation counts the ready-set changes; the load balancer reports
	// the last one it took. Pushed is the set of that generation.
	Generation int64  `json:"generation,omitempty"`
	Pushed     string `json:"pushed,omitempty"`
	// Starts counts the load balancer's starts, kept in the record for
	// whoever diagnoses a crash loop (the controller log says each one).
	Starts int `json:"starts,omitempty"`
}

// ServiceDown records a `serve down` request.
type ServiceDown struct {
	At    float64 `json:"at"`
	Purge bool    `json:"purge,omitempty"`
}

// Replica is one replica: a cluster named <service>-<id> running the
// service task of its version.
type Replica struct {
	ID        int     `json:"id"`
	Version   int     `json:"version"`
	Status    string  `json:"status"`
	Cluster   string  `json:"cluster"`
	CreatedAt float64 `json:"created_at"`
	// Attempt numbers the launches of this replica; its job is tagged
	// with it, so a controller cut off after submitting finds it.
	Attempt    int     `json:"attempt,omitempty"`
	JobID      int     `json:"job_id,omitempty"`
	LaunchedAt float64 `json:"launched_at,omitempty"`
	Tries      int     `json:"tries,omitempty"`
	NextTryAt  float64 `json:"next_try_at,omitempty"`
	// URL is http://head:port once the cluster is up.
	URL       string `json:"url,omitempty"`
	Infra     string `json:"infra,omitempty"`
	Resources string `json:"resources,omitempty"`
	Spot      bool   `json:"spot,omitempty"`
	// ReadyAt is when a probe first passed; FailingSince when the
	// current run of failed probes began (0: the last probe passed).
	ReadyAt      float64 `json:"ready_at,omitempty"`
	FailingSince float64 `json:"failing_since,omitempty"`
	// RetiredAt is when the controller decided to tear the replica down
	// (scale-down, an update's replacement: SHUTTING_DOWN). Its cluster
	// goes once the load balancer took a ready set without it and it
	// serves no request, or serve.Timings.DrainLimit after this.
	RetiredAt float64 `json:"retired_at,omitempty"`
	// CleanedUp says a failed replica's cluster is gone (it stays listed
	// to say why it failed).
	CleanedUp bool   `json:"cleaned_up,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// Replica returns replica id, or nil.
func (s *Service) Replica(id int) *Replica {
	for _, r := range s.Replicas {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// Clone is a deep copy of s, for a mutation to edit.
func (s *Service) Clone() *Service { return cloneDoc(s) }

// ErrPortTaken means another service holds the load balancer port.
var ErrPortTaken = errors.New("port held by another service")

// A service's load balancer port is reserved for the service's life in
// the lb_port column of its row, under a unique index: allocated once in
// the same INSERT that creates the service, it stays while the row does
// (a load balancer that restarts binds it again), and two servers sharing
// the database cannot hand one port to two services. The record's
// LB.Port mirrors it.

// CreateService inserts a new service holding port v.LB.Port (none when
// 0); ErrExists when the name is taken, ErrPortTaken when the port is.
func (s *Store) CreateService(ctx context.Context, v *Service) error {
	m := v.rowMeta()
	if m.CreatedAt == 0 {
		m.CreatedAt = nowSeconds()
	}
	if m.Workspace == "" {
		m.Workspace = "default"
	}
	record, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var port any
	if v.LB.Port != 0 {
		port = v.LB.Port
	}
	_, err = s.exec(ctx, "create service", `INSERT INTO services (`+docCols+`, lb_port) VALUES (?, ?, ?, ?, ?, ?, 1, ?)`,
		m.Name, m.UserHash, m.UserName, m.Workspace, m.CreatedAt, string(record), port)
	if isUniqueViolation(err) {
		if _, gerr := s.GetService(ctx, m.Name); gerr == nil {
			return ErrExists
		}
		return ErrPortTaken
	}
	if err == nil {
		m.Version = 1
	}
	return err
}

// ServicePorts returns the reserved load balancer ports, each with its
// service.
func (s *Store) ServicePorts(ctx context.Context) (map[int]string, error) {
	rows, err := s.query(ctx, "list service ports", `SELECT lb_port, name FROM services WHERE lb_port IS NOT NULL`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int]string{}
	for rows.Next() {
		var port int
		var name string
		if err := rows.Scan(&port, &name); err != nil {
			return nil, err
		}
		out[port] = name
	}
	return out, rows.Err()
}

// ServicePort returns the port service name holds (0: none yet, a row
// from before ports were reserved); ErrNotFound without the service.
func (s *Store) ServicePort(ctx context.Context, name string) (int, error) {
	var port sql.NullInt64
	err := s.queryRow(ctx, "get service port", `SELECT lb_port FROM services WHERE name = ?`, name).Scan(&port)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	if err != nil {
		return 0, err
	}
	return int(port.Int64), nil
}

// ReserveServicePort gives service name port, if it holds none yet, and
// returns the port it holds: port, or the one it already had.
// ErrPortTaken when another service holds port.
func (s *Store) ReserveServicePort(ctx context.Context, name string, port int) (int, error) {
	_, err := s.exec(ctx, "reserve service port", `UPDATE services SET lb_port = ? WHERE name = ? AND lb_port IS NULL`, port, name)
	if isUniqueViolation(err) {
		return 0, ErrPortTaken
	}
	if err != nil {
		return 0, err
	}
	return s.ServicePort(ctx, name)
}

// GetService reads one service; ErrNotFound when there is none.
func (s *Store) GetService(ctx context.Context, name string) (*Service, error) {
	return docGet[Service](ctx, s, "services", "service", name)
}

// ListServices returns every service, by name.
func (s *Store) ListServices(ctx context.Context) ([]*Service, error) {
	return docList[Service](ctx, s, "services", "service")
}

// UpdateService applies mutate (which may run more than once; ErrNoChange
// leaves the row) to service name's row, conditionally on its version.
func (s *Store) UpdateService(ctx context.Context, name string, mutate func(v *Service) error) (*Service, error) {
	return docUpdate(ctx, s, "services", "service", name, mutate)
}

// DeleteService removes service name if its row is still at version.
func (s *Store) DeleteService(ctx context.Context, name string, version int64) error {
	return docDelete(ctx, s, "services", "service", name, version)
}

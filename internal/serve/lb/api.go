// Package lb is SkyServe's load balancer: one process per service (`sky
// serve-lb`, started detached by the service controller, so traffic keeps
// flowing while the API server restarts), proxying every request to a
// ready replica chosen by the service's policy.
//
// The controller drives it through a control socket (HTTP over a unix
// socket): it pushes the ready set the moment it changes (PUT /replicas)
// and reads the request counts the autoscaler needs (GET /state). The
// load balancer keeps no state of its own beyond what was last pushed and
// the last minutes of request counts, so a restarted controller adopts it
// by reading /state and a restarted load balancer is made whole by the
// next push.
package lb

// Replica is one ready replica as the load balancer sees it.
type Replica struct {
	ID int `json:"replica_id"`
	// URL is the replica's base URL, http://ip:port.
	URL     string `json:"url"`
	Version int    `json:"version"`
	// Accelerator and TargetQPS serve instance_aware_least_load: a
	// replica's load is its in-flight requests over TargetQPS.
	Accelerator string  `json:"accelerator,omitempty"`
	TargetQPS   float64 `json:"target_qps,omitempty"`
}

// ReplicaSet is the body of PUT /replicas.
type ReplicaSet struct {
	// Generation increases with every change the controller makes; the
	// load balancer reports the last one it took in State, so the
	// controller knows whether to push again.
	Generation int64     `json:"generation"`
	Replicas   []Replica `json:"replicas"`
	// Hold says that a request arriving while no replica is ready should
	// wait (up to the hold timeout) for one instead of failing with 503:
	// replicas are on their way, or the service scales from zero.
	Hold bool `json:"hold"`
}

// State is the body of GET /state.
type State struct {
	PID        int    `json:"pid"`
	Listen     string `json:"listen"` // the address the proxy serves on
	Generation int64  `json:"generation"`
	// Known says the controller pushed a ready set since the load
	// balancer started; until then requests are held.
	Known bool `json:"known"`
	// Requests counts the requests that arrived in each of the last
	// seconds (at most the window the load balancer keeps, 10 minutes):
	// [unix second, count] pairs, oldest first, zero seconds left out.
	Requests [][2]int64 `json:"requests"`
	// Waiting is how many requests are being held for a replica now.
	Waiting int `json:"waiting"`
	// InFlight is the requests in flight per replica id.
	InFlight map[int]int64 `json:"in_flight"`
	// Answered counts the requests the load balancer answered itself
	// since it started, by status: 499 (the client went away), 500 (max
	// retries), 502, 503 (no ready replica), 504 (stream timeout).
	Answered map[int]int64 `json:"answered,omitempty"`
}

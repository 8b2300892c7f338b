package controller

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a reconcile, the values of the "result" label.
const (
	resultSuccess  = "success"
	resultError    = "error"
	resultRequeue  = "requeue"
	resultTerminal = "terminal"
	resultPanic    = "panic"
)

var results = []string{resultSuccess, resultError, resultRequeue, resultTerminal, resultPanic}

// Metrics are the runner's Prometheus metrics, shared by all controllers of a
// server and told apart by the "controller" label (so controller names must
// be unique per Metrics).
type Metrics struct {
	reconciles *prometheus.CounterVec
	errors     *prometheus.CounterVec
	depth      *prometheus.GaugeVec
	inFlight   *prometheus.GaugeVec
	duration   *prometheus.HistogramVec
}

// NewMetrics creates the metrics and registers them on reg. Pass the
// server's own registry, not prometheus.DefaultRegisterer, so that tests and
// two servers in one process do not collide.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := newMetrics()
	for _, c := range []prometheus.Collector{m.reconciles, m.errors, m.depth, m.inFlight, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register controller metrics: %w", err)
		}
	}
	return m, nil
}

// newMetrics creates unregistered metrics, which a controller without
// Options.Metrics updates for nobody; it saves a nil check on every update.
func newMetrics() *Metrics {
	return &Metrics{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skygo_controller_reconciles_total",
			Help: "Reconciles that returned, by controller and result (success, error, requeue, terminal, panic).",
		}, []string{"controller", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skygo_controller_reconcile_errors_total",
			Help: "Reconciles that failed (error, terminal error or panic), by controller.",
		}, []string{"controller"}),
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "skygo_controller_queue_depth",
			Help: "Keys due for a reconcile and waiting for a worker, by controller.",
		}, []string{"controller"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "skygo_controller_reconciles_in_flight",
			Help: "Reconciles running now, by controller.",
		}, []string{"controller"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "skygo_controller_reconcile_duration_seconds",
			Help: "Time a reconcile took, by controller.",
			// 1 ms to about 4 min: from a row read to a slow cloud call.
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
		}, []string{"controller"}),
	}
}

// controllerMetrics are one controller's series, resolved once so that a
// reconcile does not look labels up.
type controllerMetrics struct {
	reconciles map[string]prometheus.Counter // by result
	errors     prometheus.Counter
	depth      prometheus.Gauge
	inFlight   prometheus.Gauge
	duration   prometheus.Observer
}

func (m *Metrics) forController(name string) *controllerMetrics {
	cm := &controllerMetrics{
		reconciles: map[string]prometheus.Counter{},
		errors:     m.errors.WithLabelValues(name),
		depth:      m.depth.WithLabelValues(name),
		inFlight:   m.inFlight.WithLabelValues(name),
		duration:   m.duration.WithLabelValues(name),
	}
	// Creating every series now makes each result show up as 0 rather
	// than missing, so rate() and alerts work before the first failure.
	for _, r := range results {
		cm.reconciles[r] = m.reconciles.WithLabelValues(name, r)
	}
	return cm
}

package server

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics is the server's Prometheus registry. It is private to the
// server (not the global default registry) so tests can run several
// servers in one process.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	dbTime   *prometheus.HistogramVec
}

func newMetrics(pools ...*pool) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "skygo_api_requests_total",
			Help: "API requests that reached a final status, by request name and status.",
		}, []string{"name", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skygo_api_request_duration_seconds",
			Help:    "Time from a request starting to run until it finished.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10),
		}, []string{"name"}),
		dbTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "skygo_db_query_duration_seconds",
			Help:    "Latency of state database calls, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 9),
		}, []string{"op"}),
	}
	m.reg.MustRegister(m.requests, m.duration, m.dbTime,
		collectors.NewGoCollector(), // includes go_goroutines
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, p := range pools {
		p := p
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "skygo_api_queue_depth",
			Help:        "Requests waiting for a worker, by pool.",
			ConstLabels: prometheus.Labels{"pool": p.name},
		}, func() float64 { return float64(p.waiting.Load()) }))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "skygo_api_workers_busy",
			Help:        "Workers running a request, by pool.",
			ConstLabels: prometheus.Labels{"pool": p.name},
		}, func() float64 { return float64(p.busy.Load()) }))
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "skygo_api_workers",
			Help:        "Size of each worker pool.",
			ConstLabels: prometheus.Labels{"pool": p.name},
		}, func() float64 { return float64(p.size) }))
	}
	return m
}

// countCredentialChecks exports how many credential checks (bcrypt for a
// password) the server ran: with the auth cache it stays near one per
// user per TTL however many calls arrive.
func (m *metrics) countCredentialChecks(n func() int64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "skygo_api_credential_checks_total",
		Help: "Credential checks run (cache misses), for passwords and tokens.",
	}, func() float64 { return float64(n()) }))
}

func (m *metrics) finished(name, status string, d time.Duration) {
	m.requests.WithLabelValues(name, status).Inc()
	m.duration.WithLabelValues(name).Observe(d.Seconds())
}

func (m *metrics) observeDB(op string, d time.Duration) {
	m.dbTime.WithLabelValues(op).Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

package server

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentrun/agentrun/internal/run"
)

// Metrics are the server's Prometheus metrics, on a registry of their
// own (nothing registered globally).
type Metrics struct {
	handler  http.Handler
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	dispatch prometheus.Histogram
	host     hostMetrics
	reg      *prometheus.Registry
}

// NewMetrics registers the metrics: HTTP requests, dispatch latency, and,
// read from st at each scrape, the runs by state and the queue depth; with
// running (nil: none), the local worker's runs in progress out of slots.
func NewMetrics(st run.Store, slots int, running func() int) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentrun_http_requests_total",
			Help: "HTTP requests served, by method, route and status."}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentrun_http_request_duration_seconds",
			Help: "How long HTTP requests took to answer (a log stream: its whole life).", Buckets: prometheus.DefBuckets}, []string{"method", "route"}),
		dispatch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentrun_dispatch_latency_seconds",
			Help:    "How long a run waited queued (from submit or resume) until a worker claimed it.",
			Buckets: []float64{.005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}),
		host: newHostMetrics(),
		reg:  reg,
	}
	if running != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentrun_local_worker_runs",
			Help: "Runs the server's local worker executes now."}, func() float64 { return float64(running()) }))
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "agentrun_local_worker_slots",
			Help: "Runs the server's local worker executes at most at once."})
		g.Set(float64(slots))
		reg.MustRegister(g)
	}
	reg.MustRegister(m.requests, m.duration, m.dispatch, m.host.claims, m.host.lost, m.host.wait, &runsCollector{st: st},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return m
}

// Dispatched records how long a run waited for a worker.
func (m *Metrics) Dispatched(waited time.Duration) {
	if m != nil {
		m.dispatch.Observe(waited.Seconds())
	}
}

func (m *Metrics) request(method, route string, code int, took time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(method, route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(method, route).Observe(took.Seconds())
}

// runsCollector counts the runs by state at each scrape.
type runsCollector struct{ st run.Store }

var (
	runsDesc  = prometheus.NewDesc("agentrun_runs", "Runs in the store, by state.", []string{"state"}, nil)
	queueDesc = prometheus.NewDesc("agentrun_queue_depth", "Runs queued, waiting for a worker or a slot.", nil, nil)
)

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- runsDesc; ch <- queueDesc }

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := countStates(ctx, c.st)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(runsDesc, err)
		return
	}
	for _, s := range run.States {
		ch <- prometheus.MustNewConstMetric(runsDesc, prometheus.GaugeValue, float64(n[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(queueDesc, prometheus.GaugeValue, float64(n[run.StateQueued]))
}

// stateCounter is a store that counts its runs by state in its own query
// (sqlstore), not by decoding every record.
type stateCounter interface {
	CountStates(ctx context.Context) (map[run.State]int, error)
}

// countStates counts st's runs by state.
func countStates(ctx context.Context, st run.Store) (map[run.State]int, error) {
	if c, ok := st.(stateCounter); ok {
		return c.CountStates(ctx)
	}
	runs, _, err := st.List(ctx, run.Filter{})
	if err != nil {
		return nil, err
	}
	n := map[run.State]int{}
	for _, r := range runs {
		n[r.State]++
	}
	return n, nil
}

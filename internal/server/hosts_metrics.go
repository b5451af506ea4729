package server

// hosts_metrics.go: the agent hosts on /metrics. The gauges are totals
// over all hosts, read from the database at each scrape; there is no
// series per host: hosts are enrolled and revoked over a team's life
// (a re-enrolled machine is a new host), so per-host series would grow
// without bound, and what each host offers and holds is listed by
// 'agentrun server hosts'. The counters and the claim wait are counted
// by this server as it serves the hosts.

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	hostsEnrolledDesc = prometheus.NewDesc("agentrun_hosts_enrolled", "Agent hosts enrolled and not revoked.", nil, nil)
	hostsOnlineDesc   = prometheus.NewDesc("agentrun_hosts_online",
		"Agent hosts not revoked that were heard from (a heartbeat or a claim) within the lease TTL.", nil, nil)
	hostsRevokedDesc = prometheus.NewDesc("agentrun_hosts_revoked", "Agent hosts revoked.", nil, nil)
	hostSlotsDesc    = prometheus.NewDesc("agentrun_host_slots", "Runs the online agent hosts execute at most at once, together.", nil, nil)
	hostRunsDesc     = prometheus.NewDesc("agentrun_host_runs", "Runs agent hosts hold now (claims not ended).", nil, nil)
)

// hostMetrics are the hosts' counters and the claim wait, counted as the
// server serves the hosts.
type hostMetrics struct {
	claims prometheus.Counter
	lost   prometheus.Counter
	wait   prometheus.Histogram
}

func newHostMetrics() hostMetrics {
	return hostMetrics{
		claims: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentrun_host_claims_total",
			Help: "Runs handed to agent hosts by their claims."}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{Name: "agentrun_host_runs_lost_total",
			Help: "Runs whose agent host was lost (it stopped heartbeating, was revoked, or no longer executed them): queued again or cancelled."}),
		wait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentrun_host_claim_wait_seconds",
			Help:    "How long an agent host's claim that got a run waited for it on the server.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 25}}),
	}
}

// WatchHosts adds h's hosts to the metrics: read from its database at
// each scrape, and counted as h serves them (h.Metrics is m).
func (m *Metrics) WatchHosts(h *Hosts) {
	h.Metrics = m
	m.reg.MustRegister(&hostsCollector{h: h})
}

// HostClaimed counts a run handed to a host whose claim waited for it.
func (m *Metrics) HostClaimed(waited time.Duration) {
	if m != nil {
		m.host.claims.Inc()
		m.host.wait.Observe(waited.Seconds())
	}
}

// HostLost counts a run whose host was lost.
func (m *Metrics) HostLost() {
	if m != nil {
		m.host.lost.Inc()
	}
}

// hostsCollector reads the hosts' gauges at each scrape.
type hostsCollector struct{ h *Hosts }

func (c *hostsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hostsEnrolledDesc, hostsOnlineDesc, hostsRevokedDesc, hostSlotsDesc, hostRunsDesc} {
		ch <- d
	}
}

func (c *hostsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var enrolled, online, revoked, slots, runs int64
	err := c.h.DB.Read.QueryRowContext(ctx, `SELECT
		COUNT(CASE WHEN revoked_at IS NULL THEN 1 END),
		COUNT(CASE WHEN revoked_at IS NULL AND last_seen > $1 THEN 1 END),
		COUNT(revoked_at),
		COALESCE(SUM(CASE WHEN revoked_at IS NULL AND last_seen > $1 THEN slots ELSE 0 END), 0)
		FROM hosts`, micros(time.Now().Add(-c.h.TTL))).Scan(&enrolled, &online, &revoked, &slots)
	if err == nil {
		err = c.h.DB.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM host_claims WHERE ended_at IS NULL`).Scan(&runs)
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(hostsEnrolledDesc, err)
		return
	}
	for d, v := range map[*prometheus.Desc]int64{hostsEnrolledDesc: enrolled, hostsOnlineDesc: online,
		hostsRevokedDesc: revoked, hostSlotsDesc: slots, hostRunsDesc: runs} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
}

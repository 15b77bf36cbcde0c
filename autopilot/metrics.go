package autopilot

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics are the autopilot's own Prometheus metrics (docs/autopilot.md),
// on a registry of their own.
type Metrics struct {
	registry  *prometheus.Registry
	actions   *prometheus.CounterVec
	brokers   *prometheus.GaugeVec
	silent    prometheus.Gauge
	leaseHeld prometheus.Gauge
	lastPoll  prometheus.Gauge
	polls     *prometheus.CounterVec
}

// Results of an action, for gostream_autopilot_actions_total.
const (
	resultOK     = "ok"
	resultFailed = "failed"
	resultDryRun = "dry-run"
)

// NewMetrics returns the autopilot's metrics, every series at zero.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gostream_autopilot_actions_total", Help: "Commands the autopilot ran, by kind (failover, recover, elect-leaders) and result (ok, failed, dry-run).",
		}, []string{"kind", "result"}),
		brokers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gostream_autopilot_brokers", Help: "Brokers in each state at the last poll (answering, silent, failed-over, returning, recovered).",
		}, []string{"state"}),
		silent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gostream_autopilot_brokers_silent", Help: "Brokers silent at the last poll: no answer to the direct probe, or gone by gossip.",
		}),
		leaseHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gostream_autopilot_lease_held", Help: "1 while this autopilot holds the lease to act, else 0.",
		}),
		lastPoll: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gostream_autopilot_last_poll_timestamp_seconds", Help: "When the last poll that saw the cluster ended, in Unix seconds.",
		}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gostream_autopilot_polls_total", Help: "Polls of the cluster, by result (ok, failed: no broker answered).",
		}, []string{"result"}),
	}
	m.registry.MustRegister(m.actions, m.brokers, m.silent, m.leaseHeld, m.lastPoll, m.polls)
	for _, k := range []string{kindFailover, kindRecover, kindElectLeaders} {
		for _, r := range []string{resultOK, resultFailed, resultDryRun} {
			m.actions.WithLabelValues(k, r)
		}
	}
	for _, s := range allStates {
		m.brokers.WithLabelValues(string(s))
	}
	m.polls.WithLabelValues(resultOK)
	m.polls.WithLabelValues(resultFailed)
	return m
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

package streams

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Durable Streams metrics of a node: requests by method
// and status, their latency by method (the handler's durable.Observer),
// the live readers, and the node's subscriptions to streams' tails that
// serve them (Config.OnTails).
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	live     prometheus.Gauge
	tails    prometheus.Gauge
}

// NewMetrics registers the metrics in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gostream_ds_requests_total", Help: "Durable Streams HTTP requests answered, by method and status.",
		}, []string{"method", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gostream_ds_request_duration_seconds", Help: "Time to answer a Durable Streams HTTP request (a live read: its wait included; SSE: the connection's life), by method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2.5, 14),
		}, []string{"method"}),
		live: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gostream_ds_live_readers", Help: "Long-polls and SSE connections open on this node.",
		}),
		tails: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gostream_ds_tails", Help: "Streams whose tail this node follows for its live readers (one read from the leader each).",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.live, m.tails)
	return m
}

// Observe implements durable.Observer.
func (m *Metrics) Observe(method string, status int, took time.Duration) {
	switch method {
	case "GET", "HEAD", "PUT", "POST", "DELETE", "OPTIONS":
	default:
		method = "other"
	}
	m.requests.WithLabelValues(method, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(method).Observe(took.Seconds())
}

// LiveReaders implements durable.Observer.
func (m *Metrics) LiveReaders(delta int) { m.live.Add(float64(delta)) }

// Tails counts the node's subscriptions to streams' tails (Config.OnTails).
func (m *Metrics) Tails(delta int) { m.tails.Add(float64(delta)) }

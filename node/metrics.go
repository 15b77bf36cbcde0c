package node

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"gostream/console"
	"gostream/transport"
)

// metrics are the node's Prometheus metrics, on a registry of its own so
// that several nodes can live in one test process.
type metrics struct {
	registry *prometheus.Registry

	requests        *prometheus.CounterVec
	requestErrors   *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	kafkaRequests   *prometheus.CounterVec
	kafkaFailures   *prometheus.CounterVec
	kafkaDuration   *prometheus.HistogramVec
	bytesIn         prometheus.Counter
	bytesOut        prometheus.Counter
	bytesSent       prometheus.Counter
	fsyncDuration   prometheus.Histogram
	connections     prometheus.Gauge
	partitions      prometheus.Gauge
	staleEpochs     prometheus.Counter
	replication     prometheus.Histogram
	refusedConns    *prometheus.CounterVec
	refusedRequests prometheus.Counter
	groupRebuild    prometheus.Histogram
	rebalances      prometheus.Counter

	// Running totals that the web console's charts sample
	// (consoleCounters); gostream_produce_records_total and
	// gostream_fetch_records_total are served from the first two.
	producedRecords atomic.Uint64
	fetchedRecords  atomic.Uint64
	// fsyncs are under a lock so that an interval's longest fsync is
	// among those its count and mean hold.
	fsyncs struct {
		sync.Mutex
		count uint64
		total time.Duration
		max   time.Duration // the longest since consoleCounters last read it
	}
}

func newMetrics() *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gostream_requests_total", Help: "RPC requests served, by API.",
		}, []string{"api"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gostream_request_errors_total", Help: "RPC requests that failed, by API and error code.",
		}, []string{"api", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gostream_request_duration_seconds", Help: "Time from reading a request to its response, by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"api"}),
		kafkaRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gostream_kafka_requests_total", Help: "Kafka requests read on the Kafka listeners, by API.",
		}, []string{"api"}),
		kafkaFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gostream_kafka_request_failures_total", Help: "Kafka requests the connection closed on instead of answering them (or before answering them, after an earlier one), by API. Errors inside an answer are answers.",
		}, []string{"api"}),
		kafkaDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gostream_kafka_request_duration_seconds", Help: "Time from reading a Kafka request to writing its answer, by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"api"}),
		bytesIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gostream_produce_bytes_total", Help: "Batch bytes acknowledged to producers.",
		}),
		bytesOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gostream_fetch_bytes_total", Help: "Batch bytes returned to fetchers.",
		}),
		bytesSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gostream_fetch_sendfile_bytes_total", Help: "Of the batch bytes returned to fetchers, those sent from the segment files to the socket without being read into memory (splice).",
		}),
		fsyncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gostream_fsync_duration_seconds", Help: "Duration of log fsyncs.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16),
		}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gostream_open_connections", Help: "Open RPC connections.",
		}),
		partitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gostream_partitions", Help: "Partition replicas hosted by this node.",
		}),
		staleEpochs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gostream_stale_epoch_rejections_total", Help: "Replica requests refused because they carried an older leader epoch.",
		}),
		replication: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gostream_replication_duration_seconds", Help: "Time from a leader's append to every active replica holding the batch, for partitions with followers.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}),
		refusedConns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gostream_refused_connections_total", Help: "Connections closed at once because a connection limit was reached, by listener (rpc, http) and limit (per-address, total).",
		}, []string{"listener", "limit"}),
		refusedRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gostream_busy_requests_total", Help: "RPC requests refused with Busy because the node's request memory was in use.",
		}),
		groupRebuild: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "gostream_group_coordinator_load_seconds", Help: "Time a new group coordinator took to rebuild its partition of __consumer_offsets from its log.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 14),
		}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gostream_group_rebalances_total", Help: "New target assignments (group epochs) written by the group coordinators of this node.",
		}),
	}
	recordsIn := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "gostream_produce_records_total", Help: "Records acknowledged to producers.",
	}, func() float64 { return float64(m.producedRecords.Load()) })
	recordsOut := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "gostream_fetch_records_total", Help: "Records in the batches returned to fetchers, from the offset each asked for.",
	}, func() float64 { return float64(m.fetchedRecords.Load()) })
	m.registry.MustRegister(m.groupRebuild, m.rebalances, m.requests, m.requestErrors, m.requestDuration,
		m.kafkaRequests, m.kafkaFailures, m.kafkaDuration, m.bytesIn, m.bytesOut, m.bytesSent,
		recordsIn, recordsOut, m.fsyncDuration, m.connections, m.partitions, m.staleEpochs, m.replication,
		m.refusedConns, m.refusedRequests,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observeKafka counts one Kafka request (kafkaapi.Config.Observe).
func (m *metrics) observeKafka(api string, start time.Time, err error) {
	m.kafkaRequests.WithLabelValues(api).Inc()
	if err != nil {
		m.kafkaFailures.WithLabelValues(api).Inc()
		return
	}
	m.kafkaDuration.WithLabelValues(api).Observe(time.Since(start).Seconds())
}

// observeFsync counts one fsync of a log that took d.
func (m *metrics) observeFsync(d time.Duration) {
	m.fsyncDuration.Observe(d.Seconds())
	m.fsyncs.Lock()
	defer m.fsyncs.Unlock()
	m.fsyncs.count++
	m.fsyncs.total += d
	m.fsyncs.max = max(m.fsyncs.max, d)
}

// consoleCounters are the totals the console's charts sample, every
// 10 s, from one goroutine: reading them starts the next interval's
// longest fsync.
func (m *metrics) consoleCounters() console.Counters {
	m.fsyncs.Lock()
	defer m.fsyncs.Unlock()
	c := console.Counters{
		RecordsProduced: m.producedRecords.Load(),
		RecordsFetched:  m.fetchedRecords.Load(),
		Fsyncs:          m.fsyncs.count,
		FsyncTime:       m.fsyncs.total,
		FsyncMax:        m.fsyncs.max,
	}
	m.fsyncs.max = 0
	return c
}

func (m *metrics) observeRequest(api transport.API, start time.Time, err error) {
	name := api.String()
	m.requests.WithLabelValues(name).Inc()
	m.requestDuration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	if err != nil {
		code := transport.CodeUnknown
		var te *transport.Error
		if errors.As(err, &te) {
			code = te.Code
		}
		m.requestErrors.WithLabelValues(name, code.String()).Inc()
	}
}

package console

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"gostream/client"
	"gostream/metadata"
	"gostream/transport"
)

// Counters are the node's running totals that the charts sample: each
// only grows, but FsyncMax.
type Counters struct {
	// RecordsProduced are the records the node acknowledged to
	// producers, as a partition's leader.
	RecordsProduced uint64
	// RecordsFetched are the records in the batches the node returned to
	// consumers.
	RecordsFetched uint64
	// Fsyncs are the fsyncs of the node's logs, and FsyncTime their total
	// duration.
	Fsyncs    uint64
	FsyncTime time.Duration
	// FsyncMax is the longest fsync since Config.Counters was last
	// called (0 when there was none).
	FsyncMax time.Duration
}

// DefaultSeriesInterval is how often a node samples its counters for the
// charts, unless Config.SeriesInterval says otherwise.
const DefaultSeriesInterval = 10 * time.Second

// seriesSamples is how many samples the charts keep: an hour at 10 s.
const seriesSamples = 360

// maxSeriesBody bounds the answer read from another node.
const maxSeriesBody = 1 << 20

// Series is the answer of GET /ui/api/series: one node's samples of the
// last hour (of the last 360 intervals), in memory, lost at its restart.
type Series struct {
	// Node is the node that sampled them.
	Node int32 `json:"node"`
	// IntervalMs is the time between two samples, in milliseconds.
	IntervalMs int64 `json:"intervalMs"`
	// Samples are oldest first.
	Samples []Sample `json:"samples"`
}

// Sample is what a node counted over one interval.
type Sample struct {
	// Time is the end of the interval, Unix milliseconds.
	Time int64 `json:"time"`
	// ProducedPerSec and FetchedPerSec are the records produced to and
	// fetched from this node, per second over the interval.
	ProducedPerSec float64 `json:"producedPerSec"`
	FetchedPerSec  float64 `json:"fetchedPerSec"`
	// Fsyncs are the fsyncs of the interval; FsyncMeanMs and FsyncMaxMs
	// their mean and longest duration, in milliseconds (0 without any).
	Fsyncs      uint64  `json:"fsyncs"`
	FsyncMeanMs float64 `json:"fsyncMeanMs"`
	FsyncMaxMs  float64 `json:"fsyncMaxMs"`
}

// sampler samples the node's counters every interval, from New to
// stopSeries, and keeps the last seriesSamples.
type sampler struct {
	counters func() Counters
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}

	mu struct {
		sync.Mutex
		ring [seriesSamples]Sample
		n    int // samples in ring
		next int // where the next goes
	}
}

// startSeries starts the sampler, when the node gives its counters.
func (s *Server) startSeries() {
	if s.cfg.Counters == nil {
		return
	}
	interval := s.cfg.SeriesInterval
	if interval <= 0 {
		interval = DefaultSeriesInterval
	}
	s.sampler = &sampler{counters: s.cfg.Counters, interval: interval, stop: make(chan struct{}), done: make(chan struct{})}
	go s.sampler.run()
}

// stopSeries stops the sampler and waits for it. It is called once, by
// Close.
func (s *Server) stopSeries() {
	if s.sampler != nil {
		close(s.sampler.stop)
		<-s.sampler.done
	}
}

func (sm *sampler) run() {
	defer close(sm.done)
	t := time.NewTicker(sm.interval)
	defer t.Stop()
	prev, prevAt := sm.counters(), time.Now()
	for {
		select {
		case <-sm.stop:
			return
		case now := <-t.C:
			cur := sm.counters()
			sm.add(sampleOf(prev, cur, now.Sub(prevAt), now))
			prev, prevAt = cur, now
		}
	}
}

// sampleOf is the sample of an interval of length d ending at end, from
// the counters at its start and at its end.
func sampleOf(prev, cur Counters, d time.Duration, end time.Time) Sample {
	delta := func(a, b uint64) uint64 {
		if b < a {
			return 0 // counters only grow; a node's own never go back
		}
		return b - a
	}
	secs := max(d.Seconds(), 1e-3)
	out := Sample{
		Time:           end.UnixMilli(),
		ProducedPerSec: float64(delta(prev.RecordsProduced, cur.RecordsProduced)) / secs,
		FetchedPerSec:  float64(delta(prev.RecordsFetched, cur.RecordsFetched)) / secs,
		Fsyncs:         delta(prev.Fsyncs, cur.Fsyncs),
		FsyncMaxMs:     ms(cur.FsyncMax),
	}
	if out.Fsyncs > 0 && cur.FsyncTime > prev.FsyncTime {
		out.FsyncMeanMs = ms(cur.FsyncTime-prev.FsyncTime) / float64(out.Fsyncs)
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (sm *sampler) add(smp Sample) {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	sm.mu.ring[sm.mu.next] = smp
	sm.mu.next = (sm.mu.next + 1) % seriesSamples
	sm.mu.n = min(sm.mu.n+1, seriesSamples)
}

// samples returns the samples kept, oldest first.
func (sm *sampler) samples() []Sample {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	out := make([]Sample, 0, sm.mu.n)
	first := (sm.mu.next - sm.mu.n + seriesSamples) % seriesSamples
	for i := range sm.mu.n {
		out = append(out, sm.mu.ring[(first+i)%seriesSamples])
	}
	return out
}

// localSeries is this node's samples.
func (s *Server) localSeries() Series {
	out := Series{Node: s.cfg.NodeID, IntervalMs: DefaultSeriesInterval.Milliseconds(), Samples: []Sample{}}
	if s.sampler != nil {
		out.IntervalMs = s.sampler.interval.Milliseconds()
		out.Samples = s.sampler.samples()
	}
	return out
}

func (s *Server) series(w http.ResponseWriter, r *http.Request) {
	if err := s.allowed(r, metadata.OpDescribe, metadata.ResourceCluster, ""); err != nil {
		writeErr(w, err)
		return
	}
	node, err := parseOptionalID(r.URL.RawQuery, "node")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	if node < 0 || node == s.cfg.NodeID {
		writeJSON(w, http.StatusOK, s.localSeries())
		return
	}
	c, ctx, cancel, ok := s.dial(w, r)
	if !ok {
		return
	}
	defer cancel()
	series, err := remoteSeries(ctx, c, node)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, series)
}

// remoteSeries asks node id, at the HTTP address the cluster's metadata
// gives it, for its own samples. The node asks as itself (its client's
// certificate): the browser's credentials go nowhere else.
func remoteSeries(ctx context.Context, c *client.Client, id int32) (Series, error) {
	m, err := c.Metadata(ctx)
	if err != nil {
		return Series{}, err
	}
	var addr string
	found := false
	for _, b := range m.Brokers {
		if b.ID == id {
			addr, found = b.HTTP, true
		}
	}
	switch {
	case !found:
		return Series{}, fmt.Errorf("%w: no node %d in the cluster", transport.ErrUnknownBroker, id)
	case addr == "":
		return Series{}, fmt.Errorf("node %d has no HTTP address in the cluster's metadata", id)
	}
	url := c.HTTPURL(addr, "/ui/api/series")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Series{}, fmt.Errorf("ask node %d for its samples: %w", id, err)
	}
	resp, err := c.HTTPDo(req)
	if err != nil {
		return Series{}, fmt.Errorf("ask node %d for its samples: %w", id, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxSeriesBody))
	if err != nil {
		return Series{}, fmt.Errorf("read node %d's samples: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e apiError
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(body[:min(len(body), 200)]))
		}
		return Series{}, fmt.Errorf("node %d answered GET %s with %s: %s", id, url, resp.Status, e.Error)
	}
	var out Series
	if err := json.Unmarshal(body, &out); err != nil {
		return Series{}, fmt.Errorf("node %d's samples: %w", id, err)
	}
	if out.Node != id {
		return Series{}, fmt.Errorf("the node at %s answered as node %d, not %d", addr, out.Node, id)
	}
	return out, nil
}

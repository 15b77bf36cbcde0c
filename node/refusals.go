package node

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"gostream/transport"
)

// refusalWindow is how long a refusal keeps the node's health degraded.
const refusalWindow = 30 * time.Second

// refusals remembers the connections and requests the node turned away
// by a limit, for /api/health and /metrics.
type refusals struct {
	metrics *metrics
	now     func() time.Time

	mu struct {
		sync.Mutex
		streaks map[refusalKey]*refusalStreak
	}
}

type refusalKey struct {
	listener string // "rpc" or "http"
	limit    transport.Limit
}

// refusalStreak is a run of refusals of one kind with no gap of
// refusalWindow between them.
type refusalStreak struct {
	first, last time.Time
	count       int64
	latest      transport.Refusal
}

func newRefusals(m *metrics) *refusals {
	r := &refusals{metrics: m, now: time.Now}
	r.mu.streaks = make(map[refusalKey]*refusalStreak)
	return r
}

// record counts one refusal on listener.
func (r *refusals) record(listener string, rf transport.Refusal) {
	if rf.Limit == transport.LimitMemory {
		r.metrics.refusedRequests.Inc()
	} else {
		r.metrics.refusedConns.WithLabelValues(listener, rf.Limit.String()).Inc()
	}
	now := r.now()
	k := refusalKey{listener, rf.Limit}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.mu.streaks[k]
	if s == nil || now.Sub(s.last) > refusalWindow {
		s = &refusalStreak{first: now}
		r.mu.streaks[k] = s
	}
	s.last, s.latest = now, rf
	s.count++
}

// problems describes the refusals of the last refusalWindow, one line per
// kind, for /api/health; none means the node refused nothing lately.
func (r *refusals) problems() []string {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, s := range r.mu.streaks {
		if now.Sub(s.last) > refusalWindow {
			delete(r.mu.streaks, k)
			continue
		}
		since := now.Sub(s.first).Round(time.Second)
		switch k.limit {
		case transport.LimitMemory:
			out = append(out, fmt.Sprintf("refusing requests: %d Busy in the last %s: the node's request memory (%d bytes, --request-memory) is in use",
				s.count, max(since, time.Second), s.latest.Max))
		case transport.LimitConnsPerAddr:
			out = append(out, fmt.Sprintf("refusing connections: %d on the %s listener in the last %s: %s holds the per-address limit of %d (--max-conns-per-ip)",
				s.count, k.listener, max(since, time.Second), s.latest.Addr, s.latest.Max))
		default:
			out = append(out, fmt.Sprintf("refusing connections: %d on the %s listener in the last %s: the limit of %d connections in all is reached (--max-conns)",
				s.count, k.listener, max(since, time.Second), s.latest.Max))
		}
	}
	slices.Sort(out)
	return out
}

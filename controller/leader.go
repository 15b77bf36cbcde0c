package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

const (
	aliveTimeout  = 1500 * time.Millisecond
	fenceTimeout  = 3 * time.Second
	digestTimeout = 30 * time.Second
)

// candidate is one replica a failover considers: what it answered, and
// where its log starts (which bounds the range it shares with another).
type candidate struct {
	transport.Candidate
	logStart int64
	hw       int64 // its high watermark as it answered, -1 when unknown
}

// chooseLeader picks the candidate a failover promotes, by index, or -1
// when there is none: with to > 0, broker to if it answered; otherwise,
// among those that answered, the greatest (last epoch, log end), ties to
// the lowest broker id. Every active replica holds every acknowledged
// record, so the one with the most history loses nothing acknowledged.
func chooseLeader(cands []candidate, to int32) int {
	chosen := -1
	for i, cd := range cands {
		if !cd.Reachable {
			continue
		}
		if to > 0 {
			if cd.Broker == to {
				return i
			}
			continue
		}
		if chosen < 0 || moreHistory(cd.Candidate, cands[chosen].Candidate) {
			chosen = i
		}
	}
	return chosen
}

// acknowledgedEnd is the highest high watermark the candidates that
// answered report: every record below it was acknowledged to a producer
// (a replica never holds a high watermark above the leader's, and the
// leader's is what it acknowledged). Once every active replica is fenced
// (a leadership move fences the old leader too), no write can be
// acknowledged any more, so this is final.
func acknowledgedEnd(cands []candidate) int64 {
	end := int64(-1)
	for _, cd := range cands {
		if cd.Reachable {
			end = max(end, cd.hw)
		}
	}
	return end
}

// moreHistory reports whether a is to be preferred to b as leader.
func moreHistory(a, b transport.Candidate) bool {
	if a.LastEpoch != b.LastEpoch {
		return a.LastEpoch > b.LastEpoch
	}
	if a.LogEndOffset != b.LogEndOffset {
		return a.LogEndOffset > b.LogEndOffset
	}
	return a.Broker < b.Broker
}

// topicID is the id of the topic of that name in the controller's
// metadata, for the requests it sends about the topic's partitions.
func (c *Controller) topicID(topic string) string {
	if t := c.Metadata().Topic(topic); t != nil {
		return t.ID
	}
	return ""
}

// call makes one RPC to a registered broker.
func (c *Controller) call(ctx context.Context, broker int32, api transport.API, req, resp transport.Message) error {
	b, ok := c.Metadata().Broker(broker)
	if !ok {
		return fmt.Errorf("%w: broker %d is not registered", ErrBrokerNotAvailable, broker)
	}
	return c.cfg.Pool.Call(ctx, b.Addr, api, req, resp)
}

// silence remembers, within one operator command, the brokers found not
// to answer, so that a broker cut off by the network costs aliveTimeout
// once per command, not once per partition (one command may name
// thousands). Safe for concurrent use.
type silence struct {
	mu     sync.Mutex
	silent map[int32]bool
}

func (s *silence) is(b int32) bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.silent[b]
}

func (s *silence) mark(b int32) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.silent == nil {
		s.silent = map[int32]bool{}
	}
	s.silent[b] = true
}

// replicaHealth asks broker for its replica of a partition and reports
// whether it answers at all, and, when it does, why its replica cannot be
// trusted ("" when it can): damaged, behind an active follower, its
// storage failed, offline, or not there.
func (c *Controller) replicaHealth(ctx context.Context, quiet *silence, broker int32, topic string, partition int32) (st *transport.ReplicaStateResponse, answers bool, problem string) {
	if quiet.is(broker) {
		return nil, false, ""
	}
	ctx, cancel := context.WithTimeout(ctx, aliveTimeout)
	defer cancel()
	st = &transport.ReplicaStateResponse{}
	err := c.call(ctx, broker, transport.APIReplicaState, &transport.ReplicaStateRequest{Topic: topic, TopicID: c.topicID(topic), Partition: partition}, st)
	switch {
	case err == nil:
		return st, true, st.Problem
	case answeredWith(err):
		return nil, true, err.Error()
	}
	quiet.mark(broker)
	return nil, false, ""
}

// answeredWith reports whether err is a broker's own answer about its
// replica (it is there but unusable, or not there), not a failure to
// reach the broker.
func answeredWith(err error) bool {
	for _, e := range []error{transport.ErrStorageFailed, transport.ErrNoSpace, transport.ErrUnknownPartition,
		transport.ErrUnknownTopic, transport.ErrUnknownTopicID, transport.ErrNotReady} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// leaderUsable reports whether a partition's leader answers with a
// healthy replica that is not behind any active follower; when it does not,
// problem says why (empty when the leader does not answer at all). The
// followers are asked first, then the leader: a leader writes before its
// followers do, so a follower read earlier never passes a healthy leader
// read later.
func (c *Controller) leaderUsable(ctx context.Context, quiet *silence, part metadata.Partition, topic string, partition int32) (problem string, ok bool) {
	if quiet.is(part.Leader) {
		return "", false // found silent in this command: nothing to compare
	}
	followers := c.probe(ctx, quiet, topic, partition, part.Active, part.Leader, 0)
	st, answers, problem := c.replicaHealth(ctx, quiet, part.Leader, topic, partition)
	switch {
	case !answers:
		return "", false
	case problem != "":
		return problem, false
	}
	for _, f := range followers {
		if f.Reachable && (f.LastEpoch > st.LastEpoch || f.LastEpoch == st.LastEpoch && f.LogEndOffset > st.LogEndOffset) {
			return fmt.Sprintf("it is behind active follower %d (log end %d, last epoch %d; the leader's %d, %d)",
				f.Broker, f.LogEndOffset, f.LastEpoch, st.LogEndOffset, st.LastEpoch), false
		}
	}
	return "", true
}

// probe asks every active replica but leader for its state, fencing it at
// epoch when epoch > 0, all at once. A broker found silent before in the
// command is not asked, unless the request fences (a fence is never
// skipped: it is what keeps an old leader from acknowledging anything).
func (c *Controller) probe(ctx context.Context, quiet *silence, topic string, partition int32, active []int32, leader, epoch int32) []candidate {
	var out []candidate
	var mu sync.Mutex
	var wg sync.WaitGroup
	id := c.topicID(topic)
	for _, b := range active {
		if b == leader {
			continue
		}
		if epoch == 0 && quiet.is(b) {
			out = append(out, candidate{Candidate: transport.Candidate{Broker: b, LogEndOffset: -1, LastEpoch: -1, Note: "does not answer"}})
			continue
		}
		wg.Add(1)
		go func(b int32) {
			defer wg.Done()
			timeout := fenceTimeout
			if epoch == 0 {
				timeout = aliveTimeout
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			var st transport.ReplicaStateResponse
			err := c.call(cctx, b, transport.APIReplicaState, &transport.ReplicaStateRequest{Topic: topic, TopicID: id, Partition: partition, LeaderEpoch: epoch}, &st)
			cd := candidate{Candidate: transport.Candidate{Broker: b, LogEndOffset: -1, LastEpoch: -1}, hw: -1}
			if err != nil {
				cd.Note = err.Error()
				if epoch == 0 && !answeredWith(err) {
					quiet.mark(b) // as replicaHealth would
				}
			} else {
				cd.Reachable, cd.LastEpoch, cd.LogEndOffset, cd.logStart, cd.hw = true, st.LastEpoch, st.LogEndOffset, st.LogStartOffset, st.HighWatermark
			}
			mu.Lock()
			out = append(out, cd)
			mu.Unlock()
		}(b)
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].Broker < out[j].Broker })
	return out
}

// agree compares two replicas over their shared offsets by digest.
func (c *Controller) agree(ctx context.Context, topic string, partition int32, a, b *candidate) (bool, string) {
	to := min(a.LogEndOffset, b.LogEndOffset)
	ctx, cancel := context.WithTimeout(ctx, digestTimeout)
	defer cancel()
	var da, db transport.ReplicaDigestResponse
	// The shared range starts at the later log start of the two, as the
	// probe read them.
	req := &transport.ReplicaDigestRequest{Topic: topic, TopicID: c.topicID(topic), Partition: partition, From: max(a.logStart, b.logStart), To: to}
	if req.From >= to {
		return true, "no shared offsets"
	}
	if err := c.call(ctx, a.Broker, transport.APIReplicaDigest, req, &da); err != nil {
		return false, fmt.Sprintf("digest of [%d, %d) on broker %d: %v", req.From, to, a.Broker, err)
	}
	if err := c.call(ctx, b.Broker, transport.APIReplicaDigest, req, &db); err != nil {
		return false, fmt.Sprintf("digest of [%d, %d) on broker %d: %v", req.From, to, b.Broker, err)
	}
	if string(da.Digest) != string(db.Digest) {
		return false, fmt.Sprintf("offsets [%d, %d) differ", req.From, to)
	}
	return true, fmt.Sprintf("offsets [%d, %d) identical", req.From, to)
}

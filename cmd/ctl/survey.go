package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"gostream/client"
	"gostream/httpapi"
	"gostream/metadata"
	"gostream/transport"
)

// A survey asks every broker, in parallel and each under a short deadline,
// what it sees: cluster status and broker list are built from the answers,
// so that one dead or paused broker shows up as such instead of holding the
// command up or failing it.

// maxProbeTimeout bounds each request of a survey to one broker (and
// --timeout bounds it further): a broker that has not answered by then is
// reported as not answering.
const maxProbeTimeout = 2 * time.Second

// maxConcurrentProbes bounds the requests a survey or topic describe has in
// flight at once.
const maxConcurrentProbes = 16

// Gossip states, as memberlist names them, and "unknown" when no view
// decides.
const (
	gossipAlive   = "alive"
	gossipSuspect = "suspect"
	gossipDead    = "dead"
	gossipLeft    = "left"
	gossipUnknown = "unknown"
)

// gone reports whether a gossip state says the process is not there.
func gone(state string) bool { return state == gossipDead || state == gossipLeft }

// nodeView is what one broker answered, or that it did not.
type nodeView struct {
	id   int32
	addr string
	// err is why DescribeCluster failed; nil when the broker answered.
	err error
	// meta is the metadata the broker holds, nil when it holds none yet or
	// sent some that does not parse.
	meta    *metadata.Cluster
	members map[int32]client.Member
	// controllerRefusal, from the controller's node, is why it refuses
	// changes, or "".
	controllerRefusal string
	// impostors are gossip members that claim a broker id another member
	// has: a second process started with a used --id.
	impostors []client.Member
	// status is the broker's GET /api/status, nil when not asked or when it
	// failed.
	status *nodeStatus
}

func (v *nodeView) answered() bool { return v != nil && v.err == nil }

// isRegisteredRoot reports whether m has the storage root that the view's
// metadata binds m's broker id to.
func (v *nodeView) isRegisteredRoot(m client.Member) bool {
	if v.meta == nil {
		return false
	}
	b, ok := v.meta.Broker(m.BrokerID)
	return ok && b.RootID != "" && b.RootID == m.RootID
}

// nodeStatus is the part of a node's GET /api/status (node.Status) that
// cluster status reads: the replicas it hosts and, for those it leads, its
// view of each follower.
type nodeStatus struct {
	Node       int32           `json:"node"`
	Partitions []hostedReplica `json:"partitions"`
}

// hostedReplica is one replica a node hosts, as its status shows it.
type hostedReplica struct {
	Topic        string           `json:"topic"`
	Partition    int32            `json:"partition"`
	Leader       int32            `json:"leader"`
	LeaderEpoch  int32            `json:"leader_epoch"`
	LogEndOffset int64            `json:"log_end_offset"`
	Followers    []followerStatus `json:"followers"`
	// Offline or Problem say why the replica cannot serve: it could not
	// be opened (damaged), or it is damaged, failed or behind.
	Offline string `json:"offline"`
	Problem string `json:"problem"`
}

// followerStatus is a leader's view of one follower.
type followerStatus struct {
	Broker       int32  `json:"broker"`
	LogEndOffset int64  `json:"log_end_offset"` // -1 when unknown
	State        string `json:"state"`          // in-sync, lagging, diverged
	Error        string `json:"error"`
}

// Follower states as a leader reports them.
const (
	followerInSync   = "in-sync"
	followerLagging  = "lagging"
	followerDiverged = "diverged"
)

// followers returns the leader's view of the followers of topic/partition
// in epoch, if this status is from that partition's leader.
// statusOf is broker id's GET /api/status, nil when it did not answer.
func (s *survey) statusOf(id int32) *nodeStatus {
	if v := s.views[id]; v != nil {
		return v.status
	}
	return nil
}

// unusable says why the node's replica of a partition cannot serve, or ""
// when it can (or the node did not say).
func (s *nodeStatus) unusable(topic string, partition int32) string {
	if s == nil {
		return ""
	}
	for _, p := range s.Partitions {
		if p.Topic == topic && p.Partition == partition {
			if p.Offline != "" {
				return p.Offline
			}
			return p.Problem
		}
	}
	return ""
}

func (s *nodeStatus) followers(topic string, partition, epoch int32) (map[int32]followerStatus, bool) {
	if s == nil {
		return nil, false
	}
	for _, p := range s.Partitions {
		if p.Topic != topic || p.Partition != partition {
			continue
		}
		if p.Leader != s.Node || p.LeaderEpoch != epoch {
			return nil, false
		}
		out := make(map[int32]followerStatus, len(p.Followers))
		for _, f := range p.Followers {
			out[f.Broker] = f
		}
		return out, true
	}
	return nil, false
}

// survey is the cluster as its brokers described it.
type survey struct {
	// meta is the controller's metadata when it answered, else the newest
	// any broker holds.
	meta *metadata.Cluster
	// metaFrom is the broker meta came from, or -1 for the metadata the
	// client bootstrapped with.
	metaFrom int32
	// views holds every broker asked, answering or not.
	views map[int32]*nodeView
	// gossip is every broker's gossip state as judged by gossipFrom.
	gossip     map[int32]string
	gossipFrom string
	// disputed holds the brokers whose gossip state no majority agrees on.
	disputed map[int32]bool
}

// controllerAnswered reports whether the controller answered.
func (s *survey) controllerAnswered() bool { return s.views[s.meta.ControllerID].answered() }

// reachable reports whether broker id answered.
func (s *survey) reachable(id int32) bool { return s.views[id].answered() }

func (s *survey) gossipOf(id int32) string {
	if st, ok := s.gossip[id]; ok {
		return st
	}
	return gossipUnknown
}

// surveyCluster asks every broker in the metadata for its view of the
// cluster (and, with status, for its GET /api/status). It fails, with
// BrokerNotAvailable, only when no broker answers.
func surveyCluster(ctx context.Context, cl *client.Client, g globals, withStatus bool) (*survey, error) {
	m, err := cl.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	s := &survey{meta: clusterFromClient(m), metaFrom: -1, views: map[int32]*nodeView{}}
	probe := min(g.timeout, maxProbeTimeout)
	// A broker's metadata may name brokers the bootstrap answer did not:
	// ask those too, once.
	for round := 0; round < 2; round++ {
		var ask []metadata.Broker
		for _, b := range s.meta.Brokers {
			if _, ok := s.views[b.ID]; !ok {
				ask = append(ask, b)
			}
		}
		if len(ask) == 0 {
			break
		}
		for _, v := range askBrokers(ctx, cl, ask, probe, withStatus) {
			s.views[v.id] = v
		}
		s.chooseMetadata()
	}
	var errs []string
	for _, id := range sortedKeys(s.views) {
		if v := s.views[id]; !v.answered() {
			errs = append(errs, fmt.Sprintf("broker %d: %v", id, v.err))
		}
	}
	if len(errs) == len(s.views) {
		return nil, fmt.Errorf("%w: no broker answered: %s", transport.ErrBrokerNotAvailable, strings.Join(errs, "; "))
	}
	s.judgeGossip()
	return s, nil
}

// askBrokers asks each broker, in parallel, for DescribeCluster (and its
// status), each request bounded by probe.
func askBrokers(ctx context.Context, cl *client.Client, brokers []metadata.Broker, probe time.Duration, withStatus bool) []*nodeView {
	out := make([]*nodeView, len(brokers))
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentProbes)
	for i, b := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, probe)
			defer cancel()
			v := &nodeView{id: b.ID, addr: b.Addr}
			out[i] = v
			cv, err := cl.DescribeCluster(pctx, b.Addr)
			if err != nil {
				v.err = err
				return
			}
			if cv.NodeID != b.ID {
				v.err = fmt.Errorf("%s answers as broker %d, not %d", b.Addr, cv.NodeID, b.ID)
				return
			}
			v.controllerRefusal = cv.ControllerRefusal
			if len(cv.Metadata) > 0 {
				// A node validates metadata before it holds it; one that
				// does not parse here is treated as none.
				v.meta, _ = metadata.Parse(cv.Metadata, fmt.Sprintf("broker %d", b.ID))
			}
			v.members = make(map[int32]client.Member, len(cv.Members))
			for _, m := range cv.Members {
				// Another process claiming a registered broker's id shows
				// as a member of its own; the broker is the one with the
				// storage root the controller bound.
				if old, dup := v.members[m.BrokerID]; dup {
					v.impostors = append(v.impostors, m)
					if !v.isRegisteredRoot(m) || v.isRegisteredRoot(old) {
						continue
					}
					v.impostors[len(v.impostors)-1] = old
				}
				v.members[m.BrokerID] = m
			}
			if withStatus && b.HTTP != "" {
				v.status, _ = getStatus(pctx, b.HTTP)
			}
		}()
	}
	wg.Wait()
	return out
}

// chooseMetadata takes the controller's metadata if it answered with some,
// else the newest a broker holds, else keeps what the client had.
func (s *survey) chooseMetadata() {
	if v := s.views[s.meta.ControllerID]; v.answered() && v.meta != nil {
		s.meta, s.metaFrom = v.meta, v.id
		return
	}
	for _, id := range sortedKeys(s.views) {
		if v := s.views[id]; v.answered() && v.meta != nil && v.meta.Epoch > s.meta.Epoch {
			s.meta, s.metaFrom = v.meta, v.id
		}
	}
}

// judgeGossip decides every broker's gossip state: the controller's view
// when it answered, else the state that more than half of the answering
// brokers report (unknown without such a majority).
func (s *survey) judgeGossip() {
	s.gossip, s.disputed = map[int32]string{}, map[int32]bool{}
	ctrl := s.meta.ControllerID
	if v := s.views[ctrl]; v.answered() {
		for id, m := range v.members {
			s.gossip[id] = m.State
		}
		s.gossipFrom = fmt.Sprintf("the controller, broker %d", ctrl)
		return
	}
	var answering []*nodeView
	ids := map[int32]bool{}
	for _, id := range sortedKeys(s.views) {
		if v := s.views[id]; v.answered() {
			answering = append(answering, v)
			for m := range v.members {
				ids[m] = true
			}
		}
	}
	for id := range ids {
		votes := map[string]int{}
		for _, v := range answering {
			st := gossipUnknown
			if m, ok := v.members[id]; ok {
				st = m.State
			}
			votes[st]++
		}
		s.gossip[id] = gossipUnknown
		s.disputed[id] = true
		for st, n := range votes {
			if 2*n > len(answering) {
				s.gossip[id] = st
				delete(s.disputed, id)
			}
		}
	}
	s.gossipFrom = fmt.Sprintf("the majority of the %d answering brokers (the controller, broker %d, does not answer)", len(answering), ctrl)
}

// unregisteredMembers returns the gossip members the deciding views know
// that are not registered brokers, by id.
func (s *survey) unregisteredMembers() map[int32]client.Member {
	out := map[int32]client.Member{}
	for _, v := range s.views {
		if !v.answered() {
			continue
		}
		for id, m := range v.members {
			if _, ok := s.meta.Broker(id); !ok {
				out[id] = m
			}
		}
	}
	return out
}

// getStatus asks a node's HTTP surface for GET /api/status.
func getStatus(ctx context.Context, addr string) (*nodeStatus, error) {
	url := "http://" + addr + httpapi.StatusPath
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var st nodeStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&st); err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return &st, nil
}

// clusterFromClient is the metadata the client bootstrapped with, in the
// form of package metadata.
func clusterFromClient(m client.Metadata) *metadata.Cluster {
	c := &metadata.Cluster{ClusterID: m.ClusterID, Epoch: m.Epoch, ControllerID: m.ControllerID}
	for _, b := range m.Brokers {
		c.Brokers = append(c.Brokers, metadata.Broker{ID: b.ID, Addr: b.Addr, HTTP: b.HTTP, Gossip: b.Gossip})
	}
	for _, t := range m.Topics {
		mt := metadata.Topic{Name: t.Name, ReplicationFactor: t.ReplicationFactor, Sealed: t.Sealed}
		for _, p := range t.Partitions {
			mt.Partitions = append(mt.Partitions, metadata.Partition{
				Replicas: p.Replicas, Active: p.Active, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			})
		}
		c.Topics = append(c.Topics, mt)
	}
	return c
}

func sortedKeys[V any](m map[int32]V) []int32 {
	ids := make([]int32, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// replicaStater asks a broker for its replica of a partition.
type replicaStater interface {
	state(ctx context.Context, broker int32, topic string, partition int32) (client.ReplicaState, error)
}

// replicaProber asks replicas for their state under a short deadline each,
// and stops asking a broker that has once failed to answer at all, so that
// a dead broker costs one deadline, not one per partition.
type replicaProber struct {
	cl    *client.Client
	probe time.Duration

	mu struct {
		sync.Mutex
		down map[int32]error
	}
}

func newReplicaProber(cl *client.Client, g globals) *replicaProber {
	p := &replicaProber{cl: cl, probe: min(g.timeout, maxProbeTimeout)}
	p.mu.down = map[int32]error{}
	return p
}

// markDown records that broker does not answer.
func (p *replicaProber) markDown(broker int32, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.mu.down[broker]; !ok {
		p.mu.down[broker] = err
	}
}

// state asks broker for its replica of topic/partition, observing only.
func (p *replicaProber) state(ctx context.Context, broker int32, topic string, partition int32) (client.ReplicaState, error) {
	p.mu.Lock()
	err := p.mu.down[broker]
	p.mu.Unlock()
	if err != nil {
		return client.ReplicaState{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.probe)
	defer cancel()
	st, err := p.cl.ReplicaState(ctx, broker, topic, partition)
	if errors.Is(err, transport.ErrBrokerNotAvailable) || errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		p.markDown(broker, err)
	}
	return st, err
}

// leaderOffsets asks a partition's leader, broker leader, for its offsets
// as state asks a replica: under one probe deadline (within which the
// client retries), and not at all once the broker has failed to answer.
func (p *replicaProber) leaderOffsets(ctx context.Context, leader int32, topic string, partition int32) (client.PartitionOffsets, error) {
	p.mu.Lock()
	err := p.mu.down[leader]
	p.mu.Unlock()
	if err != nil {
		return client.PartitionOffsets{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.probe)
	defer cancel()
	offs, err := p.cl.ListOffsets(ctx, topic, partition)
	if errors.Is(err, transport.ErrBrokerNotAvailable) || errors.Is(err, transport.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
		p.markDown(leader, err)
	}
	return offs, err
}

package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// A survey asks every broker, in parallel and each under a short deadline,
// what it sees: the reports are built from the answers, so that one dead
// or paused broker shows up as such instead of holding the caller up or
// failing it.

// nodeView is what one broker answered, or that it did not.
type nodeView struct {
	id   int32
	addr string
	http string
	// err is why DescribeCluster failed; nil when the broker answered.
	err error
	// meta is the metadata the broker holds, nil when it holds none yet or
	// sent some that does not parse.
	meta    *metadata.Cluster
	members map[int32]Member
	// controllerRefusal, from the controller's node, is why it refuses
	// changes, or "".
	controllerRefusal string
	// impostors are gossip members that claim a broker id another member
	// has: a second process started with a used --id.
	impostors []Member
	// status is the broker's GET /api/status, nil when not asked or when it
	// failed (statusErr).
	status    *transport.NodeStatus
	statusErr error
	// group is the broker's part in the controller group, nil when not
	// asked or it did not say (a node of an older version).
	group *ControllerStatus
}

func (v *nodeView) answered() bool { return v != nil && v.err == nil }

// isRegisteredRoot reports whether m has the storage root that the view's
// metadata binds m's broker id to.
func (v *nodeView) isRegisteredRoot(m Member) bool {
	if v.meta == nil {
		return false
	}
	b, ok := v.meta.Broker(m.BrokerID)
	return ok && b.RootID != "" && b.RootID == m.RootID
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
	gossip     map[int32]transport.GossipState
	gossipFrom GossipSource
	// disputed holds the brokers whose gossip state no majority agrees on.
	disputed map[int32]bool
	// replicas indexes each broker's status document by partition (the
	// position in its Partitions), made at its first look-up: judging
	// looks up each partition's replicas several times, and a scan of
	// the document each time costs the square of the cluster's
	// partitions. Only the goroutine that judges uses it.
	replicas map[int32]map[TopicPartition]int
}

// controllerAnswered reports whether the controller answered.
func (s *survey) controllerAnswered() bool { return s.views[s.meta.ControllerID].answered() }

// reachable reports whether broker id answered.
func (s *survey) reachable(id int32) bool { return s.views[id].answered() }

func (s *survey) gossipOf(id int32) transport.GossipState {
	if st, ok := s.gossip[id]; ok {
		return st
	}
	return transport.GossipUnknown
}

// statusOf is broker id's status document, nil when it did not give one.
func (s *survey) statusOf(id int32) *transport.NodeStatus {
	if v := s.views[id]; v != nil {
		return v.status
	}
	return nil
}

// replica is broker id's replica of topic/partition as its status
// document tells it; false when the broker gave none or it holds none.
func (s *survey) replica(id int32, topic string, partition int32) (transport.PartitionStatus, bool) {
	st := s.statusOf(id)
	if st == nil {
		return transport.PartitionStatus{}, false
	}
	index, ok := s.replicas[id]
	if !ok {
		// The first of a partition's entries, as NodeStatus.Partition
		// finds it.
		index = make(map[TopicPartition]int, len(st.Partitions))
		for i, p := range st.Partitions {
			k := TopicPartition{Topic: p.Topic, Partition: p.Partition}
			if _, dup := index[k]; !dup {
				index[k] = i
			}
		}
		if s.replicas == nil {
			s.replicas = map[int32]map[TopicPartition]int{}
		}
		s.replicas[id] = index
	}
	i, ok := index[TopicPartition{Topic: topic, Partition: partition}]
	if !ok {
		return transport.PartitionStatus{}, false
	}
	return st.Partitions[i], true
}

// unusable says why broker id's replica of a partition cannot serve, or ""
// when it can (or the broker did not say).
func (s *survey) unusable(id int32, topic string, partition int32) string {
	p, _ := s.replica(id, topic, partition)
	return p.Unusable()
}

// leaderView returns the leader's view of the followers of
// topic/partition in epoch, if broker leader's status shows it leading the
// partition in that epoch.
func (s *survey) leaderView(leader int32, topic string, partition, epoch int32) (map[int32]transport.FollowerStatus, bool) {
	p, ok := s.replica(leader, topic, partition)
	if !ok || p.Leader != s.statusOf(leader).Node || p.LeaderEpoch != epoch {
		return nil, false
	}
	out := make(map[int32]transport.FollowerStatus, len(p.Followers))
	for _, f := range p.Followers {
		out[f.Broker] = f
	}
	return out, true
}

// survey asks every broker in the metadata for its view of the cluster
// (and, with status, for its status document). It fails, with
// BrokerNotAvailable, only when no broker answers.
func (c *Client) survey(ctx context.Context, withStatus bool) (*survey, error) {
	m, err := c.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	s := &survey{meta: m.cluster(), metaFrom: -1, views: map[int32]*nodeView{}}
	probe := min(c.cfg.RequestTimeout, maxProbeTimeout)
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
		for _, v := range c.askBrokers(ctx, ask, probe, withStatus) {
			s.views[v.id] = v
		}
		s.chooseMetadata()
	}
	var errs []string
	for _, id := range sortedKeys(s.views) {
		if v := s.views[id]; !v.answered() {
			if errors.Is(v.err, transport.ErrUnauthorized) {
				// Every broker answers the same from the same ACLs.
				return nil, fmt.Errorf("cluster survey: %w", v.err)
			}
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
func (c *Client) askBrokers(ctx context.Context, brokers []metadata.Broker, probe time.Duration, withStatus bool) []*nodeView {
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
			v := &nodeView{id: b.ID, addr: b.Addr, http: b.HTTP}
			out[i] = v
			cv, err := c.DescribeCluster(pctx, b.Addr)
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
			v.addMembers(cv.Members)
			if withStatus && b.HTTP != "" {
				st, err := c.NodeStatus(pctx, b.HTTP)
				if err != nil {
					v.statusErr = err
				} else {
					v.status = &st
				}
			}
			if withStatus {
				if gs, err := c.ControllerStatus(pctx, b.Addr); err == nil && gs.Node == b.ID {
					v.group = &gs
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// addMembers records the gossip members a broker sees. Another process
// claiming a registered broker's id shows as a member of its own; the
// broker is the one with the storage root the controller bound, and the
// other an impostor.
func (v *nodeView) addMembers(members []Member) {
	v.members = make(map[int32]Member, len(members))
	for _, m := range members {
		if old, dup := v.members[m.BrokerID]; dup {
			v.impostors = append(v.impostors, m)
			if !v.isRegisteredRoot(m) || v.isRegisteredRoot(old) {
				continue
			}
			v.impostors[len(v.impostors)-1] = old
		}
		v.members[m.BrokerID] = m
	}
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
	s.gossip, s.disputed = map[int32]transport.GossipState{}, map[int32]bool{}
	ctrl := s.meta.ControllerID
	if v := s.views[ctrl]; v.answered() {
		for id, m := range v.members {
			s.gossip[id] = m.State
		}
		s.gossipFrom = GossipSource{Controller: true, ControllerID: ctrl}
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
		votes := map[transport.GossipState]int{}
		for _, v := range answering {
			st := transport.GossipUnknown
			if m, ok := v.members[id]; ok {
				st = m.State
			}
			votes[st]++
		}
		s.gossip[id] = transport.GossipUnknown
		s.disputed[id] = true
		for st, n := range votes {
			if 2*n > len(answering) {
				s.gossip[id] = st
				delete(s.disputed, id)
			}
		}
	}
	s.gossipFrom = GossipSource{ControllerID: ctrl, Voters: len(answering)}
}

// unregisteredMembers returns the gossip members the answering brokers
// know that are not registered brokers, by id.
func (s *survey) unregisteredMembers() map[int32]Member {
	out := map[int32]Member{}
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

// brokersReport lists the registered brokers, then the gossip members
// that are not registered, by id.
func (s *survey) brokersReport() BrokersReport {
	r := BrokersReport{
		ClusterID: s.meta.ClusterID, Controller: s.meta.ControllerID, ControllerAnswers: s.controllerAnswered(),
		MetadataEpoch: s.meta.Epoch, MetadataFrom: s.metaFrom, GossipFrom: s.gossipFrom, Autopilot: s.meta.Autopilot.Clone(),
		Brokers: make([]BrokerReport, 0, len(s.meta.Brokers)),
	}
	if v := s.views[s.meta.ControllerID]; v.answered() {
		r.ControllerRefusal = v.controllerRefusal
	}
	for _, b := range s.meta.Brokers {
		br := BrokerReport{ID: b.ID, Address: b.Addr, HTTP: b.HTTP, Rack: b.Rack, Listeners: b.Listeners, Kafka: b.Kafka, Registered: true, Gossip: s.gossipOf(b.ID),
			GossipDisputed: s.disputed[b.ID], MetadataEpoch: -1}
		if v := s.views[b.ID]; v != nil {
			br.Answers, br.Err = v.answered(), v.err
			if v.answered() {
				br.View, br.Impostors = v.members, v.impostors
				br.Status, br.StatusErr = v.status, v.statusErr
				if v.meta != nil {
					br.MetadataEpoch = v.meta.Epoch
				}
			}
		}
		r.Brokers = append(r.Brokers, br)
	}
	for _, id := range sortedKeys(s.unregisteredMembers()) {
		r.Brokers = append(r.Brokers, BrokerReport{ID: id, Gossip: s.gossipOf(id), GossipDisputed: s.disputed[id], MetadataEpoch: -1})
	}
	slices.SortFunc(r.Brokers, func(a, b BrokerReport) int { return int(a.ID - b.ID) })
	return r
}

// cluster is the metadata in the form of package metadata.
func (m Metadata) cluster() *metadata.Cluster {
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
	state(ctx context.Context, broker int32, topic string, partition int32) (ReplicaState, error)
}

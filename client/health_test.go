package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

// The judgement of a survey, from fixed answers: what every broker said
// (its gossip view and status document) and, for the followers the
// survey could not confirm in sync, their log ends.

// fakeStater answers ReplicaState from a table keyed "broker topic/partition";
// a missing key is a broker that does not answer.
type fakeStater map[string]int64

func (f fakeStater) state(_ context.Context, broker int32, topic string, partition int32) (ReplicaState, error) {
	end, ok := f[fmt.Sprintf("%d %s/%d", broker, topic, partition)]
	if !ok {
		return ReplicaState{}, fmt.Errorf("%w: broker %d", transport.ErrBrokerNotAvailable, broker)
	}
	return ReplicaState{LogEndOffset: end}, nil
}

// testMeta is three brokers, controller 1, and topic orders with three
// partitions of three replicas led by brokers 1, 2 and 3.
func testMeta() *metadata.Cluster {
	m := &metadata.Cluster{ControllerID: 1, Epoch: 7}
	for id := int32(1); id <= 3; id++ {
		m.Brokers = append(m.Brokers, metadata.Broker{ID: id, Addr: fmt.Sprintf("h:%d", id)})
	}
	t := metadata.Topic{Name: "orders", ReplicationFactor: 3}
	for lead := int32(1); lead <= 3; lead++ {
		rs := []int32{lead, lead%3 + 1, (lead+1)%3 + 1}
		t.Partitions = append(t.Partitions, metadata.Partition{Replicas: rs, Active: rs, Leader: lead, LeaderEpoch: 1})
	}
	m.Topics = []metadata.Topic{t}
	return m
}

// failedOver2 is testMeta after failover --broker 2: broker 2 is in no
// active set, and orders/1, which it led, is led by broker 1.
func failedOver2() *metadata.Cluster {
	m := testMeta()
	for i := range m.Topics[0].Partitions {
		p := &m.Topics[0].Partitions[i]
		p.Active = slices.DeleteFunc(slices.Clone(p.Active), func(id int32) bool { return id == 2 })
		if p.Leader == 2 {
			p.Leader, p.LeaderEpoch = 1, 2
		}
	}
	return m
}

// view is broker id answering, seeing gossip states (broker -> state) and
// leading its partition (orders/id-1) with followers in the given states.
func view(id int32, gossip map[int32]transport.GossipState, followers ...transport.FollowerStatus) *nodeView {
	v := &nodeView{id: id, members: map[int32]Member{}, status: &transport.NodeStatus{Node: id}}
	for b, st := range gossip {
		v.members[b] = Member{BrokerID: b, State: st}
	}
	v.status.Partitions = []transport.PartitionStatus{{Topic: "orders", Partition: id - 1, Leader: id, LeaderEpoch: 1, Followers: followers}}
	return v
}

func silent(id int32) *nodeView {
	return &nodeView{id: id, err: fmt.Errorf("%w: dial: connection refused", transport.ErrBrokerNotAvailable)}
}

func allAlive() map[int32]transport.GossipState {
	return map[int32]transport.GossipState{1: transport.GossipAlive, 2: transport.GossipAlive, 3: transport.GossipAlive}
}

func inSync(ids ...int32) []transport.FollowerStatus {
	var out []transport.FollowerStatus
	for _, id := range ids {
		out = append(out, transport.FollowerStatus{Broker: id, State: transport.FollowerInSync})
	}
	return out
}

func surveyOf(meta *metadata.Cluster, views ...*nodeView) *survey {
	s := &survey{meta: meta, metaFrom: meta.ControllerID, views: map[int32]*nodeView{}}
	for _, v := range views {
		s.views[v.id] = v
	}
	s.judgeGossip()
	return s
}

// brokerLine is the part of a BrokerReport that cluster status prints.
type brokerLine struct {
	ID         int32
	Address    string
	Registered bool
	Gossip     transport.GossipState
	Answers    bool
}

func brokerLines(r ClusterReport) []brokerLine {
	var out []brokerLine
	for _, b := range r.Brokers {
		out = append(out, brokerLine{b.ID, b.Address, b.Registered, b.Gossip, b.Answers})
	}
	return out
}

// said is a warning as people and scripts read it.
type said struct {
	Message string
	Command string
}

func saidOf(ws []Warning) []said {
	out := []said{}
	for _, w := range ws {
		out = append(out, said{w.Message, w.Command})
	}
	return out
}

// checkAdvice checks what every warning promises: a command, or none and
// why, and a message that says the problem and the advice.
func checkAdvice(t *testing.T, ws []Warning) {
	t.Helper()
	for _, w := range ws {
		assert.NotEmpty(t, w.Problem, "%+v", w)
		assert.True(t, strings.HasPrefix(w.Message, w.Problem), "the message starts with the problem: %+v", w)
		if w.Advice != "" {
			assert.Contains(t, w.Message, " — "+w.Advice, "%+v", w)
		}
		if w.Command != "" {
			assert.Empty(t, w.NoCommand, "a command, or a reason for none: %+v", w)
			assert.Empty(t, w.Pending, "%+v", w)
			continue
		}
		require.NotEmpty(t, w.NoCommand, "no command, and no reason: %+v", w)
		switch w.NoCommand {
		case NoCommandCovered, NoCommandControllerDown, NoCommandBrokerDown:
			assert.True(t, strings.HasPrefix(w.Pending, "gostream-ctl "), "the command to run later: %+v", w)
			assert.Contains(t, w.Message, w.Pending, "%+v", w)
		}
	}
}

func TestClusterReport(t *testing.T) {
	dead2 := map[int32]transport.GossipState{1: transport.GossipAlive, 2: transport.GossipDead, 3: transport.GossipAlive}
	registered := func(gossip ...transport.GossipState) []brokerLine {
		var out []brokerLine
		for i, g := range gossip {
			id := int32(i + 1)
			out = append(out, brokerLine{ID: id, Address: fmt.Sprintf("h:%d", id), Registered: true, Gossip: g})
		}
		return out
	}
	tests := []struct {
		name     string
		survey   *survey
		stater   fakeStater
		brokers  []brokerLine // when checked; Answers is filled from the survey
		counts   PartitionCounts
		warnings []said
		// reasons are the warnings' NoCommand, when checked.
		reasons    []NoCommandReason
		gossipFrom string
		check      func(t *testing.T, r ClusterReport)
	}{
		{
			name: "healthy",
			survey: surveyOf(testMeta(),
				view(1, allAlive(), inSync(2, 3)...), view(2, allAlive(), inSync(3, 1)...), view(3, allAlive(), inSync(1, 2)...)),
			brokers:    registered(transport.GossipAlive, transport.GossipAlive, transport.GossipAlive),
			counts:     PartitionCounts{Total: 3},
			gossipFrom: "the controller, broker 1",
			check: func(t *testing.T, r ClusterReport) {
				require.Len(t, r.Partitions, 3)
				p := r.Partitions[1]
				assert.Equal(t, "orders", p.Topic)
				assert.Equal(t, int32(1), p.Partition)
				assert.Equal(t, int32(2), p.Leader)
				assert.Equal(t, []int32{2, 3, 1}, p.Active)
				assert.Equal(t, []FollowerReport{{Broker: 1, State: transport.FollowerInSync}, {Broker: 3, State: transport.FollowerInSync}}, p.Followers)
				assert.True(t, r.ControllerAnswers)
			},
		},
		{
			name: "a leader is dead",
			survey: surveyOf(testMeta(),
				view(1, dead2, transport.FollowerStatus{Broker: 2, State: transport.FollowerLagging, LogEndOffset: -1}, transport.FollowerStatus{Broker: 3, State: transport.FollowerInSync}),
				silent(2), view(3, dead2, inSync(1, 2)...)),
			brokers: registered(transport.GossipAlive, transport.GossipDead, transport.GossipAlive),
			// orders/1 is offline; orders/0 and orders/2 have follower 2 gone.
			counts: PartitionCounts{Total: 3, UnderReplicated: 2, Offline: 1},
			warnings: []said{
				{Message: "broker 2 is registered but gossip says dead and it does not answer — check the process; if it is gone for good, fail it over", Command: "gostream-ctl failover --broker 2"},
				{Message: "partition orders/1: leader broker 2 is unreachable (gossip: dead) — the fix above (gostream-ctl failover --broker 2) covers it"},
			},
			reasons: []NoCommandReason{"", NoCommandCovered},
			check: func(t *testing.T, r ClusterReport) {
				assert.True(t, r.Partitions[1].Offline)
				assert.Equal(t, "leader broker 2 is unreachable (gossip: dead)", r.Partitions[1].OfflineReason)
				assert.Empty(t, r.Partitions[1].Followers, "nobody can say how the followers of an offline partition stand")
				assert.Equal(t, []FollowerReport{{Broker: 2, State: transport.FollowerOffline}, {Broker: 3, State: transport.FollowerInSync}}, r.Partitions[0].Followers)
				b, ok := r.Broker(2)
				require.True(t, ok)
				assert.False(t, b.Answers)
				assert.ErrorIs(t, b.Err, transport.ErrBrokerNotAvailable)
				assert.Equal(t, "gostream-ctl failover --broker 2", r.Warnings[1].Pending)
			},
		},
		{
			name: "the controller is down: the majority decides",
			survey: surveyOf(testMeta(),
				silent(1),
				view(2, map[int32]transport.GossipState{1: transport.GossipDead, 2: transport.GossipAlive, 3: transport.GossipAlive}, inSync(3)...),
				view(3, map[int32]transport.GossipState{1: transport.GossipDead, 2: transport.GossipAlive, 3: transport.GossipSuspect}, inSync(2)...)),
			brokers: registered(transport.GossipDead, transport.GossipAlive, transport.GossipUnknown),
			counts:  PartitionCounts{Total: 3, UnderReplicated: 2, Offline: 1},
			warnings: []said{
				{Message: "the controller, broker 1, does not answer (gossip: dead) — admin commands (failover included) fail until it is back, and the partitions whose active set holds broker 1 take no writes meanwhile (reads from the other leaders go on); restart it"},
				{Message: "the answering brokers disagree on broker 3's gossip state — check the network between the nodes"},
				{Message: "partition orders/0: its leader, broker 1, is the controller's node, which does not answer (gossip: dead) — restart it; no failover can run without the controller"},
			},
			reasons:    []NoCommandReason{NoCommandManual, NoCommandManual, NoCommandManual},
			gossipFrom: "the majority of the 2 answering brokers (the controller, broker 1, does not answer)",
			check: func(t *testing.T, r ClusterReport) {
				assert.False(t, r.ControllerAnswers)
				assert.Equal(t, GossipSource{ControllerID: 1, Voters: 2}, r.GossipFrom)
				b, _ := r.Broker(3)
				assert.True(t, b.GossipDisputed)
			},
		},
		{
			name: "lagging and diverged followers",
			survey: surveyOf(testMeta(),
				view(1, allAlive(), inSync(2, 3)...),
				view(2, allAlive(), transport.FollowerStatus{Broker: 3, State: transport.FollowerLagging, LogEndOffset: -1}, transport.FollowerStatus{Broker: 1, State: transport.FollowerInSync}),
				view(3, allAlive(), transport.FollowerStatus{Broker: 1, State: transport.FollowerDiverged}, transport.FollowerStatus{Broker: 2, State: transport.FollowerInSync})),
			stater: fakeStater{"3 orders/1": 30, "2 orders/1": 150},
			counts: PartitionCounts{Total: 3, UnderReplicated: 2},
			warnings: []said{
				{Message: "partition orders/1: follower 3 lags by 120 records", Command: "gostream-ctl catch-up --topic orders --partition 1 --broker 3"},
				{Message: "partition orders/2: follower 1 diverged from its leader — writes to the partition fail until it is dropped; the fix drops it, cuts what it holds that the leader does not, and rebuilds it",
					Command: "gostream-ctl failover --topic orders --partition 2 --broker 1 && gostream-ctl recover --topic orders --partition 2 --broker 1"},
			},
			check: func(t *testing.T, r ClusterReport) {
				lag := int64(120)
				assert.Equal(t, []FollowerReport{{Broker: 1, State: transport.FollowerInSync}, {Broker: 3, State: transport.FollowerLagging, Lag: &lag}}, r.Partitions[1].Followers)
				assert.Equal(t, []FollowerReport{{Broker: 1, State: transport.FollowerDiverged}, {Broker: 2, State: transport.FollowerInSync}}, r.Partitions[2].Followers)
				assert.True(t, r.Partitions[2].UnderReplicated)
				assert.False(t, r.Partitions[0].UnderReplicated)
			},
		},
		{
			name: "without the leader's view, log ends decide",
			survey: func() *survey {
				v1, v2, v3 := view(1, allAlive()), view(2, allAlive()), view(3, allAlive())
				v1.status, v2.status, v3.status = nil, nil, nil
				return surveyOf(testMeta(), v1, v2, v3)
			}(),
			stater: fakeStater{
				"1 orders/0": 10, "2 orders/0": 10, "3 orders/0": 10, // in sync
				"2 orders/1": 10, "3 orders/1": 7, "1 orders/1": 10, // 3 lags by 3
				"3 orders/2": 10, "1 orders/2": 12, // 1 is ahead; 2 does not say
			},
			counts: PartitionCounts{Total: 3, UnderReplicated: 2},
			warnings: []said{
				{Message: "partition orders/1: follower 3 lags by 3 records", Command: "gostream-ctl catch-up --topic orders --partition 1 --broker 3"},
				{Message: "partition orders/2: follower 1 is 2 records ahead of its leader: it diverged",
					Command: "gostream-ctl failover --topic orders --partition 2 --broker 1 && gostream-ctl recover --topic orders --partition 2 --broker 1"},
			},
			check: func(t *testing.T, r ClusterReport) {
				zero, three, ahead := int64(0), int64(3), int64(-2)
				assert.Equal(t, []FollowerReport{{Broker: 2, State: transport.FollowerInSync, Lag: &zero}, {Broker: 3, State: transport.FollowerInSync, Lag: &zero}}, r.Partitions[0].Followers)
				assert.Equal(t, []FollowerReport{{Broker: 1, State: transport.FollowerInSync, Lag: &zero}, {Broker: 3, State: transport.FollowerLagging, Lag: &three}}, r.Partitions[1].Followers)
				f := r.Partitions[2].Followers
				require.Len(t, f, 2)
				assert.Equal(t, FollowerReport{Broker: 1, State: transport.FollowerDiverged, Lag: &ahead}, f[0])
				assert.Equal(t, transport.FollowerUnknown, f[1].State, "broker 2 did not say its log end")
				assert.Nil(t, f[1].Lag)
				assert.Contains(t, f[1].LagError, "BrokerNotAvailable")
			},
		},
		{
			// Each fix names the one replica: failover --broker 3 would act
			// on broker 3's healthy replicas too, and refuse them.
			// The leader's word on the full follower (lagging, NoSpace) adds
			// no second warning.
			name: "a follower's replica is damaged, another's disk is full",
			survey: func() *survey {
				v1, v3 := view(1, allAlive(), inSync(2, 3)...), view(3, allAlive(), inSync(1, 2)...)
				v2 := view(2, allAlive(), transport.FollowerStatus{Broker: 3, State: transport.FollowerInSync},
					transport.FollowerStatus{Broker: 1, State: transport.FollowerLagging, LogEndOffset: -1, Error: "NoSpace: no space left on device"})
				v3.status.Partitions = append(v3.status.Partitions, transport.PartitionStatus{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1,
					Offline: "open replica orders/0: storage: corrupt: batch at offset 259"})
				v1.status.Partitions = append(v1.status.Partitions, transport.PartitionStatus{Topic: "orders", Partition: 1, Leader: 2, LeaderEpoch: 1,
					Problem: "NoSpace: no space left on device"})
				return surveyOf(testMeta(), v1, v2, v3)
			}(),
			counts: PartitionCounts{Total: 3, UnderReplicated: 1},
			warnings: []said{
				{Message: "partition orders/0: its follower on broker 3 cannot serve (open replica orders/0: storage: corrupt: batch at offset 259) — " +
					"writes to the partition fail until it is dropped; the fix drops it and rebuilds it from the leader",
					Command: "gostream-ctl failover --topic orders --partition 0 --broker 3 && gostream-ctl recover --topic orders --partition 0 --broker 3"},
				{Message: "partition orders/1: its follower on broker 1 cannot serve (NoSpace: no space left on device) — writes to the partition fail until space is freed on broker 1 " +
					"(then the replica resumes by itself) or it is dropped from the active set; the fix drops it, so that writes go on with the other replicas " +
					"(gostream-ctl failover --broker 1 drops each replica of broker 1 that reports a full disk), and once space is back gostream-ctl recover --broker 1 brings it back",
					Command: "gostream-ctl failover --topic orders --partition 1 --broker 1"},
			},
			reasons: []NoCommandReason{"", ""},
			check: func(t *testing.T, r ClusterReport) {
				assert.Equal(t, FollowerReport{Broker: 3, State: transport.FollowerInSync, Unusable: "open replica orders/0: storage: corrupt: batch at offset 259"},
					r.Partitions[0].Followers[1])
			},
		},
		{
			// Failover is an admin command: with the controller down, it
			// waits for the controller.
			name: "the controller and a leader are down",
			survey: surveyOf(testMeta(),
				silent(1), silent(2), view(3, map[int32]transport.GossipState{1: transport.GossipDead, 2: transport.GossipDead, 3: transport.GossipAlive}, inSync(1, 2)...)),
			counts: PartitionCounts{Total: 3, UnderReplicated: 1, Offline: 2},
			warnings: []said{
				{Message: "the controller, broker 1, does not answer (gossip: dead) — admin commands (failover included) fail until it is back, and the partitions whose active set holds broker 1 take no writes meanwhile (reads from the other leaders go on); restart it"},
				{Message: "broker 2 is registered but gossip says dead and it does not answer — check the process; if it is gone for good, fail it over — admin commands wait for the controller, broker 1: once it is back, run: gostream-ctl failover --broker 2"},
				{Message: "partition orders/0: its leader, broker 1, is the controller's node, which does not answer (gossip: dead) — restart it; no failover can run without the controller"},
				{Message: "partition orders/1: leader broker 2 is unreachable (gossip: dead) — the fix above (gostream-ctl failover --broker 2) covers it"},
			},
			reasons: []NoCommandReason{NoCommandManual, NoCommandControllerDown, NoCommandManual, NoCommandCovered},
			check: func(t *testing.T, r ClusterReport) {
				assert.Equal(t, "gostream-ctl failover --broker 2", r.Warnings[1].Pending)
			},
		},
		{
			// Broker 2 was failed over and is still down: failover again
			// would find nothing to do, and recover cannot reach it.
			name: "a failed-over broker still down",
			survey: surveyOf(failedOver2(),
				view(1, dead2, inSync(3)...), silent(2), view(3, dead2, inSync(1)...)),
			stater: fakeStater{"1 orders/1": 5, "3 orders/1": 5},
			counts: PartitionCounts{Total: 3, UnderReplicated: 3},
			warnings: []said{
				{Message: "broker 2 does not answer (gossip: dead); it is in no active set, so nothing waits for it — start it again, then run: gostream-ctl recover --broker 2"},
				{Message: "broker 2 holds 3 inactive replicas (under-replicated: orders/0, orders/1, orders/2) — broker 2 does not answer: start it first, then run: gostream-ctl recover --broker 2"},
			},
			reasons: []NoCommandReason{NoCommandBrokerDown, NoCommandBrokerDown},
			check: func(t *testing.T, r ClusterReport) {
				for _, p := range r.Partitions {
					assert.Equal(t, []int32{2}, p.Inactive, "%s/%d", p.Topic, p.Partition)
				}
			},
		},
		{
			// Back and answering: one recover brings every replica back.
			name: "a failed-over broker back",
			survey: surveyOf(failedOver2(),
				view(1, allAlive(), inSync(3)...), view(2, allAlive()), view(3, allAlive(), inSync(1)...)),
			stater: fakeStater{"1 orders/1": 5, "3 orders/1": 5},
			counts: PartitionCounts{Total: 3, UnderReplicated: 3},
			warnings: []said{
				{Message: "broker 2 holds 3 inactive replicas (under-replicated: orders/0, orders/1, orders/2) — recover brings them back", Command: "gostream-ctl recover --broker 2"},
			},
		},
		{
			name: "healthy, but leadership off the preferred replicas",
			survey: func() *survey {
				m := testMeta()
				m.Topics[0].Partitions[1].Leader = 1 // prefers 2
				return surveyOf(m, view(1, allAlive(), inSync(2, 3)...), view(2, allAlive()), view(3, allAlive(), inSync(1, 2)...))
			}(),
			stater: fakeStater{"1 orders/1": 5, "2 orders/1": 5, "3 orders/1": 5},
			counts: PartitionCounts{Total: 3},
			warnings: []said{
				{Message: "1 partition led by another replica than the preferred one (a failover moves leadership, and it stays where it went) — move it back", Command: "gostream-ctl elect-leaders"},
			},
			check: func(t *testing.T, r ClusterReport) {
				assert.True(t, r.Partitions[1].OffPreferred)
				assert.False(t, r.Partitions[0].OffPreferred)
			},
		},
		{
			name: "metadata problems and an unregistered member",
			survey: func() *survey {
				m := testMeta()
				m.Topics = append(m.Topics, metadata.Topic{Name: "z", ReplicationFactor: 2, Partitions: []metadata.Partition{
					{Replicas: []int32{1, 2}, Active: []int32{1}, Leader: 1, LeaderEpoch: 2},
					{Replicas: []int32{4}, Active: []int32{4}, Leader: 4},
					{Replicas: []int32{2}, Active: []int32{2}, Leader: -1},
				}})
				g := allAlive()
				g[9] = transport.GossipAlive
				return surveyOf(m, view(1, g, inSync(2, 3)...), view(2, g, inSync(3, 1)...), view(3, g, inSync(1, 2)...))
			}(),
			brokers: append(registered(transport.GossipAlive, transport.GossipAlive, transport.GossipAlive),
				brokerLine{ID: 9, Gossip: transport.GossipAlive}),
			counts: PartitionCounts{Total: 6, UnderReplicated: 1, Offline: 2},
			warnings: []said{
				{Message: "broker 9 is in gossip but not registered with the controller — check its log (a refused registration says why) and its --controller flag"},
				{Message: "partition z/1 is offline: its leader, broker 4, is not registered", Command: "gostream-ctl failover --topic z --partition 1"},
				{Message: "partition z/2 is offline: it has no leader", Command: "gostream-ctl failover --topic z --partition 2"},
				{Message: "broker 2 holds 1 inactive replica (under-replicated: z/0) — recover brings it back", Command: "gostream-ctl recover --broker 2"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.survey.judge(context.Background(), tt.stater)
			if tt.brokers != nil {
				for i := range tt.brokers {
					tt.brokers[i].Answers = tt.survey.reachable(tt.brokers[i].ID)
				}
				assert.Equal(t, tt.brokers, brokerLines(r))
			}
			assert.Equal(t, tt.counts, r.Counts)
			assert.Len(t, r.Partitions, tt.counts.Total)
			want := tt.warnings
			if want == nil {
				want = []said{}
			}
			assert.Equal(t, want, saidOf(r.Warnings))
			checkAdvice(t, r.Warnings)
			if tt.reasons != nil {
				var got []NoCommandReason
				for _, w := range r.Warnings {
					got = append(got, w.NoCommand)
				}
				assert.Equal(t, tt.reasons, got)
			}
			if tt.gossipFrom != "" {
				assert.Equal(t, tt.gossipFrom, r.GossipFrom.String())
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestProberSkipsABrokerThatDoesNotAnswer(t *testing.T) {
	p := &Prober{}
	p.mu.down = map[int32]error{}
	down := fmt.Errorf("%w: dial", transport.ErrBrokerNotAvailable)
	p.markDown(3, down)
	_, err := p.state(context.Background(), 3, "t", 0)
	assert.True(t, errors.Is(err, down), "asked a broker already known not to answer: %v", err)
	_, err = p.LeaderOffsets(context.Background(), 3, "t", 0)
	assert.True(t, errors.Is(err, down), "asked a leader already known not to answer: %v", err)
}

// BenchmarkClusterReport judges a healthy cluster of 2,000 partitions
// (20 topics of 100, RF 3, led in turn by three brokers), as cluster
// status and the web console's overview do on every request: it looks up
// each partition's replicas in the brokers' status documents.
func BenchmarkClusterReport(b *testing.B) {
	m := &metadata.Cluster{ControllerID: 1, Epoch: 7}
	views := map[int32]*nodeView{}
	for id := int32(1); id <= 3; id++ {
		m.Brokers = append(m.Brokers, metadata.Broker{ID: id, Addr: fmt.Sprintf("h:%d", id)})
		views[id] = view(id, allAlive())
		views[id].status.Partitions = nil
	}
	for i := range 20 {
		t := metadata.Topic{Name: fmt.Sprintf("t%03d", i), ReplicationFactor: 3}
		for p := range int32(100) {
			lead := p%3 + 1
			rs := []int32{lead, lead%3 + 1, (lead+1)%3 + 1}
			t.Partitions = append(t.Partitions, metadata.Partition{Replicas: rs, Active: rs, Leader: lead, LeaderEpoch: 1})
			for _, r := range rs {
				st := transport.PartitionStatus{Topic: t.Name, Partition: p, Leader: lead, LeaderEpoch: 1}
				if r == lead {
					st.Followers = inSync(rs[1], rs[2])
				}
				views[r].status.Partitions = append(views[r].status.Partitions, st)
			}
		}
		m.Topics = append(m.Topics, t)
	}
	b.ReportAllocs()
	for b.Loop() {
		s := surveyOf(m, views[1], views[2], views[3])
		r := s.judge(context.Background(), fakeStater{})
		if r.Counts.Total != 2000 || len(r.Warnings) != 0 {
			b.Fatalf("judged %d partitions with warnings %v, want 2000 healthy ones", r.Counts.Total, saidOf(r.Warnings))
		}
	}
}

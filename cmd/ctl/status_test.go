package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/metadata"
	"gostream/transport"
)

// fakeStater answers ReplicaState from a table keyed "broker topic/partition";
// a missing key is a broker that does not answer.
type fakeStater map[string]int64

func (f fakeStater) state(_ context.Context, broker int32, topic string, partition int32) (client.ReplicaState, error) {
	end, ok := f[fmt.Sprintf("%d %s/%d", broker, topic, partition)]
	if !ok {
		return client.ReplicaState{}, fmt.Errorf("%w: broker %d", transport.ErrBrokerNotAvailable, broker)
	}
	return client.ReplicaState{LogEndOffset: end}, nil
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
// leading its partitions with followers in the given states.
func view(id int32, gossip map[int32]string, followers ...followerStatus) *nodeView {
	v := &nodeView{id: id, members: map[int32]client.Member{}, status: &nodeStatus{Node: id}}
	for b, st := range gossip {
		v.members[b] = client.Member{BrokerID: b, State: st}
	}
	v.status.Partitions = []hostedReplica{{Topic: "orders", Partition: id - 1, Leader: id, LeaderEpoch: 1, Followers: followers}}
	return v
}

func silent(id int32) *nodeView {
	return &nodeView{id: id, err: fmt.Errorf("%w: dial: connection refused", transport.ErrBrokerNotAvailable)}
}

func allAlive() map[int32]string {
	return map[int32]string{1: gossipAlive, 2: gossipAlive, 3: gossipAlive}
}

func inSync(ids ...int32) []followerStatus {
	var out []followerStatus
	for _, id := range ids {
		out = append(out, followerStatus{Broker: id, State: followerInSync})
	}
	return out
}

func surveyOf(meta *metadata.Cluster, views ...*nodeView) *survey {
	s := &survey{meta: meta, views: map[int32]*nodeView{}}
	for _, v := range views {
		s.views[v.id] = v
	}
	s.judgeGossip()
	return s
}

func TestStatusOf(t *testing.T) {
	dead2 := map[int32]string{1: gossipAlive, 2: gossipDead, 3: gossipAlive}
	tests := []struct {
		name       string
		survey     *survey
		stater     fakeStater
		brokers    string // JSON, when checked
		partitions string
		warnings   []warning
		gossipFrom string
	}{
		{
			name: "healthy",
			survey: surveyOf(testMeta(),
				view(1, allAlive(), inSync(2, 3)...), view(2, allAlive(), inSync(3, 1)...), view(3, allAlive(), inSync(1, 2)...)),
			brokers: `[{"id":1,"address":"h:1","registered":"registered","gossip":"alive"},
				{"id":2,"address":"h:2","registered":"registered","gossip":"alive"},
				{"id":3,"address":"h:3","registered":"registered","gossip":"alive"}]`,
			partitions: `{"total":3,"under_replicated":0,"offline":0}`,
			gossipFrom: "the controller, broker 1",
		},
		{
			name: "a leader is dead",
			survey: surveyOf(testMeta(),
				view(1, dead2, followerStatus{Broker: 2, State: followerLagging, LogEndOffset: -1}, followerStatus{Broker: 3, State: followerInSync}),
				silent(2), view(3, dead2, inSync(1, 2)...)),
			brokers: `[{"id":1,"address":"h:1","registered":"registered","gossip":"alive"},
				{"id":2,"address":"h:2","registered":"registered","gossip":"dead"},
				{"id":3,"address":"h:3","registered":"registered","gossip":"alive"}]`,
			// orders/1 is offline; orders/0 and orders/2 have follower 2 gone.
			partitions: `{"total":3,"under_replicated":2,"offline":1}`,
			warnings: []warning{
				{Message: "broker 2 is registered but gossip says dead and it does not answer — check the process; if it is gone for good, fail it over", Command: "gostream-ctl failover --broker 2"},
				{Message: "partition orders/1: leader broker 2 is unreachable (gossip: dead) — the fix above (gostream-ctl failover --broker 2) covers it"},
			},
		},
		{
			name: "the controller is down: the majority decides",
			survey: surveyOf(testMeta(),
				silent(1),
				view(2, map[int32]string{1: gossipDead, 2: gossipAlive, 3: gossipAlive}, inSync(3)...),
				view(3, map[int32]string{1: gossipDead, 2: gossipAlive, 3: gossipSuspect}, inSync(2)...)),
			brokers: `[{"id":1,"address":"h:1","registered":"registered","gossip":"dead"},
				{"id":2,"address":"h:2","registered":"registered","gossip":"alive"},
				{"id":3,"address":"h:3","registered":"registered","gossip":"unknown"}]`,
			partitions: `{"total":3,"under_replicated":2,"offline":1}`,
			warnings: []warning{
				{Message: "the controller, broker 1, does not answer (gossip: dead) — admin commands fail until it is back; produce and consume go on; restart it"},
				{Message: "the answering brokers disagree on broker 3's gossip state — check the network between the nodes"},
				{Message: "partition orders/0: its leader, broker 1, is the controller's node, which does not answer (gossip: dead) — restart it; no failover can run without the controller"},
			},
			gossipFrom: "the majority of the 2 answering brokers (the controller, broker 1, does not answer)",
		},
		{
			name: "lagging and diverged followers",
			survey: surveyOf(testMeta(),
				view(1, allAlive(), inSync(2, 3)...),
				view(2, allAlive(), followerStatus{Broker: 3, State: followerLagging, LogEndOffset: -1}, followerStatus{Broker: 1, State: followerInSync}),
				view(3, allAlive(), followerStatus{Broker: 1, State: followerDiverged}, followerStatus{Broker: 2, State: followerInSync})),
			stater:     fakeStater{"3 orders/1": 30, "2 orders/1": 150},
			partitions: `{"total":3,"under_replicated":2,"offline":0}`,
			warnings: []warning{
				{Message: "partition orders/1: follower 3 lags by 120 records", Command: "gostream-ctl catch-up --topic orders --partition 1 --broker 3"},
				{Message: "partition orders/2: follower 1 diverged from its leader — writes to the partition fail until it is dropped; the fix drops it, cuts what it holds that the leader does not, and rebuilds it",
					Command: "gostream-ctl failover --topic orders --partition 2 --broker 1 && gostream-ctl recover --topic orders --partition 2 --broker 1"},
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
			partitions: `{"total":3,"under_replicated":2,"offline":0}`,
			warnings: []warning{
				{Message: "partition orders/1: follower 3 lags by 3 records", Command: "gostream-ctl catch-up --topic orders --partition 1 --broker 3"},
				{Message: "partition orders/2: follower 1 is 2 records ahead of its leader: it diverged",
					Command: "gostream-ctl failover --topic orders --partition 2 --broker 1 && gostream-ctl recover --topic orders --partition 2 --broker 1"},
			},
		},
		{
			// Each fix names the one replica: failover --broker 3 would act
			// on broker 3's healthy replicas too, and refuse them.
			name: "a follower's replica is damaged, another's disk is full",
			survey: func() *survey {
				v1, v2, v3 := view(1, allAlive(), inSync(2, 3)...), view(2, allAlive(), inSync(3, 1)...), view(3, allAlive(), inSync(1, 2)...)
				v3.status.Partitions = append(v3.status.Partitions, hostedReplica{Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1,
					Offline: "open replica orders/0: storage: corrupt: batch at offset 259"})
				v1.status.Partitions = append(v1.status.Partitions, hostedReplica{Topic: "orders", Partition: 1, Leader: 2, LeaderEpoch: 1,
					Problem: "NoSpace: no space left on device"})
				return surveyOf(testMeta(), v1, v2, v3)
			}(),
			partitions: `{"total":3,"under_replicated":0,"offline":0}`,
			warnings: []warning{
				{Message: "partition orders/0: its follower on broker 3 cannot serve (open replica orders/0: storage: corrupt: batch at offset 259) — " +
					"writes to the partition fail until it is dropped; the fix drops it and rebuilds it from the leader",
					Command: "gostream-ctl failover --topic orders --partition 0 --broker 3 && gostream-ctl recover --topic orders --partition 0 --broker 3"},
				{Message: "partition orders/1: its follower on broker 1 cannot serve (NoSpace: no space left on device) — writes to the partition fail until space is freed on broker 1, " +
					"then the replica resumes by itself; to take writes meanwhile, drop it with: gostream-ctl failover --topic orders --partition 1 --broker 1"},
			},
		},
		{
			// Failover is an admin command: with the controller down, it
			// waits for the controller.
			name: "the controller and a leader are down",
			survey: surveyOf(testMeta(),
				silent(1), silent(2), view(3, map[int32]string{1: gossipDead, 2: gossipDead, 3: gossipAlive}, inSync(1, 2)...)),
			partitions: `{"total":3,"under_replicated":1,"offline":2}`,
			warnings: []warning{
				{Message: "the controller, broker 1, does not answer (gossip: dead) — admin commands fail until it is back; produce and consume go on; restart it"},
				{Message: "broker 2 is registered but gossip says dead and it does not answer — check the process; if it is gone for good, fail it over — admin commands wait for the controller, broker 1: once it is back, run: gostream-ctl failover --broker 2"},
				{Message: "partition orders/0: its leader, broker 1, is the controller's node, which does not answer (gossip: dead) — restart it; no failover can run without the controller"},
				{Message: "partition orders/1: leader broker 2 is unreachable (gossip: dead) — the fix above (gostream-ctl failover --broker 2) covers it"},
			},
		},
		{
			// Broker 2 was failed over and is still down: failover again
			// would find nothing to do, and recover cannot reach it.
			name: "a failed-over broker still down",
			survey: surveyOf(failedOver2(),
				view(1, dead2, inSync(3)...), silent(2), view(3, dead2, inSync(1)...)),
			stater:     fakeStater{"1 orders/1": 5, "3 orders/1": 5},
			partitions: `{"total":3,"under_replicated":3,"offline":0}`,
			warnings: []warning{
				{Message: "broker 2 does not answer (gossip: dead); it is in no active set, so nothing waits for it — start it again, then run: gostream-ctl recover --broker 2"},
				{Message: "broker 2 holds 3 inactive replicas (under-replicated: orders/0, orders/1, orders/2) — broker 2 does not answer: start it first, then run: gostream-ctl recover --broker 2"},
			},
		},
		{
			// Back and answering: one recover brings every replica back.
			name: "a failed-over broker back",
			survey: surveyOf(failedOver2(),
				view(1, allAlive(), inSync(3)...), view(2, allAlive()), view(3, allAlive(), inSync(1)...)),
			stater:     fakeStater{"1 orders/1": 5, "3 orders/1": 5},
			partitions: `{"total":3,"under_replicated":3,"offline":0}`,
			warnings: []warning{
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
			stater:     fakeStater{"1 orders/1": 5, "2 orders/1": 5, "3 orders/1": 5},
			partitions: `{"total":3,"under_replicated":0,"offline":0}`,
			warnings: []warning{
				{Message: "1 partition led by another replica than the preferred one (a failover moves leadership, and it stays where it went) — move it back", Command: "gostream-ctl elect-leaders"},
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
				g[9] = gossipAlive
				return surveyOf(m, view(1, g, inSync(2, 3)...), view(2, g, inSync(3, 1)...), view(3, g, inSync(1, 2)...))
			}(),
			brokers: `[{"id":1,"address":"h:1","registered":"registered","gossip":"alive"},
				{"id":2,"address":"h:2","registered":"registered","gossip":"alive"},
				{"id":3,"address":"h:3","registered":"registered","gossip":"alive"},
				{"id":9,"address":"","registered":"unregistered","gossip":"alive"}]`,
			partitions: `{"total":6,"under_replicated":1,"offline":2}`,
			warnings: []warning{
				{Message: "broker 9 is in gossip but not registered with the controller — check its log (a refused registration says why) and its --controller flag"},
				{Message: "partition z/1 is offline: its leader, broker 4, is not registered", Command: "gostream-ctl failover --topic z --partition 1"},
				{Message: "partition z/2 is offline: it has no leader", Command: "gostream-ctl failover --topic z --partition 2"},
				{Message: "broker 2 holds 1 inactive replica (under-replicated: z/0) — recover brings it back", Command: "gostream-ctl recover --broker 2"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := statusOf(context.Background(), tt.survey, tt.stater)
			out, err := json.Marshal(st)
			require.NoError(t, err)
			m := requireKeys(t, out, "controller", "brokers", "partitions", "warnings")
			if tt.brokers != "" {
				assert.JSONEq(t, tt.brokers, string(m["brokers"]))
			}
			assert.JSONEq(t, tt.partitions, string(m["partitions"]))
			want := tt.warnings
			if want == nil {
				want = []warning{}
			}
			assert.Equal(t, want, st.Warnings)
			if tt.gossipFrom != "" {
				assert.Equal(t, tt.gossipFrom, st.gossipFrom)
			}
		})
	}
}

func TestReplicaProberSkipsABrokerThatDoesNotAnswer(t *testing.T) {
	p := &replicaProber{}
	p.mu.down = map[int32]error{}
	down := fmt.Errorf("%w: dial", transport.ErrBrokerNotAvailable)
	p.markDown(3, down)
	_, err := p.state(context.Background(), 3, "t", 0)
	assert.True(t, errors.Is(err, down), "asked a broker already known not to answer: %v", err)
}

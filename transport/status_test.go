package transport

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The status document's field names are what scripts read from GET
// /api/status: a rename here breaks them.
func TestNodeStatusJSON(t *testing.T) {
	st := NodeStatus{
		Node: 2, ClusterID: "c", Controller: 1, MetadataEpoch: 7,
		Brokers: []BrokerStatus{{ID: 1, Addr: "h:1", HTTP: "h:2", Gossip: "h:3", State: GossipAlive}},
		Partitions: []PartitionStatus{
			{Topic: "orders", Partition: 0, Leader: 2, LeaderEpoch: 3, FencedEpoch: 3, Replicas: []int32{2, 1}, Active: []int32{2, 1},
				HighWatermark: 5, LogStartOffset: 0, LogEndOffset: 6, SizeBytes: 100, UnderReplicated: true,
				Followers: []FollowerStatus{{Broker: 1, LogEndOffset: -1, State: FollowerLagging, Error: "Timeout"}}},
			{Topic: "orders", Partition: 1, Leader: -1, Offline: "open replica orders/1: storage: corrupt"},
		},
	}
	out, err := json.Marshal(st)
	require.NoError(t, err)
	assert.JSONEq(t, `{"node":2,"cluster_id":"c","controller":1,"metadata_epoch":7,
		"brokers":[{"id":1,"address":"h:1","http":"h:2","gossip":"h:3","gossip_state":"alive"}],
		"partitions":[
			{"topic":"orders","partition":0,"leader":2,"leader_epoch":3,"fenced_epoch":3,"replicas":[2,1],"active":[2,1],"sealed":false,
			 "high_watermark":5,"log_start_offset":0,"log_end_offset":6,"size_bytes":100,"under_replicated":true,
			 "followers":[{"broker":1,"log_end_offset":-1,"state":"lagging","error":"Timeout"}]},
			{"topic":"orders","partition":1,"leader":-1,"leader_epoch":0,"fenced_epoch":0,"replicas":null,"active":null,"sealed":false,
			 "high_watermark":0,"log_start_offset":0,"log_end_offset":0,"size_bytes":0,"under_replicated":false,
			 "offline":"open replica orders/1: storage: corrupt"}]}`, string(out))

	var back NodeStatus
	require.NoError(t, json.Unmarshal(out, &back))
	assert.Equal(t, st, back)

	p, ok := back.Partition("orders", 1)
	require.True(t, ok)
	assert.Equal(t, "open replica orders/1: storage: corrupt", p.Unusable())
	_, ok = back.Partition("orders", 2)
	assert.False(t, ok)
	_, ok = (*NodeStatus)(nil).Partition("orders", 0)
	assert.False(t, ok, "a node that did not answer hosts nothing")

	// Live readers of streams are there only when the node has some, so
	// a node without them answers what it answered before.
	readers := NodeStatus{Node: 2, StreamReaders: []StreamReaderCount{{Path: "shop/log", Readers: 2}}}
	out, err = json.Marshal(readers)
	require.NoError(t, err)
	assert.JSONEq(t, `{"node":2,"cluster_id":"","controller":0,"metadata_epoch":0,"brokers":null,"partitions":null,
		"stream_readers":[{"path":"shop/log","readers":2}]}`, string(out))
}

func TestGossipStateGone(t *testing.T) {
	for st, gone := range map[GossipState]bool{GossipAlive: false, GossipSuspect: false, GossipDead: true, GossipLeft: true, GossipUnknown: false} {
		assert.Equal(t, gone, st.Gone(), "%s", st)
	}
}

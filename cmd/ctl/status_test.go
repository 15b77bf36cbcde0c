package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// cluster status and broker list print client.ClusterStatus's report;
// the judgement itself is tested in package client (TestClusterReport).

// downReport is a cluster of three whose broker 2 is dead, with one
// gossip member that is not registered, as client.ClusterStatus reports
// it.
func downReport() client.ClusterReport {
	return client.ClusterReport{
		BrokersReport: client.BrokersReport{
			Controller: 1, ControllerAnswers: true, MetadataEpoch: 7, MetadataFrom: 1,
			GossipFrom: client.GossipSource{Controller: true, ControllerID: 1},
			Brokers: []client.BrokerReport{
				{ID: 1, Address: "h:1", Registered: true, Answers: true, Gossip: transport.GossipAlive},
				{ID: 2, Address: "h:2", Registered: true, Gossip: transport.GossipDead, Err: transport.ErrBrokerNotAvailable},
				{ID: 3, Address: "h:3", Registered: true, Answers: true, Gossip: transport.GossipAlive},
				{ID: 9, Gossip: transport.GossipAlive},
			},
		},
		Counts: client.PartitionCounts{Total: 3, UnderReplicated: 2, Offline: 1},
		Warnings: []client.Warning{
			{Problem: "broker 2 is registered but gossip says dead and it does not answer", Advice: "fail it over",
				Command: "gostream-ctl failover --broker 2", Message: "broker 2 is registered but gossip says dead and it does not answer — fail it over"},
			{Problem: "partition orders/1: leader broker 2 is unreachable (gossip: dead)", NoCommand: client.NoCommandCovered, Pending: "gostream-ctl failover --broker 2",
				Message: "partition orders/1: leader broker 2 is unreachable (gossip: dead) — the fix above (gostream-ctl failover --broker 2) covers it"},
		},
	}
}

func TestClusterStatusOutput(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, writeJSON(&b, clusterStatusOf(downReport())))
	assert.Equal(t, `{"controller":1,"brokers":[`+
		`{"id":1,"address":"h:1","registered":"registered","gossip":"alive"},`+
		`{"id":2,"address":"h:2","registered":"registered","gossip":"dead"},`+
		`{"id":3,"address":"h:3","registered":"registered","gossip":"alive"},`+
		`{"id":9,"address":"","registered":"unregistered","gossip":"alive"}],`+
		`"partitions":{"total":3,"under_replicated":2,"offline":1},"warnings":[`+
		`{"message":"broker 2 is registered but gossip says dead and it does not answer — fail it over","command":"gostream-ctl failover --broker 2"},`+
		`{"message":"partition orders/1: leader broker 2 is unreachable (gossip: dead) — the fix above (gostream-ctl failover --broker 2) covers it"}]}`+"\n",
		b.String(), "docs/cli.md's JSON, byte for byte")

	b.Reset()
	require.NoError(t, printClusterStatus(&b, downReport()))
	assert.Equal(t, `Controller: broker 1 (answers)

ID  ADDRESS  REGISTERED    GOSSIP  RPC          ROLE
1   h:1      registered    alive   answers      controller
2   h:2      registered    dead    unreachable  broker
3   h:3      registered    alive   answers      broker
9   -        unregistered  alive   unreachable  broker
Gossip states as seen by the controller, broker 1.

Partitions: 3 total, 2 under-replicated, 1 offline

Warnings:
  - broker 2 is registered but gossip says dead and it does not answer — fail it over
    fix: gostream-ctl failover --broker 2
  - partition orders/1: leader broker 2 is unreachable (gossip: dead) — the fix above (gostream-ctl failover --broker 2) covers it
`, b.String())

	// A healthy cluster whose controller does not answer (the majority
	// judged gossip) prints no warning list, and an empty one in JSON.
	healthy := downReport()
	healthy.ControllerAnswers = false
	healthy.GossipFrom = client.GossipSource{ControllerID: 1, Voters: 2}
	healthy.Warnings = []client.Warning{}
	b.Reset()
	require.NoError(t, printClusterStatus(&b, healthy))
	assert.Contains(t, b.String(), "Controller: broker 1 (does not answer)\n")
	assert.Contains(t, b.String(), "Gossip states as seen by the majority of the 2 answering brokers (the controller, broker 1, does not answer).\n")
	assert.Contains(t, b.String(), "\nNo warnings.\n")
	b.Reset()
	require.NoError(t, writeJSON(&b, clusterStatusOf(healthy)))
	m := requireKeys(t, b.Bytes(), "controller", "brokers", "partitions", "warnings")
	assert.JSONEq(t, `[]`, string(m["warnings"]))
}

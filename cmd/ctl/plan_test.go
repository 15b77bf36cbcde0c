package main

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

func TestPrintPlan(t *testing.T) {
	p := client.MovePlan{Version: 1,
		Partitions: []client.PlannedMove{
			{Topic: "orders", Partition: 0, From: []int32{1, 2, 3}, Replicas: []int32{4, 2, 3}, Bytes: 3 << 29, Reason: "replicas per broker"},
			{Topic: "orders", Partition: 5, From: []int32{1, 2, 3}, Replicas: []int32{2, 1, 3}, Reason: "preferred leaders per broker"},
		},
		Summary: &client.PlanSummary{Moves: 2, NewReplicas: 1, BytesToCopy: 3 << 29,
			Brokers: []client.BrokerLoad{
				{Broker: 1, Rack: "a", Replicas: 3, Leaders: 2, Bytes: 3 << 30, ReplicasAfter: 2, LeadersAfter: 1, BytesAfter: 3 << 29},
				{Broker: 4, Rack: "b", ReplicasAfter: 1, BytesAfter: 3 << 29},
			},
			Notes: []string{"1 partition is being moved"}},
	}
	var out bytes.Buffer
	require.NoError(t, printPlan(&out, p, "empty"))
	assert.Equal(t, `Plan: 2 moves, 1 replica to copy (1.5 GiB).

TOPIC   PARTITION  FROM   TO     COPY     REASON
orders  0          1,2,3  4,2,3  1.5 GiB  replicas per broker
orders  5          1,2,3  2,1,3  0 B      preferred leaders per broker

BROKER  RACK  REPLICAS  LEADERS  BYTES
1       a     3 -> 2    2 -> 1   3.0 GiB -> 1.5 GiB
4       b     0 -> 1    0        0 B -> 1.5 GiB

Notes:
  - 1 partition is being moved
`, out.String())

	out.Reset()
	require.NoError(t, printPlan(&out, client.MovePlan{Version: 1, Partitions: []client.PlannedMove{}, Summary: &client.PlanSummary{}}, "The cluster is balanced: nothing to move."))
	assert.Equal(t, "The cluster is balanced: nothing to move.\n", out.String())
}

func TestBytesText(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536: "1.5 KiB", 5 << 20: "5.0 MiB", 3 << 40: "3.0 TiB"} {
		assert.Equal(t, want, bytesText(n), "%d", n)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
)

// The operator commands against one real node: everything it can refuse,
// and what a healthy cluster of one looks like. testcluster drives them
// through a real failover and recovery on three nodes.
func TestOperatorCommandsOnOneNode(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "orders", "--partitions", "2")
	ctlOK(t, c, "", "produce", "orders", "--partition", "1", "a", "b", "c")

	// The leader answers: refused, nothing printed, the controller's words.
	res := ctlFails(t, c, 2, "", "", "failover", "--topic", "orders", "--partition", "0")
	assert.Equal(t, "LeaderStillAvailable: partition orders/0 is led by broker 1, which answers and whose replica is healthy\n", res.Stderr)
	assert.Empty(t, res.Stdout)
	res = ctlFails(t, c, 2, "", "", "failover", "--topic", "orders", "--partition", "1", "--dry-run", "-o", "json")
	assert.Equal(t, "LeaderStillAvailable: partition orders/1 is led by broker 1, which answers and whose replica is healthy\n", res.Stderr)
	ctlFails(t, c, 2, "UnknownTopic: ", "", "failover", "--topic", "nope", "--partition", "0")
	ctlFails(t, c, 2, "UnknownPartition: ", "", "failover", "--topic", "orders", "--partition", "7")

	// --broker: every result is printed, then every error.
	res = ctlFails(t, c, 2, "LeaderStillAvailable: partition orders/0 is led by broker 1, which answers and whose replica is healthy; "+
		"LeaderStillAvailable: partition orders/1 is led by broker 1, which answers and whose replica is healthy\n", "", "failover", "--broker", "1", "-o", "json")
	var rep struct {
		Results []map[string]json.RawMessage `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &rep), res.Stdout)
	require.Len(t, rep.Results, 2)
	for i, r := range rep.Results {
		assert.JSONEq(t, fmt.Sprint(i), string(r["partition"]))
		assert.JSONEq(t, `"failover"`, string(r["action"]))
		assert.JSONEq(t, `"LeaderStillAvailable"`, string(r["error_name"]))
		assert.JSONEq(t, `[1]`, string(r["old_active"]))
	}
	res = ctlFails(t, c, 2, "LeaderStillAvailable: ", "", "failover", "--broker", "1")
	rows := tableRows(res.Stdout, "PARTITION", "ACTION")
	require.Len(t, rows, 2, res.Stdout)
	assert.Equal(t, []string{"orders/0", "failover", "1", "0", "1", "-", "LeaderStillAvailable"}, rows[0])

	// A broker that does not exist is an error, not "nothing to do".
	ctlFails(t, c, 2, "UnknownBroker: broker 9 is not registered", "", "failover", "--broker", "9")
	ctlFails(t, c, 2, "UnknownBroker: broker 9 is not registered", "", "recover", "--broker", "9")
	out := ctlOK(t, c, "", "recover", "--broker", "1")
	assert.Equal(t, "broker 1 is active wherever it holds a replica: nothing to recover\n", out)
	assert.JSONEq(t, `{"results":[]}`, ctlOK(t, c, "", "recover", "--broker", "1", "-o", "json"))
	ctlFails(t, c, 2, "InvalidRequest: broker 1 leads orders/0; the leader is never recovered", "",
		"recover", "--topic", "orders", "--partition", "0", "--broker", "1")

	// Nothing was changed, so there is no history.
	assert.Equal(t, "No failovers or recoveries yet.\n", ctlOK(t, c, "", "cluster", "history"))
	assert.JSONEq(t, `{"events":[]}`, ctlOK(t, c, "", "cluster", "history", "-o", "json"))

	// verify: every replica is the leader.
	out = ctlOK(t, c, "", "verify", "-o", "json")
	assert.JSONEq(t, `{"ok":true,"partitions":[
		{"topic":"orders","partition":0,"leader":1,"high_watermark":0,"replicas":[{"broker":1,"state":"leader"}]},
		{"topic":"orders","partition":1,"leader":1,"high_watermark":3,"replicas":[{"broker":1,"state":"leader"}]}]}`, out)
	out = ctlOK(t, c, "", "verify", "--topic", "orders")
	rows = tableRows(out, "PARTITION", "LEADER")
	assert.Equal(t, [][]string{{"orders/0", "1", "0", "-", "OK"}, {"orders/1", "1", "3", "-", "OK"}}, rows)
	ctlFails(t, c, 2, "UnknownTopic: topic \"nope\" does not exist", "", "verify", "--topic", "nope")
}

func TestVerifyTable(t *testing.T) {
	hw := int64(1200)
	rep := client.VerifyReport{Partitions: []client.VerifiedPartition{
		{Topic: "orders", Partition: 0, Leader: 1, HighWatermark: &hw, Replicas: []client.VerifiedReplica{{Broker: 1, State: client.VerifyLeader}, {Broker: 2, State: client.VerifyIdentical}}},
		{Topic: "orders", Partition: 1, Leader: 1, HighWatermark: &hw, Replicas: []client.VerifiedReplica{
			{Broker: 1, State: client.VerifyLeader}, {Broker: 2, State: client.VerifyUnknown, Error: "BrokerNotAvailable: dial"}, {Broker: 3, State: client.VerifyDiffers, Error: "differs from leader 1 in [0, 1200)"}}},
	}}
	var b bytes.Buffer
	require.NoError(t, printVerify(&b, rep))
	out := b.String()
	assert.Contains(t, out, "broker 3 differs from leader 1 in [0, 1200)")
	assert.Contains(t, out, "broker 2 unknown: BrokerNotAvailable: dial")
	assert.Equal(t, []string{"orders/0", "1", "1200", "2", "OK"}, tableRows(out, "PARTITION", "LEADER")[0])
	var e *exitcode.Error
	require.ErrorAs(t, verifyFailed(rep), &e)
	assert.Equal(t, "ReplicaDivergence", e.Name)
	assert.Equal(t, "1 replica differs from its leader: orders/1 broker 3; 1 could not be compared: orders/1 broker 2", e.Err.Error())
}

// verify's exit status follows the worst verdict: damaged, then differs,
// then unknown; the verdicts themselves are tested in package client
// (TestVerifyPartition).
func TestVerifyFailed(t *testing.T) {
	fix := "gostream-ctl failover --topic orders --partition 1 --broker 3 && gostream-ctl recover --topic orders --partition 1 --broker 3"
	tests := []struct {
		name     string
		replicas []client.VerifiedReplica
		want     string // the error's name, "" for none
	}{
		{"identical", []client.VerifiedReplica{{Broker: 1, State: client.VerifyLeader}, {Broker: 2, State: client.VerifyIdentical}}, ""},
		{"unknown", []client.VerifiedReplica{{Broker: 1, State: client.VerifyLeader}, {Broker: 2, State: client.VerifyUnknown}}, "Unverified"},
		{"differs", []client.VerifiedReplica{{Broker: 1, State: client.VerifyLeader}, {Broker: 2, State: client.VerifyUnknown}, {Broker: 3, State: client.VerifyDiffers}}, "ReplicaDivergence"},
		{"damaged", []client.VerifiedReplica{{Broker: 1, State: client.VerifyLeader}, {Broker: 2, State: client.VerifyDiffers}, {Broker: 3, State: client.VerifyDamaged, Command: fix}}, "StorageFailed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verifyFailed(client.VerifyReport{Partitions: []client.VerifiedPartition{{Topic: "orders", Partition: 1, Leader: 1, Replicas: tt.replicas}}})
			if tt.want == "" {
				assert.NoError(t, err)
				return
			}
			var e *exitcode.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, exitcode.Failed, e.Code)
			assert.Equal(t, tt.want, e.Name)
			if tt.want == "StorageFailed" {
				assert.Equal(t, "1 replica is damaged: orders/1 broker 3 (fix: "+fix+")", e.Err.Error())
			}
		})
	}
}

func TestFailoverTables(t *testing.T) {
	lost := int64(40)
	dry := []client.ChangeResult{{
		Topic: "orders", Partition: 1, Action: client.ActionFailover, DryRun: true,
		OldLeader: 2, NewLeader: 1, OldEpoch: 0, NewEpoch: 1, OldActive: []int32{1, 2, 3}, NewActive: []int32{1, 3},
		Candidates: []client.Candidate{
			{Broker: 1, Reachable: true, LastEpoch: 0, LogEndOffset: 40, Agrees: true, Chosen: true},
			{Broker: 3, Reachable: false, LastEpoch: -1, LogEndOffset: -1, Note: "BrokerNotAvailable"},
		},
		LostFrom: &lost,
	}, {
		Topic: "orders", Partition: 0, Action: client.ActionDropFollower, DryRun: true,
		OldLeader: 1, NewLeader: 1, OldActive: []int32{1, 2, 3}, NewActive: []int32{1, 3},
	}}
	var b bytes.Buffer
	require.NoError(t, printFailover(&b, dry, target{broker: 2}, true))
	out := b.String()
	assert.True(t, strings.HasPrefix(out, "Dry run: nothing was changed.\n"), out)
	rows := tableRows(out, "PARTITION", "ACTION")
	assert.Equal(t, [][]string{
		{"orders/1", "failover", "2", "->", "1", "0", "->", "1", "1,2,3", "->", "1,3", "40", "ok"},
		{"orders/0", "drop-follower", "1", "0", "1,2,3", "->", "1,3", "-", "ok"},
	}, rows)
	assert.Contains(t, out, "Candidates for orders/1 (old leader 2):")
	assert.Equal(t, [][]string{
		{"1", "yes", "0", "40", "yes", "yes"},
		{"3", "no", "?", "?", "?", "no", "BrokerNotAvailable"},
	}, tableRows(out, "BROKER", "REACHABLE")[:2])
	assert.Contains(t, out, "\n  Records at or past offset 40 held only by the old leader would be lost.\n")

	// A leadership move whose old leader ends where the new one does
	// loses nothing, and says so.
	b.Reset()
	moveAt := int64(17)
	move := []client.ChangeResult{{
		Topic: "orders", Partition: 1, Action: client.ActionElectLeader, DryRun: true,
		OldLeader: 1, NewLeader: 2, OldEpoch: 3, NewEpoch: 4, OldActive: []int32{1, 2, 3}, NewActive: []int32{1, 2, 3},
		Candidates: []client.Candidate{
			{Broker: 1, Reachable: true, LastEpoch: 3, LogEndOffset: 17, Agrees: true},
			{Broker: 2, Reachable: true, LastEpoch: 3, LogEndOffset: 17, Agrees: true, Chosen: true},
			{Broker: 3, Reachable: true, LastEpoch: 3, LogEndOffset: 17, Agrees: true},
		},
		LostFrom: &moveAt,
	}}
	require.NoError(t, printFailover(&b, move, target{}, true))
	assert.Equal(t, [][]string{{"orders/1", "elect-leader", "1", "->", "2", "3", "->", "4", "1,2,3", "-", "ok"}},
		tableRows(b.String(), "PARTITION", "ACTION"), b.String())
	assert.NotContains(t, b.String(), "held only by the old leader would be lost")
	assert.Contains(t, b.String(), "Nothing would be lost: the old leader's log ends where the new leader's does, at offset 17.")

	b.Reset()
	rec := []client.ChangeResult{{
		Topic: "orders", Partition: 1, Action: client.ActionRecover, OldLeader: 1, NewLeader: 1, OldEpoch: 1, NewEpoch: 1,
		OldActive: []int32{1, 3}, NewActive: []int32{1, 2, 3}, Truncated: &[2]int64{45, 40}, CopiedTo: 80,
	}}
	require.NoError(t, printRecover(&b, rec, target{broker: 2}))
	assert.Equal(t, [][]string{{"orders/1", "2", "1", "1", "45", "->", "40", "80", "1,3", "->", "1,2,3", "ok"}},
		tableRows(b.String(), "PARTITION", "BROKER"))
}

func TestPartitionsFailedNamesTheFirst(t *testing.T) {
	assert.NoError(t, partitionsFailed([]client.ChangeResult{{Topic: "a"}}))
	err := partitionsFailed([]client.ChangeResult{
		{Topic: "a"},
		{Topic: "a", Partition: 1, Error: "ReplicaDivergence: candidates disagree", ErrorName: "ReplicaDivergence"},
		{Topic: "a", Partition: 2, Error: "no follower answers", ErrorName: "NoEligibleReplica"},
		{Topic: "a", Partition: 3, Error: "something"},
	})
	var b bytes.Buffer
	assert.Equal(t, exitcode.Failed, exitcode.Report(&b, err))
	assert.Equal(t, "ReplicaDivergence: candidates disagree; NoEligibleReplica: no follower answers; Error: something\n", b.String())
}

package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// These tests run gostream-ctl against three real nodes, as an operator
// would: cluster status, topic describe and catch-up while a broker dies
// and comes back.

// ctlStatus is cluster status -o json (docs/cli.md).
type ctlStatus struct {
	Controller int32 `json:"controller"`
	Brokers    []struct {
		ID         int32  `json:"id"`
		Address    string `json:"address"`
		Registered string `json:"registered"`
		Gossip     string `json:"gossip"`
	} `json:"brokers"`
	Partitions struct {
		Total           int `json:"total"`
		UnderReplicated int `json:"under_replicated"`
		Offline         int `json:"offline"`
	} `json:"partitions"`
	Warnings []struct {
		Message string `json:"message"`
		Command string `json:"command"`
	} `json:"warnings"`
}

func (s ctlStatus) gossip(id int32) string {
	for _, b := range s.Brokers {
		if b.ID == id {
			return b.Gossip
		}
	}
	return ""
}

func (s ctlStatus) hasCommand(cmd string) bool {
	return slices.ContainsFunc(s.Warnings, func(w struct {
		Message string `json:"message"`
		Command string `json:"command"`
	}) bool {
		return w.Command == cmd
	})
}

func (s ctlStatus) hasMessagePrefix(prefix string) bool {
	for _, w := range s.Warnings {
		if strings.HasPrefix(w.Message, prefix) {
			return true
		}
	}
	return false
}

// ctlDescribe is topic describe -o json, with each replica's fields kept
// raw so that null and 0 stay apart.
type ctlDescribe struct {
	Name       string `json:"name"`
	Partitions []struct {
		Partition     int32                        `json:"partition"`
		Leader        int32                        `json:"leader"`
		HighWatermark *int64                       `json:"high_watermark"`
		ReplicaStatus []map[string]json.RawMessage `json:"replica_status"`
	} `json:"partitions"`
}

// replica returns broker's entry of a partition's replica_status.
func (d ctlDescribe) replica(t *testing.T, partition, broker int32) map[string]json.RawMessage {
	t.Helper()
	for _, rs := range d.Partitions[partition].ReplicaStatus {
		if string(rs["broker"]) == strconv.Itoa(int(broker)) {
			return rs
		}
	}
	require.FailNow(t, "no replica status", "broker %d in partition %d", broker, partition)
	return nil
}

// runCtl runs gostream-ctl against c.
func runCtl(t *testing.T, c *Cluster, args ...string) CtlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Ctl(ctx, "", args...)
	require.NoError(t, err, "gostream-ctl %s", strings.Join(args, " "))
	return res
}

// ctlJSON runs gostream-ctl -o json, requires exit 0 and decodes stdout.
func ctlJSON[T any](t *testing.T, c *Cluster, args ...string) T {
	t.Helper()
	res := runCtl(t, c, append(args, "-o", "json")...)
	require.Equal(t, 0, res.Exit, "gostream-ctl %s: %s", strings.Join(args, " "), res.Stderr)
	var v T
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &v), "%s", res.Stdout)
	return v
}

// eventuallyStatus polls cluster status until ok accepts it, and returns
// that status.
func eventuallyStatus(t *testing.T, c *Cluster, what string, ok func(ctlStatus) bool) ctlStatus {
	t.Helper()
	var last ctlStatus
	var lastOut string
	if !assert.Eventually(t, func() bool {
		res := runCtl(t, c, "cluster", "status", "-o", "json")
		if res.Exit != 0 {
			return false
		}
		last, lastOut = ctlStatus{}, res.Stdout
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &last), "%s", res.Stdout)
		return ok(last)
	}, 90*time.Second, 500*time.Millisecond) {
		require.FailNow(t, "cluster status never showed "+what, "last: %s", lastOut)
	}
	return last
}

func healthy(s ctlStatus) bool {
	if len(s.Brokers) != 3 || len(s.Warnings) != 0 || s.Partitions.UnderReplicated != 0 || s.Partitions.Offline != 0 {
		return false
	}
	for _, b := range s.Brokers {
		if b.Registered != "registered" || b.Gossip != "alive" {
			return false
		}
	}
	return true
}

// TestCtlClusterStatusDescribeAndCatchUp: a healthy three-node cluster
// reports itself so; a broker killed with SIGKILL shows up as dead and
// unreachable with the command that fails it over, and its replicas as
// unknown (not as zero) in topic describe; after it restarts, catch-up
// brings it level with the leader and describe shows a lag of 0.
func TestCtlClusterStatusDescribeAndCatchUp(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "orders", 3, 3)

	st := eventuallyStatus(t, c, "a healthy cluster", healthy)
	assert.Equal(t, int32(1), st.Controller)
	assert.Equal(t, 3, st.Partitions.Total)
	for i, b := range st.Brokers {
		assert.Equal(t, int32(i+1), b.ID)
		assert.Equal(t, c.Node(b.ID).RPC, b.Address)
	}
	res := runCtl(t, c, "cluster", "status")
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Contains(t, res.Stdout, "Gossip states as seen by the controller, broker 1.")
	assert.Contains(t, res.Stdout, "No warnings.")

	// Every partition gets records; describe shows every replica level
	// with its leader.
	want := map[int32]int64{}
	for _, p := range tm.Partitions {
		n := int(p.Partition) + 2
		values := make([]string, n)
		for i := range values {
			values[i] = fmt.Sprintf("p%d-%d", p.Partition, i)
		}
		res := runCtl(t, c, append([]string{"produce", "orders", "--partition", strconv.Itoa(int(p.Partition))}, values...)...)
		require.Equal(t, 0, res.Exit, res.Stderr)
		want[p.Partition] = int64(n)
	}
	d := ctlJSON[ctlDescribe](t, c, "topic", "describe", "orders")
	require.Len(t, d.Partitions, 3)
	for _, p := range tm.Partitions {
		dp := d.Partitions[p.Partition]
		require.NotNil(t, dp.HighWatermark)
		assert.Equal(t, want[p.Partition], *dp.HighWatermark, "partition %d", p.Partition)
		require.Len(t, dp.ReplicaStatus, 3)
		for _, r := range p.Replicas {
			rs := d.replica(t, p.Partition, r)
			assert.JSONEq(t, strconv.FormatInt(want[p.Partition], 10), string(rs["log_end_offset"]), "partition %d broker %d", p.Partition, r)
			assert.JSONEq(t, `0`, string(rs["lag"]), "partition %d broker %d", p.Partition, r)
			state := `"in-sync"`
			if r == p.Leader {
				state = `"leader"`
			}
			assert.JSONEq(t, state, string(rs["state"]), "partition %d broker %d", p.Partition, r)
		}
	}

	// Kill a broker other than the controller that leads a partition.
	var led, followed client.PartitionMetadata
	victim := int32(-1)
	for _, p := range tm.Partitions {
		if p.Leader != 1 && victim < 0 {
			victim, led = p.Leader, p
		}
	}
	require.Positive(t, victim, "placement gives a broker other than 1 a partition to lead")
	for _, p := range tm.Partitions {
		if p.Leader != victim {
			followed = p
		}
	}
	require.NoError(t, c.Node(victim).Kill())

	// Gossip may take a few seconds to call it dead; the RPC survey sees
	// at once that it does not answer. Either is enough for the warning.
	failover := fmt.Sprintf("gostream-ctl failover --broker %d", victim)
	unreachable := fmt.Sprintf("partition orders/%d: leader broker %d is unreachable (gossip: ", led.Partition, victim)
	st = eventuallyStatus(t, c, fmt.Sprintf("broker %d dead or unreachable", victim), func(s ctlStatus) bool {
		return s.hasCommand(failover) && (s.gossip(victim) == "dead" || s.hasMessagePrefix(unreachable))
	})
	t.Logf("gossip state of the killed broker %d: %s", victim, st.gossip(victim))
	assert.GreaterOrEqual(t, st.Partitions.Offline, 1, "partition %d is led by the dead broker", led.Partition)
	assert.Equal(t, 2, st.Partitions.UnderReplicated, "the dead broker follows the other two partitions")
	assert.Equal(t, "alive", st.gossip(1))
	res = runCtl(t, c, "cluster", "status")
	require.Equal(t, 0, res.Exit, "a report with warnings still exits 0: %s", res.Stderr)
	assert.Contains(t, res.Stdout, unreachable)
	assert.Contains(t, res.Stdout, "fix: "+failover)
	victimRow := slices.IndexFunc(strings.Split(res.Stdout, "\n"), func(l string) bool {
		f := strings.Fields(l)
		return len(f) > 4 && f[0] == strconv.Itoa(int(victim)) && f[4] == "unreachable"
	})
	assert.GreaterOrEqual(t, victimRow, 0, "the table shows broker %d unreachable:\n%s", victim, res.Stdout)

	// The dead broker's replica is unknown: null, not zero.
	d = ctlJSON[ctlDescribe](t, c, "topic", "describe", "orders")
	rs := d.replica(t, followed.Partition, victim)
	assert.JSONEq(t, `"unknown"`, string(rs["state"]))
	assert.JSONEq(t, `null`, string(rs["log_end_offset"]))
	assert.JSONEq(t, `null`, string(rs["lag"]))
	leaderRS := d.replica(t, followed.Partition, followed.Leader)
	assert.JSONEq(t, `"leader"`, string(leaderRS["state"]))

	// A write while it is down fails, but the leader keeps it: the victim
	// is now one record behind.
	res = runCtl(t, c, "produce", "orders", "--partition", strconv.Itoa(int(followed.Partition)), "while-down")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "ReplicationFailed: "), res.Stderr)
	end := want[followed.Partition] + 1

	// Restart it; catch-up brings it to the leader's log end.
	require.NoError(t, c.StartNode(victim))
	args := []string{"catch-up", "--topic", "orders", "--partition", strconv.Itoa(int(followed.Partition)), "--broker", strconv.Itoa(int(victim))}
	var caught struct {
		Topic      string `json:"topic"`
		Partition  int32  `json:"partition"`
		Broker     int32  `json:"broker"`
		FromOffset int64  `json:"from_offset"`
		ToOffset   int64  `json:"to_offset"`
	}
	require.Eventually(t, func() bool {
		res := runCtl(t, c, append(args, "-o", "json")...)
		if res.Exit != 0 {
			return false
		}
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &caught), "%s", res.Stdout)
		return true
	}, 60*time.Second, 500*time.Millisecond, "catch-up never succeeded")
	assert.Equal(t, "orders", caught.Topic)
	assert.Equal(t, followed.Partition, caught.Partition)
	assert.Equal(t, victim, caught.Broker)
	assert.LessOrEqual(t, caught.FromOffset, caught.ToOffset)
	assert.Equal(t, end, caught.ToOffset, "the follower ends where the leader does")
	// The catch-up is in the controller's audit trail.
	h := ctlJSON[ctlHistory](t, c, "cluster", "history")
	found := false
	for _, ev := range h.Events {
		found = found || ev.Action == "catch-up" && ev.Topic == "orders" && ev.Partition == followed.Partition
	}
	assert.True(t, found, "catch-up recorded in cluster history: %+v", h.Events)
	res = runCtl(t, c, args...)
	require.Equal(t, 0, res.Exit, res.Stderr)
	assert.Equal(t, fmt.Sprintf("caught up broker %d on orders/%d from offset %d to %d\n", victim, followed.Partition, end, end), res.Stdout)

	d = ctlJSON[ctlDescribe](t, c, "topic", "describe", "orders")
	rs = d.replica(t, followed.Partition, victim)
	assert.JSONEq(t, strconv.FormatInt(end, 10), string(rs["log_end_offset"]))
	assert.JSONEq(t, `0`, string(rs["lag"]))
	assert.JSONEq(t, `"in-sync"`, string(rs["state"]))

	// Once gossip has it back, the cluster is healthy again.
	eventuallyStatus(t, c, "the cluster healthy again", healthy)

	// Catch-up refuses what it cannot do, naming why.
	res = runCtl(t, c, "catch-up", "--topic", "orders", "--partition", strconv.Itoa(int(followed.Partition)), "--broker", strconv.Itoa(int(followed.Leader)))
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "InvalidRequest: "), res.Stderr)
	res = runCtl(t, c, "catch-up", "--topic", "nope", "--partition", "0", "--broker", "2")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "UnknownTopic: "), res.Stderr)
}

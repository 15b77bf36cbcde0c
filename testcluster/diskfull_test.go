package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// A full disk on a follower, then on a leader: writes fail with NoSpace
// (retriable), the failed replica shows in status and in cluster status,
// nothing acknowledged is lost, and once space is back the partition takes
// writes again by itself, without a restart.
func TestFullDiskIsNamedAndResumesWithoutARestart(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, CrashFS: true})
	cl := newClient(t, c)
	createTopic(t, cl, "full", 3, 3) // partition 1 is led by broker 2
	produceN(t, cl, "full", 1, 10, "before")
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 5 * time.Second, Linger: -1, Retries: -1})
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	for _, victim := range []int32{3, 2} { // a follower, then the leader
		require.NoError(t, c.Node(victim).FillDisk())
		// The segment's preallocated space takes writes still, as on a
		// real disk; 64 KiB records use it up.
		big := strings.Repeat("x", 64<<10)
		var perr error
		for i := 0; i < 100; i++ {
			if _, perr = p.Send(ctx, client.ProducerRecord{Topic: "full", Partition: 1, ManualPartition: true, Value: []byte(big)}); perr != nil {
				break
			}
		}
		require.Error(t, perr)
		if victim == 2 {
			require.ErrorIs(t, perr, transport.ErrNoSpace, "the leader's full disk is named")
		} else {
			require.ErrorIs(t, perr, transport.ErrReplicationFailed, "the follower's failure is named")
			assert.Contains(t, perr.Error(), "broker 3: NoSpace")
		}
		t.Logf("with broker %d's disk full: %v", victim, perr)
		var res CtlResult

		require.Eventually(t, func() bool {
			res = ctlRun(t, c, "cluster", "status")
			return strings.Contains(res.Stdout, "no space left on device")
		}, 30*time.Second, 200*time.Millisecond, "cluster status shows the failed replica on broker %d:\n%s", victim, res.Stdout)

		require.NoError(t, c.Node(victim).FreeDisk())
		require.Eventually(t, func() bool {
			res = ctlRun(t, c, "produce", "full", "--partition", "1", "after")
			return res.Exit == 0
		}, 30*time.Second, 200*time.Millisecond, "writes resume once space is back: %s", res.Stderr)
		assert.True(t, c.Node(victim).Running(), "without a restart")
	}
	// The controller's disk: a change is refused as NoSpace, and made once
	// space is back.
	require.NoError(t, c.Node(1).FillDisk())
	res := ctlRun(t, c, "topic", "create", "later", "--partitions", "1", "--replication-factor", "3")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "NoSpace:"), res.Stderr)
	require.NoError(t, c.Node(1).FreeDisk())
	res = ctlRun(t, c, "topic", "create", "later", "--partitions", "1", "--replication-factor", "3")
	assert.Equal(t, 0, res.Exit, res.Stderr)

	res = ctlRun(t, c, "verify")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	got := consumeAll(t, newClient(t, c), "full", 1)
	for i := range 10 {
		assert.Contains(t, got, int64(i), "acknowledged offset %d", i)
	}
}

// A follower whose disk is full holds up every write to the partitions it
// follows. It reports that like any failed replica: in its ReplicaState
// answer and /api/status, in cluster status with the command that drops
// it, and as failed in topic describe; the operator drops it (the
// per-partition form and failover --broker) and writes go on with the two
// others while its disk is still full; once space is back, recover brings
// it back, verify is clean, and nothing acknowledged is lost.
func TestFollowersFullDiskIsReportedAndDropped(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, CrashFS: true})
	cl := newClient(t, c)
	createTopic(t, cl, "ff", 2, 3) // ff/0 led by broker 1, ff/1 by broker 2; broker 3 follows both
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 5 * time.Second, Linger: -1, Retries: -1})
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	acks := map[int32]map[int64]string{0: {}, 1: {}}
	send := func(partition int32, value string) error {
		ack, err := p.Send(ctx, client.ProducerRecord{Topic: "ff", Partition: partition, ManualPartition: true, Value: []byte(value)})
		if err == nil {
			acks[partition][ack.Offset] = value
		}
		return err
	}
	for i := range 5 {
		for part := range int32(2) {
			require.NoError(t, send(part, fmt.Sprintf("before-%d-%d", part, i)))
		}
	}

	require.NoError(t, c.Node(3).FillDisk())
	big := strings.Repeat("x", 64<<10) // uses up the segments' preallocated space
	for part := range int32(2) {
		var perr error
		for i := 0; i < 100 && perr == nil; i++ {
			perr = send(part, big)
		}
		require.ErrorIs(t, perr, transport.ErrReplicationFailed, "ff/%d", part)
		assert.Contains(t, perr.Error(), "broker 3: NoSpace")
	}

	// Its replica state, as the controller and recovery read it.
	for part := range int32(2) {
		st, err := cl.ReplicaState(ctx, 3, "ff", part)
		require.NoError(t, err)
		assert.Contains(t, st.Problem, "the disk of broker 3 is full", "ff/%d", part)
		assert.Contains(t, st.Problem, "no space left on device")
	}
	// Its /api/status.
	body, err := c.Node(3).HTTPGet(transport.StatusPath)
	require.NoError(t, err)
	var status transport.NodeStatus
	require.NoError(t, json.Unmarshal(body, &status))
	for part := range int32(2) {
		ps, ok := status.Partition("ff", part)
		require.True(t, ok)
		assert.Contains(t, ps.Problem, "the disk of broker 3 is full", "ff/%d in /api/status", part)
	}
	// cluster status: a warning per partition, with the command that drops
	// the replica.
	res := ctlRun(t, c, "cluster", "status")
	for part := range 2 {
		assert.Contains(t, res.Stdout, fmt.Sprintf("partition ff/%d: its follower on broker 3 cannot serve (", part))
		assert.Contains(t, res.Stdout, fmt.Sprintf("fix: gostream-ctl failover --topic ff --partition %d --broker 3\n", part))
	}
	assert.Contains(t, res.Stdout, "until space is freed on broker 3", res.Stdout)
	assert.Contains(t, res.Stdout, "gostream-ctl failover --broker 3", res.Stdout)
	assert.Contains(t, res.Stdout, "gostream-ctl recover --broker 3", res.Stdout)
	// topic describe.
	res = ctlRun(t, c, "topic", "describe", "ff", "-o", "json")
	require.Equal(t, 0, res.Exit, res.Stderr)
	var described struct {
		Partitions []struct {
			ReplicaStatus []struct {
				Broker  int32  `json:"broker"`
				State   string `json:"state"`
				Problem string `json:"problem"`
			} `json:"replica_status"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &described))
	require.Len(t, described.Partitions, 2)
	for part, dp := range described.Partitions {
		for _, rs := range dp.ReplicaStatus {
			if rs.Broker == 3 {
				assert.Equal(t, "failed", rs.State, "ff/%d", part)
				assert.Contains(t, rs.Problem, "the disk of broker 3 is full")
			}
		}
	}

	// Dropped, one partition at a time and then the whole broker, with
	// its disk still full: writes go on with the two others.
	res = ctlRun(t, c, "failover", "--topic", "ff", "--partition", "1", "--broker", "3")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	res = ctlRun(t, c, "failover", "--broker", "3")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	for part := range int32(2) {
		require.Eventually(t, func() bool {
			return send(part, fmt.Sprintf("dropped-%d", part)) == nil
		}, 30*time.Second, 200*time.Millisecond, "ff/%d takes writes without broker 3", part)
		for i := range 5 {
			require.NoError(t, send(part, fmt.Sprintf("without-3-%d-%d", part, i)))
		}
	}
	tm, err := cl.DescribeTopic(ctx, "ff")
	require.NoError(t, err)
	for _, pm := range tm.Partitions {
		assert.NotContains(t, pm.Active, int32(3), "ff/%d", pm.Partition)
	}

	// Recover before space is back fails, naming the full disk, and
	// leaves it out.
	res = ctlRun(t, c, "recover", "--broker", "3")
	assert.Equal(t, 2, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.Contains(t, res.Stdout+res.Stderr, "NoSpace")
	tm, err = cl.DescribeTopic(ctx, "ff")
	require.NoError(t, err)
	for _, pm := range tm.Partitions {
		assert.NotContains(t, pm.Active, int32(3), "ff/%d", pm.Partition)
	}

	// Space back: recover brings it back, and it holds every record.
	require.NoError(t, c.Node(3).FreeDisk())
	require.Eventually(t, func() bool {
		res = ctlRun(t, c, "recover", "--broker", "3")
		return res.Exit == 0
	}, 60*time.Second, time.Second, "recover --broker 3: %s%s", res.Stdout, res.Stderr)
	tm, err = cl.DescribeTopic(ctx, "ff")
	require.NoError(t, err)
	for _, pm := range tm.Partitions {
		assert.Contains(t, pm.Active, int32(3), "ff/%d", pm.Partition)
		// A full disk is no damage: recovery copied what the replica
		// lacked, and did not rebuild it.
		rebuilt, err := filepath.Glob(filepath.Join(c.Node(3).ReplicaDir("ff", pm.Partition), "quarantine", "damaged-*"))
		require.NoError(t, err)
		assert.Empty(t, rebuilt, "ff/%d was rebuilt whole", pm.Partition)
	}
	for part := range int32(2) {
		require.NoError(t, send(part, fmt.Sprintf("after-%d", part)))
	}
	require.Eventually(t, func() bool {
		res = ctlRun(t, c, "cluster", "status")
		return strings.Contains(res.Stdout, "No warnings.")
	}, 30*time.Second, 200*time.Millisecond, "cluster status once broker 3 is back:\n%s", res.Stdout)
	res = ctlRun(t, c, "verify")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	for part := range int32(2) {
		got := consumeAll(t, newClient(t, c), "ff", part)
		for off, v := range acks[part] {
			assert.Equal(t, v, got[off], "acknowledged ff/%d offset %d", part, off)
		}
	}
}

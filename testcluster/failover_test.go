package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

type changeResult struct {
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	Action     string  `json:"action"`
	OldLeader  int32   `json:"old_leader"`
	NewLeader  int32   `json:"new_leader"`
	OldEpoch   int32   `json:"old_epoch"`
	NewEpoch   int32   `json:"new_epoch"`
	NewActive  []int32 `json:"new_active"`
	Error      string  `json:"error,omitempty"`
	Truncated  *[2]int64
	Candidates []struct {
		Broker       int32 `json:"broker"`
		Reachable    bool  `json:"reachable"`
		LogEndOffset int64 `json:"log_end_offset"`
		Agrees       bool  `json:"agrees"`
		Chosen       bool  `json:"chosen"`
	} `json:"candidates"`
}

func operator(t *testing.T, c *Cluster, api transport.API, req map[string]any) ([]changeResult, error) {
	t.Helper()
	data, err := json.Marshal(req)
	require.NoError(t, err)
	var resp transport.JSONMessage
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := transport.Dial(ctx, c.Node(1).RPC, transport.ConnConfig{})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.Call(ctx, api, &transport.JSONMessage{Data: data}, &resp); err != nil {
		return nil, err
	}
	var rep struct {
		Results []changeResult `json:"results"`
	}
	require.NoError(t, json.Unmarshal(resp.Data, &rep))
	return rep.Results, nil
}

// TestFailoverRefusedWhileLeaderAnswers: nothing changes.
func TestFailoverRefusedWhileLeaderAnswers(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "fo", 1, 3)
	_, err := operator(t, c, transport.APIFailover, map[string]any{"topic": "fo", "partition": 0})
	require.ErrorIs(t, err, transport.ErrLeaderStillAvailable)
	assert.Contains(t, err.Error(), fmt.Sprintf("led by broker %d, which answers", tm.Partitions[0].Leader))
	after, err := cl.DescribeTopic(context.Background(), "fo")
	require.NoError(t, err)
	assert.Equal(t, tm.Partitions[0].LeaderEpoch, after.Partitions[0].LeaderEpoch)
}

// TestFailoverAwayFromDeadLeader uses a partition led by broker 2, kills
// broker 2, fails over, writes, restarts it and recovers it.
func TestFailoverAwayFromDeadLeader(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "fo", 2, 3)
	p1 := tm.Partitions[1]
	require.Equal(t, int32(2), p1.Leader, "round-robin placement")
	acked := map[int64]string{}
	for k, v := range produceTo(t, cl, "fo", 1, "before", 40) {
		acked[k] = v
	}
	require.NoError(t, c.Node(2).Kill())

	dry, err := operator(t, c, transport.APIFailover, map[string]any{"topic": "fo", "partition": 1, "dry_run": true})
	require.NoError(t, err)
	require.Len(t, dry, 1)
	assert.Equal(t, int32(1), dry[0].NewLeader, "equal (last epoch, log end): the lowest broker id wins")
	res, err := operator(t, c, transport.APIFailover, map[string]any{"topic": "fo", "partition": 1})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, int32(2), res[0].OldLeader)
	assert.Greater(t, res[0].NewEpoch, res[0].OldEpoch)
	assert.NotContains(t, res[0].NewActive, int32(2))
	newLeader := res[0].NewLeader

	for k, v := range produceTo(t, cl, "fo", 1, "after", 40) {
		acked[k] = v
	}

	// The old leader returns as a follower, never as leader.
	require.NoError(t, c.StartNode(2))
	_, err = produceOne(context.Background(), c.Node(2).RPC, "fo", 1, "to the old leader")
	require.ErrorIs(t, err, transport.ErrNotLeader)

	rec, err := operator(t, c, transport.APIRecover, map[string]any{"topic": "fo", "partition": 1, "broker": 2})
	require.NoError(t, err)
	require.Len(t, rec, 1)
	assert.Contains(t, rec[0].NewActive, int32(2))

	for k, v := range produceTo(t, cl, "fo", 1, "recovered", 10) {
		acked[k] = v
	}
	got := consumeAll(t, cl, "fo", 1)
	for off, v := range acked {
		assert.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	lead := replicaBytes(t, c.Node(newLeader), "fo", 1)
	for _, r := range []int32{1, 2, 3} {
		assert.True(t, bytes.Equal(lead, replicaBytes(t, c.Node(r), "fo", 1)), "broker %d differs", r)
	}
}

func produceTo(t *testing.T, cl *client.Client, topic string, partition int32, prefix string, n int) map[int64]string {
	t.Helper()
	p, err := client.NewProducer(cl, client.ProducerConfig{})
	require.NoError(t, err)
	defer p.Close()
	out := map[int64]string{}
	for i := 0; i < n; i++ {
		v := fmt.Sprintf("%s-%d", prefix, i)
		var ack client.Ack
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var err error
			ack, err = p.Send(ctx, client.ProducerRecord{Topic: topic, Partition: partition, ManualPartition: true, Value: []byte(v)})
			if err != nil {
				t.Logf("send %s: %v", v, err)
				cl.RefreshMetadata(context.Background(), topic)
			}
			return err == nil
		}, 30*time.Second, 100*time.Millisecond)
		out[ack.Offset] = v
	}
	return out
}

// TestPausedLeaderIsFencedAfterFailover: SIGSTOP a leader, fail over,
// resume it. Its writes are refused by epoch, nothing it acknowledges after
// the failover exists, and recovery moves its unacknowledged tail to
// quarantine/.
func TestPausedLeaderIsFencedAfterFailover(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "z", 2, 3) // partition 1: replicas [2 3 1]
	acked := produceTo(t, cl, "z", 1, "before", 20)

	require.NoError(t, c.Node(2).Pause())
	res, err := operator(t, c, transport.APIFailover, map[string]any{"topic": "z", "partition": 1})
	require.NoError(t, err)
	require.Len(t, res, 1)
	for k, v := range produceTo(t, cl, "z", 1, "after", 20) {
		acked[k] = v
	}

	require.NoError(t, c.Node(2).Resume())
	// The zombie still believes it leads epoch 0 until new metadata reaches
	// it: its write goes to its own log, but the followers refuse it.
	for i := 0; i < 3; i++ {
		ack, err := produceOne(context.Background(), c.Node(2).RPC, "z", 1, fmt.Sprint("zombie-", i))
		require.Error(t, err, "the old leader acknowledged a write after the failover: %+v", ack)
		t.Logf("zombie write %d: %v", i, err)
	}

	rec, err := operator(t, c, transport.APIRecover, map[string]any{"topic": "z", "partition": 1, "broker": 2})
	require.NoError(t, err)
	require.Len(t, rec, 1)
	got := consumeAll(t, cl, "z", 1)
	for off, v := range acked {
		assert.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	for _, v := range got {
		assert.NotContains(t, v, "zombie", "a refused write is readable")
	}
	lead := replicaBytes(t, c.Node(res[0].NewLeader), "z", 1)
	for _, r := range []int32{1, 2, 3} {
		assert.True(t, bytes.Equal(lead, replicaBytes(t, c.Node(r), "z", 1)), "broker %d differs", r)
	}
	// The zombie's first write reached its own log before the followers
	// refused it: that unacknowledged tail is cut and kept.
	require.NotNil(t, rec[0].Truncated, "recover cut the old leader's unacknowledged tail")
	q, err := filepath.Glob(filepath.Join(c.Node(2).ReplicaDir("z", 1), "quarantine", "*"))
	require.NoError(t, err)
	assert.NotEmpty(t, q, "the cut tail is kept in quarantine")
}

// TestNoEligibleReplicaChangesNothing: with every follower of a partition
// down, failover refuses and leadership stays as it was.
func TestNoEligibleReplicaChangesNothing(t *testing.T) {
	c := startCluster(t, 4)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "ne", 2, 3) // partition 1: replicas [2 3 4]
	p1 := tm.Partitions[1]
	for _, id := range p1.Replicas {
		require.NoError(t, c.Node(id).Kill())
	}
	_, err := operator(t, c, transport.APIFailover, map[string]any{"topic": "ne", "partition": 1})
	require.ErrorIs(t, err, transport.ErrNoEligibleReplica)
	require.NoError(t, cl.RefreshMetadata(context.Background(), "ne"))
	after, err := cl.DescribeTopic(context.Background(), "ne")
	require.NoError(t, err)
	assert.Equal(t, p1.Leader, after.Partitions[1].Leader)
	assert.Equal(t, p1.LeaderEpoch, after.Partitions[1].LeaderEpoch)
	assert.Equal(t, p1.Active, after.Partitions[1].Active)
}

// TestControllerKilledBetweenFenceAndPersistRerunSucceeds: the controller
// dies after fencing the followers with a new epoch and before persisting
// the new leader; after its restart the same command succeeds with a
// higher epoch, and a full restart of the cluster keeps the result.
func TestControllerKilledBetweenFenceAndPersistRerunSucceeds(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "ck", 2, 3) // partition 1: replicas [2 3 1]
	acked := produceTo(t, cl, "ck", 1, "before", 10)
	require.NoError(t, c.Node(2).Kill())

	require.NoError(t, c.Node(1).Stop(10*time.Second))
	c.Node(1).Env = []string{"GOSTREAM_CRASHPOINT=failover-after-fence"}
	require.NoError(t, c.StartNode(1))
	_, err := operator(t, c, transport.APIFailover, map[string]any{"topic": "ck", "partition": 1})
	require.Error(t, err, "the controller died mid-failover")
	require.Eventually(t, func() bool { return !c.Node(1).Running() }, 10*time.Second, 50*time.Millisecond)

	c.Node(1).Env = nil
	require.NoError(t, c.StartNode(1))
	res, err := operator(t, c, transport.APIFailover, map[string]any{"topic": "ck", "partition": 1})
	require.NoError(t, err)
	require.Len(t, res, 1)
	assert.Equal(t, int32(2), res[0].NewEpoch, "the rerun takes an epoch above the one reserved by the dead attempt")
	for k, v := range produceTo(t, cl, "ck", 1, "after", 10) {
		acked[k] = v
	}

	// A full restart brings back the same leaders, epochs and active sets.
	require.NoError(t, cl.RefreshMetadata(context.Background()))
	before, err := cl.ListTopics(context.Background())
	require.NoError(t, err)
	for _, n := range c.Nodes {
		if n.Running() {
			require.NoError(t, n.Stop(10*time.Second))
		}
	}
	require.NoError(t, c.Start())
	cl2 := newClient(t, c)
	after, err := cl2.ListTopics(context.Background())
	require.NoError(t, err)
	assert.Equal(t, before, after)
	got := consumeAll(t, cl2, "ck", 1)
	for off, v := range acked {
		assert.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
}

// TestCorruptReplicaIsRebuiltByRecover: a follower whose segment is
// damaged in the middle starts anyway and serves its other replicas; the
// damaged replica is offline; dropped by failover and rebuilt by recover,
// its damaged files are quarantined and it ends identical to the leader.
func TestCorruptReplicaIsRebuiltByRecover(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "cr", 2, 3) // partition 1: replicas [2 3 1], led by 2
	acked := produceTo(t, cl, "cr", 1, "before", 30)

	require.NoError(t, c.Node(3).Stop(10*time.Second))
	seg := filepath.Join(c.Node(3).ReplicaDir("cr", 1), "00000000000000000000.log")
	data, err := os.ReadFile(seg)
	require.NoError(t, err)
	data[len(data)/2] ^= 0xff // inside a complete batch, with valid batches after it
	require.NoError(t, os.WriteFile(seg, data, 0o644))
	require.NoError(t, c.StartNode(3), "a node with one corrupt replica still starts")

	// Its healthy replica (partition 0) keeps serving.
	produceTo(t, cl, "cr", 0, "p0", 3)

	res, err := operator(t, c, transport.APIFailover, map[string]any{"broker": 3})
	require.NoError(t, err)
	dropped := false
	for _, r := range res {
		if r.Partition == 1 && r.Action == "drop-follower" && !contains(r.NewActive, 3) {
			dropped = true
		}
	}
	require.True(t, dropped, "the corrupt replica is dropped from the active set: %+v", res)
	for k, v := range produceTo(t, cl, "cr", 1, "reduced", 10) {
		acked[k] = v
	}

	rec, err := operator(t, c, transport.APIRecover, map[string]any{"topic": "cr", "partition": 1, "broker": 3})
	require.NoError(t, err)
	require.Len(t, rec, 1)
	assert.Contains(t, rec[0].NewActive, int32(3))
	damaged, err := filepath.Glob(filepath.Join(c.Node(3).ReplicaDir("cr", 1), "quarantine", "damaged-*", "*.log"))
	require.NoError(t, err)
	assert.NotEmpty(t, damaged, "the damaged segment is kept in quarantine")

	for k, v := range produceTo(t, cl, "cr", 1, "after", 5) {
		acked[k] = v
	}
	got := consumeAll(t, cl, "cr", 1)
	for off, v := range acked {
		assert.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	lead := replicaBytes(t, c.Node(2), "cr", 1)
	for _, r := range []int32{1, 3} {
		assert.True(t, bytes.Equal(lead, replicaBytes(t, c.Node(r), "cr", 1)), "broker %d differs", r)
	}
}

// TestFailoverOfSilentBrokerIsBounded: a broker that accepts connections
// and never answers (SIGSTOP, as a partition looks from the controller)
// costs one liveness timeout and one push timeout per failover request,
// not one each per partition. With 12 partitions the old cost was about
// 12 × (1.5 s + 2 s); the test allows a quarter of that.
func TestFailoverOfSilentBrokerIsBounded(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "many", 12, 3) // broker 2 leads 4 and follows 8
	require.NoError(t, c.Node(2).Pause())
	defer c.Node(2).Resume()
	start := time.Now()
	res, err := operator(t, c, transport.APIFailover, map[string]any{"broker": 2})
	took := time.Since(start)
	require.NoError(t, err)
	require.Len(t, res, 12)
	for _, r := range res {
		assert.Empty(t, r.Error, "%s/%d", r.Topic, r.Partition)
		assert.NotContains(t, r.NewActive, int32(2))
	}
	t.Logf("failover of a silent broker over 12 partitions took %s", took)
	assert.Less(t, took, 10*time.Second, "failover of a silent broker took %s", took)
}

// TestDamagedMetadataIsReportedNeverRewritten (invariant 8): a node whose
// metadata file is damaged refuses to start, says which file and why, and
// leaves the file as it found it, for the controller's metadata and for a
// broker's cached copy alike.
func TestDamagedMetadataIsReportedNeverRewritten(t *testing.T) {
	c := startCluster(t, 2)
	cl := newClient(t, c)
	createTopic(t, cl, "m", 2, 2)
	for _, tc := range []struct {
		id   int32
		path string
	}{
		{1, filepath.Join(c.Node(1).DataDir, "controller", "metadata.json")},
		{2, filepath.Join(c.Node(2).DataDir, "metadata.json")},
	} {
		n := c.Node(tc.id)
		require.NoError(t, n.Stop(10*time.Second))
		good, err := os.ReadFile(tc.path)
		require.NoError(t, err, "node %d keeps its metadata in %s", tc.id, tc.path)
		bad := good[:len(good)/2]
		require.NoError(t, os.WriteFile(tc.path, bad, 0o644))

		require.NoError(t, n.Start(c.Controller(), nil))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = n.Wait(ctx)
		cancel()
		require.Error(t, err, "node %d started over damaged metadata", tc.id)
		log := n.LogTail(20)
		assert.Contains(t, log, tc.path, "node %d: the error names the file", tc.id)
		after, rerr := os.ReadFile(tc.path)
		require.NoError(t, rerr)
		assert.Equal(t, bad, after, "node %d rewrote its damaged metadata", tc.id)

		// Put back the good copy: the node starts as before.
		require.NoError(t, os.WriteFile(tc.path, good, 0o644))
		require.NoError(t, c.StartNode(tc.id))
	}
}

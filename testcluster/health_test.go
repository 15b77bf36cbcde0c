package testcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cutReplicaTo cuts the newest segment of a stopped node's replica back to
// the end of the batch that holds offset keep-1 (a log that lost records
// it had acknowledged: a disk that dropped writes, an old file put back).
func cutReplicaTo(t *testing.T, dir string, keep int64) {
	t.Helper()
	base, err := newestSegment(dir)
	require.NoError(t, err)
	path := filepath.Join(dir, fmt.Sprintf("%020d.log", base))
	scan, err := scanSegment(path)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(path, scan.bound(keep)))
}

// A leader whose own log lost acknowledged records (its followers hold
// more) stops taking writes and says so, and failover, refused for a
// healthy live leader, is allowed for it, also when it is the
// controller's node: the follower with the records becomes leader, the
// damaged replica is recovered, and nothing acknowledged is lost.
func TestLeaderBehindItsFollowersIsFailedOver(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "lb", 1, 3) // led by broker 1, the controller's node
	produceN(t, cl, "lb", 0, 20, "v")

	res := ctlRun(t, c, "failover", "--topic", "lb", "--partition", "0")
	require.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "LeaderStillAvailable")

	require.NoError(t, c.Node(1).Stop(10*time.Second))
	cutReplicaTo(t, c.Node(1).ReplicaDir("lb", 0), 10)
	// Without its checkpoint the leader cannot tell from its own files
	// that it lost records; only its followers show it.
	require.NoError(t, os.Remove(filepath.Join(c.Node(1).DataDir, "high-watermarks")))
	require.NoError(t, c.StartNode(1))

	require.Eventually(t, func() bool {
		res = ctlRun(t, c, "produce", "lb", "--partition", "0", "refused")
		return res.Exit == 2 && strings.Contains(res.Stderr, "StorageFailed") && strings.Contains(res.Stderr, "behind")
	}, 30*time.Second, 200*time.Millisecond, "the leader refuses writes, saying it is behind: %s", res.Stderr)

	res = ctlRun(t, c, "cluster", "status")
	assert.Contains(t, res.Stdout, "answers but its replica cannot lead")
	assert.Contains(t, res.Stdout, "gostream-ctl failover --topic lb --partition 0")

	res = ctlRun(t, c, "failover", "--topic", "lb", "--partition", "0")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.Contains(t, res.Stdout, "cannot lead")
	res = ctlRun(t, c, "recover", "--topic", "lb", "--partition", "0", "--broker", "1")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	res = ctlRun(t, c, "verify")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	got := consumeAll(t, newClient(t, c), "lb", 0)
	for i := range 20 {
		assert.Equal(t, fmt.Sprintf("v-%d", i), got[int64(i)], "offset %d", i)
	}
}

// flipBatchBit flips one bit inside the records of the batch that pick
// chooses among those of the newest segment of a replica: the batch stays
// whole, its checksum fails. The node may be running (the flip is then
// under it, where nothing reads it until something does) or stopped.
func flipBatchBit(t *testing.T, dir string, pick func([]batchSpan) batchSpan) {
	t.Helper()
	base, err := newestSegment(dir)
	require.NoError(t, err)
	path := filepath.Join(dir, fmt.Sprintf("%020d.log", base))
	scan, err := scanSegment(path)
	require.NoError(t, err)
	require.NotEmpty(t, scan.batches)
	at := pick(scan.batches).end - 2 // in the batch's last record's value
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := []byte{0}
	_, err = f.ReadAt(b, at)
	require.NoError(t, err)
	b[0] ^= 0x10
	_, err = f.WriteAt(b, at)
	require.NoError(t, err)
}

func lastBatch(bs []batchSpan) batchSpan   { return bs[len(bs)-1] }
func middleBatch(bs []batchSpan) batchSpan { return bs[len(bs)/2] }

// One bit flipped in the last, acknowledged batch of the leader's log, on
// the controller's node, while it is stopped: on start the replica is
// corrupt (not a torn write to cut), it serves nothing and takes no
// writes, and failover, then recover, bring the partition back with every
// acknowledged record.
func TestBitRotInTheLeadersLastBatchIsCorruptionAndCanBeFixed(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "rot", 1, 3) // led by broker 1, the controller's node
	produceN(t, cl, "rot", 0, 20, "v")

	require.NoError(t, c.Node(1).Stop(10*time.Second))
	flipBatchBit(t, c.Node(1).ReplicaDir("rot", 0), lastBatch)
	require.NoError(t, c.StartNode(1))
	assert.Contains(t, c.Node(1).LogTail(100), "replica is corrupt and offline")
	assert.NotContains(t, c.Node(1).LogTail(100), "cut a torn write")

	res := ctlRun(t, c, "produce", "rot", "--partition", "0", "refused")
	assert.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "StorageFailed")
	res = ctlRun(t, c, "cluster", "status")
	assert.Contains(t, res.Stdout, "answers but its replica cannot lead")

	res = ctlRun(t, c, "failover", "--topic", "rot", "--partition", "0")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	res = ctlRun(t, c, "recover", "--topic", "rot", "--partition", "0", "--broker", "1")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	res = ctlRun(t, c, "verify")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	got := consumeAll(t, newClient(t, c), "rot", 0)
	for i := range 20 {
		assert.Equal(t, fmt.Sprintf("v-%d", i), got[int64(i)], "offset %d", i)
	}
	q, err := filepath.Glob(filepath.Join(c.Node(1).ReplicaDir("rot", 0), "quarantine", "damaged-*"))
	require.NoError(t, err)
	assert.NotEmpty(t, q, "the damaged files are kept in quarantine")
}

// A bit flipped where nothing reads it (a follower's batch in the middle
// of its log, under the running node): verify reads every replica whole,
// finds it, names the command that fixes it, and the command does.
func TestVerifyFindsLatentBitRotAndItsFixWorks(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "latent", 1, 3) // led by broker 1
	produceN(t, cl, "latent", 0, 20, "v")

	dir := c.Node(3).ReplicaDir("latent", 0)
	flipBatchBit(t, dir, middleBatch)

	res := ctlRun(t, c, "verify", "-o", "json")
	require.Equal(t, 2, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.True(t, strings.HasPrefix(res.Stderr, "StorageFailed:"), res.Stderr)
	var rep verifyReply
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &rep))
	var fix string
	for _, r := range rep.Partitions[0].Replicas {
		if r.Broker == 3 {
			assert.Equal(t, "damaged", r.State)
			fix = r.Command
		}
	}
	require.NotEmpty(t, fix)
	for _, cmd := range strings.Split(fix, " && ") {
		args := strings.Fields(strings.TrimPrefix(cmd, "gostream-ctl "))
		res = ctlRun(t, c, args...)
		require.Equal(t, 0, res.Exit, "%s: %s%s", cmd, res.Stdout, res.Stderr)
	}
	res = ctlRun(t, c, "verify")
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	leader, err := ReadReplica(c.Node(1).ReplicaDir("latent", 0))
	require.NoError(t, err)
	rebuilt, err := ReadReplica(dir)
	require.NoError(t, err)
	assert.Equal(t, leader, rebuilt, "broker 3's replica is the leader's again")
}

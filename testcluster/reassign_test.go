package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// ackedWriter writes values to one partition until stopped and keeps
// every acknowledged one by offset; a failed send is retried with the
// next value (it may or may not have landed).
type ackedWriter struct {
	mu    sync.Mutex
	acked map[int64]string
	fails int
	stop  chan struct{}
	done  chan struct{}
}

func startAckedWriter(t *testing.T, cl *client.Client, topic string, partition int32, size int) *ackedWriter {
	t.Helper()
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 5 * time.Second})
	require.NoError(t, err)
	w := &ackedWriter{acked: map[int64]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	pad := strings.Repeat("x", max(0, size-16))
	go func() {
		defer close(w.done)
		defer p.Close()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			v := fmt.Sprintf("w-%d-%s", i, pad)
			ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
			ack, err := p.Send(ctx, client.ProducerRecord{Topic: topic, Partition: partition, ManualPartition: true, Value: []byte(v)})
			cancel()
			w.mu.Lock()
			if err == nil {
				w.acked[ack.Offset] = v
			} else {
				w.fails++
			}
			w.mu.Unlock()
			if err != nil {
				cl.RefreshMetadata(context.Background(), topic)
				time.Sleep(50 * time.Millisecond) // a pause between retries, not a wait for a condition
			}
		}
	}()
	return w
}

// finish stops the writer and returns what was acknowledged.
func (w *ackedWriter) finish() map[int64]string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acked
}

func (w *ackedWriter) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// partitionNow is the partition as the metadata of the cluster says now.
func partitionNow(t *testing.T, cl *client.Client, topic string, p int32) client.PartitionMetadata {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, cl.RefreshMetadata(ctx, topic))
	tm, err := cl.DescribeTopic(ctx, topic)
	require.NoError(t, err)
	return tm.Partitions[p]
}

// waitMoved waits until topic/p has replicas want, led by want[0], and no
// move under way.
func waitMoved(t *testing.T, c *Cluster, cl *client.Client, topic string, p int32, want []int32, within time.Duration) {
	t.Helper()
	var last client.PartitionMetadata
	require.Eventually(t, func() bool {
		last = partitionNow(t, cl, topic, p)
		return slices.Equal(last.Replicas, want) && last.Leader == want[0] && slices.Equal(sorted(last.Active), sorted(want))
	}, within, 200*time.Millisecond, "%s/%d never reached %v: %+v; status: %s", topic, p, want, &last, reassignStatusText(c))
}

func sorted(ids []int32) []int32 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

func reassignStatusText(c *Cluster) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", "partition", "reassign", "--status")
	if err != nil {
		return err.Error()
	}
	return res.Stdout + res.Stderr
}

// TestReassignMovesAPartitionUnderLoad moves a partition from brokers
// 1, 2, 3 to 4, 2, 3 while a producer writes to it: the dry run changes
// nothing; the move copies the log to broker 4, makes it active, hands it
// the leadership and removes broker 1, which deletes its replica; every
// acknowledged record is read back from the new replicas, which are
// byte-identical, and each step is in the audit trail.
func TestReassignMovesAPartitionUnderLoad(t *testing.T) {
	c := startCluster(t, 4)
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	createTopic(t, cl, "mv", 4, 3) // partition 0: replicas 1, 2, 3; 2: 3, 4, 1
	require.Equal(t, []int32{1, 2, 3}, partitionNow(t, cl, "mv", 0).Replicas)
	before := produceTo(t, cl, "mv", 0, "before", 300)

	res, err := c.Ctl(ctx, "", "partition", "reassign", "mv", "0", "--replicas", "4,2,3")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.Contains(t, res.Stdout, "Dry run: nothing was changed")
	assert.Contains(t, res.Stdout, "copies to [4]")
	assert.Equal(t, []int32{1, 2, 3}, partitionNow(t, cl, "mv", 0).Replicas, "a dry run moves nothing")

	w := startAckedWriter(t, cl, "mv", 0, 512)
	require.Eventually(t, func() bool { return w.count() >= 50 }, time.Minute, 50*time.Millisecond)
	res, err = c.Ctl(ctx, "", "partition", "reassign", "mv", "0", "--replicas", "4,2,3", "--execute", "--throttle", "5")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.Contains(t, res.Stdout, "Started 1 move(s)")
	waitMoved(t, c, cl, "mv", 0, []int32{4, 2, 3}, 2*time.Minute)
	n := w.count()
	require.Eventually(t, func() bool { return w.count() >= n+50 }, time.Minute, 50*time.Millisecond, "writes go on after the move")
	acked := w.finish()
	t.Logf("%d records acknowledged during the move, %d sends failed", len(acked), w.fails)

	got := consumeAll(t, cl, "mv", 0)
	for off, v := range before {
		require.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	for off, v := range acked {
		require.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	// The replicas settle on the same bytes; broker 1 deleted its own.
	require.Eventually(t, func() bool {
		lead, err := segmentBytes(c.Node(4), "mv", 0)
		if err != nil {
			return false
		}
		for _, r := range []int32{2, 3} {
			b, err := segmentBytes(c.Node(r), "mv", 0)
			if err != nil || !bytes.Equal(lead, b) {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "replicas 4, 2, 3 are byte-identical")
	require.Eventually(t, func() bool {
		_, err := os.Stat(c.Node(1).ReplicaDir("mv", 0))
		return os.IsNotExist(err)
	}, 30*time.Second, 200*time.Millisecond, "broker 1 deletes the replica it no longer holds")
	_, err = os.Stat(c.Node(1).ReplicaDir("mv", 2))
	require.NoError(t, err, "broker 1 keeps its other replicas")

	res, err = c.Ctl(ctx, "", "partition", "reassign", "--status")
	require.NoError(t, err)
	assert.Equal(t, "no partition is moving\n", res.Stdout)
	res, err = c.Ctl(ctx, "", "cluster", "history", "-o", "json")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	for _, action := range []string{`"action":"reassign"`, `"action":"reassign-join"`, `"action":"elect-leader"`, `"action":"reassign-finish"`} {
		assert.Contains(t, res.Stdout, action)
	}
}

// TestReassignRefusesBadPlansAndCancels: plans naming an unknown broker,
// a broker twice, no replica, more replicas than brokers, an unknown
// partition, or a partition already moving are refused whole, with
// nothing changed; a throttle out of range and a misspelt plan file are
// usage errors. A move under way is cancelled: the partition is back on
// its replicas and the broker it added deletes what it had copied.
func TestReassignRefusesBadPlansAndCancels(t *testing.T) {
	c := startCluster(t, 4)
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	createTopic(t, cl, "bad", 2, 3) // 0: 1, 2, 3; 1: 2, 3, 4
	for _, tc := range []struct {
		args []string
		exit int
		want string
	}{
		{[]string{"bad", "0", "--replicas", "9,2,3"}, 2, "UnknownBroker: "},
		{[]string{"bad", "0", "--replicas", "4,4,3"}, 2, "names broker 4 twice"},
		{[]string{"bad", "0", "--replicas", "1,2,3,4,4"}, 2, "InvalidReplicationFactor: "},
		{[]string{"bad", "7", "--replicas", "1,2,3"}, 2, "UnknownPartition: "},
		{[]string{"nope", "0", "--replicas", "1,2,3"}, 2, "UnknownTopic: "},
		{[]string{"bad", "0", "--replicas", "4,2,3", "--throttle", "0"}, 1, "InvalidFlag: --throttle 0"},
		{[]string{"bad", "0", "--replicas", ""}, 1, "InvalidFlag: "},
		{[]string{"bad", "0"}, 1, "MissingFlag: "},
		// The partition named by flags, as the other operator commands do.
		{[]string{"--topic", "bad", "--partition", "7", "--replicas", "1,2,3"}, 2, "UnknownPartition: "},
		{[]string{"--topic", "bad", "--replicas", "1,2,3"}, 1, "MissingFlag: name the partition with both --topic and --partition"},
		{[]string{"--topic", "bad", "--partition", "0", "bad", "0", "--replicas", "1,2,3"}, 1, "UnexpectedArgument: "},
	} {
		res, err := c.Ctl(ctx, "", append([]string{"partition", "reassign"}, tc.args...)...)
		require.NoError(t, err)
		assert.Equal(t, tc.exit, res.Exit, "%v: %s%s", tc.args, res.Stdout, res.Stderr)
		assert.Contains(t, res.Stderr, tc.want, "%v", tc.args)
	}
	plan := filepath.Join(t.TempDir(), "plan.json")
	require.NoError(t, os.WriteFile(plan, []byte(`{"version":1,"partitions":[{"topic":"bad","partition":0,"replica":[4,2,3]}]}`), 0o644))
	res, err := c.Ctl(ctx, "", "partition", "reassign", "--plan", plan)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Exit)
	assert.Contains(t, res.Stderr, `InvalidPlan: `)
	assert.Contains(t, res.Stderr, `unknown field "replica"`)
	// One wrong partition refuses the whole plan.
	require.NoError(t, os.WriteFile(plan, []byte(`{"version":1,"partitions":[
		{"topic":"bad","partition":0,"replicas":[4,2,3]},
		{"topic":"bad","partition":1,"replicas":[2,3,9]}]}`), 0o644))
	res, err = c.Ctl(ctx, "", "partition", "reassign", "--plan", plan, "--execute")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Exit, "%s%s", res.Stdout, res.Stderr)
	assert.Contains(t, res.Stderr, "nothing moved")
	assert.Equal(t, []int32{1, 2, 3}, partitionNow(t, cl, "bad", 0).Replicas)

	// A slow move: 3 MB at 0.1 MB/s stays in its copy for half a minute.
	produceTo(t, cl, "bad", 0, strings.Repeat("y", 30_000), 100)
	res, err = c.Ctl(ctx, "", "partition", "reassign", "bad", "0", "--replicas", "4,2,3", "--execute", "--throttle", "0.1")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	var st client.ReassignStatus
	require.Eventually(t, func() bool {
		st, err = cl.ReassignStatus(ctx, "")
		return err == nil && len(st.Moves) == 1 && len(st.Moves[0].Copies) == 1 && st.Moves[0].Copies[0].CopiedBytes > 300_000
	}, time.Minute, 200*time.Millisecond, "the copy shows progress: %+v %v", st, err)
	m := st.Moves[0]
	assert.Equal(t, "copy", m.Step)
	assert.Equal(t, []int32{1, 2, 3}, m.From)
	assert.Equal(t, []int32{4, 2, 3}, m.Target)
	assert.Less(t, m.Copies[0].BytesPerSec, 200_000.0, "paced at about 0.1 MB/s: %+v", m.Copies[0])
	assert.Greater(t, m.Copies[0].TotalBytes, int64(2_000_000))
	assert.Equal(t, []int32{4, 2, 3, 1}, partitionNow(t, cl, "bad", 0).Replicas, "while it moves: the target, then the replica it takes off")
	_, err = os.Stat(c.Node(4).ReplicaDir("bad", 0))
	require.NoError(t, err, "broker 4 holds the replica being copied")
	res, err = c.Ctl(ctx, "", "cluster", "status", "-o", "json")
	require.NoError(t, err)
	var cs struct {
		Partitions struct {
			UnderReplicated int `json:"under_replicated"`
		} `json:"partitions"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &cs), res.Stdout)
	assert.Zero(t, cs.Partitions.UnderReplicated, "a replica being copied is not a missing one: %s", res.Stdout)

	res, err = c.Ctl(ctx, "", "partition", "reassign", "bad", "0", "--replicas", "3,2,1")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "is already moving, from [1 2 3] to [4 2 3]")

	res, err = c.Ctl(ctx, "", "partition", "reassign", "--cancel", "bad", "0")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	p := partitionNow(t, cl, "bad", 0)
	assert.Equal(t, []int32{1, 2, 3}, p.Replicas)
	assert.Equal(t, int32(1), p.Leader)
	require.Eventually(t, func() bool {
		_, err := os.Stat(c.Node(4).ReplicaDir("bad", 0))
		return os.IsNotExist(err)
	}, 30*time.Second, 200*time.Millisecond, "broker 4 deletes what it had copied")
	produceTo(t, cl, "bad", 0, "after", 5)
	res, err = c.Ctl(ctx, "", "partition", "reassign", "--cancel", "bad", "0")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "is not moving")

	res, err = c.Ctl(ctx, "", "cluster", "history", "-o", "json")
	require.NoError(t, err)
	var hist struct {
		Events []struct {
			Action string `json:"action"`
		} `json:"events"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &hist), res.Stdout)
	assert.True(t, slices.ContainsFunc(hist.Events, func(e struct {
		Action string `json:"action"`
	}) bool {
		return e.Action == "reassign-cancel"
	}), "the cancel is in the audit trail: %s", res.Stdout)
}

// moveUnderKill starts moving topic/0 from its replicas to target at 1
// MB/s with 4 MB to copy and a writer going, waits until the copy is
// under way, runs kill, and then checks that the move ends on target with
// every acknowledged record on the new replicas. after runs once the kill
// is done (a failover, a restart).
func moveUnderKill(t *testing.T, c *Cluster, cl *client.Client, topic string, partition int32, target []int32, kill, after func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	before := produceTo(t, cl, topic, partition, strings.Repeat("b", 40_000), 100)
	w := startAckedWriter(t, cl, topic, partition, 256)
	res, err := c.Ctl(ctx, "", "partition", "reassign", topic, fmt.Sprint(partition), "--replicas", joinInts(target), "--execute", "--throttle", "1")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	require.Eventually(t, func() bool {
		st, err := cl.ReassignStatus(ctx, topic)
		return err == nil && len(st.Moves) == 1 && len(st.Moves[0].Copies) > 0 && st.Moves[0].Copies[0].CopiedBytes > 500_000
	}, time.Minute, 100*time.Millisecond, "the copy gets under way: %s", reassignStatusText(c))
	kill()
	after()
	waitMoved(t, c, cl, topic, partition, target, 3*time.Minute)
	acked := w.finish()
	t.Logf("%s/%d: %d records acknowledged during the move, %d sends failed", topic, partition, len(acked), w.fails)
	got := consumeAll(t, cl, topic, partition)
	for off, v := range before {
		require.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	for off, v := range acked {
		require.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	require.Eventually(t, func() bool {
		lead, err := segmentBytes(c.Node(target[0]), topic, partition)
		if err != nil {
			return false
		}
		for _, r := range target[1:] {
			b, err := segmentBytes(c.Node(r), topic, partition)
			if err != nil || !bytes.Equal(lead, b) {
				return false
			}
		}
		return true
	}, 30*time.Second, 200*time.Millisecond, "replicas %v are byte-identical", target)
}

// outside is a broker of 1..n in none of ids.
func outside(n int32, ids ...int32) int32 {
	for b := int32(1); b <= n; b++ {
		if !slices.Contains(ids, b) {
			return b
		}
	}
	return 0
}

// TestReassignSurvivesKills: kill -9 of the broker being added, of the
// partition's leader (the source of the copy, itself being removed), and
// of the active controller, each in the middle of a move's copy, on five
// nodes with three controller candidates. The move resumes (after the
// target's restart; after a failover of the dead leader; by itself with
// the next controller) and ends on its target with every acknowledged
// record on the new replicas.
func TestReassignSurvivesKills(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 5, Candidates: 3})
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	t.Run("target", func(t *testing.T) {
		createTopic(t, cl, "kt", 1, 3)
		r := partitionNow(t, cl, "kt", 0).Replicas
		x := outside(5, r...)
		target := []int32{r[0], r[1], x}
		moveUnderKill(t, c, cl, "kt", 0, target, func() {
			require.NoError(t, c.Node(x).Kill())
			require.Eventually(t, func() bool {
				st, err := cl.ReassignStatus(ctx, "kt")
				return err == nil && len(st.Moves) == 1 && st.Moves[0].Waiting != ""
			}, time.Minute, 200*time.Millisecond, "the move says why it waits: %s", reassignStatusText(c))
			t.Logf("while broker %d is down: %s", x, reassignStatusText(c))
		}, func() {
			require.NoError(t, c.StartNode(x))
		})
	})

	t.Run("source", func(t *testing.T) {
		createTopic(t, cl, "ks", 1, 3)
		p := partitionNow(t, cl, "ks", 0)
		leader := p.Leader
		rest := slices.DeleteFunc(slices.Clone(p.Replicas), func(b int32) bool { return b == leader })
		x := outside(5, p.Replicas...)
		target := append([]int32{x}, rest...)
		moveUnderKill(t, c, cl, "ks", 0, target, func() {
			require.NoError(t, c.Node(leader).Kill())
		}, func() {
			// The dead leader's partition fails over as ever; the copy
			// goes on from the new leader.
			require.Eventually(t, func() bool {
				res, err := c.Ctl(ctx, "", "failover", "--topic", "ks", "--partition", "0")
				if err == nil && res.Exit != 0 {
					t.Logf("failover: %s%s", res.Stdout, res.Stderr)
				}
				return err == nil && res.Exit == 0
			}, time.Minute, time.Second)
		})
		require.NoError(t, c.StartNode(leader))
		require.Eventually(t, func() bool {
			_, err := os.Stat(c.Node(leader).ReplicaDir("ks", 0))
			return os.IsNotExist(err)
		}, time.Minute, 200*time.Millisecond, "the old leader, back, deletes the replica it no longer holds")
	})

	t.Run("controller", func(t *testing.T) {
		active, err := c.ActiveController(30*time.Second, 0)
		require.NoError(t, err)
		createTopic(t, cl, "kc", 5, 3)
		tm, err := cl.DescribeTopic(ctx, "kc")
		require.NoError(t, err)
		part := int32(-1)
		for i, p := range tm.Partitions {
			if !slices.Contains(p.Replicas, active) {
				part = int32(i)
				break
			}
		}
		require.GreaterOrEqual(t, part, int32(0), "a partition without the active controller: %+v", tm.Partitions)
		r := tm.Partitions[part].Replicas
		x := outside(5, append(slices.Clone(r), active)...)
		target := []int32{r[0], r[1], x}
		moveUnderKill(t, c, cl, "kc", part, target, func() {
			require.NoError(t, c.Node(active).Kill())
		}, func() {
			next, err := c.ActiveController(30*time.Second, active)
			require.NoError(t, err)
			t.Logf("controller %d killed mid-move; %d took over", active, next)
		})
		require.NoError(t, c.StartNode(active))
	})
}

// TestReassignBackOntoABroker moves a partition off broker 1 and back:
// broker 1 deleted its replica, and the one it is given again starts
// empty and is filled. Before, the high-watermark checkpoint still held
// the deleted replica's, and the new one was found corrupt and offline
// ("acknowledged but the log has no segment"): the move never ended.
func TestReassignBackOntoABroker(t *testing.T) {
	c := startCluster(t, 4)
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, cl, "back", 1, 3) // 1, 2, 3
	acked := produceTo(t, cl, "back", 0, "v", 200)
	for _, target := range [][]int32{{4, 2, 3}, {1, 2, 3}} {
		// Long enough for a high-watermark checkpoint (every second).
		time.Sleep(1500 * time.Millisecond) // the checkpoint's interval, not a condition to poll
		res, err := c.Ctl(ctx, "", "partition", "reassign", "back", "0", "--replicas", joinInts(target), "--execute")
		require.NoError(t, err)
		require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
		waitMoved(t, c, cl, "back", 0, target, time.Minute)
	}
	got := consumeAll(t, cl, "back", 0)
	for off, v := range acked {
		require.Equal(t, v, got[off])
	}
	res, err := c.Ctl(ctx, "", "cluster", "status", "-o", "json")
	require.NoError(t, err)
	assert.NotContains(t, res.Stdout, "offline\":true", "no replica is offline: %s", res.Stdout)
}

// TestReassignMovesADurableStream moves a Durable Streams stream's
// partition, leadership included, to another broker: every append is
// there once and in order, and the stream's idempotent producer is known
// to the new leader (its retry of an acknowledged append is a
// duplicate, 204, and its next sequence is taken).
func TestReassignMovesADurableStream(t *testing.T) {
	c := startCluster(t, 4)
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const path = "moving/stream"
	require.Equal(t, http.StatusCreated, dsDo(t, c.Node(2), http.MethodPut, path, "", "Content-Type", "text/plain").Status)
	topic := mustTopic(t, path)
	msg := func(seq int) string { return fmt.Sprintf("m%03d;", seq) }
	headers := func(seq int) []string {
		return []string{"Content-Type", "text/plain", "Producer-Id", "mover", "Producer-Epoch", "1", "Producer-Seq", strconv.Itoa(seq)}
	}
	var want strings.Builder
	for seq := range 40 {
		r := dsDo(t, c.Node(3), http.MethodPost, path, msg(seq), headers(seq)...)
		require.Contains(t, []int{http.StatusOK, http.StatusNoContent}, r.Status, r.Body)
		want.WriteString(msg(seq))
	}
	from := partitionNow(t, cl, topic, 0)
	x := outside(4, from.Replicas...)
	require.NotZero(t, x, "the stream is on %v", from.Replicas)
	target := append([]int32{x}, slices.DeleteFunc(slices.Clone(from.Replicas), func(b int32) bool { return b == from.Leader })...)
	res, err := c.Ctl(ctx, "", "partition", "reassign", topic, "0", "--replicas", joinInts(target), "--execute")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	waitMoved(t, c, cl, topic, 0, target, time.Minute)

	// The retry of the last acknowledged append, through the new leader,
	// then more appends. Each is tried again while it is answered 503: the
	// node that takes it may route by the metadata of a moment before the
	// move ended, to the old leader that is letting its replica go, and
	// the protocol's answer to that is "retry" (the producer's headers
	// make a retry safe).
	appendRetrying := func(seq int) dsReply {
		var r dsReply
		require.Eventually(t, func() bool {
			r, err = dsTry(c.Node(x), 10*time.Second, http.MethodPost, path, msg(seq), headers(seq)...)
			return err == nil && r.Status != http.StatusServiceUnavailable
		}, 30*time.Second, 100*time.Millisecond, "append %d: %v %s", seq, err, r.Body)
		return r
	}
	dup := appendRetrying(39)
	assert.Equal(t, http.StatusNoContent, dup.Status, "a duplicate after the move: %s", dup.Body)
	for seq := 40; seq < 50; seq++ {
		r := appendRetrying(seq)
		require.Contains(t, []int{http.StatusOK, http.StatusNoContent}, r.Status, r.Body)
		want.WriteString(msg(seq))
	}
	all := dsDo(t, c.Node(1), http.MethodGet, path+"?offset=-1", "")
	require.Equal(t, http.StatusOK, all.Status, all.Body)
	assert.Equal(t, want.String(), all.Body, "every append once and in order")
}

// TestReassignCopyOutlastsACallTimeout moves a partition whose copy at
// the throttle takes longer than transport.DefaultCallTimeout (30 s):
// 4 MB at 0.1 MB/s. The copy is bounded by its progress, not by a fixed
// time (docs/reassignment.md): the move never waits on a failed step and
// the progress --status shows never goes back. Before, the controller's
// call that runs the copy had the transport's default deadline: at 30 s
// it failed with Timeout while the leader copied on, every try again was
// refused (NotReady: the first copy still ran) and showed "0 of 0 MB"
// in its place, and the move ended only at the first try after the copy
// did, up to 30 s later.
func TestReassignCopyOutlastsACallTimeout(t *testing.T) {
	c := startCluster(t, 2)
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createTopic(t, cl, "slow", 1, 1)
	from := partitionNow(t, cl, "slow", 0).Replicas[0]
	to := outside(2, from)
	p, err := client.NewProducer(cl, client.ProducerConfig{})
	require.NoError(t, err)
	value := bytes.Repeat([]byte("s"), 50_000)
	for range 80 { // 4 MB
		_, err := p.Send(ctx, client.ProducerRecord{Topic: "slow", Value: value})
		require.NoError(t, err)
	}
	p.Close()

	res, err := c.Ctl(ctx, "", "partition", "reassign", "slow", "0", "--replicas", fmt.Sprint(to), "--execute", "--throttle", "0.1")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "%s%s", res.Stdout, res.Stderr)
	start := time.Now()
	var waited []string
	var copied int64
	require.Eventually(t, func() bool {
		st, err := cl.ReassignStatus(ctx, "slow")
		if err != nil {
			return false
		}
		if len(st.Moves) == 0 {
			return true
		}
		m := st.Moves[0]
		if m.Waiting != "" && (len(waited) == 0 || !strings.HasSuffix(waited[len(waited)-1], m.Waiting)) {
			waited = append(waited, fmt.Sprintf("%.0fs: %s", time.Since(start).Seconds(), m.Waiting))
		}
		if len(m.Copies) == 1 && !m.Copies[0].Active {
			assert.GreaterOrEqual(t, m.Copies[0].CopiedBytes, copied, "the copy's progress at %.0fs goes back", time.Since(start).Seconds())
			copied = m.Copies[0].CopiedBytes
		}
		return false
	}, 2*time.Minute, 500*time.Millisecond, "the move never ended: %s", reassignStatusText(c))
	took := time.Since(start)
	t.Logf("moved in %s; the copy had reached %d bytes", took.Round(100*time.Millisecond), copied)
	assert.Empty(t, waited, "no step failed")
	assert.Greater(t, took, 30*time.Second, "a copy longer than the transport's default deadline")
	assert.Equal(t, []int32{to}, partitionNow(t, cl, "slow", 0).Replicas)
}

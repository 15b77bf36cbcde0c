package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/record"
	"gostream/storage"
)

// These tests drive failover, recovery, verify and the audit trail with
// gostream-ctl against three real nodes, as an operator would (docs/cli.md,
// docs/design.md section 7).

// ctlChange is one result of failover or recover -o json.
type ctlChange struct {
	Topic      string  `json:"topic"`
	Partition  int32   `json:"partition"`
	Broker     int32   `json:"broker"`
	Action     string  `json:"action"`
	DryRun     bool    `json:"dry_run"`
	OldLeader  int32   `json:"old_leader"`
	NewLeader  int32   `json:"new_leader"`
	OldEpoch   int32   `json:"old_epoch"`
	NewEpoch   int32   `json:"new_epoch"`
	OldActive  []int32 `json:"old_active"`
	NewActive  []int32 `json:"new_active"`
	Candidates []struct {
		Broker       int32 `json:"broker"`
		Reachable    bool  `json:"reachable"`
		LastEpoch    int32 `json:"last_epoch"`
		LogEndOffset int64 `json:"log_end_offset"`
		Agrees       bool  `json:"agrees"`
		Chosen       bool  `json:"chosen"`
	} `json:"candidates"`
	LostFrom  *int64    `json:"lost_from_offset"`
	Truncated *[2]int64 `json:"truncated"`
	CopiedTo  int64     `json:"copied_to"`
	Error     string    `json:"error"`
	ErrorName string    `json:"error_name"`
}

type ctlChangeReport struct {
	Results []ctlChange `json:"results"`
}

// ctlVerify is verify -o json.
type ctlVerify struct {
	OK         bool `json:"ok"`
	Partitions []struct {
		Topic         string `json:"topic"`
		Partition     int32  `json:"partition"`
		Leader        int32  `json:"leader"`
		HighWatermark *int64 `json:"high_watermark"`
		Replicas      []struct {
			Broker int32  `json:"broker"`
			State  string `json:"state"`
			Error  string `json:"error"`
		} `json:"replicas"`
	} `json:"partitions"`
}

// ctlHistory is cluster history -o json.
type ctlHistory struct {
	Events []struct {
		Time      time.Time `json:"time"`
		Requester string    `json:"requester"`
		ctlChange
	} `json:"events"`
}

// ctlLeadership is the leadership part of topic describe -o json.
type ctlLeadership struct {
	Partitions []struct {
		Partition   int32   `json:"partition"`
		Leader      int32   `json:"leader"`
		LeaderEpoch int32   `json:"leader_epoch"`
		Active      []int32 `json:"active"`
	} `json:"partitions"`
}

// checkCtl runs gostream-ctl until ok accepts its result or the deadline
// passes, and returns the last result.
func checkCtl(t *testing.T, c *Cluster, what string, timeout time.Duration, ok func(CtlResult) bool, args ...string) CtlResult {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		res := runCtl(t, c, args...)
		if ok(res) {
			return res
		}
		if time.Now().After(deadline) {
			require.FailNow(t, "gostream-ctl never showed "+what, "gostream-ctl %s: exit %d\n%s%s",
				strings.Join(args, " "), res.Exit, res.Stdout, res.Stderr)
		}
		time.Sleep(250 * time.Millisecond) // poll interval under the deadline above
	}
}

func exitZero(res CtlResult) bool { return res.Exit == 0 }

// TestCtlFailoverRecoverVerifyHistory: a leader is killed with SIGKILL; a
// dry run names the candidates and changes nothing; the failover moves
// leadership and writes go on; the old leader comes back as a follower
// through recover; verify finds every replica identical; the audit trail
// lists both changes. Failover of a broker that answers is refused.
func TestCtlFailoverRecoverVerifyHistory(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "orders", 3, 3)
	require.Equal(t, int32(2), tm.Partitions[1].Leader, "round-robin placement: broker 2 leads partition 1")
	require.Equal(t, int32(3), tm.Partitions[2].Leader)
	want := map[int32]int64{0: 5, 1: 20, 2: 7}
	for p, n := range want {
		values := make([]string, n)
		for i := range values {
			values[i] = fmt.Sprintf("p%d-%d", p, i)
		}
		args := append([]string{"produce", "orders", "--partition", strconv.Itoa(int(p))}, values...)
		checkCtl(t, c, "a produce accepted", 60*time.Second, exitZero, args...)
	}

	// The leader of a partition that answers is never replaced.
	res := runCtl(t, c, "failover", "--topic", "orders", "--partition", "0")
	assert.Equal(t, 2, res.Exit)
	assert.Equal(t, "LeaderStillAvailable: partition orders/0 is led by broker 1, which answers and whose replica is healthy\n", res.Stderr)

	require.NoError(t, c.Node(2).Kill())

	// Dry run: the candidates and what would be lost; nothing changes.
	dry := ctlJSON[ctlChangeReport](t, c, "failover", "--topic", "orders", "--partition", "1", "--dry-run")
	require.Len(t, dry.Results, 1)
	d := dry.Results[0]
	assert.True(t, d.DryRun)
	assert.Equal(t, "failover", d.Action)
	assert.Equal(t, int32(2), d.OldLeader)
	assert.Equal(t, int32(1), d.NewLeader, "equal (last epoch, log end): the lowest broker id wins")
	assert.Equal(t, int32(0), d.OldEpoch)
	assert.Greater(t, d.NewEpoch, d.OldEpoch)
	assert.Equal(t, []int32{1, 3}, d.NewActive)
	require.Len(t, d.Candidates, 2)
	for i, id := range []int32{1, 3} {
		cd := d.Candidates[i]
		assert.Equal(t, id, cd.Broker)
		assert.True(t, cd.Reachable, "broker %d", id)
		assert.True(t, cd.Agrees, "broker %d", id)
		assert.Equal(t, want[1], cd.LogEndOffset, "broker %d", id)
		assert.Equal(t, id == 1, cd.Chosen, "broker %d", id)
	}
	require.NotNil(t, d.LostFrom)
	assert.Equal(t, want[1], *d.LostFrom)
	out := runCtl(t, c, "failover", "--topic", "orders", "--partition", "1", "--dry-run")
	require.Equal(t, 0, out.Exit, out.Stderr)
	assert.Contains(t, out.Stdout, "Dry run: nothing was changed.")
	assert.Contains(t, out.Stdout, fmt.Sprintf("Records at or past offset %d held only by the old leader would be lost.", want[1]))
	before := ctlJSON[ctlLeadership](t, c, "topic", "describe", "orders")
	assert.Equal(t, int32(2), before.Partitions[1].Leader)
	assert.Equal(t, int32(0), before.Partitions[1].LeaderEpoch)
	assert.Equal(t, tm.Partitions[1].Active, before.Partitions[1].Active)

	// The failover.
	done := ctlJSON[ctlChangeReport](t, c, "failover", "--topic", "orders", "--partition", "1")
	require.Len(t, done.Results, 1)
	f := done.Results[0]
	assert.False(t, f.DryRun)
	assert.Equal(t, int32(2), f.OldLeader)
	assert.Equal(t, int32(1), f.NewLeader)
	assert.Equal(t, d.NewEpoch, f.NewEpoch, "the dry run reserved nothing")
	assert.Equal(t, []int32{1, 3}, f.NewActive)
	assert.Empty(t, f.Error)
	after := ctlJSON[ctlLeadership](t, c, "topic", "describe", "orders")
	assert.Equal(t, int32(1), after.Partitions[1].Leader)
	assert.Equal(t, f.NewEpoch, after.Partitions[1].LeaderEpoch)

	// Writes go on, to the new leader.
	var ack struct {
		Offset      int64 `json:"offset"`
		Leader      int32 `json:"leader"`
		LeaderEpoch int32 `json:"leader_epoch"`
	}
	for i := 0; i < 5; i++ {
		res := checkCtl(t, c, "produce after the failover", 60*time.Second, exitZero,
			"produce", "orders", "--partition", "1", fmt.Sprint("after-", i), "-o", "json")
		require.NoError(t, json.Unmarshal([]byte(res.Stdout), &ack), res.Stdout)
		assert.Equal(t, int32(1), ack.Leader)
		assert.Equal(t, f.NewEpoch, ack.LeaderEpoch)
		assert.Equal(t, want[1]+int64(i), ack.Offset)
	}
	want[1] += 5

	// The old leader returns; recover brings it back as a follower.
	require.NoError(t, c.StartNode(2))
	res = checkCtl(t, c, "a recovery of broker 2", 60*time.Second, exitZero, "recover", "--broker", "2", "-o", "json")
	var rec ctlChangeReport
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &rec), res.Stdout)
	require.Len(t, rec.Results, 1, "broker 2 left the active set of partition 1 only")
	r := rec.Results[0]
	assert.Equal(t, "recover", r.Action)
	assert.Equal(t, int32(1), r.Partition)
	assert.Equal(t, int32(2), r.Broker)
	assert.Equal(t, int32(1), r.NewLeader)
	assert.Equal(t, []int32{1, 3}, r.OldActive)
	assert.Equal(t, []int32{1, 2, 3}, r.NewActive)
	assert.Equal(t, want[1], r.CopiedTo)
	assert.Empty(t, r.Error)
	after = ctlJSON[ctlLeadership](t, c, "topic", "describe", "orders")
	assert.Equal(t, []int32{1, 2, 3}, after.Partitions[1].Active)
	out = runCtl(t, c, "recover", "--broker", "2")
	require.Equal(t, 0, out.Exit, out.Stderr)
	assert.Equal(t, "broker 2 is active wherever it holds a replica: nothing to recover\n", out.Stdout)

	// verify: every active replica holds what its leader holds.
	res = checkCtl(t, c, "verify succeeding", 60*time.Second, exitZero, "verify", "-o", "json")
	var v ctlVerify
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &v), res.Stdout)
	assert.True(t, v.OK)
	require.Len(t, v.Partitions, 3)
	for _, p := range v.Partitions {
		require.NotNil(t, p.HighWatermark, "orders/%d", p.Partition)
		assert.Equal(t, want[p.Partition], *p.HighWatermark, "orders/%d", p.Partition)
		require.Len(t, p.Replicas, 3, "orders/%d", p.Partition)
		for _, rr := range p.Replicas {
			state := "identical"
			if rr.Broker == p.Leader {
				state = "leader"
			}
			assert.Equal(t, state, rr.State, "orders/%d broker %d: %s", p.Partition, rr.Broker, rr.Error)
		}
	}
	out = runCtl(t, c, "verify", "--topic", "orders")
	require.Equal(t, 0, out.Exit, out.Stderr)
	assert.Equal(t, 3, strings.Count(out.Stdout, " OK\n"), out.Stdout)

	// The audit trail: the failover, then the recovery.
	h := ctlJSON[ctlHistory](t, c, "cluster", "history")
	require.Len(t, h.Events, 2, "the dry run is not recorded")
	fe, re := h.Events[0], h.Events[1]
	assert.Equal(t, "failover", fe.Action)
	assert.Equal(t, "orders", fe.Topic)
	assert.Equal(t, int32(1), fe.Partition)
	assert.Equal(t, int32(2), fe.OldLeader)
	assert.Equal(t, int32(1), fe.NewLeader)
	assert.Equal(t, int32(0), fe.OldEpoch)
	assert.Equal(t, f.NewEpoch, fe.NewEpoch)
	assert.Equal(t, tm.Partitions[1].Active, fe.OldActive)
	assert.Equal(t, []int32{1, 3}, fe.NewActive)
	assert.NotEmpty(t, fe.Requester)
	assert.WithinDuration(t, time.Now(), fe.Time, 5*time.Minute)
	assert.Equal(t, "recover", re.Action)
	assert.Equal(t, int32(1), re.OldLeader)
	assert.Equal(t, int32(1), re.NewLeader)
	assert.Equal(t, f.NewEpoch, re.OldEpoch)
	assert.Equal(t, f.NewEpoch, re.NewEpoch)
	assert.Equal(t, []int32{1, 3}, re.OldActive)
	assert.Equal(t, []int32{1, 2, 3}, re.NewActive)
	out = runCtl(t, c, "cluster", "history")
	require.Equal(t, 0, out.Exit, out.Stderr)
	rows := tableRowsAfter(out.Stdout, "TIME")
	require.Len(t, rows, 2, out.Stdout)
	assert.Equal(t, []string{"failover", "orders/1", "2", "->", "1", "0", "->", strconv.Itoa(int(f.NewEpoch)), "2,3,1", "->", "1,3", "-"}, rows[0][2:])
	assert.Equal(t, []string{"recover", "orders/1", "1", strconv.Itoa(int(f.NewEpoch)), "1,3", "->", "1,2,3", "-"}, rows[1][2:])

	// Broker 3 answers: failing it over is refused for every partition,
	// each result is printed, and nothing changes.
	res = runCtl(t, c, "failover", "--broker", "3", "-o", "json")
	assert.Equal(t, 2, res.Exit)
	assert.True(t, strings.HasPrefix(res.Stderr, "LeaderStillAvailable: "), res.Stderr)
	assert.Equal(t, 1, strings.Count(res.Stderr, "\n"), "one line: %q", res.Stderr)
	var refused ctlChangeReport
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &refused), res.Stdout)
	require.Len(t, refused.Results, 3, "broker 3 leads partition 2 and follows 0 and 1")
	for _, r := range refused.Results {
		assert.Equal(t, "LeaderStillAvailable", r.ErrorName, "orders/%d", r.Partition)
	}
	assert.Equal(t, after, ctlJSON[ctlLeadership](t, c, "topic", "describe", "orders"))
	assert.Len(t, ctlJSON[ctlHistory](t, c, "cluster", "history").Events, 2, "a refusal is not recorded")
}

// tableRowsAfter returns the fields of the rows under the header row that
// starts with first.
func tableRowsAfter(out, first string) [][]string {
	var rows [][]string
	in := false
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 0 && f[0] == first:
			in = true
		case len(f) == 0:
			in = false
		case in:
			rows = append(rows, f)
		}
	}
	return rows
}

// TestCtlFailoverRefusesDivergedReplicas: two followers hold different
// batches at the same offsets under the same epoch. verify reports the
// one that differs from the leader; once the leader is gone, failover
// (dry or not) refuses with ReplicaDivergence and promotes nobody.
func TestCtlFailoverRefusesDivergedReplicas(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "dv", 2, 3)
	require.Equal(t, int32(2), tm.Partitions[1].Leader, "round-robin placement: broker 2 leads partition 1")
	produceTo(t, cl, "dv", 1, "v", 10)

	// Rewrite broker 3's tail behind its back: same offsets, same epoch,
	// other records.
	require.NoError(t, c.Node(3).Stop(30*time.Second))
	end := divergeTail(t, c.Node(3).ReplicaDir("dv", 1), 3)
	require.Equal(t, int64(10), end)
	require.NoError(t, c.StartNode(3))

	// verify sees it while the leader is up. Right after the restart a
	// leader may not be ready to say its high watermark (then verify says
	// the partition could not be checked): poll until every partition has
	// been compared.
	const diverged = "ReplicaDivergence: 1 replica differs from its leader: dv/1 broker 3\n"
	out := checkCtl(t, c, "verify finding the diverged follower, and only it", 60*time.Second, func(r CtlResult) bool {
		return r.Exit == 2 && r.Stderr == diverged
	}, "verify", "--topic", "dv")
	assert.Contains(t, out.Stdout, "broker 3 differs from leader 2 in [0, 10)")
	res := runCtl(t, c, "verify", "--topic", "dv", "-o", "json")
	assert.Equal(t, 2, res.Exit)
	assert.Equal(t, diverged, res.Stderr)
	var v ctlVerify
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &v), res.Stdout)
	assert.False(t, v.OK)
	require.Len(t, v.Partitions, 2)
	p1 := v.Partitions[1]
	assert.Equal(t, int32(2), p1.Leader)
	states := map[int32]string{}
	for _, r := range p1.Replicas {
		states[r.Broker] = r.State
	}
	assert.Equal(t, map[int32]string{1: "identical", 2: "leader", 3: "differs"}, states)

	before := ctlJSON[ctlLeadership](t, c, "topic", "describe", "dv")
	require.NoError(t, c.Node(2).Kill())

	for _, args := range [][]string{
		{"failover", "--topic", "dv", "--partition", "1", "--dry-run"},
		{"failover", "--topic", "dv", "--partition", "1"},
	} {
		res := runCtl(t, c, args...)
		assert.Equal(t, 2, res.Exit, "%s", args)
		assert.True(t, strings.HasPrefix(res.Stderr, "ReplicaDivergence: "), res.Stderr)
		assert.Contains(t, res.Stderr, "broker 3")
		assert.Contains(t, res.Stderr, "nothing was promoted")
		if args[len(args)-1] == "--dry-run" {
			// A dry run shows the candidates that disagree.
			assert.Contains(t, res.Stdout, "ReplicaDivergence")
		} else {
			assert.Empty(t, res.Stdout)
		}
	}
	assert.Equal(t, before, ctlJSON[ctlLeadership](t, c, "topic", "describe", "dv"), "nothing was promoted")
	assert.Empty(t, ctlJSON[ctlHistory](t, c, "cluster", "history").Events)
}

// divergeTail rewrites the last batches of the (stopped) replica in dir:
// it cuts the log back by batches batches and appends as many records,
// one batch each, under the same leader epoch but with other values, up
// to the old log end. It returns that end.
func divergeTail(t *testing.T, dir string, batches int) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := storage.Open(dir, storage.Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Close()) }()
	end, epoch := l.LogEndOffset(), l.LastEpoch()
	var bases []int64
	for off := l.LogStartOffset(); off < end; {
		buf, err := l.Read(ctx, off, 1<<20, end, nil)
		require.NoError(t, err)
		require.NotEmpty(t, buf, "read at %d of [%d, %d)", off, l.LogStartOffset(), end)
		require.NoError(t, record.Batches(buf, func(b record.Batch) bool {
			if b.BaseOffset() >= off {
				bases = append(bases, b.BaseOffset())
			}
			off = b.NextOffset()
			return true
		}))
	}
	require.Greater(t, len(bases), batches)
	cut := bases[len(bases)-batches]
	require.NoError(t, l.TruncateTo(ctx, cut))
	for off := cut; off < end; off++ {
		b, err := record.AppendBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte(fmt.Sprint("diverged-", off))}})
		require.NoError(t, err)
		batch := record.Batch(b)
		batch.Stamp(off, epoch, time.Now().UnixMilli())
		_, err = l.AppendExact(ctx, batch)
		require.NoError(t, err)
	}
	require.Equal(t, end, l.LogEndOffset())
	return end
}

// TestCtlElectLeadersMovesLeadershipBack: after a failover and a recovery,
// leadership stays on the broker that took over; elect-leaders moves it back
// to the preferred replica while a producer keeps writing. Every write
// acknowledged before, during and after is read back, the replicas are
// identical, the move is in the audit trail, and a second run has nothing
// to do.
func TestCtlElectLeadersMovesLeadershipBack(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "el", 3, 3)
	require.Equal(t, int32(2), tm.Partitions[1].Leader, "round-robin placement: broker 2 leads partition 1")
	acked := produceTo(t, cl, "el", 1, "before", 20)

	require.NoError(t, c.Node(2).Kill())
	checkCtl(t, c, "failover", 60*time.Second, exitZero, "failover", "--broker", "2")
	require.NoError(t, c.StartNode(2))
	checkCtl(t, c, "recover", 60*time.Second, exitZero, "recover", "--broker", "2")
	moved := ctlJSON[ctlLeadership](t, c, "topic", "describe", "el")
	require.NotEqual(t, int32(2), moved.Partitions[1].Leader, "the failover moved leadership off broker 2")

	// A producer writes throughout the move.
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 5 * time.Second, Linger: -1})
	require.NoError(t, err)
	defer p.Close()
	stop := make(chan struct{})
	during := make(chan map[int64]string)
	var acks atomic.Int64
	go func() {
		got := map[int64]string{}
		for i := 0; ; i++ {
			select {
			case <-stop:
				during <- got
				return
			default:
			}
			v := fmt.Sprint("during-", i)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			ack, err := p.Send(ctx, client.ProducerRecord{Topic: "el", Partition: 1, ManualPartition: true, Value: []byte(v)})
			cancel()
			if err != nil {
				cl.RefreshMetadata(context.Background(), "el")
				time.Sleep(20 * time.Millisecond)
				continue
			}
			got[ack.Offset] = v
			acks.Add(1)
		}
	}()
	// Some writes are acknowledged before the move, and some after it.
	ackedAtLeast := func(n int64) func() bool { return func() bool { return acks.Load() >= n } }
	require.Eventually(t, ackedAtLeast(5), 30*time.Second, 10*time.Millisecond)

	dry := ctlJSON[ctlChangeReport](t, c, "elect-leaders", "--topic", "el", "--dry-run")
	require.Len(t, dry.Results, 1, "only partition 1 has moved off its preferred replica")
	assert.True(t, dry.Results[0].DryRun)
	rep := ctlJSON[ctlChangeReport](t, c, "elect-leaders")
	require.NotEmpty(t, rep.Results)
	m := rep.Results[0]
	assert.Equal(t, "elect-leader", m.Action)
	assert.Equal(t, int32(1), m.Partition)
	assert.Equal(t, int32(2), m.NewLeader)
	assert.Greater(t, m.NewEpoch, m.OldEpoch)
	assert.Empty(t, m.Error)
	for _, r := range rep.Results[1:] {
		assert.Equal(t, "recover", r.Action, "a replica left out by the move is recovered: %+v", r)
		assert.Empty(t, r.Error)
	}
	require.Eventually(t, ackedAtLeast(acks.Load()+5), 30*time.Second, 10*time.Millisecond)
	close(stop)
	for k, v := range <-during {
		acked[k] = v
	}
	for k, v := range produceTo(t, cl, "el", 1, "after", 10) {
		acked[k] = v
	}

	after := ctlJSON[ctlLeadership](t, c, "topic", "describe", "el")
	for i, part := range after.Partitions {
		assert.Equal(t, tm.Partitions[i].Replicas[0], part.Leader, "partition %d is led by its preferred replica", i)
		assert.Equal(t, tm.Partitions[i].Replicas, sortedCopy(part.Active, tm.Partitions[i].Replicas), "partition %d: every replica active", i)
	}
	got := consumeAll(t, cl, "el", 1)
	for off, v := range acked {
		assert.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	checkCtl(t, c, "verify", 60*time.Second, exitZero, "verify", "--topic", "el")
	hist := runCtl(t, c, "cluster", "history")
	assert.Contains(t, hist.Stdout, "elect-leader")
	again := runCtl(t, c, "elect-leaders")
	require.Equal(t, 0, again.Exit, again.Stderr)
	assert.Contains(t, again.Stdout, "nothing to move")
}

// sortedCopy returns ids in the order of like, for comparing sets.
func sortedCopy(ids, like []int32) []int32 {
	out := make([]int32, 0, len(ids))
	for _, l := range like {
		for _, id := range ids {
			if id == l {
				out = append(out, id)
			}
		}
	}
	return out
}

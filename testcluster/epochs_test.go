package testcluster

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/record"
	"gostream/storage"
	"gostream/transport"
)

// epNewBatch returns an unstamped batch holding values.
func epNewBatch(t *testing.T, values ...string) record.Batch {
	t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	b, err := record.AppendBatch(nil, recs)
	require.NoError(t, err)
	return b
}

// epochBatch is one batch to append in an epoch.
type epochBatch struct {
	epoch  int32
	values []string
}

func epb(epoch int32, values ...string) epochBatch { return epochBatch{epoch, values} }

// epOpenLog opens a storage log in dir with small segments, so that a few
// batches span several segment files.
func epOpenLog(t *testing.T, dir string, start int64) *storage.Log {
	t.Helper()
	l, err := storage.Open(dir, storage.Options{SegmentBytes: 128, InitialOffset: start})
	require.NoError(t, err)
	return l
}

func epAppend(t *testing.T, l *storage.Log, batches ...epochBatch) {
	t.Helper()
	for _, b := range batches {
		_, err := l.Append(context.Background(), epNewBatch(t, b.values...), b.epoch)
		require.NoError(t, err)
	}
}

// epWriteLog writes a replica log in dir with the storage package.
func epWriteLog(t *testing.T, dir string, batches ...epochBatch) {
	t.Helper()
	l := epOpenLog(t, dir, 0)
	epAppend(t, l, batches...)
	require.NoError(t, l.Close())
}

// epRawBatch is a batch stamped by hand, for logs the storage refuses to
// write.
type epRawBatch struct {
	base   int64
	epoch  int32
	values []string
}

// epWriteRawSegment writes batches, stamped as given, as one segment file
// of dir named by the first batch's base offset.
func epWriteRawSegment(t *testing.T, dir string, batches ...epRawBatch) {
	t.Helper()
	var buf []byte
	for _, rb := range batches {
		b := epNewBatch(t, rb.values...)
		b.Stamp(rb.base, rb.epoch, 0)
		buf = append(buf, b...)
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%020d.log", batches[0].base)), buf, 0o644))
}

func epSegmentCount(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	return len(files)
}

// epCluster is a Cluster of n node slots with data directories and no
// processes, for the checks that read files.
func epCluster(t *testing.T, n int) *Cluster {
	c := &Cluster{}
	for i := 1; i <= n; i++ {
		c.Nodes = append(c.Nodes, &Node{ID: int32(i), DataDir: filepath.Join(t.TempDir(), fmt.Sprintf("node%d", i))})
	}
	return c
}

func TestReadReplica(t *testing.T) {
	want := []BatchInfo{
		{Base: 0, Next: 2, Epoch: 1, Values: []string{"a", "b"}},
		{Base: 2, Next: 3, Epoch: 1, Values: []string{"c"}},
		{Base: 3, Next: 5, Epoch: 2, Values: []string{"d", "e"}},
		{Base: 5, Next: 6, Epoch: 4, Values: []string{"f"}},
	}
	written := []epochBatch{epb(1, "a", "b"), epb(1, "c"), epb(2, "d", "e"), epb(4, "f")}

	t.Run("SegmentsInOrder", func(t *testing.T) {
		dir := t.TempDir()
		epWriteLog(t, dir, written...)
		require.Greater(t, epSegmentCount(t, dir), 1, "the batches should span several segments")
		got, err := ReadReplica(dir)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
	t.Run("RebuiltReplicaStartsPastZero", func(t *testing.T) {
		dir := t.TempDir()
		l := epOpenLog(t, dir, 40)
		epAppend(t, l, epb(3, "x"), epb(3, "y", "z"))
		require.NoError(t, l.Close())
		got, err := ReadReplica(dir)
		require.NoError(t, err)
		assert.Equal(t, []BatchInfo{{40, 41, 3, []string{"x"}}, {41, 43, 3, []string{"y", "z"}}}, got)
	})
	t.Run("PartialBatchAtTheEndIsLeftOut", func(t *testing.T) {
		dir := t.TempDir()
		epWriteLog(t, dir, written...)
		files, err := filepath.Glob(filepath.Join(dir, "*.log"))
		require.NoError(t, err)
		last := files[len(files)-1]
		f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		b := epNewBatch(t, "in-flight")
		b.Stamp(6, 4, 0)
		_, err = f.Write(b[:len(b)-3])
		require.NoError(t, err)
		require.NoError(t, f.Close())
		got, err := ReadReplica(dir)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
	t.Run("QuarantineIsNotRead", func(t *testing.T) {
		dir := t.TempDir()
		l := epOpenLog(t, dir, 0)
		epAppend(t, l, written...)
		require.NoError(t, l.TruncateTo(context.Background(), 3))
		require.NoError(t, l.Close())
		q, err := os.ReadDir(filepath.Join(dir, storage.QuarantineDir))
		require.NoError(t, err)
		require.Len(t, q, 1)
		got, err := ReadReplica(dir)
		require.NoError(t, err)
		assert.Equal(t, want[:2], got)
	})
	t.Run("DamageInsideTheLog", func(t *testing.T) {
		dir := t.TempDir()
		epWriteLog(t, dir, written...)
		first := filepath.Join(dir, fmt.Sprintf("%020d.log", 0))
		data, err := os.ReadFile(first)
		require.NoError(t, err)
		data[len(data)-2] ^= 0xff // inside the last record of the first segment
		require.NoError(t, os.WriteFile(first, data, 0o644))
		got, err := ReadReplica(dir)
		require.ErrorIs(t, err, record.ErrInvalid)
		assert.Contains(t, err.Error(), first)
		assert.Less(t, len(got), len(want))
	})
	t.Run("NoDirectory", func(t *testing.T) {
		_, err := ReadReplica(filepath.Join(t.TempDir(), "missing"))
		require.ErrorIs(t, err, fs.ErrNotExist)
	})
}

// epochFixture is a consistent run of topic "t" over brokers 1-3:
// partition 0 starts led by broker 1 in epoch 1; broker 1 is paused and
// accepts a zombie write at offset 3, the failover makes broker 2 leader
// in epoch 2 from offset 3, and broker 1 is recovered (its zombie write
// cut). Partition 1 stays with broker 2 in epoch 1; broker 1 is dropped
// from and recovered into its active set.
type epochFixture struct {
	c        *Cluster
	samples  []LeaderSample
	events   []client.HistoryEvent
	replicas map[int32]map[int32][]BatchInfo
	active   map[int32][]int32
}

var epT0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func epAt(sec int) time.Time { return epT0.Add(time.Duration(sec) * time.Second) }

func epInt64p(v int64) *int64 { return &v }

func epSample(sec int, p, leader, epoch int32, meta int64) LeaderSample {
	return LeaderSample{Time: epAt(sec), Partition: p, Leader: leader, Epoch: epoch, MetadataEpoch: meta}
}

func epChange(sec int, action client.Action, p, oldLeader, newLeader, oldEpoch, newEpoch int32, oldActive, newActive []int32) client.HistoryEvent {
	return client.HistoryEvent{Time: epAt(sec), ChangeResult: client.ChangeResult{
		Topic: "t", Partition: p, Action: action, OldLeader: oldLeader, NewLeader: newLeader,
		OldEpoch: oldEpoch, NewEpoch: newEpoch, OldActive: oldActive, NewActive: newActive,
	}}
}

func newEpochFixture(t *testing.T) *epochFixture {
	f := &epochFixture{c: epCluster(t, 3)}
	p0 := []epochBatch{epb(1, "p0-0", "p0-1"), epb(1, "p0-2"), epb(2, "p1-0", "p1-1")}
	p1 := []epochBatch{epb(1, "p2-0")}
	for _, n := range f.c.Nodes {
		if n.ID == 1 {
			// The zombie's write, cut by its recovery and copied over.
			l := epOpenLog(t, n.ReplicaDir("t", 0), 0)
			epAppend(t, l, p0[0], p0[1], epb(1, "p0-3"))
			require.NoError(t, l.TruncateTo(context.Background(), 3))
			epAppend(t, l, p0[2])
			require.NoError(t, l.Close())
		} else {
			epWriteLog(t, n.ReplicaDir("t", 0), p0...)
		}
		epWriteLog(t, n.ReplicaDir("t", 1), p1...)
	}
	var err error
	f.replicas, err = ReadTopicReplicas(f.c, "t")
	require.NoError(t, err)

	failover := epChange(10, client.ActionFailover, 0, 1, 2, 1, 2, []int32{1, 2, 3}, []int32{2, 3})
	failover.LostFrom = epInt64p(3)
	recover0 := epChange(20, client.ActionRecover, 0, 2, 2, 2, 2, []int32{2, 3}, []int32{1, 2, 3})
	recover0.Truncated = &[2]int64{4, 3}
	// A catch-up is recorded by a leader from its own view; this stale
	// one would name a second leader of epoch 1 if it counted.
	catchUp := epChange(25, "catch-up", 0, 3, 3, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3})
	f.events = []client.HistoryEvent{
		failover,
		epChange(10, client.ActionDropFollower, 1, 2, 2, 1, 1, []int32{1, 2, 3}, []int32{2, 3}),
		recover0,
		epChange(21, client.ActionRecover, 1, 2, 2, 1, 1, []int32{2, 3}, []int32{1, 2, 3}),
		catchUp,
	}
	f.samples = []LeaderSample{
		epSample(1, 0, 1, 1, 1), epSample(1, 1, 2, 1, 1),
		epSample(12, 0, 2, 2, 3), epSample(12, 1, 2, 1, 3),
		// A broker with a stale cache answers later with an older epoch.
		epSample(13, 0, 1, 1, 2),
		// A description the harness made itself: no metadata epoch.
		epSample(22, 0, 2, 2, 0),
		epSample(30, 0, 2, 2, 5), epSample(30, 1, 2, 1, 5),
	}
	f.active = map[int32][]int32{0: {1, 2, 3}, 1: {1, 2, 3}}
	return f
}

func (f *epochFixture) check() []string {
	return CheckEpochs(f.samples, f.events, f.replicas, f.active)
}

// readRaw replaces broker b's replica of partition p by a log written by
// hand, read back from disk.
func (f *epochFixture) readRaw(t *testing.T, p, b int32, batches ...epRawBatch) {
	dir := filepath.Join(t.TempDir(), "raw")
	epWriteRawSegment(t, dir, batches...)
	log, err := ReadReplica(dir)
	require.NoError(t, err)
	f.replicas[p][b] = log
}

func TestCheckEpochsClean(t *testing.T) {
	f := newEpochFixture(t)
	require.Len(t, f.replicas, 2)
	for p, byBroker := range f.replicas {
		require.Len(t, byBroker, 3, "partition %d", p)
	}
	assert.Empty(t, f.check())
	assert.Empty(t, CheckEpochs(nil, nil, nil, nil))

	// Before its recovery the deposed leader holds its zombie write above
	// where the new epoch began; it is not active, so that is no violation.
	f.readRaw(t, 0, 1, epRawBatch{0, 1, []string{"p0-0", "p0-1"}}, epRawBatch{2, 1, []string{"p0-2"}}, epRawBatch{3, 1, []string{"p0-3"}})
	f.active[0] = []int32{2, 3}
	assert.Empty(t, f.check())
}

func TestCheckEpochsViolations(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, f *epochFixture)
		want   string // the one violation's prefix
	}{
		{"EpochDecreasesInALog", func(t *testing.T, f *epochFixture) {
			f.readRaw(t, 0, 3, epRawBatch{0, 2, []string{"p0-0", "p0-1"}}, epRawBatch{2, 1, []string{"p0-2"}}, epRawBatch{3, 2, []string{"p1-0", "p1-1"}})
		}, "log-epoch: partition 0 broker 3: batch [2, 3) has epoch 1 after epoch 2 of batch [0, 2)"},
		{"GapInOffsets", func(t *testing.T, f *epochFixture) {
			f.readRaw(t, 0, 3, epRawBatch{0, 1, []string{"p0-0", "p0-1"}}, epRawBatch{3, 2, []string{"p1-0", "p1-1"}})
		}, "log-gap: partition 0 broker 3: batch [3, 5) follows batch [0, 2)"},
		{"TwoLeadersForOneEpochInSamples", func(t *testing.T, f *epochFixture) {
			f.samples = append(f.samples, epSample(14, 0, 3, 2, 4))
		}, "two-leaders: partition 0 epoch 2 is led by broker 2 (the audit trail's failover"},
		{"EpochGoesBackInSamples", func(t *testing.T, f *epochFixture) {
			f.samples = append(f.samples, epSample(31, 0, 1, 1, 6))
		}, "epoch-back: partition 0: leader epoch 1 (broker 1) at metadata epoch 6"},
		{"FailoverDoesNotRaiseTheEpoch", func(t *testing.T, f *epochFixture) {
			ev := epChange(40, client.ActionFailover, 1, 2, 3, 1, 0, []int32{1, 2, 3}, []int32{1, 3})
			ev.LostFrom = epInt64p(1)
			// What follows it starts from where it left the partition:
			// one bad event is reported once.
			f.events = append(f.events, ev, epChange(41, client.ActionDropFollower, 1, 3, 3, 0, 0, []int32{1, 3}, []int32{3}))
		}, "epoch-back: partition 1: the failover at 2025-01-02T03:04:45Z from broker 2 to broker 3 went from epoch 1 to epoch 0, not higher"},
		{"TrailGoesBackToAnOlderEpoch", func(t *testing.T, f *epochFixture) {
			f.events = append(f.events, epChange(40, client.ActionRecover, 0, 1, 1, 1, 1, []int32{2, 3}, []int32{1, 2, 3}))
		}, "epoch-back: partition 0: the audit trail's recover at 2025-01-02T03:04:45Z starts from epoch 1 after its recover at 2025-01-02T03:04:25Z reached epoch 2"},
		{"TrailAndSamplesDisagree", func(t *testing.T, f *epochFixture) {
			ev := epChange(40, client.ActionFailover, 1, 2, 3, 1, 2, []int32{1, 2, 3}, []int32{1, 3})
			ev.LostFrom = epInt64p(1)
			f.events = append(f.events, ev)
			f.samples = append(f.samples, epSample(41, 1, 1, 2, 6))
		}, "two-leaders: partition 1 epoch 2 is led by broker 1 (a sample at 2025-01-02T03:04:46Z (metadata epoch 6)) and by broker 3 (the audit trail's failover"},
		{"ZombieBatchInAnActiveReplica", func(t *testing.T, f *epochFixture) {
			f.readRaw(t, 0, 3, epRawBatch{0, 1, []string{"p0-0", "p0-1"}}, epRawBatch{2, 1, []string{"p0-2"}},
				epRawBatch{3, 1, []string{"p0-3"}}, epRawBatch{4, 2, []string{"p1-0", "p1-1"}})
		}, "zombie: partition 0: the failover at 2025-01-02T03:04:15Z made broker 2 leader in epoch 2 from offset 3, yet active broker 3 (1 batches) hold batches of older epochs from there, first [3, 4) epoch 1 on broker 3"},
		{"EpochAboveAnyKnown", func(t *testing.T, f *epochFixture) {
			f.readRaw(t, 1, 2, epRawBatch{0, 1, []string{"p2-0"}}, epRawBatch{1, 7, []string{"p2-1"}})
		}, "epoch-ahead: partition 1 broker 2: 1 batches have epochs above 1"},
		{"EventsOfTwoTopics", func(t *testing.T, f *epochFixture) {
			ev := epChange(40, client.ActionRecover, 0, 1, 1, 1, 1, []int32{1}, []int32{1, 2})
			ev.Topic = "other"
			f.events = append(f.events, ev)
		}, "harness: CheckEpochs was given audit trail events of topics other, t"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newEpochFixture(t)
			require.Empty(t, f.check(), "the fixture itself")
			tc.change(t, f)
			got := f.check()
			require.Len(t, got, 1, "violations: %q", got)
			assert.True(t, strings.HasPrefix(got[0], tc.want), "got  %q\nwant %q...", got[0], tc.want)
		})
	}
}

func TestCheckEpochsCapsEachKind(t *testing.T) {
	var log []BatchInfo
	for i := int64(0); i < maxReported+5; i++ {
		log = append(log, BatchInfo{Base: 2 * i, Next: 2*i + 1, Epoch: 1, Values: []string{"v"}})
	}
	got := CheckEpochs(nil, nil, map[int32]map[int32][]BatchInfo{0: {1: log}}, nil)
	require.Len(t, got, maxReported+1)
	assert.Contains(t, got, "log-gap: 4 more not listed")
}

// truncationFixture is partition 0 of topic "t" on brokers 1-3 after
// broker 1 (the old leader) was recovered: its log was cut at cutAt
// (quarantined by the storage) and filled again from broker 2, which
// leads in epoch 2. Broker 1 held p0-0..p0-3 in epoch 1.
type truncationFixture struct {
	c      *Cluster
	ops    []Op
	events []client.HistoryEvent
}

func epAcked(value string, offset int64) Op {
	return Op{Kind: OpProduce, Topic: "t", Partition: 0, Value: value, Offset: offset, Result: ResultOK, Start: epAt(0), End: epAt(1)}
}

// newTruncationFixture builds the replicas. leaderHasP02 says whether the
// new leader holds p0-2 (acknowledged at offset 2): if not, its epoch 2
// writes start at 2, and the cut at 2 lost p0-2 for good.
func newTruncationFixture(t *testing.T, cutAt int64, leaderHasP02 bool) *truncationFixture {
	f := &truncationFixture{c: epCluster(t, 3)}
	leaderLog := []epochBatch{epb(1, "p0-0", "p0-1"), epb(1, "p0-2"), epb(2, "p1-0", "p1-1")}
	f.ops = []Op{epAcked("p0-0", 0), epAcked("p0-1", 1), epAcked("p0-2", 2), epAcked("p1-0", 3), epAcked("p1-1", 4),
		{Kind: OpProduce, Topic: "t", Value: "p0-3", Offset: -1, Result: ResultUnknown}}
	if !leaderHasP02 {
		leaderLog = []epochBatch{epb(1, "p0-0", "p0-1"), epb(2, "p1-0", "p1-1")}
		f.ops[3].Offset, f.ops[4].Offset = 2, 3
	}
	for _, id := range []int32{2, 3} {
		epWriteLog(t, f.c.Node(id).ReplicaDir("t", 0), leaderLog...)
	}
	l := epOpenLog(t, f.c.Node(1).ReplicaDir("t", 0), 0)
	epAppend(t, l, epb(1, "p0-0", "p0-1"), epb(1, "p0-2"), epb(1, "p0-3"))
	end := l.LogEndOffset()
	require.NoError(t, l.TruncateTo(context.Background(), cutAt))
	// Copy the leader's batches from the cut on.
	var base int64
	for _, b := range leaderLog {
		if base >= cutAt {
			epAppend(t, l, b)
		}
		base += int64(len(b.values))
	}
	require.NoError(t, l.Close())
	ev := epChange(20, client.ActionRecover, 0, 2, 2, 2, 2, []int32{2, 3}, []int32{1, 2, 3})
	ev.Truncated = &[2]int64{end, cutAt}
	f.events = []client.HistoryEvent{ev}
	return f
}

func (f *truncationFixture) check() []string {
	return CheckTruncations(f.c, "t", f.ops, f.events)
}

func TestCheckTruncations(t *testing.T) {
	t.Run("OnlyUnacknowledgedRecordsCut", func(t *testing.T) {
		f := newTruncationFixture(t, 3, true)
		logs, err := ReadTopicReplicas(f.c, "t")
		require.NoError(t, err)
		require.Equal(t, logs[0][2], logs[0][1], "broker 1 was filled again like the leader")
		assert.Empty(t, f.check())
	})
	t.Run("AcknowledgedRecordCutAndLost", func(t *testing.T) {
		f := newTruncationFixture(t, 2, false)
		got := f.check()
		require.Len(t, got, 1, "violations: %q", got)
		assert.True(t, strings.HasPrefix(got[0],
			`truncated-acked: partition 0 offset 2: acknowledged "p0-2" (producer 0, acked 2025-01-02T03:04:06Z) was cut off broker 1's log (quarantine/00000000000000000002-00000000000000000004-`), got[0])
	})
	t.Run("AcknowledgedRecordCutAndCopiedBack", func(t *testing.T) {
		// Recovery may cut further than it must and copy the same
		// batches back: nothing acknowledged is lost.
		f := newTruncationFixture(t, 2, true)
		logs, err := ReadTopicReplicas(f.c, "t")
		require.NoError(t, err)
		require.Equal(t, logs[0][2], logs[0][1])
		assert.Empty(t, f.check())
	})
	t.Run("TornAndDamagedFilesAreNotTruncations", func(t *testing.T) {
		f := newTruncationFixture(t, 2, false)
		q := filepath.Join(f.c.Node(1).ReplicaDir("t", 0), storage.QuarantineDir)
		files, err := filepath.Glob(filepath.Join(q, "*.log"))
		require.NoError(t, err)
		require.Len(t, files, 1)
		cut, err := os.ReadFile(files[0])
		require.NoError(t, err)
		require.NoError(t, os.Remove(files[0]))
		// The same acknowledged record, decodable, in a torn tail and in a
		// replica moved aside whole.
		require.NoError(t, os.WriteFile(filepath.Join(q, "torn-00000000000000000002-1.bin"), cut, 0o644))
		damaged := filepath.Join(q, "damaged-1")
		epWriteLog(t, damaged, epb(1, "p0-0", "p0-1"), epb(1, "p0-2"))
		// A file named as a truncation's, inside the damaged replica.
		seg, err := os.ReadFile(filepath.Join(damaged, fmt.Sprintf("%020d.log", 0)))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(damaged, "00000000000000000000-00000000000000000003-1.log"), seg, 0o644))
		assert.Empty(t, f.check(), "a torn tail from the cut offset also accounts for the recovery's cut")
	})
	t.Run("RecoveryCutWithoutQuarantine", func(t *testing.T) {
		f := newTruncationFixture(t, 3, true)
		q := filepath.Join(f.c.Node(1).ReplicaDir("t", 0), storage.QuarantineDir)
		require.NoError(t, os.RemoveAll(q))
		got := f.check()
		require.Len(t, got, 1, "violations: %q", got)
		assert.Equal(t, "truncated-unquarantined: partition 0: the recovery of broker 1 at 2025-01-02T03:04:25Z cut its log from 4 back to 3, but its quarantine/ holds nothing cut from offset 3", got[0])
	})
	t.Run("OtherTopicsAreNotRead", func(t *testing.T) {
		f := newTruncationFixture(t, 2, false)
		assert.Empty(t, CheckTruncations(f.c, "other", f.ops, f.events))
	})
}

// epMetadataServer is a broker that answers only Metadata, with a state the
// test changes: topic "t" with one partition.
type epMetadataServer struct {
	addr string
	mu   sync.Mutex
	meta int64 // metadata epoch
	lead int32
	ep   int32
}

func epNewMetadataServer(t *testing.T) *epMetadataServer {
	s := &epMetadataServer{meta: 1, lead: 1, ep: 1}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.addr = ln.Addr().String()
	srv := transport.NewServer(transport.ServerConfig{}, transport.HandlerFunc(func(ctx context.Context, req *transport.Request) transport.Reply {
		if transport.API(req.API) != transport.APIMetadata {
			return transport.Immediate(nil, transport.ErrUnsupportedVersion)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return transport.Immediate(&transport.MetadataResponse{
			ClusterID: "c", ControllerID: 1, MetadataEpoch: s.meta,
			Brokers: []transport.BrokerInfo{{ID: 1, Addr: s.addr}},
			Topics: []transport.TopicInfo{{Name: "t", ReplicationFactor: 1, Partitions: []transport.PartitionInfo{
				{Partition: 0, Leader: s.lead, LeaderEpoch: s.ep, Replicas: []int32{1, 2}, Active: []int32{1, 2}},
			}}},
		}, nil)
	}))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *epMetadataServer) set(meta int64, leader, epoch int32) {
	s.mu.Lock()
	s.meta, s.lead, s.ep = meta, leader, epoch
	s.mu.Unlock()
}

func epHasSample(s *LeaderSampler, leader, epoch int32, meta int64) bool {
	for _, x := range s.Samples() {
		if x.Partition == 0 && x.Leader == leader && x.Epoch == epoch && x.MetadataEpoch == meta {
			return true
		}
	}
	return false
}

func TestLeaderSampler(t *testing.T) {
	srv := epNewMetadataServer(t)
	c := &Cluster{Nodes: []*Node{{ID: 1, RPC: srv.addr}}}
	s := NewLeaderSampler(c, "t", 10*time.Millisecond)
	s.Start()
	s.Start() // once only
	require.Eventually(t, func() bool { return epHasSample(s, 1, 1, 1) }, 10*time.Second, 10*time.Millisecond)
	srv.set(3, 2, 2)
	require.Eventually(t, func() bool { return epHasSample(s, 2, 2, 3) }, 10*time.Second, 10*time.Millisecond)

	// The harness records samples of its own while the sampler polls.
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				s.Record(LeaderSample{Time: time.Now(), Partition: 9, Leader: 1, Epoch: 1})
			}
		}()
	}
	wg.Wait()
	srv.set(4, 2, 2)
	s.Stop()
	s.Stop() // idempotent

	got := s.Samples()
	n := len(got)
	require.Never(t, func() bool { return len(s.Samples()) != n }, 100*time.Millisecond, 10*time.Millisecond, "samples after Stop")
	recorded, last := 0, LeaderSample{}
	var meta int64
	for _, x := range got {
		if x.Partition == 9 {
			recorded++
			continue
		}
		require.GreaterOrEqual(t, x.MetadataEpoch, meta, "one client never goes back to older metadata")
		meta, last = x.MetadataEpoch, x
		assert.Contains(t, []string{"1/1/1", "2/2/3", "2/2/4"}, fmt.Sprintf("%d/%d/%d", x.Leader, x.Epoch, x.MetadataEpoch))
	}
	assert.Equal(t, 200, recorded)
	assert.Equal(t, int64(4), last.MetadataEpoch)
	assert.Empty(t, CheckEpochs(got, nil, nil, nil))
}

func TestLeaderSamplerStopTakesALastSample(t *testing.T) {
	srv := epNewMetadataServer(t)
	s := NewLeaderSampler(&Cluster{Nodes: []*Node{{ID: 1, RPC: srv.addr}}}, "t", time.Hour)
	s.Start() // polls at once, then not for an hour
	require.Eventually(t, func() bool { return epHasSample(s, 1, 1, 1) }, 10*time.Second, 10*time.Millisecond)
	srv.set(2, 2, 2)
	s.Stop()
	assert.True(t, epHasSample(s, 2, 2, 2), "samples: %+v", s.Samples())
}

func TestLeaderSamplerUnreachable(t *testing.T) {
	addr, err := freeAddr("127.0.0.1") // nothing listens there
	require.NoError(t, err)
	s := NewLeaderSampler(&Cluster{Nodes: []*Node{{ID: 1, RPC: addr}}}, "t", 10*time.Millisecond)
	s.Start()
	require.Never(t, func() bool { return len(s.Samples()) > 0 }, 200*time.Millisecond, 20*time.Millisecond)
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(3 * finalSampleTimeout):
		t.Fatal("Stop did not return")
	}
	assert.Empty(t, s.Samples())

	never := NewLeaderSampler(&Cluster{}, "t", 0)
	never.Stop() // never started: nothing to wait for
	never.Start()
	assert.Empty(t, never.Samples())
}

func TestEpochsAuditTrailJSON(t *testing.T) {
	out := `{
  "events": [
    {"time": "2025-01-02T03:04:05.678Z", "requester": "127.0.0.1:40000", "topic": "t", "partition": 1,
     "action": "failover", "old_leader": 2, "new_leader": 3, "old_epoch": 4, "new_epoch": 5,
     "old_active": [1, 2, 3], "new_active": [1, 3], "lost_from_offset": 17},
    {"time": "2025-01-02T03:04:06.000Z", "requester": "127.0.0.1:40001", "topic": "u", "partition": 0,
     "action": "recover", "old_leader": 1, "new_leader": 1, "old_epoch": 2, "new_epoch": 2,
     "old_active": [1], "new_active": [1, 2], "truncated": [9, 7], "copied_to": 12}
  ]
}`
	evs, err := parseAuditTrail([]byte(out))
	require.NoError(t, err)
	require.Len(t, evs, 2)
	assert.Equal(t, epT0.Add(678*time.Millisecond), evs[0].Time.UTC())
	assert.Equal(t, client.ActionFailover, evs[0].Action)
	assert.Equal(t, int32(5), evs[0].NewEpoch)
	require.NotNil(t, evs[0].LostFrom)
	assert.Equal(t, int64(17), *evs[0].LostFrom)
	require.NotNil(t, evs[1].Truncated)
	assert.Equal(t, [2]int64{9, 7}, *evs[1].Truncated)
	assert.Equal(t, []int32{1, 2}, evs[1].NewActive)

	only := TopicEvents(evs, "u")
	require.Len(t, only, 1)
	assert.Equal(t, "u", only[0].Topic)

	empty, err := parseAuditTrail([]byte(`{"events": []}`))
	require.NoError(t, err)
	assert.Empty(t, empty)
	_, err = parseAuditTrail([]byte(`No failovers or recoveries yet.`))
	assert.Error(t, err)
	_, err = parseAuditTrail([]byte(`{}`))
	assert.Error(t, err)
}

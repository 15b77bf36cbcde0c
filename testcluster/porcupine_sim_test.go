package testcluster

import (
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simConfig shapes a simulated run of the chaos workload against a correct
// log.
type simConfig struct {
	partitions, producers, consumers int
	sends                            int
	unknown                          float64 // the share of sends whose outcome the producer cannot know
	stale                            float64 // the share of polls answered with an older high watermark
}

type simRecord struct {
	value  string
	commit int64 // when the high watermark passed it, in microseconds
}

// simulate returns the history of the workload run against a correct
// partitioned log, shaped like Workload's: producers sending in turn to
// the partitions, each send committed at some point between its start and
// its acknowledgement, or, when its outcome is unknown, never, before its
// end or after it; consumers polling every partition from offset 0 with
// long polls, told a high watermark read at or after the records, or an
// older one, and failing now and then; then a drain to the high watermark
// after the producers stopped, and the final read of every partition.
func simulate(seed int64, cfg simConfig) []Op {
	rng := rand.New(rand.NewSource(seed))
	us := func(n int64) time.Time { return t0.Add(time.Duration(n) * time.Microsecond) }
	between := func(a, b int64) int64 { return a + rng.Int63n(b-a+1) }
	var ops []Op
	logs := make([][]simRecord, cfg.partitions)
	lastCommit := make([]int64, cfg.partitions)
	next := make([]int64, cfg.producers)
	seq := make([]int, cfg.producers)
	var stop int64
	for sent := 0; sent < cfg.sends; sent++ {
		id := 0
		for i := range next {
			if next[i] < next[id] {
				id = i
			}
		}
		p := (seq[id] + id + 1) % cfg.partitions
		op := Op{Kind: OpProduce, Worker: id + 1, Topic: "t", Partition: int32(p), Value: fmt.Sprintf("p%d-%d", id+1, seq[id]), Offset: -1, Start: us(next[id])}
		seq[id]++
		start := next[id]
		commit := max(lastCommit[p]+1, start+between(100, 3000))
		var end int64
		switch r := rng.Float64(); {
		case r >= cfg.unknown:
			op.Result, op.Offset = ResultOK, int64(len(logs[p]))
			end = commit + between(0, 500)
		case r < cfg.unknown/3: // never appended
			op.Result = ResultUnknown
			end = start + between(2000, 5000)
			commit = -1
		case r < 2*cfg.unknown/3: // appended, the answer lost
			op.Result = ResultUnknown
			end = max(commit, start+between(2000, 5000))
		default: // appended after the producer gave up
			op.Result = ResultUnknown
			end = start + between(2000, 5000)
			commit = max(lastCommit[p]+1, end+between(1, 20000))
		}
		if commit >= 0 {
			logs[p] = append(logs[p], simRecord{op.Value, commit})
			lastCommit[p] = commit
		}
		op.End = us(end)
		ops = append(ops, op)
		next[id] = end + between(0, 200)
		stop = max(stop, end)
	}
	hw := func(p int, t int64) int64 {
		return int64(sort.Search(len(logs[p]), func(i int) bool { return logs[p][i].commit > t }))
	}
	drainAt := stop + 1000
	targets := make([]int64, cfg.partitions)
	for p := range targets {
		targets[p] = hw(p, drainAt)
	}
	for c := 1; c <= cfg.consumers; c++ {
		pos := make([]int64, cfg.partitions)
		told := make([]int64, cfg.partitions)
		for p := range told {
			told[p] = -1
		}
		now := between(0, 1000)
		for {
			done := now > drainAt
			for p := range pos {
				done = done && pos[p] >= targets[p]
			}
			if done {
				break
			}
			for p := 0; p < cfg.partitions; p++ {
				start := now
				base := Op{Kind: OpRead, Worker: c, Topic: "t", Partition: int32(p), Start: us(start), Result: ResultOK}
				if rng.Float64() < 0.01 {
					now = start + between(100, 3000)
					base.End, base.Result, base.Offset, base.HW, base.Err = us(now), ResultFail, pos[p], told[p], "fetch: connection reset"
					ops = append(ops, base)
					now += between(100, 1000)
					continue
				}
				at := start + between(50, 500) // the leader reads its log
				if hw(p, at) <= pos[p] {
					// A long poll: answered at the first commit past
					// the position, or empty at the deadline.
					deadline := start + 100_000
					if pos[p] < int64(len(logs[p])) && logs[p][pos[p]].commit <= deadline {
						at = max(at, logs[p][pos[p]].commit)
					} else {
						at = deadline
					}
				}
				avail := hw(p, at)
				h := hw(p, at+between(0, 100)) // read after the records: it may have moved on
				if rng.Float64() < cfg.stale {
					// An older answer: what a leader that has not caught
					// up, or a zombie, knows (never less than this consumer
					// was told before).
					avail = max(told[p], hw(p, at-between(0, 5000)))
					h = avail
				}
				h = max(h, told[p])
				n := min(max(avail-pos[p], 0), int64(between(1, 60)))
				now = at + between(150, 600)
				base.End, base.HW = us(now), h
				told[p] = h
				if n == 0 {
					base.Offset = -1
					ops = append(ops, base)
				}
				for off := pos[p]; off < pos[p]+n; off++ {
					r := base
					r.Offset, r.Value = off, logs[p][off].value
					ops = append(ops, r)
				}
				pos[p] += n
				now += between(0, 100)
			}
		}
	}
	// The workload records an operation when it ends.
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].End.Before(ops[j].End) })
	// The final read, once every record has been committed.
	final := drainAt
	for p := range logs {
		final = max(final, lastCommit[p])
	}
	for p, l := range logs {
		at := us(final + 1000)
		ops = append(ops, Op{Kind: OpFinal, Topic: "t", Partition: int32(p), Start: at, End: at, Result: ResultOK, Offset: -1, HW: int64(len(l))})
		for off, r := range l {
			ops = append(ops, Op{Kind: OpFinal, Topic: "t", Partition: int32(p), Start: at, End: at, Result: ResultOK, Offset: int64(off), Value: r.value})
		}
	}
	return ops
}

// TestPorcupineAcceptsSimulatedHistories checks that histories a correct
// log gives pass both checkers, with unknown sends that landed before
// their end, after it or never, stale and racing high watermarks, failed
// polls, concurrent sends, and enough operations to be cut into stretches.
func TestPorcupineAcceptsSimulatedHistories(t *testing.T) {
	cfgs := []struct {
		simConfig
		cuts bool // whether the history has points with nothing under way
	}{
		{simConfig{partitions: 3, producers: 4, consumers: 2, sends: 3000, unknown: 0.02, stale: 0.05}, true},
		{simConfig{partitions: 1, producers: 4, consumers: 2, sends: 2000, unknown: 0.2, stale: 0.2}, false},
		{simConfig{partitions: 2, producers: 8, consumers: 3, sends: 4000, unknown: 0.05, stale: 0}, true},
	}
	for i, c := range cfgs {
		cfg := c.simConfig
		for seed := int64(1); seed <= 5; seed++ {
			ops := simulate(seed, cfg)
			v, st := CheckHistory(ops)
			require.Empty(t, v, "config %d seed %d: the simulation is not of a correct log", i, seed)
			res := CheckPorcupine(ops, time.Minute)
			t.Logf("config %d seed %d: %d operations, %d unknown of %d produces: %s, %d porcupine operations in %d stretches, %s",
				i, seed, st.Ops, st.Produces-st.Acked, st.Produces, res.Verdict, res.Operations, res.Stretches, res.Elapsed)
			require.Equal(t, PorcupineOK, res.Verdict, "config %d seed %d: %v", i, seed, res.Violations)
			assert.Equal(t, res.Operations, res.Linearized)
			if c.cuts {
				assert.Greater(t, res.Stretches, cfg.partitions, "config %d seed %d: no cuts were made", i, seed)
			}
		}
	}
}

// A mutation plants an anomaly in a history of a correct log; it returns
// nil when the history has nothing to plant it on.
type mutation struct {
	name string
	// history says whether CheckHistory finds it too.
	history bool
	plant   func(rng *rand.Rand, ops []Op) []Op
}

// simIndex finds things in a simulated history.
type simIndex struct {
	ops     []Op
	acked   map[pOff]int // produce index by partition and offset
	readsAt map[pOff][]int
	unread  map[int32][]int // unknown produces nobody read, by partition
	maxOff  map[int32]int64 // the highest acknowledged offset
}

func indexSim(ops []Op) simIndex {
	x := simIndex{ops: ops, acked: map[pOff]int{}, readsAt: map[pOff][]int{}, unread: map[int32][]int{}, maxOff: map[int32]int64{}}
	read := map[string]bool{}
	for i, op := range ops {
		if op.Kind == OpRead && op.Result == ResultOK && op.Offset >= 0 {
			x.readsAt[pOff{op.Partition, op.Offset}] = append(x.readsAt[pOff{op.Partition, op.Offset}], i)
			read[op.Value] = true
		}
	}
	for i, op := range ops {
		if op.Kind != OpProduce {
			continue
		}
		if op.Result == ResultOK {
			x.acked[pOff{op.Partition, op.Offset}] = i
			if off, ok := x.maxOff[op.Partition]; !ok || op.Offset > off {
				x.maxOff[op.Partition] = op.Offset
			}
		} else if !read[op.Value] {
			x.unread[op.Partition] = append(x.unread[op.Partition], i)
		}
	}
	return x
}

// someAcked picks an acknowledged produce with offset at least 1 and reads
// by every consumer, and an unread unknown produce of its partition if
// needUnread.
func (x simIndex) someAcked(rng *rand.Rand, needUnread bool) (pOff, int, bool) {
	var keys []pOff
	for k := range x.acked {
		if k.off >= 1 && len(x.readsAt[k]) >= 2 && (!needUnread || len(x.unread[k.p]) > 0) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return pOff{}, 0, false
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].p < keys[j].p || keys[i].p == keys[j].p && keys[i].off < keys[j].off
	})
	k := keys[rng.Intn(len(keys))]
	u := -1
	if needUnread {
		u = x.unread[k.p][rng.Intn(len(x.unread[k.p]))]
	}
	return k, u, true
}

var mutations = []mutation{
	{name: "an acknowledged write lost at the tail", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		p := int32(rng.Intn(len(x.maxOff)))
		off, ok := x.maxOff[p]
		if !ok {
			return nil
		}
		var out []Op
		for _, op := range ops {
			if op.Kind == OpRead && op.Partition == p && op.Offset == off {
				continue
			}
			out = append(out, op)
		}
		return out
	}},
	{name: "an acknowledged write overwritten by one that timed out", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, u, ok := x.someAcked(rng, true)
		if !ok {
			return nil
		}
		for _, i := range x.readsAt[k] {
			ops[i].Value = ops[u].Value
		}
		return ops
	}},
	{name: "two values at one offset", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, u, ok := x.someAcked(rng, true)
		if !ok {
			return nil
		}
		ops[x.readsAt[k][0]].Value = ops[u].Value
		return ops
	}},
	{name: "a value at two offsets", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, _, ok := x.someAcked(rng, false)
		if !ok || len(x.readsAt[pOff{k.p, k.off - 1}]) == 0 {
			return nil
		}
		ops[x.readsAt[k][0]].Value = ops[x.readsAt[pOff{k.p, k.off - 1}][0]].Value
		return ops
	}},
	{name: "a read of a value never produced", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, _, ok := x.someAcked(rng, false)
		if !ok {
			return nil
		}
		ops[x.readsAt[k][1]].Value = "ghost"
		return ops
	}},
	{name: "a read at the high watermark it was given", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, _, ok := x.someAcked(rng, false)
		if !ok {
			return nil
		}
		r := ops[x.readsAt[k][0]]
		for i, op := range ops {
			if op.Kind == OpRead && op.Worker == r.Worker && op.Partition == r.Partition && op.Start.Equal(r.Start) {
				ops[i].HW = r.Offset
			}
		}
		return ops
	}},
	{name: "a produce acknowledged before another began at the higher offset", plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, _, ok := x.someAcked(rng, false)
		if !ok {
			return nil
		}
		a := x.acked[k]
		// The first acknowledged produce of the partition by another
		// producer that began after a ended.
		b := -1
		for i, op := range ops {
			if op.Kind == OpProduce && op.Result == ResultOK && op.Partition == k.p && op.Worker != ops[a].Worker && op.Start.After(ops[a].End) &&
				(b < 0 || op.Start.Before(ops[b].Start)) {
				b = i
			}
		}
		if b < 0 {
			return nil
		}
		// Swap who sent them, and when: now the one at the higher offset
		// was acknowledged before the other began.
		ops[a].Worker, ops[b].Worker = ops[b].Worker, ops[a].Worker
		ops[a].Start, ops[b].Start = ops[b].Start, ops[a].Start
		ops[a].End, ops[b].End = ops[b].End, ops[a].End
		return ops
	}},
	{name: "a consumer skipped a record", plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, _, ok := x.someAcked(rng, false)
		if !ok {
			return nil
		}
		i := x.readsAt[k][0]
		return append(ops[:i:i], ops[i+1:]...)
	}},
	{name: "a record read, then replaced at the end", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, u, ok := x.someAcked(rng, true)
		if !ok {
			return nil
		}
		for i, op := range ops {
			if op.Kind == OpFinal && op.Partition == k.p && op.Offset == k.off {
				ops[i].Value = ops[u].Value
			}
		}
		return ops
	}},
	{name: "a record read, then gone at the end", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, _, ok := x.someAcked(rng, false)
		if !ok {
			return nil
		}
		// The final read ends below a record read: the log was cut back
		// to it, and nothing was written there again.
		var out []Op
		for _, op := range ops {
			if op.Kind == OpFinal && op.Partition == k.p {
				if op.Offset >= k.off {
					continue
				}
				if op.Offset < 0 {
					op.HW = k.off
				}
			}
			out = append(out, op)
		}
		return out
	}},
	{name: "a high watermark above every record", history: true, plant: func(rng *rand.Rand, ops []Op) []Op {
		x := indexSim(ops)
		k, _, ok := x.someAcked(rng, false)
		if !ok {
			return nil
		}
		ops[x.readsAt[k][0]].HW = int64(len(ops))
		return ops
	}},
}

// TestPorcupinePlantedAnomalies checks that porcupine finds each kind of
// anomaly planted in histories of a correct log, in the partition it was
// planted in.
func TestPorcupinePlantedAnomalies(t *testing.T) {
	cfg := simConfig{partitions: 3, producers: 4, consumers: 2, sends: 3000, unknown: 0.05, stale: 0.05}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			planted := 0
			for seed := int64(1); seed <= 4; seed++ {
				ops := m.plant(rand.New(rand.NewSource(seed)), simulate(seed, cfg))
				if ops == nil {
					continue
				}
				planted++
				res := CheckPorcupine(ops, time.Minute)
				v, _ := CheckHistory(ops)
				require.Equal(t, PorcupineViolation, res.Verdict, "seed %d", seed)
				require.NotEmpty(t, res.Violations)
				t.Logf("seed %d, %s: %s; CheckHistory: %d violations", seed, res.Elapsed, res.Violations[0], len(v))
				assert.Equal(t, m.history, len(v) > 0, "seed %d: CheckHistory: %v", seed, v)
				var html countWriter
				require.NoError(t, res.Visualize(&html))
				assert.Less(t, int(html), 8<<20, "the visualization shows more than the illegal stretches")
			}
			require.Greater(t, planted, 0, "nowhere to plant it")
		})
	}
}

type countWriter int

func (w *countWriter) Write(p []byte) (int, error) {
	*w += countWriter(len(p))
	return len(p), nil
}

// TestPorcupineRewritingKeepsVerdict checks the rewritings (unknown
// produces pinned where they were read or deferred, histories cut into
// stretches) against the plain history, where an unknown produce may be
// appended anywhere or never: on small histories, valid and with each
// anomaly planted, the verdicts agree.
func TestPorcupineRewritingKeepsVerdict(t *testing.T) {
	cfg := simConfig{partitions: 2, producers: 3, consumers: 2, sends: 24, unknown: 0.3, stale: 0.2}
	compared, illegal, stretches := 0, 0, 0
	for seed := int64(1); seed <= 60; seed++ {
		histories := [][]Op{simulate(seed, cfg)}
		for _, m := range mutations {
			if ops := m.plant(rand.New(rand.NewSource(seed)), simulate(seed, cfg)); ops != nil {
				histories = append(histories, ops)
			}
		}
		for i, ops := range histories {
			plain := checkPorcupine(ops, 5*time.Second, lpOptions{plain: true})
			if plain.Verdict == PorcupineInconclusive {
				continue
			}
			compared++
			if plain.Verdict == PorcupineViolation {
				illegal++
			}
			got := checkPorcupine(ops, 5*time.Second, lpOptions{minStretch: 4})
			require.Equal(t, plain.Verdict, got.Verdict, "seed %d history %d: plain %v, rewritten %v", seed, i, plain.Violations, got.Violations)
			stretches += got.Stretches
		}
	}
	t.Logf("%d histories compared, %d not linearizable, %d stretches", compared, illegal, stretches)
	assert.Greater(t, compared, 300)
	assert.Greater(t, illegal, 200)
	assert.Greater(t, stretches, 3*compared, "too few cuts to test them")
}

// TestPorcupineNarrowsLongOperations checks that one operation spanning
// most of a history does not leave it uncut: an unknown send from the
// start whose record is read at the end, in place of a write acknowledged
// there (so the history is not linearizable, and the search must exhaust
// the stretch that holds them to say so).
func TestPorcupineNarrowsLongOperations(t *testing.T) {
	cfg := simConfig{partitions: 3, producers: 4, consumers: 2, sends: 6000, unknown: 0.03, stale: 0.05}
	ops := simulate(1, cfg)
	valid := CheckPorcupine(ops, time.Minute)
	require.Equal(t, PorcupineOK, valid.Verdict, "%v", valid.Violations)
	x := indexSim(ops)
	var p int32
	for p = 0; len(x.unread[p]) == 0; p++ {
		require.Less(t, int(p), cfg.partitions, "no unknown send went unread")
	}
	u := x.unread[p][0]
	last := pOff{p, x.maxOff[p]}
	for ; len(x.readsAt[last]) == 0; last.off-- {
	}
	for _, i := range x.readsAt[last] {
		ops[i].Value = ops[u].Value
	}
	t.Logf("%q sent at %s, read at %d/%d", ops[u].Value, ops[u].Start.Format(time.RFC3339Nano), last.p, last.off)
	res := CheckPorcupine(ops, time.Minute)
	require.Equal(t, PorcupineViolation, res.Verdict)
	t.Logf("%s; valid: %s; %v", res.Summary(), valid.Summary(), res.Violations)
	assert.Greater(t, res.Stretches, valid.Stretches*3/4, "the long send left the history uncut")
}

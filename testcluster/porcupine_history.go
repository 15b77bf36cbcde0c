package testcluster

import (
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// lpStretch is one stretch of a partition's history, checked on its own.
type lpStretch struct {
	topic     string
	partition int32
	from, to  time.Time
	ops       []porcupine.Operation
}

// lpHistory is a history rewritten for the log model.
type lpHistory struct {
	model     *logModel
	stretches []lpStretch
}

func (h *lpHistory) operations() []porcupine.Operation {
	var all []porcupine.Operation
	for _, s := range h.stretches {
		all = append(all, s.ops...)
	}
	return all
}

// minStretch is the fewest operations of a stretch before a cut. Fewer
// stretches cost less, but porcupine keeps a bitset of the stretch's
// operations with every state it reaches, so its memory grows with the
// square of a stretch's length.
const minStretch = 512

type topicPartition struct {
	topic     string
	partition int32
}

type lpClient struct {
	consumer bool
	worker   int
}

// lpPartition collects the operations of one partition.
type lpPartition struct {
	tp      topicPartition
	regular []porcupine.Operation // pinned produces and reads
	unread  []porcupine.Operation // unknown produces nobody read
	// firstRead is, per value, the offset and the end of the first poll
	// that returned it.
	firstRead map[int32][2]int64
	maxRead   int64           // the highest offset read, -1 if none
	pins      map[int64]int32 // offset -> a value pinned there
	position  map[int]int64   // consumer -> its position after its last poll
	readOffs  map[int64]bool  // the offsets the consumers read
}

// lpOptions are for tests.
type lpOptions struct {
	// plain leaves out the rewritings: every unknown produce may be
	// appended anywhere and never returns, and nothing is cut. The search
	// is exponential in the unknown produces.
	plain bool
	// minStretch replaces the constant minStretch when above 0.
	minStretch int
}

type lpBuilder struct {
	lpOptions
	m       *logModel
	base    time.Time
	ids     map[string]int32
	clients map[lpClient]int
	parts   map[topicPartition]*lpPartition
	// final is the final read, by partition.
	final map[int32]*finalLog
}

func (b *lpBuilder) at(t time.Time) int64 { return int64(t.Sub(b.base)) }

func (b *lpBuilder) time(ns int64) time.Time { return b.base.Add(time.Duration(ns)) }

func (b *lpBuilder) intern(v string) int32 {
	id, ok := b.ids[v]
	if !ok {
		id = int32(len(b.m.values))
		b.ids[v] = id
		b.m.values = append(b.m.values, v)
	}
	return id
}

// client numbers the visualization's rows: 0 is the harness's (the
// snapshots), then one per producer and consumer.
func (b *lpBuilder) client(consumer bool, worker int) int {
	k := lpClient{consumer, worker}
	c, ok := b.clients[k]
	if !ok {
		c = len(b.clients) + 1
		b.clients[k] = c
	}
	return c
}

func (b *lpBuilder) part(topic string, partition int32) *lpPartition {
	tp := topicPartition{topic, partition}
	p := b.parts[tp]
	if p == nil {
		p = &lpPartition{tp: tp, firstRead: map[int32][2]int64{}, maxRead: -1, pins: map[int64]int32{}, position: map[int]int64{}, readOffs: map[int64]bool{}}
		b.parts[tp] = p
	}
	return p
}

// buildLogHistory rewrites a history for the log model: one operation per
// poll, the unknown produces pinned or deferred, each partition's history
// cut into stretches (see the top of porcupine.go).
func buildLogHistory(ops []Op, opt lpOptions) *lpHistory {
	if opt.minStretch <= 0 {
		opt.minStretch = minStretch
	}
	b := &lpBuilder{lpOptions: opt, m: &logModel{}, ids: map[string]int32{}, clients: map[lpClient]int{}, parts: map[topicPartition]*lpPartition{},
		final: finalLogs(ops)}
	h := &lpHistory{model: b.m}
	if len(ops) == 0 {
		return h
	}
	b.base = ops[0].Start
	for _, op := range ops {
		if op.Start.Before(b.base) {
			b.base = op.Start
		}
	}
	consumers := map[int]bool{}
	for _, op := range ops {
		if op.Kind == OpFinal {
			continue
		}
		b.part(op.Topic, op.Partition)
		if op.Kind == OpRead {
			consumers[op.Worker] = true
		}
	}
	b.addPolls(ops)
	b.addProduces(ops)

	var order []*lpPartition
	for _, p := range b.parts {
		order = append(order, p)
	}
	sort.Slice(order, func(i, j int) bool {
		if order[i].tp.topic != order[j].tp.topic {
			return order[i].tp.topic < order[j].tp.topic
		}
		return order[i].tp.partition < order[j].tp.partition
	})
	var workers []int
	for w := range consumers {
		workers = append(workers, w)
	}
	sort.Ints(workers)
	for _, p := range order {
		h.stretches = append(h.stretches, b.cut(p, workers)...)
	}
	b.m.progress = make([]atomic.Int32, len(h.stretches))
	b.m.sizes = make([]int, len(h.stretches))
	for i := range h.stretches {
		s := &h.stretches[i]
		b.m.sizes[i] = len(s.ops)
		for j := range s.ops {
			in := s.ops[j].Input.(lpInput)
			in.stretch = i
			s.ops[j].Input = in
		}
	}
	return h
}

// addPolls adds one read per poll. The workload records each record a
// poll returned as an Op of its own, one after the other, all with the
// same worker, partition, start, end and high watermark; a poll that
// returned nothing is one Op with offset -1. A failed poll returned
// nothing and moved nothing: it is left out.
func (b *lpBuilder) addPolls(ops []Op) {
	type poll struct {
		op   Op
		recs []lpRecord
	}
	type consumerPartition struct {
		worker int
		tp     topicPartition
	}
	var polls []*poll
	last := map[consumerPartition]*poll{}
	for _, op := range ops {
		if op.Kind != OpRead || op.Result != ResultOK {
			continue
		}
		k := consumerPartition{op.Worker, topicPartition{op.Topic, op.Partition}}
		p := last[k]
		if p == nil || op.Offset < 0 || len(p.recs) == 0 || !op.Start.Equal(p.op.Start) || !op.End.Equal(p.op.End) || op.HW != p.op.HW {
			p = &poll{op: op}
			polls = append(polls, p)
			last[k] = p
		}
		if op.Offset >= 0 {
			p.recs = append(p.recs, lpRecord{op.Offset, b.intern(op.Value)})
		}
	}
	for _, pl := range polls {
		op := pl.op
		p := b.part(op.Topic, op.Partition)
		in := lpInput{kind: lpRead, client: b.client(true, op.Worker), pos: p.position[op.Worker]}
		if n := len(pl.recs); n > 0 {
			// The consumer moves one past the last record returned.
			p.position[op.Worker] = pl.recs[n-1].off + 1
		}
		end := b.at(op.End)
		for _, r := range pl.recs {
			p.maxRead = max(p.maxRead, r.off)
			p.readOffs[r.off] = true
			if f, ok := p.firstRead[r.val]; !ok || end < f[1] {
				p.firstRead[r.val] = [2]int64{r.off, end}
			}
		}
		p.regular = append(p.regular, porcupine.Operation{
			ClientId: in.client, Input: in, Call: b.at(op.Start), Output: lpOutput{recs: pl.recs, hw: op.HW}, Return: end,
			Metadata: fmt.Sprintf("consumer %d, %s to %s", op.Worker, op.Start.Format(time.RFC3339Nano), op.End.Format(time.RFC3339Nano)),
		})
	}
}

// addProduces adds the produces: acknowledged at their offsets; unknown
// ones pinned to where they were first read and returning when that poll
// ended, or, never read, deferred; failed ones not at all.
func (b *lpBuilder) addProduces(ops []Op) {
	for _, op := range ops {
		if op.Kind != OpProduce || op.Result == ResultFail {
			continue
		}
		p := b.part(op.Topic, op.Partition)
		in := lpInput{kind: lpProduce, client: b.client(false, op.Worker), value: b.intern(op.Value)}
		call, ret := b.at(op.Start), b.at(op.End)
		meta := fmt.Sprintf("producer %d, %s to %s", op.Worker, op.Start.Format(time.RFC3339Nano), op.End.Format(time.RFC3339Nano))
		if op.Err != "" {
			meta += ": " + op.Err
		}
		var out lpOutput
		if op.Result == ResultOK {
			out = lpOutput{offset: op.Offset, acked: true}
		} else if f, read := p.firstRead[in.value]; read && !b.plain {
			// A read can return the record only after it is appended:
			// the produce can be placed no later than that read ended.
			out = lpOutput{offset: f[0]}
			ret = max(call, f[1])
		} else {
			p.unread = append(p.unread, porcupine.Operation{ClientId: in.client, Input: in, Call: call, Output: lpOutput{offset: -1}, Metadata: meta})
			continue
		}
		if _, dup := p.pins[out.offset]; !dup {
			p.pins[out.offset] = in.value
		}
		p.regular = append(p.regular, porcupine.Operation{ClientId: in.client, Input: in, Call: call, Output: out, Return: ret, Metadata: meta})
	}
}

// narrow narrows the pinned produces and the polls of a partition to
// where an order that explains them can place them: produces are placed
// in offset order, and before every poll told a high watermark above
// their offset. So a produce comes after every produce at a lower offset
// began, and before every produce at a higher offset and every such poll
// ended; a poll comes after every produce below its high watermark began.
// Where the bounds cross, the history is not linearizable and the
// operation is left as it was. Long operations (a send whose record is
// first read much later) would otherwise leave no point to cut at for as
// long as they last.
func narrow(ops []porcupine.Operation) {
	var prods, polls []int
	for i, op := range ops {
		switch op.Input.(lpInput).kind {
		case lpProduce:
			prods = append(prods, i)
		case lpRead:
			polls = append(polls, i)
		}
	}
	off := func(i int) int64 { return ops[i].Output.(lpOutput).offset }
	hw := func(i int) int64 { return ops[i].Output.(lpOutput).hw }
	sort.SliceStable(prods, func(a, b int) bool { return off(prods[a]) < off(prods[b]) })
	sort.SliceStable(polls, func(a, b int) bool { return hw(polls[a]) > hw(polls[b]) })
	// began[k]: the latest start of the produces up to the k-th by offset.
	began := make([]int64, len(prods))
	latest := int64(math.MinInt64)
	for k, i := range prods {
		latest = max(latest, ops[i].Call)
		began[k] = latest
	}
	// ended[k]: the earliest end of the produces from the k-th on and of
	// the polls told a high watermark above the k-th's offset.
	ended := make([]int64, len(prods))
	earliest := int64(math.MaxInt64)
	j := 0
	for k := len(prods) - 1; k >= 0; k-- {
		i := prods[k]
		for ; j < len(polls) && hw(polls[j]) > off(i); j++ {
			earliest = min(earliest, ops[polls[j]].Return)
		}
		earliest = min(earliest, ops[i].Return)
		ended[k] = earliest
	}
	for k, i := range prods {
		if began[k] <= ended[k] {
			ops[i].Call, ops[i].Return = began[k], ended[k]
		}
	}
	for _, i := range polls {
		// The produces below its high watermark.
		k := sort.Search(len(prods), func(k int) bool { return off(prods[k]) >= hw(i) })
		if k > 0 && began[k-1] > ops[i].Call && began[k-1] <= ops[i].Return {
			ops[i].Call = began[k-1]
		}
	}
}

// cut cuts a partition's operations into stretches where none is under
// way, each after the first starting with a snapshot of the log the
// pinned produces before the cut made, and puts the unread produces, the
// drained operations and the final read in the last.
func (b *lpBuilder) cut(p *lpPartition, consumers []int) []lpStretch {
	ops := p.regular
	if !b.plain {
		narrow(ops)
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	reached := p.maxRead + 1 // the log's length once every offset read is in it
	// No cut once the log can reach it: the unread produces may be placed
	// from then on.
	limit := int64(math.MaxInt64)
	if reached == 0 || b.plain {
		limit = math.MinInt64
	}
	var end int64 = math.MinInt64 // the latest call or return
	produces := 0
	for _, op := range ops {
		end = max(end, op.Call, op.Return)
		if op.Input.(lpInput).kind == lpProduce {
			produces++
			if op.Output.(lpOutput).offset >= reached-1 {
				limit = min(limit, op.Call)
			}
		}
	}
	for _, op := range p.unread {
		end = max(end, op.Call)
	}
	// The log the pinned produces make, shared by the snapshots: no
	// longer than there are produces, which is as long as a log that
	// passes can be.
	var chain []*logNode
	var prev *logNode
	for off := int64(0); off < int64(produces); off++ {
		v, ok := p.pins[off]
		if !ok {
			v = noValue
		}
		prev = appendNode(prev, v)
		chain = append(chain, prev)
	}
	snapshot := func(length, acked int64) *logState {
		s := &logState{ackedEnd: acked}
		if length = min(length, int64(len(chain))); length > 0 {
			s.tail = chain[length-1]
		}
		return s
	}

	var out []lpStretch
	var cur []porcupine.Operation
	var from, to int64 // of the current stretch's own operations
	flush := func() {
		if len(cur) > 0 {
			out = append(out, lpStretch{topic: p.tp.topic, partition: p.tp.partition, from: b.time(from), to: b.time(to), ops: cur})
		}
	}
	var maxRet int64 = math.MinInt64
	var length, acked int64 // of the log the operations so far make
	for i, op := range ops {
		if len(cur) >= b.minStretch && maxRet < op.Call && op.Call <= limit {
			flush()
			cur = []porcupine.Operation{{Input: lpInput{kind: lpSnapshot, snap: snapshot(length, acked)}, Call: op.Call - 1, Output: lpOutput{}, Return: op.Call - 1}}
			from, to = op.Call, op.Return
		}
		if i == 0 {
			from, to = op.Call, op.Return
		}
		to = max(to, op.Return)
		cur = append(cur, op)
		maxRet = max(maxRet, op.Return)
		if in, o := op.Input.(lpInput), op.Output.(lpOutput); in.kind == lpProduce {
			length = max(length, o.offset+1)
			if o.acked {
				acked = max(acked, o.offset+1)
			}
		}
	}
	// The unread produces may be placed anywhere after they began, which
	// in the last stretch is after it began; the drained operations come
	// after every other operation, and the unread produces return after
	// them: to porcupine that is the same as never.
	first := int64(math.MinInt64)
	if len(out) > 0 {
		first = cur[0].Call + 1
	}
	if len(ops) == 0 {
		from, to = end, end
	}
	sort.SliceStable(p.unread, func(i, j int) bool { return p.unread[i].Call < p.unread[j].Call })
	for i, op := range p.unread {
		op.Call = max(op.Call, first)
		op.Return = end + 3
		op.Output = lpOutput{offset: -1, rank: -1}
		if !b.plain {
			op.Output = lpOutput{offset: -1, minLen: reached, rank: int32(i)}
		}
		cur = append(cur, op)
	}
	for _, w := range consumers {
		in := lpInput{kind: lpDrained, client: b.client(true, w), pos: p.position[w]}
		cur = append(cur, porcupine.Operation{ClientId: in.client, Input: in, Call: end + 1, Output: lpOutput{}, Return: end + 2,
			Metadata: fmt.Sprintf("consumer %d after the drain", w)})
	}
	if f := b.final[p.tp.partition]; f != nil {
		cur = append(cur, b.finalOp(p, f, end))
	}
	flush()
	return out
}

// finalOp is the final read of a partition, after every other operation
// but the unread produces: the records it found at the offsets the
// consumers read (those below its log start left out: retention deleted
// them), none for an offset read at or above its high watermark.
func (b *lpBuilder) finalOp(p *lpPartition, f *finalLog, end int64) porcupine.Operation {
	var recs []lpRecord
	for off := range p.readOffs {
		if off < f.start || off >= f.hw {
			continue
		}
		val := noValue
		if v, ok := f.values[off]; ok {
			val = b.intern(v)
		}
		recs = append(recs, lpRecord{off, val})
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].off < recs[j].off })
	in := lpInput{kind: lpFinal, client: b.client(true, 0)}
	return porcupine.Operation{ClientId: in.client, Input: in, Call: end + 1, Output: lpOutput{recs: recs, hw: f.hw}, Return: end + 2,
		Metadata: "the final read, after healing"}
}

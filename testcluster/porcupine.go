package testcluster

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// The second checker of a chaos history: porcupine (Lowe's search for a
// linearization, with Horn and Kroening's partitioning) against a sequential model of one
// partition of an append-only log. CheckHistory checks the invariants one
// by one; this asks whether one order of all the operations, each placed
// between its start and its end, explains every result.
//
// The model. The state is the committed log of one partition (the records
// below the true high watermark), its records in order, and one past the
// highest acknowledged offset. Operations:
//
//   - produce v, acknowledged at offset o: the log is o records long; v is
//     appended. A produce is placed where its record became committed, or
//     at its acknowledgement if that came first;
//   - produce v, unknown: appended, or never. Porcupine's way to say so is
//     an operation that never returns: placed at the end, after every
//     other, it has no effect;
//   - produce v, fail: provably not appended, so not an operation at all: a
//     read of v has nothing to explain it;
//   - a read by a consumer at its position pos (0 at first, then one past
//     the last record it read), told high watermark hw, of records r_0..r_k-1:
//     they are at offsets pos..pos+k-1, pos+k <= hw, hw is at most the
//     log's length (a consumer is never told of records not committed), and
//     the log holds r_i at pos+i. A read may be stale: hw below the log's
//     length is fine, so reads say nothing about freshness;
//   - drained, one per consumer and partition, after everything: the
//     consumer's final position is past every acknowledged offset (after
//     healing the consumers read to the high watermark, which covers every
//     acknowledged write);
//   - final, one per partition the final read (OpFinal) read whole, after
//     everything too: the log is no longer than the high watermark the
//     final read read to, and at every offset a consumer read it holds
//     the record the final read found there. A record read is committed
//     and stays: one that vanished (a leader that served records no
//     follower held, failed over) or was replaced leaves no order.
//
// Four rewritings make the search feasible on histories of hundreds of
// thousands of operations; each gives the same verdict as the plain
// history (the proofs are in docs/chaos.md):
//
//  1. an unknown produce whose value some read returned is pinned to the
//     offset that read returned it at, and returns when that read ended;
//  2. an unknown produce whose value nobody read may be appended only once
//     the log is past every offset read (every offset below was read with
//     another value), as a record without a value (nobody reads it), and
//     the unread produces of a partition are appended in the order they
//     began (any set of them appended can be taken to be the earliest):
//     their orders and values would otherwise multiply the states the
//     search must visit before it can say no;
//  3. a partition's history is cut where no operation is under way, into
//     stretches checked separately (porcupine's Partition): every produce
//     before a cut has a fixed offset, so the log at the cut is known, and
//     the next stretch starts with it (a snapshot operation). No cut is
//     made after the produce that reaches the last offset read begins, so
//     the unread unknowns and the drained operations all fall in the last
//     stretch;
//  4. before cutting, each pinned produce and each poll is narrowed to
//     where an order that explains the history can place it (narrow), so
//     that one long operation does not leave nowhere to cut.

// Porcupine verdicts of a history.
const (
	PorcupineOK           = "ok"
	PorcupineViolation    = "violation"
	PorcupineInconclusive = "inconclusive" // the search ran out of time
)

// PorcupineResult is the outcome of CheckPorcupine.
type PorcupineResult struct {
	Verdict string
	// Operations counts the operations given to porcupine: produces,
	// polls (one for all the records a poll returned), the drained and
	// snapshot operations.
	Operations int
	// Linearized counts the operations placed in the longest orders found:
	// Operations when the verdict is ok, how far the search got otherwise.
	Linearized int
	// Stretches counts the stretches the histories of the partitions were
	// cut into, and Complete those found linearizable.
	Stretches, Complete int
	// Illegal counts the stretches found not linearizable.
	Illegal int
	Elapsed time.Duration
	// Violations describe the stretches found not linearizable, or why
	// the check is inconclusive.
	Violations []string

	model *logModel
	info  *porcupine.LinearizationInfo // the illegal stretches, for Visualize
}

// Visualize writes porcupine's HTML visualization of the stretches found
// not linearizable: their operations, the longest orders the search found
// and the model's state after each step. It returns an error when there is
// nothing to show.
func (r PorcupineResult) Visualize(w io.Writer) error {
	if r.info == nil {
		return fmt.Errorf("porcupine: no violation to visualize")
	}
	return porcupine.Visualize(r.model.porcupine(), *r.info, w)
}

// Summary is one line: the verdict, the operations, the stretches and
// the time taken.
func (r PorcupineResult) Summary() string {
	s := fmt.Sprintf("%s: %d operations in %d stretches, checked in %s", r.Verdict, r.Operations, r.Stretches, r.Elapsed.Round(time.Millisecond))
	switch r.Verdict {
	case PorcupineInconclusive:
		s += fmt.Sprintf("; placed %d operations, %d stretches linearizable", r.Linearized, r.Complete)
	case PorcupineViolation:
		s += fmt.Sprintf("; %d stretches not linearizable", r.Illegal)
	}
	return s
}

// SaveVisualization writes Visualize's page to the file at path.
func (r PorcupineResult) SaveVisualization(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := r.Visualize(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Kinds of an operation of the log model.
const (
	lpProduce = iota
	lpRead
	lpDrained
	lpSnapshot
	lpFinal
)

// lpInput is the input of an operation of the log model.
type lpInput struct {
	stretch int
	kind    uint8
	client  int
	value   int32     // produce: its value
	pos     int64     // read: the position polled; drained: the final position
	snap    *logState // snapshot: the log at the cut
}

// lpOutput is the output of an operation of the log model.
type lpOutput struct {
	// produce: the offset it must be appended at, or -1 for an unknown
	// produce nobody read, appended once the log is minLen long, as a
	// record nobody can read, after the rank unread produces that began
	// before it (rank -1: in any order, with its value).
	offset int64
	minLen int64
	rank   int32
	acked  bool
	// read; final: the records the final read found at the offsets the
	// consumers read, and the high watermark it read to
	recs []lpRecord
	hw   int64
}

type lpRecord struct {
	off int64
	val int32
}

// Values no read matches: of an offset no produce is known to have
// written, in a snapshot; of an unknown produce nobody read.
const (
	noValue     int32 = -1
	unreadValue int32 = -2
)

// logNode is one record of a log: logs are persistent lists sharing their
// prefixes, with Myers's jump pointers to find an offset in O(log n).
type logNode struct {
	off  int64
	val  int32
	hash uint64 // of the log up to and including this record
	prev *logNode
	jump *logNode
}

func appendNode(prev *logNode, val int32) *logNode {
	n := &logNode{val: val, prev: prev}
	var h uint64
	if prev != nil {
		n.off = prev.off + 1
		h = prev.hash
		n.jump = prev
		if j := prev.jump; j != nil && j.jump != nil && prev.off-j.off == j.off-j.jump.off {
			n.jump = j.jump
		}
	}
	n.hash = mix64(h ^ (uint64(uint32(val)) | uint64(n.off)<<32))
	return n
}

// at returns the record at offset off, which must be at most n's.
func (n *logNode) at(off int64) *logNode {
	for n.off != off {
		if n.jump != nil && n.jump.off >= off {
			n = n.jump
		} else {
			n = n.prev
		}
	}
	return n
}

func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// logState is a state of the log model. It is never modified.
type logState struct {
	tail     *logNode // the last record; nil when the log is empty
	ackedEnd int64    // one past the highest acknowledged offset
	n        int32    // operations linearized: what the search has reached
	unread   int32    // unread unknown produces appended
}

func (s *logState) length() int64 {
	if s.tail == nil {
		return 0
	}
	return s.tail.off + 1
}

func sameLog(a, b *logNode) bool {
	for a != b {
		if a == nil || b == nil || a.off != b.off || a.hash != b.hash || a.val != b.val {
			return false
		}
		a, b = a.prev, b.prev
	}
	return true
}

// logModel is the model of one partition's log, with the values' names
// and the search's progress per stretch.
type logModel struct {
	values   []string
	progress []atomic.Int32 // per stretch, the most operations linearized
	sizes    []int          // per stretch, its operations
}

func (m *logModel) porcupine() porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := make([][]porcupine.Operation, len(m.sizes))
			for _, op := range h {
				s := op.Input.(lpInput).stretch
				by[s] = append(by[s], op)
			}
			out := by[:0]
			for _, ops := range by {
				if len(ops) > 0 {
					out = append(out, ops)
				}
			}
			return out
		},
		Init: func() any { return &logState{} },
		Step: func(state, input, output any) (bool, any) {
			in := input.(lpInput)
			next, ok := step(state.(*logState), in, output.(lpOutput))
			if !ok {
				return false, nil
			}
			p := &m.progress[in.stretch]
			for old := p.Load(); next.n > old && !p.CompareAndSwap(old, next.n); old = p.Load() {
			}
			return true, next
		},
		Equal: func(a, b any) bool {
			x, y := a.(*logState), b.(*logState)
			return x.n == y.n && x.ackedEnd == y.ackedEnd && x.unread == y.unread && sameLog(x.tail, y.tail)
		},
		Hash: func(state any) uint64 {
			s := state.(*logState)
			var h uint64
			if s.tail != nil {
				h = s.tail.hash
			}
			return h ^ mix64(uint64(s.ackedEnd))
		},
		DescribeOperation: m.describeOperation,
		DescribeState:     m.describeState,
		DescribeOperationMetadata: func(info any) string {
			if info == nil {
				return ""
			}
			return info.(string)
		},
	}
}

// step is the sequential specification of one partition of the log.
func step(s *logState, in lpInput, out lpOutput) (*logState, bool) {
	n := s.length()
	switch in.kind {
	case lpSnapshot:
		if s.n != 0 {
			return nil, false
		}
		return &logState{tail: in.snap.tail, ackedEnd: in.snap.ackedEnd, n: 1}, true
	case lpProduce:
		if out.offset >= 0 && n != out.offset || out.offset < 0 && n < out.minLen {
			return nil, false
		}
		next := &logState{ackedEnd: s.ackedEnd, n: s.n + 1, unread: s.unread}
		if out.offset < 0 && out.rank >= 0 {
			if s.unread != out.rank {
				return nil, false
			}
			next.tail, next.unread = appendNode(s.tail, unreadValue), s.unread+1
			return next, true
		}
		next.tail = appendNode(s.tail, in.value)
		if out.acked {
			next.ackedEnd = max(next.ackedEnd, n+1)
		}
		return next, true
	case lpRead:
		k := int64(len(out.recs))
		if out.hw > n || k > 0 && in.pos+k > out.hw {
			return nil, false
		}
		for i, r := range out.recs {
			if r.off != in.pos+int64(i) {
				return nil, false
			}
		}
		if k > 0 {
			x := s.tail.at(in.pos + k - 1)
			for i := k - 1; i >= 0; i-- {
				if x.val != out.recs[i].val {
					return nil, false
				}
				x = x.prev
			}
		}
	case lpDrained:
		if s.ackedEnd > in.pos {
			return nil, false
		}
	case lpFinal:
		if n > out.hw {
			return nil, false
		}
		for _, r := range out.recs {
			if r.off >= n || s.tail.at(r.off).val != r.val {
				return nil, false
			}
		}
	}
	return &logState{tail: s.tail, ackedEnd: s.ackedEnd, n: s.n + 1, unread: s.unread}, true
}

func (m *logModel) value(v int32) string {
	switch {
	case v == unreadValue:
		return "(unread)"
	case v < 0 || int(v) >= len(m.values):
		return "(no record known)"
	}
	return fmt.Sprintf("%q", m.values[v])
}

func (m *logModel) describeOperation(input, output any) string {
	in, out := input.(lpInput), output.(lpOutput)
	switch in.kind {
	case lpSnapshot:
		return fmt.Sprintf("the log at the cut: %d records, acknowledged below %d", in.snap.length(), in.snap.ackedEnd)
	case lpProduce:
		switch {
		case out.acked:
			return fmt.Sprintf("produce %s -> ok at %d", m.value(in.value), out.offset)
		case out.offset >= 0:
			return fmt.Sprintf("produce %s -> unknown, read at %d", m.value(in.value), out.offset)
		default:
			return fmt.Sprintf("produce %s -> unknown, never read (at %d or above, or never)", m.value(in.value), out.minLen)
		}
	case lpRead:
		if len(out.recs) == 0 {
			return fmt.Sprintf("read at %d -> nothing, hw %d", in.pos, out.hw)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "read at %d -> ", in.pos)
		for i, r := range out.recs {
			if i == 3 && len(out.recs) > 4 {
				fmt.Fprintf(&b, "... %d more ... ", len(out.recs)-4)
				r = out.recs[len(out.recs)-1]
			} else if i > 3 {
				continue
			}
			fmt.Fprintf(&b, "%s@%d ", m.value(r.val), r.off)
		}
		fmt.Fprintf(&b, "hw %d", out.hw)
		return b.String()
	case lpDrained:
		return fmt.Sprintf("drained: read to %d", in.pos)
	case lpFinal:
		return fmt.Sprintf("final read: %d records where consumers read, high watermark %d", len(out.recs), out.hw)
	}
	return "?"
}

func (m *logModel) describeState(state any) string {
	s := state.(*logState)
	if s.tail == nil {
		return fmt.Sprintf("empty, acknowledged below %d", s.ackedEnd)
	}
	var last []string
	for x := s.tail; x != nil && len(last) < 3; x = x.prev {
		last = append(last, fmt.Sprintf("%s@%d", m.value(x.val), x.off))
	}
	return fmt.Sprintf("%d records, acknowledged below %d, last %s", s.length(), s.ackedEnd, strings.Join(last, " "))
}

// reached returns the operations placed in the longest orders found, over
// every stretch, and the stretches placed whole.
func (m *logModel) reached() (ops, complete int) {
	for i := range m.progress {
		n := int(m.progress[i].Load())
		ops += n
		if n == m.sizes[i] {
			complete++
		}
	}
	return ops, complete
}

// maxExplained bounds the illegal stretches described and visualized.
const maxExplained = 3

// CheckPorcupine checks with porcupine that the history is linearizable
// as a partitioned append-only log (the model at the top of this file)
// once the consumers have drained every partition, as CheckHistory
// assumes too. It gives up after timeout (none if 0): the verdict is then
// inconclusive, neither a pass nor a violation, and Linearized says how
// far the search got. When the history is not linearizable it checks the
// stretches again one by one, within timeout again, to say which are not.
func CheckPorcupine(ops []Op, timeout time.Duration) PorcupineResult {
	return checkPorcupine(ops, timeout, lpOptions{})
}

func checkPorcupine(ops []Op, timeout time.Duration, opt lpOptions) PorcupineResult {
	start := time.Now()
	h := buildLogHistory(ops, opt)
	res := PorcupineResult{model: h.model, Stretches: len(h.stretches)}
	all := h.operations()
	res.Operations = len(all)
	model := h.model.porcupine()
	verdict := porcupine.CheckOperationsTimeout(model, all, timeout)
	res.Linearized, res.Complete = h.model.reached()
	switch verdict {
	case porcupine.Ok:
		res.Verdict = PorcupineOK
	case porcupine.Unknown:
		res.Verdict = PorcupineInconclusive
		res.Violations = []string{fmt.Sprintf("porcupine: inconclusive: out of time after %s, having placed %d of %d operations (%d of %d stretches linearizable)",
			timeout, res.Linearized, res.Operations, res.Complete, res.Stretches)}
	default:
		res.Verdict = PorcupineViolation
		h.explain(&res, timeout)
	}
	res.Elapsed = time.Since(start)
	return res
}

// explain finds the stretches that are not linearizable, among those the
// first search did not place whole, describes them and keeps porcupine's
// account of them for Visualize.
func (h *lpHistory) explain(res *PorcupineResult, timeout time.Duration) {
	model := h.model.porcupine()
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var illegal []porcupine.Operation
	found := 0
	for i, s := range h.stretches {
		if int(h.model.progress[i].Load()) == len(s.ops) {
			continue
		}
		var left time.Duration
		if !deadline.IsZero() {
			if left = time.Until(deadline); left <= 0 {
				break
			}
		}
		verdict, info := porcupine.CheckOperationsVerbose(model, s.ops, left)
		if verdict != porcupine.Illegal {
			continue
		}
		found++
		res.Illegal = found
		res.Violations = append(res.Violations, h.describeIllegal(s, info))
		if found <= maxExplained {
			illegal = append(illegal, s.ops...)
		}
	}
	if found == 0 {
		res.Violations = append(res.Violations, "porcupine: the history is not linearizable, but no stretch was found not to be in the time left")
		return
	}
	if found > maxExplained {
		res.Violations = append(res.Violations, fmt.Sprintf("porcupine: %d stretches not linearizable, the first %d in the visualization", found, maxExplained))
	}
	_, info := porcupine.CheckOperationsVerbose(model, illegal, 0)
	res.info = &info
}

// describeIllegal says which stretch is not linearizable, how far the
// longest order found got, and the earliest operation it left out.
func (h *lpHistory) describeIllegal(s lpStretch, info porcupine.LinearizationInfo) string {
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, l := range part {
			if len(l) > len(longest) {
				longest = l
			}
		}
	}
	placed := make([]bool, len(s.ops))
	for _, id := range longest {
		placed[id] = true
	}
	next := -1
	for i, op := range s.ops {
		if !placed[i] && (next < 0 || op.Call < s.ops[next].Call) {
			next = i
		}
	}
	msg := fmt.Sprintf("porcupine: %s/%d from %s to %s (%d operations) is not linearizable as a log: the longest order found places %d",
		s.topic, s.partition, s.from.UTC().Format("15:04:05.000000"), s.to.UTC().Format("15:04:05.000000"), len(s.ops), len(longest))
	if next >= 0 {
		op := s.ops[next]
		msg += "; the earliest operation left out: " + h.model.describeOperation(op.Input, op.Output)
		if meta, ok := op.Metadata.(string); ok && meta != "" {
			msg += " (" + meta + ")"
		}
	}
	return msg
}

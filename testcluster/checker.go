package testcluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"gostream/record"
)

// maxReported bounds the violations of one kind listed one by one.
const maxReported = 20

// CheckStats are figures of a checked history.
type CheckStats struct {
	Ops      int // operations recorded, the final read's left out
	Produces int
	Acked    int // acknowledged produces
	Reads    int // records read
	// Final counts the records of the final read (OpFinal), Kept the
	// records read before that it found at their offsets.
	Final, Kept int
}

type pOff struct {
	p   int32
	off int64
}

// CheckHistory checks the invariants of docs/design.md section 10 that a
// history shows, after the consumers have drained every partition:
//
//  1. every acknowledged produce is read back at its acknowledged offset;
//  2. one offset never holds two values in any read, and no value is at
//     two offsets (nor read that was never produced);
//  3. no record is read at or above the high watermark given with it, and
//     the high watermark a consumer sees of a partition never decreases;
//  4. for one producer and partition, a produce acknowledged before
//     another began has a lower offset;
//
// and, of 2 and 3 together, that a record read stays: where the history
// has the final read (OpFinal), every record read before is at its
// offset at the end, whatever its produce's result (read-lost).
func CheckHistory(ops []Op) ([]string, CheckStats) {
	var st CheckStats
	var v []string
	counts := map[string]int{}
	add := func(kind, format string, args ...any) {
		counts[kind]++
		if counts[kind] <= maxReported {
			v = append(v, kind+": "+fmt.Sprintf(format, args...))
		}
	}

	produced := map[string]Op{} // by value
	var acked []Op
	read := map[pOff]string{}   // the value read at an offset
	readAt := map[string]pOff{} // where a value was read
	lastHW := map[[2]int64]Op{} // consumer, partition -> last read with a HW
	for _, op := range ops {
		if op.Kind == OpFinal {
			if op.Offset >= 0 {
				st.Final++
			}
			continue
		}
		st.Ops++
		switch op.Kind {
		case OpProduce:
			st.Produces++
			if prev, dup := produced[op.Value]; dup {
				add("harness", "value %q produced twice: %+v and %+v", op.Value, prev, op)
			}
			produced[op.Value] = op
			if op.Result == ResultOK {
				st.Acked++
				acked = append(acked, op)
				if op.Err != "" {
					add("misrouted", "produce %q to partition %d: %s", op.Value, op.Partition, op.Err)
				}
			}
		case OpRead:
			if op.Result != ResultOK {
				continue
			}
			key := [2]int64{int64(op.Worker), int64(op.Partition)}
			if prev, ok := lastHW[key]; ok && op.HW < prev.HW {
				add("hw-decreased", "consumer %d partition %d: high watermark %d at %s after %d at %s",
					op.Worker, op.Partition, op.HW, op.End.Format(time.RFC3339Nano), prev.HW, prev.End.Format(time.RFC3339Nano))
			}
			if op.HW >= 0 {
				lastHW[key] = op
			}
			if op.Offset < 0 {
				continue
			}
			st.Reads++
			if op.Offset >= op.HW {
				add("read-above-hw", "consumer %d read %q at %d/%d with high watermark %d", op.Worker, op.Value, op.Partition, op.Offset, op.HW)
			}
			at := pOff{op.Partition, op.Offset}
			if prev, ok := read[at]; ok && prev != op.Value {
				add("two-values", "partition %d offset %d read as %q and as %q (consumer %d)", op.Partition, op.Offset, prev, op.Value, op.Worker)
			} else if !ok {
				read[at] = op.Value
			}
			if prev, ok := readAt[op.Value]; ok && prev != at {
				add("duplicated", "value %q read at %d/%d and at %d/%d", op.Value, prev.p, prev.off, at.p, at.off)
			} else if !ok {
				readAt[op.Value] = at
			}
		}
	}
	// Reads of values nobody produced, or produced to another partition.
	for val, at := range readAt {
		pr, ok := produced[val]
		switch {
		case !ok:
			add("phantom", "value %q read at %d/%d was never produced", val, at.p, at.off)
		case pr.Partition != at.p:
			add("wrong-partition", "value %q produced to partition %d read at %d/%d", val, pr.Partition, at.p, at.off)
		}
	}
	// 1: every acknowledged write is read back at its offset.
	for _, op := range acked {
		got, ok := read[pOff{op.Partition, op.Offset}]
		switch {
		case !ok:
			where := "nothing was read there"
			if at, seen := readAt[op.Value]; seen {
				where = fmt.Sprintf("it was read at %d/%d", at.p, at.off)
			}
			add("lost", "acknowledged %q at %d/%d (acked %s) not read back: %s", op.Value, op.Partition, op.Offset, op.End.Format(time.RFC3339Nano), where)
		case got != op.Value:
			add("lost", "acknowledged %q at %d/%d (acked %s) but %q was read there", op.Value, op.Partition, op.Offset, op.End.Format(time.RFC3339Nano), got)
		}
	}
	// 2 and 3: every record read is there at the end.
	st.Kept = checkKept(add, ops, ops, produced)
	// 4: real-time order per producer and partition.
	type pp struct {
		w int
		p int32
	}
	byPP := map[pp][]Op{}
	for _, op := range acked {
		k := pp{op.Worker, op.Partition}
		byPP[k] = append(byPP[k], op)
	}
	for k, list := range byPP {
		sort.Slice(list, func(i, j int) bool { return list[i].Start.Before(list[j].Start) })
		byEnd := append([]Op(nil), list...)
		sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].End.Before(byEnd[j].End) })
		// maxOff is the highest offset of the sends acknowledged before
		// the current one began.
		var maxOff int64 = -1
		var maxVal string
		j := 0
		for _, op := range list {
			for ; j < len(byEnd) && byEnd[j].End.Before(op.Start); j++ {
				if byEnd[j].Offset > maxOff {
					maxOff, maxVal = byEnd[j].Offset, byEnd[j].Value
				}
			}
			if maxOff >= op.Offset {
				add("order", "producer %d partition %d: %q got offset %d, not above %d of %q acknowledged before it began",
					k.w, k.p, op.Value, op.Offset, maxOff, maxVal)
			}
		}
	}
	for kind, n := range counts {
		if n > maxReported {
			v = append(v, fmt.Sprintf("%s: %d more not listed", kind, n-maxReported))
		}
	}
	sort.Strings(v)
	return v, st
}

// finalLog is one partition as the final read found it: its log start,
// its high watermark and the records between.
type finalLog struct {
	start, hw int64
	values    map[int64]string
}

// finalLogs collects the final read of a history, by partition; a
// partition it did not read whole (or a history without one) is absent.
func finalLogs(ops []Op) map[int32]*finalLog {
	out := map[int32]*finalLog{}
	for _, op := range ops {
		if op.Kind == OpFinal && op.Offset < 0 {
			out[op.Partition] = &finalLog{start: op.LogStart, hw: op.HW, values: map[int64]string{}}
		}
	}
	for _, op := range ops {
		if f := out[op.Partition]; op.Kind == OpFinal && op.Offset >= 0 && f != nil {
			f.values[op.Offset] = op.Value
		}
	}
	return out
}

// checkKept checks that every record reads shows (an OpRead, or a group
// member's OpGroupRead) is at its offset in the final read of final: a
// consumer is told only of records below the high watermark, which every
// active replica holds and no failover or recovery may take back. It
// holds for every record read, acknowledged or not: a record whose
// produce failed or timed out that was read must stay, and one that was
// never read may go. It reports each record once, as read-lost, and
// returns how many were found in place. Records below the final log
// start (deleted by retention) and partitions the final read did not read
// whole are not judged.
func checkKept(add func(kind, format string, args ...any), reads, final []Op, produced map[string]Op) int {
	logs := finalLogs(final)
	if len(logs) == 0 {
		return 0
	}
	type readRec struct {
		at  pOff
		val string
	}
	seen := map[readRec]bool{}
	kept := 0
	for _, op := range reads {
		read := op.Kind == OpRead && op.Result == ResultOK || op.Kind == OpGroupRead
		if !read || op.Offset < 0 {
			continue
		}
		k := readRec{pOff{op.Partition, op.Offset}, op.Value}
		f := logs[op.Partition]
		if seen[k] || f == nil || op.Offset < f.start {
			continue
		}
		seen[k] = true
		now, ok := f.values[op.Offset]
		if ok && now == op.Value {
			kept++
			continue
		}
		who := fmt.Sprintf("consumer %d read %q at %s (high watermark %d)", op.Worker, op.Value, op.End.Format(time.RFC3339Nano), op.HW)
		if op.Kind == OpGroupRead {
			who = fmt.Sprintf("group member %d printed %q at %s", op.Worker, op.Value, op.End.Format(time.RFC3339Nano))
		}
		var there string
		switch {
		case ok:
			there = fmt.Sprintf("the log now holds %q there (final read, high watermark %d)", now, f.hw)
		case op.Offset >= f.hw:
			there = fmt.Sprintf("the log now ends below it (final read: log start %d, high watermark %d)", f.start, f.hw)
		default:
			there = fmt.Sprintf("the final read found no record there (log start %d, high watermark %d)", f.start, f.hw)
		}
		add("read-lost", "partition %d offset %d: %s, its produce %s; %s", op.Partition, op.Offset, who, produceOutcome(produced, op.Value), there)
	}
	return kept
}

// produceOutcome says how the produce of value ended, for a message.
func produceOutcome(produced map[string]Op, value string) string {
	pr, ok := produced[value]
	switch {
	case !ok:
		return "unknown to the history"
	case pr.Result == ResultOK:
		return fmt.Sprintf("acknowledged at %d/%d", pr.Partition, pr.Offset)
	}
	err := pr.Err
	if i := strings.IndexByte(err, '\n'); i >= 0 {
		err = err[:i]
	}
	if len(err) > 160 {
		err = err[:160] + "..."
	}
	if err == "" {
		return pr.Result
	}
	return fmt.Sprintf("%s (%s)", pr.Result, err)
}

// CheckGroupReads checks that every record a group member printed (the
// group's history, OpGroupRead) is at its offset in the final read of
// ops, the workload's history, as CheckHistory checks the consumers'
// reads (read-lost).
func CheckGroupReads(group, ops []Op) []string {
	var v []string
	n := 0
	add := func(kind, format string, args ...any) {
		if n++; n <= maxReported {
			v = append(v, kind+": "+fmt.Sprintf(format, args...))
		}
	}
	produced := map[string]Op{}
	for _, op := range ops {
		if op.Kind == OpProduce {
			produced[op.Value] = op
		}
	}
	checkKept(add, group, ops, produced)
	if n > maxReported {
		v = append(v, fmt.Sprintf("read-lost: %d more printed by group members not listed", n-maxReported))
	}
	return v
}

// segmentBytes is the concatenation of a replica's segment files, in
// name order (quarantined files are in a subdirectory and not included),
// the newest cut at the end of its last whole batch: a running node's
// newest segment has space preallocated after its data, and a follower may
// be half way through a write.
func segmentBytes(n *Node, topic string, p int32) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(n.ReplicaDir(topic, p), "*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var all []byte
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if i == len(files)-1 {
			b = b[:wholeBatches(b)]
		}
		all = append(all, b...)
	}
	return all, nil
}

// wholeBatches is the length of the run of whole, valid batches at the
// start of b.
func wholeBatches(b []byte) int {
	n := 0
	for n < len(b) {
		batch, _, err := record.Frame(b[n:], record.MaxBatchSize)
		if err != nil || batch.Validate() != nil {
			break
		}
		n += len(batch)
	}
	return n
}

// CheckReplicas checks invariant 6 after the faults have healed and the
// workload stopped: gostream-ctl verify exits 0, and every active replica's
// segment bytes equal its leader's. Followers may still be fetching the
// last batches, so it retries until timeout before reporting.
func CheckReplicas(c *Cluster, topic string, timeout time.Duration) []string {
	deadline := time.Now().Add(timeout)
	for {
		v := checkReplicasOnce(c, topic)
		if len(v) == 0 || time.Now().After(deadline) {
			return v
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func checkReplicasOnce(c *Cluster, topic string) []string {
	var v []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", "verify", "--topic", topic)
	if err != nil {
		return []string{"replicas: gostream-ctl verify: " + err.Error()}
	}
	if res.Exit != 0 {
		v = append(v, fmt.Sprintf("replicas: gostream-ctl verify exit %d: %s%s", res.Exit, res.Stdout, res.Stderr))
	}
	tm, err := describe(c, topic)
	if err != nil {
		return append(v, "replicas: describe: "+err.Error())
	}
	for _, p := range tm.Partitions {
		lead, err := segmentBytes(c.Node(p.Leader), topic, p.Partition)
		if err != nil {
			v = append(v, fmt.Sprintf("replicas: partition %d leader %d: %v", p.Partition, p.Leader, err))
			continue
		}
		if len(p.Active) != len(p.Replicas) {
			v = append(v, fmt.Sprintf("replicas: partition %d: active %v of replicas %v after healing", p.Partition, p.Active, p.Replicas))
		}
		for _, r := range p.Active {
			if r == p.Leader {
				continue
			}
			b, err := segmentBytes(c.Node(r), topic, p.Partition)
			if err != nil {
				v = append(v, fmt.Sprintf("replicas: partition %d broker %d: %v", p.Partition, r, err))
				continue
			}
			if !bytes.Equal(lead, b) {
				v = append(v, fmt.Sprintf("replicas: partition %d: broker %d (%d bytes) differs from leader %d (%d bytes) at byte %d",
					p.Partition, r, len(b), p.Leader, len(lead), firstDiff(lead, b)))
			}
		}
	}
	return v
}

func firstDiff(a, b []byte) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

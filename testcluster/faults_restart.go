package testcluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"gostream/client"
)

// client returns a client of the brokers that run and are not paused.
func (r *run) client(ctx context.Context) (*client.Client, error) {
	return client.New(ctx, r.c.Secured(client.Config{Bootstrap: strings.Split(r.liveBootstrap(), ","), RequestTimeout: 3 * time.Second, DialTimeout: time.Second}))
}

// ackedBefore returns, per partition of the workload's topic, the highest
// offset of a produce acknowledged before t.
func (r *run) ackedBefore(t time.Time) map[int32]int64 {
	acked := map[int32]int64{}
	for _, op := range r.hist.Ops() {
		if op.Kind != OpProduce || op.Result != ResultOK || !op.End.Before(t) || op.Topic != chaosTopic {
			continue
		}
		if cur, ok := acked[op.Partition]; !ok || op.Offset > cur {
			acked[op.Partition] = op.Offset
		}
	}
	return acked
}

// checkReadable checks that, within timeout, a consumer can read offset
// want[p] of every partition p of the workload's topic: acknowledged data
// must not stay unreadable longer than the operator's steps take. It
// reports a violation naming what and the partitions still unreadable.
//
// With advise, it also does what an operator watching the cluster does
// meanwhile: every 2 seconds it follows the advice of gostream-ctl
// cluster status (a follower found diverged once writes resume is
// recovered, say); the bound then covers those steps too.
func (r *run) checkReadable(what string, want map[int32]int64, timeout time.Duration, advise bool) {
	if len(want) == 0 {
		return
	}
	start := time.Now()
	deadline := start.Add(timeout)
	left := map[int32]int64{}
	for p, off := range want {
		left[p] = off
	}
	lastErr := map[int32]string{}
	var advised time.Time
	for len(left) > 0 && time.Now().Before(deadline) {
		if advise && time.Since(advised) > 2*time.Second && time.Since(start) > 2*time.Second {
			advised = time.Now()
			for _, fix := range r.statusAdvice() {
				r.follow(fix)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cl, err := r.client(ctx)
		if err == nil {
			for p, off := range left {
				if err := readAt(ctx, cl, p, off); err != nil {
					lastErr[p] = err.Error()
					continue
				}
				delete(left, p)
			}
			cl.Close()
		}
		cancel()
		if len(left) > 0 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if len(left) == 0 {
		r.say("acknowledged data readable %s after %s: offsets %v", time.Since(start).Round(time.Millisecond), what, want)
		return
	}
	var ps []string
	for p, off := range left {
		ps = append(ps, fmt.Sprintf("partition %d offset %d (%s)", p, off, lastErr[p]))
	}
	sort.Strings(ps)
	r.violation("unreadable: acknowledged records were not readable within %s after %s: %s", timeout, what, strings.Join(ps, "; "))
}

// settleAdvice goes on doing what an operator does once the workload's
// topic is readable again: it follows cluster status's advice until there
// is none, for every partition, internal topics included (a partition of
// __consumer_offsets left for an operator's step stalls the groups it
// coordinates, and checkReadable only looks while the workload's topic is
// unreadable). Advice still given after timeout is reported, not counted
// as a violation: the group checks say what it held up.
func (r *run) settleAdvice(what string, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for {
		fixes := r.statusAdvice()
		if len(fixes) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.say("cluster status still advises %q %s after %s", fixes, what, timeout)
			return
		}
		for _, fix := range fixes {
			if !r.follow(fix) {
				return
			}
		}
		time.Sleep(2 * time.Second)
	}
}

// readAt reads the record at offset off of a partition of the workload's
// topic.
func readAt(ctx context.Context, cl *client.Client, p int32, off int64) error {
	if err := cl.RefreshMetadata(ctx, chaosTopic); err != nil {
		return err
	}
	c, err := client.NewConsumer(cl, chaosTopic, p, client.ConsumerConfig{MaxBytes: 64 << 10})
	if err != nil {
		return err
	}
	c.SeekTo(off)
	recs, err := c.Poll(ctx, 500*time.Millisecond)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		if rec.Offset >= off {
			return nil
		}
	}
	return fmt.Errorf("no record at or past %d yet (high watermark %d)", off, c.HighWatermark())
}

// killAll kills every node at once with kill -9. On the crashfs build each
// loses what it had not fsync'd: a power loss of the whole cluster. It
// waits for the sends that were in flight to end and returns when the
// nodes died.
func (r *run) killAll() (time.Time, error) {
	if len(r.lastActive) > 0 {
		r.leaderFaults++ // every partition's leader goes down with it
	}
	for _, n := range r.c.Nodes {
		n.signal(syscall.SIGCONT)
		n.signal(syscall.SIGKILL)
	}
	for _, n := range r.c.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n.Wait(ctx)
		cancel()
		if n.Running() {
			return time.Time{}, fmt.Errorf("node %d did not die of kill -9 within 30s", n.ID)
		}
	}
	killed := time.Now()
	if !r.w.Settle(killed, 30*time.Second) {
		return killed, fmt.Errorf("sends begun before the power loss did not end within 30s")
	}
	r.checkDurable(r.ackedBefore(time.Now()))
	return killed, nil
}

// powerLoss cuts the power of the whole cluster: every node is killed at
// once and, on the crashfs build, loses every byte it had not fsync'd.
// Then all come back, the operator runs recover for each, and every
// record acknowledged before the power went must be readable within 30
// seconds; the checkers later see that none was lost. This is the fault
// that sees storage which says it synced when it did not.
func (r *run) powerLoss() error {
	r.noteActive()
	killed, err := r.killAll()
	if err != nil {
		return err
	}
	r.say("power loss: every node killed at once, losing what it had not fsync'd")
	acked := r.ackedBefore(killed)
	r.sleep(200, 1500)
	for _, n := range r.c.Nodes {
		if err := r.c.StartNode(n.ID); err != nil {
			r.violation("power-loss: node %d did not start and serve after the power loss: %v", n.ID, err)
			return nil
		}
	}
	r.say("every node restarted after the power loss")
	for _, n := range r.c.Nodes {
		if err := r.recover(n.ID); err != nil {
			return err
		}
	}
	r.checkReadable("the power came back, recover ran and cluster status's advice was followed", acked, 30*time.Second, true)
	r.settleAdvice("the power came back", 30*time.Second)
	r.rebalance()
	return nil
}

// restartOneDown is a full restart with one node left down: every node is
// killed at once (a power loss), all but one broker other than the
// controller's come back. With no operator step, every record acknowledged
// more than the high-watermark checkpoint's interval before the kill must
// be readable within 15 seconds on the partitions whose leader is back
// (the restarted leaders serve below their checkpointed high watermark,
// not waiting for the missing follower). Then the operator fails the
// missing broker over, and everything acknowledged must be readable within
// 30 seconds; the broker comes back last and is recovered.
func (r *run) restartOneDown() error {
	r.noteActive()
	killed, err := r.killAll()
	if err != nil {
		return err
	}
	down := int32(2 + r.rng.Intn(2))
	r.say("every node killed at once; node %d stays down", down)
	acked := r.ackedBefore(killed)
	// The checkpoint is written every second: a record acknowledged in
	// the last moment before the kill may be above it.
	checkpointed := r.ackedBefore(killed.Add(-3 * time.Second))
	for _, n := range r.c.Nodes {
		if n.ID == down {
			continue
		}
		if err := r.c.StartNode(n.ID); err != nil {
			r.violation("restart-one-down: node %d did not start and serve: %v", n.ID, err)
			return nil
		}
	}
	r.say("nodes other than %d restarted", down)
	tm, err := describe(r.c, chaosTopic)
	if err != nil {
		return err
	}
	want := map[int32]int64{}
	for _, p := range tm.Partitions {
		if off, ok := checkpointed[p.Partition]; ok && p.Leader != down {
			want[p.Partition] = off
		}
	}
	r.checkReadable(fmt.Sprintf("a full restart with node %d left down, before any operator step", down), want, 15*time.Second, false)
	if err := r.failover(down); err != nil {
		return err
	}
	r.checkReadable(fmt.Sprintf("failover of node %d, left down after a full restart", down), acked, 30*time.Second, true)
	r.sleep(1000, 3000)
	for _, n := range r.c.Nodes {
		if n.ID != down {
			if err := r.recover(n.ID); err != nil {
				return err
			}
		}
	}
	return r.restart(down)
}

// noteActive remembers each partition's active set, for faults that take
// every node down.
func (r *run) noteActive() {
	tm, err := describe(r.c, chaosTopic)
	if err != nil {
		r.say("describe %s: %v", chaosTopic, err)
		return
	}
	r.lastActive = map[int32][]int32{}
	for _, p := range tm.Partitions {
		r.lastActive[p.Partition] = p.Active
	}
}

// checkDurable checks, with every node down after a power loss, that each
// replica in a partition's active set holds on its disk every record
// acknowledged on that partition (acked: the highest such offset): an
// acknowledgement promises that every active replica had fsync'd it.
func (r *run) checkDurable(acked map[int32]int64) {
	bad := 0
	for p, active := range r.lastActive {
		off, ok := acked[p]
		if !ok {
			continue
		}
		for _, id := range active {
			end, err := ReplicaLogEnd(r.c.Node(id).ReplicaDir(chaosTopic, p))
			if err != nil {
				r.violation("not-durable: broker %d's replica of partition %d cannot be read after the power loss: %v", id, p, err)
				continue
			}
			if end <= off {
				if bad++; bad <= maxReported {
					r.violation("not-durable: after the power loss broker %d's replica of partition %d (in the active set) ends at offset %d on disk, but offset %d was acknowledged",
						id, p, end, off)
				}
			}
		}
	}
	if bad == 0 {
		r.say("every active replica held every acknowledged record on disk after the power loss: %v", acked)
	}
}

// ReplicaLogEnd is the offset after the last whole, valid batch that the
// segment files in dir hold, read from the disk itself.
func ReplicaLogEnd(dir string) (int64, error) {
	segs, err := segmentFiles(dir)
	if err != nil {
		return 0, err
	}
	var end int64
	for _, seg := range segs {
		s, err := scanSegment(seg.path)
		if err != nil {
			return 0, err
		}
		end = max(end, seg.base)
		if len(s.batches) > 0 {
			end = max(end, s.batches[len(s.batches)-1].next)
		}
	}
	return end, nil
}

// unreplicatedTail restarts a leader over records no follower holds, lets
// the consumers read from it, and then fails it over to a follower
// without them. It needs a partition whose replicas leave out the
// controller's node: the scenario's topic has replication factor 2, so
// one of its three partitions lives on brokers 2 and 3 only.
//
// That partition's leader is cut off from its follower, both ways; both
// still reach the controller, and clients reach both. The writes it takes
// fail with ReplicationFailed at the producer's deadline, an unknown
// outcome, and it keeps each batch: its log grows a tail that no follower
// holds and nobody was told of. Once a high-watermark checkpoint has
// passed (they run every second), it is killed with kill -9 and started
// again, still cut off: it hears from the controller and leads again,
// from its checkpointed high watermark, and the consumers poll it. Then
// it dies again, the operator does what cluster status says for a leader
// that does not answer (failover --broker N: its follower, which lacks
// the tail, takes over), the network heals, and it comes back and is
// recovered, which cuts its tail off.
//
// A correct leader restarts from a high watermark no higher than the
// records its follower holds, so nobody reads the tail. One that
// checkpointed more (its log end, say) serves the tail as committed, and
// the records read vanish at the failover: the checkers find them missing
// from the final read (read-lost).
func (r *run) unreplicatedTail() error {
	tm, err := describe(r.c, chaosTopic)
	if err != nil {
		return err
	}
	var part *client.PartitionMetadata
	for i, p := range tm.Partitions {
		if len(p.Replicas) == 2 && !slices.Contains(p.Replicas, 1) {
			part = &tm.Partitions[i]
		}
	}
	if part == nil {
		return fmt.Errorf("unreplicated-tail: no partition of %s with two replicas off the controller's node: %+v", chaosTopic, tm.Partitions)
	}
	p, leader := part.Partition, part.Leader
	follower := part.Replicas[0]
	if follower == leader {
		follower = part.Replicas[1]
	}
	if !slices.Contains(part.Active, follower) || !slices.Contains(part.Active, leader) {
		return fmt.Errorf("unreplicated-tail: partition %d's active set %v lacks a replica of %v after the last fault was recovered", p, part.Active, part.Replicas)
	}
	r.leaderFaults++
	mark := r.hist.Len()
	if err := r.c.Partition([]int32{leader}, []int32{follower}); err != nil {
		return err
	}
	r.say("cut node %d, leader of partition %d, off its follower %d, both ways; both still reach the controller", leader, p, follower)
	// A send to the partition that failed after the cut: the leader kept
	// its batch.
	sent, err := r.waitOp(mark, 20*time.Second, func(op Op) bool {
		return op.Kind == OpProduce && op.Partition == p && op.Result == ResultUnknown
	})
	if err != nil {
		return fmt.Errorf("unreplicated-tail: no send to partition %d failed after the cut: %w", p, err)
	}
	r.say("a send to partition %d failed after the cut, its batch kept by the leader: %s", p, sent.Err)
	r.sleep(1500, 3000) // a checkpoint of the high watermarks passes
	if err := r.c.Node(leader).Kill(); err != nil {
		return err
	}
	r.say("killed node %d, its log holding a tail that its follower does not", leader)
	r.sleep(200, 1000)
	if err := r.c.StartNode(leader); err != nil {
		return err
	}
	mark = r.hist.Len()
	r.say("node %d restarted, still cut off from node %d", leader, follower)
	// Every consumer polls the restarted leader, which serves what is
	// below its high watermark.
	for _, c := range []int{1, 2} {
		if _, err := r.waitOp(mark, 30*time.Second, func(op Op) bool {
			return op.Kind == OpRead && op.Worker == c && op.Partition == p && op.Result == ResultOK
		}); err != nil {
			r.note(fmt.Sprintf("unreplicated-tail: consumer %d did not poll partition %d on the restarted node %d within 30s", c, p, leader))
		}
	}
	r.sleep(500, 2000)
	read := int64(-1)
	for _, op := range r.hist.From(mark) {
		if op.Kind == OpRead && op.Partition == p && op.Result == ResultOK {
			read = max(read, op.Offset)
		}
	}
	if err := r.c.Node(leader).Kill(); err != nil {
		return err
	}
	r.say("killed node %d again; since its restart the consumers read partition %d up to offset %d", leader, p, read)
	if err := r.followAdvice(fmt.Sprintf("gostream-ctl failover --broker %d", leader), 30*time.Second); err != nil {
		return err
	}
	if err := r.c.HealNetwork(); err != nil {
		return err
	}
	r.say("network healed")
	r.sleep(500, 2000)
	return r.restart(leader)
}

// waitOp waits until an operation recorded from the mark-th on matches,
// and returns it.
func (r *run) waitOp(mark int, timeout time.Duration, match func(Op) bool) (Op, error) {
	deadline := time.Now().Add(timeout)
	for {
		for _, op := range r.hist.From(mark) {
			if match(op) {
				return op, nil
			}
		}
		if time.Now().After(deadline) {
			return Op{}, fmt.Errorf("none within %s", timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// followAdvice waits until gostream-ctl cluster status gives the command
// want as the fix of a warning, and runs it, as an operator following
// the runbook does. Advice that does not come within timeout is a
// violation, and the command is run anyway.
func (r *run) followAdvice(want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if slices.Contains(r.statusAdvice(), want) {
			break
		}
		if time.Now().After(deadline) {
			r.violation("advice: gostream-ctl cluster status did not give %q within %s", want, timeout)
			break
		}
		time.Sleep(time.Second)
	}
	r.say("following the advice: %s", want)
	args := strings.Fields(want)
	return r.ctl(60*time.Second, args[1:]...)
}

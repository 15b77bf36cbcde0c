package testcluster

import (
	"fmt"
	"strings"
	"time"
)

// The scenarios that cut the network, slow it down, or damage a disk. The
// process faults (kill, pause, restart) are in scenario.go.

// others lists the nodes but id.
func (r *run) others(id int32) []int32 {
	var out []int32
	for _, n := range r.c.Nodes {
		if n.ID != id {
			out = append(out, n.ID)
		}
	}
	return out
}

// cutOff separates node id from every other node: both ways, or (one time
// in three) one way only, picked at random. It returns what it did.
func (r *run) cutOff(id int32) (string, error) {
	others := r.others(id)
	switch r.rng.Intn(6) {
	case 0:
		for _, o := range others {
			if err := r.c.Cut(id, o); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("one way: nothing from node %d reaches %v", id, others), nil
	case 1:
		for _, o := range others {
			if err := r.c.Cut(o, id); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("one way: nothing from %v reaches node %d", others, id), nil
	default:
		return fmt.Sprintf("both ways from %v", others), r.c.Partition([]int32{id}, others)
	}
}

// leaderIsolated cuts a leader off from its followers (and the
// controller), while clients still reach it: the old leader goes on taking
// writes it can no longer replicate. The operator fails it over; the new
// epoch must fence whatever it still tries. Then the network heals, the
// old leader learns it is a follower, and recover brings it back.
func (r *run) leaderIsolated() error {
	id, what, err := r.victim(true)
	if err != nil {
		return err
	}
	how, err := r.cutOff(id)
	if err != nil {
		return err
	}
	r.say("cut node %d (%s) off the cluster, %s", id, what, how)
	r.sleep(500, 2000)
	if err := r.failover(id); err != nil {
		return err
	}
	r.sleep(2000, 5000) // the zombie leader keeps trying
	if err := r.c.HealNetwork(); err != nil {
		return err
	}
	r.say("network healed")
	return r.recoverAndRebalance(id)
}

// controllerIsolated cuts the controller off from the other brokers.
// Nothing can be failed over meanwhile (the controller cannot reach
// anyone), and writes stop where a replica is out of reach: safety, not
// availability. After healing, writes must resume with nothing lost.
func (r *run) controllerIsolated() error {
	r.countIfLeader(1)
	how, err := r.cutOff(1)
	if err != nil {
		return err
	}
	r.say("cut node 1 (the controller) off the cluster, %s", how)
	r.sleep(3000, 8000)
	if err := r.c.HealNetwork(); err != nil {
		return err
	}
	r.say("network healed")
	// Replicas the leaders gave up on while the links were down are back
	// by catch-up or, if the operator is asked, by recover.
	return r.recover(1)
}

// durableBounds returns, per partition, the offset below which every
// record is known to be on every active replica: past the highest
// acknowledged offset and up to the highest high watermark any consumer
// was told. A crash may not lose those records; anything above may not
// have been fsync'd on a given replica.
func (r *run) durableBounds() map[int32]int64 {
	keep := map[int32]int64{}
	for _, op := range r.hist.Ops() {
		var b int64
		switch {
		case op.Kind == OpProduce && op.Result == ResultOK:
			b = op.Offset + 1
		case op.Kind == OpRead && op.Result == ResultOK:
			b = op.HW
		default:
			continue
		}
		if b > keep[op.Partition] {
			keep[op.Partition] = b
		}
	}
	return keep
}

// lostUnsynced is a machine crash: a node dies (kill -9) and its disk
// loses what it had not fsync'd. Its newest segments are cut back to a
// random length no shorter than what is known durable, then junk or
// zeroes are added after the cut, or (one time in three) its last batch is
// torn instead. The operator fails it over; it must start over the
// damaged tail and serve (invariant 8), and recover brings it back.
func (r *run) lostUnsynced() error {
	ids := []int32{2, 3}
	id := ids[r.rng.Intn(len(ids))]
	r.countIfLeader(id)
	n := r.c.Node(id)
	if err := n.Kill(); err != nil {
		return err
	}
	killed := time.Now()
	r.say("killed node %d (a crash that loses unsynced writes)", id)
	// Sends in flight when it died end within their timeout; only then is
	// every acknowledgement it took part in known.
	if !r.w.Settle(killed, 30*time.Second) {
		return fmt.Errorf("sends begun before node %d died did not end within 30s", id)
	}
	keep := r.durableBounds()
	if err := r.failover(id); err != nil {
		return err
	}
	fault, name := LoseUnsynced, "lost unsynced bytes"
	if r.rng.Intn(3) == 0 {
		fault, name = TornTail, "torn tail"
	}
	damage, err := DamageNode(n, chaosTopic, keep, fault, r.rng)
	if err != nil {
		return err
	}
	var lines []string
	for _, d := range damage {
		lines = append(lines, d.String())
	}
	r.say("damaged node %d's disk (%s), keeping offsets below %v:\n  %s", id, name, keep, strings.Join(lines, "\n  "))
	r.sleep(500, 2000)
	if err := r.c.StartNode(id); err != nil {
		r.violation("restart-over-damage: node %d did not start and serve after %s: %v", id, name, err)
		return nil
	}
	r.say("node %d restarted over the damaged tail", id)
	return r.recoverAndRebalance(id)
}

// slowNetwork slows some links down through the proxy: delay with jitter,
// segments lost and retransmitted, now and then a connection reset,
// between brokers and between the clients and the brokers. Sometimes a
// broker is killed while it lasts.
func (r *run) slowNetwork() error {
	p := r.c.Proxy()
	if p == nil {
		return fmt.Errorf("slow-network needs the proxy (a network namespace)")
	}
	hosts := []string{clientSource}
	for _, n := range r.c.Nodes {
		hosts = append(hosts, NodeHost(n.ID))
	}
	var set []string
	for i, links := 0, 2+r.rng.Intn(5); i < links; i++ {
		from, to := hosts[r.rng.Intn(len(hosts))], hosts[1+r.rng.Intn(len(hosts)-1)]
		if from == to {
			continue
		}
		f := LinkFault{
			Delay:  time.Duration(1+r.rng.Intn(40)) * time.Millisecond,
			Jitter: time.Duration(r.rng.Intn(20)) * time.Millisecond,
			Loss:   float64(r.rng.Intn(6)) / 100,
			Reset:  float64(r.rng.Intn(3)) / 1000,
		}
		// Both directions of the link: requests one way, answers back.
		p.SetFault(from, to, f)
		p.SetFault(to, from, f)
		set = append(set, fmt.Sprintf("%s<->%s %+v", from, to, f))
	}
	r.say("slowed links: %s", strings.Join(set, "; "))
	if r.rng.Intn(3) == 0 {
		r.sleep(1000, 3000)
		if err := r.followerKill(); err != nil {
			return err
		}
	} else {
		r.sleep(3000, 8000)
	}
	p.ClearFaults()
	r.say("links back to normal")
	return nil
}

// waitProgress waits until every partition has taken an acknowledged
// write that began after since: after healing, the cluster must serve
// again, not only lose nothing.
func (r *run) waitProgress(partitions int, since time.Time, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	done := map[int32]bool{}
	seen := 0 // operations of the history already looked at
	for {
		ops := r.hist.From(seen)
		seen += len(ops)
		for _, op := range ops {
			if op.Kind == OpProduce && op.Result == ResultOK && op.Start.After(since) {
				done[op.Partition] = true
			}
		}
		if len(done) == partitions {
			return nil
		}
		if time.Now().After(deadline) {
			var missing []int
			for p := 0; p < partitions; p++ {
				if !done[int32(p)] {
					missing = append(missing, p)
				}
			}
			return fmt.Errorf("no write acknowledged on partitions %v within %s after healing", missing, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

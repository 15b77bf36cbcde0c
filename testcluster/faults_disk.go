package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"time"
)

// BitFlip is one bit flipped inside a whole batch of a segment file.
type BitFlip struct {
	Path       string
	Pos        int64 // byte position in the file
	Bit        uint
	Base, Next int64 // the offsets of the batch it hit
}

func (f BitFlip) String() string {
	return fmt.Sprintf("%s: bit %d of byte %d, in the batch of offsets [%d, %d)", f.Path, f.Bit, f.Pos, f.Base, f.Next)
}

// FlipBitInReplica flips one bit inside a random whole batch of a random
// segment of the replica in dir, header or payload, in place, and makes it
// durable: bit rot under a log that was written and fsync'd whole. The
// node must not be running.
func FlipBitInReplica(dir string, rng *rand.Rand) (BitFlip, error) {
	segs, err := segmentFiles(dir)
	if err != nil {
		return BitFlip{}, err
	}
	type span struct {
		path string
		b    batchSpan
	}
	var spans []span
	for _, seg := range segs {
		s, err := scanSegment(seg.path)
		if err != nil {
			return BitFlip{}, err
		}
		for _, b := range s.batches {
			spans = append(spans, span{seg.path, b})
		}
	}
	if len(spans) == 0 {
		return BitFlip{}, fmt.Errorf("testcluster: no whole batch in %s", dir)
	}
	// One time in two the last batch, the case a torn write is mistaken
	// for; otherwise any.
	pick := spans[len(spans)-1]
	if rng.Intn(2) == 0 {
		pick = spans[rng.Intn(len(spans))]
	}
	flip := BitFlip{Path: pick.path, Pos: pick.b.start + rng.Int63n(pick.b.end-pick.b.start), Bit: uint(rng.Intn(8)),
		Base: pick.b.base, Next: pick.b.next}
	f, err := os.OpenFile(flip.Path, os.O_RDWR, 0)
	if err != nil {
		return BitFlip{}, err
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], flip.Pos); err != nil {
		return BitFlip{}, err
	}
	b[0] ^= 1 << flip.Bit
	if _, err := f.WriteAt(b[:], flip.Pos); err != nil {
		return BitFlip{}, err
	}
	return flip, f.Sync()
}

// bitRot stops a node (any, the controller's included; cleanly or with
// kill -9), flips one bit in a whole batch of one of its replicas (leader
// or follower, any segment) and starts it again. The operator then does
// what gostream-ctl says: verify reads every replica whole and names the
// damaged one with the command that fixes it (failover of that replica,
// then recover, which rebuilds it from the leader); the harness runs those
// commands. The damaged copy must never be served: the checkers see what
// consumers read.
func (r *run) bitRot() error {
	id := int32(1 + r.rng.Intn(3))
	n := r.c.Node(id)
	r.countIfLeader(id)
	if r.rng.Intn(2) == 0 {
		if err := n.Stop(10 * time.Second); err != nil {
			r.say("stop node %d: %v", id, err)
		}
	} else if err := n.Kill(); err != nil {
		return err
	}
	parts, err := n.Partitions(chaosTopic)
	if err != nil || len(parts) == 0 {
		return fmt.Errorf("node %d holds no replica of %s: %v", id, chaosTopic, err)
	}
	p := parts[r.rng.Intn(len(parts))]
	flip, err := FlipBitInReplica(n.ReplicaDir(chaosTopic, p), r.rng)
	if err != nil {
		return err
	}
	r.say("node %d stopped; flipped %s", id, flip)
	if err := r.c.StartNode(id); err != nil {
		r.violation("bit-rot: node %d did not start and serve over a damaged batch: %v", id, err)
		return nil
	}
	r.say("node %d restarted over the damaged batch", id)
	if id != 1 {
		// The leaders it led were not failed over: it was down only a
		// moment. Its replicas rejoin by recover.
		if err := r.recover(id); err != nil {
			return err
		}
	}
	return r.verifyAndFix()
}

// verifyReply is the part of gostream-ctl verify -o json the harness reads.
type verifyReply struct {
	Partitions []struct {
		Partition int32 `json:"partition"`
		Replicas  []struct {
			Broker  int32  `json:"broker"`
			State   string `json:"state"`
			Command string `json:"command"`
		} `json:"replicas"`
	} `json:"partitions"`
	OK bool `json:"ok"`
}

// verifyAndFix runs gostream-ctl verify and every fix command it gives,
// or, when verify gives none, every command cluster status gives with its
// warnings, until verify finds every replica identical to its leader (a replica
// being rebuilt may take a few rounds). Advice that cannot be followed to
// a clean verify within two minutes is a violation.
func (r *run) verifyAndFix() error {
	deadline := time.Now().Add(2 * time.Minute)
	for round := 1; ; round++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		res, err := r.ctlAt(ctx, r.liveBootstrap(), "verify", "--topic", chaosTopic, "-o", "json")
		cancel()
		if err != nil {
			return err
		}
		var rep verifyReply
		jerr := json.Unmarshal([]byte(res.Stdout), &rep)
		if jerr == nil && rep.OK && res.Exit == 0 {
			r.say("gostream-ctl verify: every replica of %s is whole and identical to its leader (round %d)", chaosTopic, round)
			return nil
		}
		var fixes []string
		if jerr == nil {
			for _, p := range rep.Partitions {
				for _, rp := range p.Replicas {
					if rp.Command != "" {
						fixes = append(fixes, rp.Command)
					}
				}
			}
		}
		if len(fixes) == 0 {
			fixes = r.statusAdvice()
		}
		if time.Now().After(deadline) {
			r.violation("advice: verify still fails after following its advice for 2 minutes: exit %d: %s %s",
				res.Exit, strings.TrimSpace(res.Stderr), strings.TrimSpace(res.Stdout))
			return nil
		}
		for _, fix := range fixes {
			if !r.follow(fix) {
				return nil
			}
		}
		if len(fixes) == 0 {
			r.say("gostream-ctl verify: exit %d, no advice to follow yet: %s", res.Exit, strings.TrimSpace(res.Stderr))
		}
		time.Sleep(time.Second)
	}
}

// follow runs one piece of advice, gostream-ctl commands joined by &&, as
// an operator types it; a fix that is no such command, or fails, is a
// violation (it returns false).
func (r *run) follow(fix string) bool {
	r.say("following the advice: %s", fix)
	for _, step := range strings.Split(fix, "&&") {
		args := strings.Fields(step)
		if len(args) == 0 || args[0] != "gostream-ctl" {
			r.violation("advice: a fix that is not a gostream-ctl command: %q", fix)
			return false
		}
		if err := r.ctl(60*time.Second, args[1:]...); err != nil {
			r.violation("advice: the fix %q failed: %v", fix, err)
			return false
		}
	}
	return true
}

// statusAdvice is the commands gostream-ctl cluster status gives with its
// warnings, but dry runs.
func (r *run) statusAdvice() []string {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := r.ctlAt(ctx, r.liveBootstrap(), "cluster", "status", "-o", "json")
	if err != nil {
		return nil
	}
	var st struct {
		Warnings []struct {
			Message string `json:"message"`
			Command string `json:"command"`
		} `json:"warnings"`
	}
	if json.Unmarshal([]byte(res.Stdout), &st) != nil {
		return nil
	}
	var out []string
	for _, w := range st.Warnings {
		// A warning that asks for judgement ("only if the broker is
		// really gone") is not followed blindly.
		if w.Command != "" && !strings.Contains(w.Command, "--dry-run") && !strings.Contains(w.Message, "only if") {
			r.say("gostream-ctl cluster status warns: %s", w.Message)
			out = append(out, w.Command)
		}
	}
	return out
}

// diskFull fills one node's disk (any, the controller's included) under
// the workload: every write it needs space for fails with ENOSPC. Writes
// to the partitions it holds a replica of fail with NoSpace meanwhile.
// After a few seconds the space comes back, and writes must resume within
// 20 seconds with no restart and no operator command.
func (r *run) diskFull() error {
	id := int32(1 + r.rng.Intn(3))
	n := r.c.Node(id)
	r.countIfLeader(id)
	if err := n.FillDisk(); err != nil {
		return err
	}
	r.say("node %d's disk is full", id)
	r.sleep(2000, 6000)
	if err := n.FreeDisk(); err != nil {
		return err
	}
	freed := time.Now()
	r.say("node %d's disk has space again", id)
	if err := r.waitProgress(r.partitions, freed, 20*time.Second); err != nil {
		r.violation("disk-full: writes did not resume by themselves after node %d's disk had space again: %v", id, err)
	}
	return nil
}

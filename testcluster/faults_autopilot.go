package testcluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gostream/client"
)

// The autopilot scenario (docs/autopilot.md): three nodes, each a
// controller candidate as under `make run`, and a `gostream-ctl
// autopilot` beside them; the harness runs no command at all. It kills,
// pauses or stops one node at a time, for less or more than the
// autopilot's grace period, and brings it back; the autopilot is the
// only operator. A node silent for less than the grace period must not be
// failed over, one silent well past it must be (the audit trail says who
// did what), after each fault the cluster must be whole again (every
// replica active, every partition led by its preferred replica) within
// autopilotHealLimit, by the autopilot's doing, and the autopilot must
// never stop.

const (
	autopilotScenario = "autopilot"
	autopilotName     = "autopilot:chaos"
)

// autopilotPolicy is the scenario's policy: a 6 s grace period (gossip's
// bound is 5.5 s), a look every half second.
var autopilotPolicy = []string{"--failover-after", "6s", "--poll-interval", "500ms", "--recover-after", "1s",
	"--leaders-back-after", "2s", "--lease-ttl", "3s"}

const (
	autopilotGrace     = 6 * time.Second
	autopilotHealLimit = time.Minute
)

// startAutopilot starts the scenario's autopilot and waits until it
// holds the lease.
func (r *run) startAutopilot() error {
	ap, err := r.c.StartAutopilot(autopilotName, autopilotPolicy...)
	if err != nil {
		return err
	}
	r.ap = ap
	return ap.WaitLog("acting: the lease is this autopilot's", 30*time.Second)
}

// autopilotAlive checks that the autopilot runs: one that stopped is a
// violation (it stops only when something calls for a person, and one
// node at a time never should), and it is started again.
func (r *run) autopilotAlive() {
	if ended, code := r.ap.Exited(); ended {
		r.violation("autopilot: it stopped (exit %d): %s", code, strings.TrimSpace(r.ap.Stderr()))
		if err := r.startAutopilot(); err != nil {
			r.say("start the autopilot again: %v", err)
		}
	}
}

// autopilotFault takes one node away (kill -9, SIGSTOP or a clean stop),
// two times in five for less than the grace period, else for longer,
// brings it back, checks that the autopilot failed it over or not as
// its grace period says, and waits for it to make the cluster whole.
func (r *run) autopilotFault() error {
	r.autopilotAlive()
	id := int32(1 + r.rng.Intn(len(r.c.Nodes)))
	r.countIfLeader(id)
	kind := r.rng.Intn(3)
	ms := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.rng.Int63n(int64(hi-lo)/int64(time.Millisecond)+1))*time.Millisecond
	}
	down := ms(500*time.Millisecond, autopilotGrace-1500*time.Millisecond)
	switch {
	case r.rng.Intn(5) < 2:
	case kind == 1:
		// Each look at a paused node waits out a probe (2 s) instead of
		// meeting a refused connection: give it room.
		down = ms(autopilotGrace+10*time.Second, autopilotGrace+14*time.Second)
	default:
		down = ms(autopilotGrace+4*time.Second, autopilotGrace+12*time.Second)
	}
	n := r.c.Node(id)
	began := time.Now()
	switch kind {
	case 0:
		if err := n.Kill(); err != nil {
			return err
		}
		r.say("killed node %d; back in %s (grace %s)", id, down, autopilotGrace)
		time.Sleep(down)
		if err := r.c.StartNode(id); err != nil {
			return err
		}
	case 1:
		if err := n.Pause(); err != nil {
			return err
		}
		r.paused[id] = true
		r.say("paused node %d; resumed in %s (grace %s)", id, down, autopilotGrace)
		time.Sleep(down)
		if err := n.Resume(); err != nil {
			return err
		}
		delete(r.paused, id)
		if err := n.WaitHealthy(30 * time.Second); err != nil {
			return err
		}
	default:
		if err := n.Stop(10 * time.Second); err != nil {
			r.say("stop node %d: %v", id, err)
		}
		r.say("stopped node %d cleanly; back in %s (grace %s)", id, down, autopilotGrace)
		time.Sleep(down)
		if err := r.c.StartNode(id); err != nil {
			return err
		}
	}
	silent := time.Since(began)
	r.say("node %d back, %s after it went; the autopilot is to make the cluster whole", id, silent.Round(time.Millisecond))
	r.checkGrace(id, kind == 1, began, silent)
	r.waitWhole(autopilotHealLimit)
	return nil
}

// checkGrace checks the autopilot's grace period on broker id, away from
// began for silent: a broker back well within the grace period was not
// failed over, one away well past it was. In between, and for a pause
// not long enough past it, either is right.
func (r *run) checkGrace(id int32, paused bool, began time.Time, silent time.Duration) {
	// A look begun just before the fault may already count the broker
	// silent; a look at a paused node takes a probe's 2 s.
	must := autopilotGrace + 3*time.Second
	if paused {
		must = autopilotGrace + 10*time.Second
	}
	if silent >= autopilotGrace-time.Second && silent < must {
		return
	}
	evs, err := LoadAuditTrail(r.c)
	if err != nil {
		r.note(fmt.Sprintf("autopilot: no audit trail to check broker %d against: %v", id, err))
		return
	}
	failedOver := false
	for _, ev := range evs {
		if ev.Requester != autopilotName || ev.Time.Before(began) {
			continue
		}
		switch ev.Action {
		case client.ActionFailover:
			failedOver = failedOver || ev.OldLeader == id
		case client.ActionDropFollower:
			failedOver = failedOver || slices.Contains(ev.OldActive, id) && !slices.Contains(ev.NewActive, id)
		}
	}
	switch {
	case silent < must && failedOver:
		r.violation("autopilot: it failed broker %d over, silent for %s, under its grace period of %s", id, silent.Round(time.Millisecond), autopilotGrace)
	case silent >= must && !failedOver:
		r.violation("autopilot: it did not fail broker %d over, silent for %s, past its grace period of %s", id, silent.Round(time.Millisecond), autopilotGrace)
	case failedOver:
		r.say("the autopilot failed broker %d over", id)
	default:
		r.say("the autopilot left broker %d alone", id)
	}
}

// waitWhole waits until every partition of the workload's topic has
// every replica active and is led by its preferred replica; a cluster
// not whole within limit is a violation: the autopilot did not heal it.
func (r *run) waitWhole(limit time.Duration) {
	start := time.Now()
	var last string
	for time.Since(start) < limit {
		tm, err := describe(r.c, chaosTopic)
		if err == nil {
			last = ""
			for _, p := range tm.Partitions {
				if len(p.Active) != len(p.Replicas) || p.Leader != p.Replicas[0] {
					last = fmt.Sprintf("partition %d led by %d, active %v of %v", p.Partition, p.Leader, p.Active, p.Replicas)
				}
			}
			if last == "" {
				r.say("whole again %s after", time.Since(start).Round(time.Millisecond))
				return
			}
		} else {
			last = err.Error()
		}
		if ended, _ := r.ap.Exited(); ended {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.autopilotAlive()
	r.violation("autopilot: the cluster is not whole %s after the node came back: %s", time.Since(start).Round(time.Millisecond), last)
}

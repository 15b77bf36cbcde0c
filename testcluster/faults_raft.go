package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"gostream/transport"
)

// The replicated controller's scenarios (docs/controller-raft.md) run on
// four nodes: 1, 2 and 3 the candidates, 4 a plain broker, so that a
// broker can be failed over while a candidate is down and the other two
// keep the group's quorum. The active controller is whichever candidate
// the group elected; each fault finds it first. A ControllerSampler
// watches every candidate all along for the checker.

// raftScenarioNodes and raftCandidates shape the replicated controller's
// scenarios.
const (
	raftScenarioNodes = 4
	raftCandidates    = 3
)

// takeoverLimit is how long a scenario waits for a new active controller
// once the old one is killed or cut off: Raft's election (about a
// second), with room for a loaded machine.
const takeoverLimit = 10 * time.Second

// isRaftScenario reports whether a scenario runs the replicated
// controller.
func isRaftScenario(name string) bool { return strings.HasPrefix(name, "raft-") }

// activeController finds the active controller, as a violation if none is
// active within takeoverLimit (other than not).
func (r *run) activeController(not int32) (int32, error) {
	start := time.Now()
	id, err := r.c.ActiveController(takeoverLimit, not)
	if err != nil {
		r.violation("no active controller: %v", err)
		return 0, err
	}
	if not != 0 {
		r.say("candidate %d active %s after candidate %d's loss", id, time.Since(start).Round(time.Millisecond), not)
	}
	return id, nil
}

// raftControllerKill kills the active controller with SIGKILL: another
// candidate must be active within takeoverLimit, and the operator's
// failover of the dead node then works at once.
func (r *run) raftControllerKill() error {
	a, err := r.activeController(0)
	if err != nil {
		return err
	}
	r.countIfLeader(a)
	if err := r.c.Node(a).Kill(); err != nil {
		return err
	}
	r.say("killed node %d (the active controller)", a)
	if _, err := r.activeController(a); err != nil {
		return err
	}
	if err := r.failover(a); err != nil {
		return err
	}
	r.sleep(500, 3000)
	return r.restart(a)
}

// raftControllerIsolated cuts the active controller off from the other
// nodes: it commits nothing, another candidate is elected, and the
// operator's failover of the cut-off node works through it. After
// healing, the old one follows the group.
func (r *run) raftControllerIsolated() error {
	a, err := r.activeController(0)
	if err != nil {
		return err
	}
	r.countIfLeader(a)
	how, err := r.cutOff(a)
	if err != nil {
		return err
	}
	r.say("cut node %d (the active controller) off the cluster, %s", a, how)
	if _, err := r.activeController(a); err != nil {
		return err
	}
	// The cut-off one may be asked first (clients still reach it): it
	// answers NotController once it has stepped down, or its change
	// cannot commit; the command is sent again until the new active
	// controller carries it out.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := r.c.Ctl(ctx, "", "failover", "--broker", fmt.Sprint(a))
		cancel()
		if err == nil && res.Exit == 0 {
			r.say("gostream-ctl failover --broker %d: ok", a)
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("failover --broker %d through the new active controller: exit %d %s (%v)", a, res.Exit, strings.TrimSpace(res.Stderr), err)
		}
		r.say("gostream-ctl failover --broker %d: exit %d %s; again", a, res.Exit, strings.TrimSpace(res.Stderr))
		time.Sleep(500 * time.Millisecond)
	}
	r.sleep(1000, 4000)
	if err := r.c.HealNetwork(); err != nil {
		return err
	}
	r.say("network healed")
	return r.recoverAndRebalance(a)
}

// failoverCrashPoints are the points at which a controller can die in a
// failover (docs/failover.md): after reserving the epochs, after fencing
// the replicas, after committing the new leaders (before the push).
var failoverCrashPoints = []string{"failover-after-reserve", "failover-after-fence", "failover-after-commit"}

// raftControllerMidFailover restarts the active controller with one of
// the failover crash points and has it fail over node 4, killed first:
// it dies part way. Another candidate must be active, and the same
// failover sent again finishes it (or finds it done).
func (r *run) raftControllerMidFailover() error {
	a, err := r.activeController(0)
	if err != nil {
		return err
	}
	const victim = raftScenarioNodes
	// The crash point is in a leader failover: the victim must lead.
	// Failovers leave leadership on the lowest ids, so move it back first.
	r.electLeaders()
	if leaders, err := r.leaders(); err == nil && !leaders[victim] {
		r.note(fmt.Sprintf("node %d leads no partition of %s after elect-leaders; the crash point may not be reached", victim, chaosTopic))
	}
	r.countIfLeader(victim)
	if err := r.c.Node(victim).Kill(); err != nil {
		return err
	}
	r.say("killed node %d (a plain broker)", victim)
	ctrl := r.c.Node(a)
	if err := ctrl.Stop(10 * time.Second); err != nil {
		r.say("stop node %d: %v", a, err)
	}
	point := failoverCrashPoints[r.rng.Intn(len(failoverCrashPoints))]
	ctrl.Env = []string{"GOSTREAM_CRASHPOINT=" + point}
	err = r.c.StartNode(a)
	ctrl.Env = nil
	if err != nil {
		return err
	}
	r.say("node %d restarted with crash point %s", a, point)
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		r.c.Ctl(ctx, "", "controller", "transfer", "--to", fmt.Sprint(a))
		cancel()
		if id, err := r.c.ActiveController(2*time.Second, 0); err == nil && id == a {
			break
		}
		if time.Now().After(deadline) {
			r.note(fmt.Sprintf("candidate %d did not become active again; the failover below runs without the crash point", a))
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	res, err := r.c.Ctl(ctx, "", "failover", "--broker", fmt.Sprint(victim))
	cancel()
	if err != nil {
		return err
	}
	r.say("gostream-ctl failover --broker %d with the crash point: exit %d %s", victim, res.Exit, strings.TrimSpace(res.Stderr))
	for deadline := time.Now().Add(15 * time.Second); ctrl.Running() && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if ctrl.Running() {
		r.note(fmt.Sprintf("node %d did not die at the crash point (not active, or no partition of node %d needed a leader failover); killed it", a, victim))
		ctrl.Kill()
	}
	if _, err := r.activeController(a); err != nil {
		return err
	}
	if err := r.failover(victim); err != nil {
		return err
	}
	if err := r.restart(a); err != nil {
		return err
	}
	r.sleep(1000, 3000)
	return r.restart(victim)
}

// ControllerSample is one candidate's part in the controller group, and
// its broker's metadata epoch, at one time.
type ControllerSample struct {
	At          time.Time
	Node        int32
	State       string
	Active      bool
	Term        uint64
	GroupEpoch  int64 // the metadata epoch its group member applied
	BrokerEpoch int64 // the metadata epoch its broker serves (-1 unknown)
}

// ControllerSampler polls every running candidate's controller status and
// node status.
type ControllerSampler struct {
	c     *Cluster
	every time.Duration
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	got   []ControllerSample
}

// NewControllerSampler starts polling c's candidates every interval.
func NewControllerSampler(c *Cluster, every time.Duration) *ControllerSampler {
	s := &ControllerSampler{c: c, every: every, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	return s
}

func (s *ControllerSampler) run() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (s *ControllerSampler) sample() {
	for _, n := range s.c.Nodes[:min(s.c.cfg.Candidates, len(s.c.Nodes))] {
		if !n.Running() {
			continue
		}
		st, err := n.ControllerStatus(500 * time.Millisecond)
		if err != nil || st.Mode != "candidate" {
			continue
		}
		smp := ControllerSample{At: time.Now(), Node: n.ID, State: st.State, Active: st.Active, Term: st.Term, GroupEpoch: st.MetadataEpoch, BrokerEpoch: -1}
		if body, err := n.HTTPGet(transport.StatusPath); err == nil {
			var ns transport.NodeStatus
			if json.Unmarshal(body, &ns) == nil && ns.ClusterID != "" {
				smp.BrokerEpoch = ns.MetadataEpoch
			}
		}
		s.mu.Lock()
		s.got = append(s.got, smp)
		s.mu.Unlock()
	}
}

// Stop ends the polling and returns every sample, in time order.
func (s *ControllerSampler) Stop() []ControllerSample {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]ControllerSample(nil), s.got...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

// CheckControllerSamples checks the controller group's invariants over a
// run's samples: one active controller per Raft term; the metadata epoch
// of the active controller never goes back, from one active controller to
// the next; and no broker's metadata epoch ever goes back (a candidate's
// broker keeps its copy across restarts).
func CheckControllerSamples(samples []ControllerSample) (violations []string) {
	activeIn := map[uint64]int32{}
	var lastActive ControllerSample
	haveActive := false
	lastBroker := map[int32]ControllerSample{}
	for _, s := range samples {
		if s.Active && s.State == "Leader" {
			if other, ok := activeIn[s.Term]; ok && other != s.Node {
				violations = append(violations, fmt.Sprintf("two active controllers in Raft term %d: candidates %d and %d", s.Term, other, s.Node))
			}
			activeIn[s.Term] = s.Node
			if haveActive && s.GroupEpoch < lastActive.GroupEpoch {
				violations = append(violations, fmt.Sprintf("the active controller's metadata went back: candidate %d at epoch %d (%s), after candidate %d at epoch %d (%s)",
					s.Node, s.GroupEpoch, s.At.Format("15:04:05.000"), lastActive.Node, lastActive.GroupEpoch, lastActive.At.Format("15:04:05.000")))
			}
			lastActive, haveActive = s, true
		}
		if s.BrokerEpoch >= 0 {
			if prev, ok := lastBroker[s.Node]; ok && s.BrokerEpoch < prev.BrokerEpoch {
				violations = append(violations, fmt.Sprintf("node %d's metadata went back: epoch %d (%s) after epoch %d (%s)",
					s.Node, s.BrokerEpoch, s.At.Format("15:04:05.000"), prev.BrokerEpoch, prev.At.Format("15:04:05.000")))
			}
			lastBroker[s.Node] = s
		}
	}
	return violations
}

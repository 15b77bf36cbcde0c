package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"gostream/transport"
)

// The moves' scenarios (docs/reassignment.md) run on more nodes than
// three, with the replicated controller, so that replicas have somewhere
// to go and the controller group is bigger than three: reassign on five
// nodes (1 to 3 the candidates), reassign-7 on seven (1 to 5). Each fault
// is a move of a random partition, of the workload's topic or of
// __consumer_offsets (whose leaders are the groups' coordinators), to a
// random set of brokers; a decommission (every replica of a broker moved
// off it, by one plan); or a move with a kill -9 in its copy (of the
// broker being added, of the partition's leader, of the active
// controller), or cancelled. The moves go on under the workload and the
// groups; heal waits until none is left, and the usual checks follow.

// reassignShape is the nodes and controller candidates of a moves'
// scenario.
func reassignShape(name string) (nodes, candidates int) {
	if name == "reassign-7" {
		return 7, 5
	}
	return 5, 3
}

func isReassignScenario(name string) bool { return strings.HasPrefix(name, "reassign") }

// moveWait bounds how long heal waits for the moves under way to end.
const moveWait = 3 * time.Minute

// reassignFault is one fault of the moves' scenarios.
func (r *run) reassignFault() error {
	switch k := r.rng.Intn(8); k {
	case 0, 1:
		return r.randomMove(chaosTopic)
	case 2:
		return r.randomMove(transport.OffsetsTopic)
	case 3:
		return r.decommission()
	case 4:
		return r.moveAndKill("target")
	case 5:
		return r.moveAndKill("source")
	case 6:
		return r.moveAndKill("controller")
	default:
		return r.moveAndCancel()
	}
}

// moveable picks a partition of topic that is not moving, or -1 when
// every one is.
func (r *run) moveable(topic string) (int32, transport.MoveStatus, error) {
	tm, err := describe(r.c, topic)
	if err != nil {
		return -1, transport.MoveStatus{}, err
	}
	moving, err := r.moving(topic)
	if err != nil {
		return -1, transport.MoveStatus{}, err
	}
	var free []int32
	for i := range tm.Partitions {
		if !slices.ContainsFunc(moving, func(m transport.MoveStatus) bool { return m.Partition == int32(i) }) {
			free = append(free, int32(i))
		}
	}
	if len(free) == 0 {
		return -1, transport.MoveStatus{}, nil
	}
	p := free[r.rng.Intn(len(free))]
	part := tm.Partitions[p]
	return p, transport.MoveStatus{Topic: topic, Partition: p, From: part.Replicas, Leader: part.Leader, Active: part.Active}, nil
}

// moving lists the moves under way of topic.
func (r *run) moving(topic string) ([]transport.MoveStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.ctlAt(ctx, r.c.Bootstrap(), "partition", "reassign", "--status", topic, "-o", "json")
	if err != nil {
		return nil, err
	}
	if res.Exit != 0 {
		return nil, fmt.Errorf("partition reassign --status: exit %d: %s", res.Exit, strings.TrimSpace(res.Stderr))
	}
	var st transport.ReassignStatus
	if err := json.Unmarshal([]byte(res.Stdout), &st); err != nil {
		return nil, fmt.Errorf("partition reassign --status: %w: %s", err, res.Stdout)
	}
	return st.Moves, nil
}

// newReplicas is a random target for a partition on replicas: as many
// replicas, one to all of them replaced by brokers outside the list, in
// a random order; nil when every broker holds one already (no broker to
// move to).
func (r *run) newReplicas(replicas []int32) []int32 {
	n := int32(len(r.c.Nodes))
	var out, spare []int32
	for b := int32(1); b <= n; b++ {
		if !slices.Contains(replicas, b) {
			spare = append(spare, b)
		}
	}
	if len(spare) == 0 {
		return nil
	}
	r.rng.Shuffle(len(spare), func(i, j int) { spare[i], spare[j] = spare[j], spare[i] })
	out = slices.Clone(replicas)
	swaps := 1 + r.rng.Intn(min(len(spare), len(out)))
	idx := r.rng.Perm(len(out))
	for i := range swaps {
		out[idx[i]] = spare[i]
	}
	r.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// startMove runs partition reassign --execute for one partition; a
// refusal because it is moving already is noted, not an error.
func (r *run) startMove(topic string, p int32, target []int32, throttleMB float64) (bool, error) {
	if target == nil {
		r.note(fmt.Sprintf("%s/%d has a replica on every broker: no move to make", topic, p))
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	args := []string{"partition", "reassign", topic, fmt.Sprint(p), "--replicas", joinInts(target), "--execute", "--throttle", fmt.Sprint(throttleMB)}
	res, err := r.ctlAt(ctx, r.c.Bootstrap(), args...)
	switch {
	case err != nil:
		return false, err
	case res.Exit != 0 && strings.Contains(res.Stderr, "already moving"):
		r.note(fmt.Sprintf("%s/%d is moving already: %s", topic, p, strings.TrimSpace(res.Stderr)))
		return false, nil
	case res.Exit != 0:
		return false, fmt.Errorf("gostream-ctl %s: exit %d: %s", strings.Join(args, " "), res.Exit, strings.TrimSpace(res.Stderr))
	}
	r.say("moving %s/%d to %v at %g MB/s", topic, p, target, throttleMB)
	return true, nil
}

// joinInts writes ids as --replicas takes them: "4,2,3".
func joinInts(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

// randomMove moves a random partition of topic to random brokers.
func (r *run) randomMove(topic string) error {
	p, found, err := r.moveable(topic)
	if err != nil || p < 0 {
		return err
	}
	_, err = r.startMove(topic, p, r.newReplicas(found.From), float64(1+r.rng.Intn(50)))
	return err
}

// decommission moves every replica of the workload's topic off a random
// broker, in one plan, as broker decommission would.
func (r *run) decommission() error {
	tm, err := describe(r.c, chaosTopic)
	if err != nil {
		return err
	}
	moving, err := r.moving(chaosTopic)
	if err != nil {
		return err
	}
	b := int32(1 + r.rng.Intn(len(r.c.Nodes)))
	plan := transport.MovePlan{Version: transport.MovePlanVersion}
	for i, p := range tm.Partitions {
		if !slices.Contains(p.Replicas, b) || slices.ContainsFunc(moving, func(m transport.MoveStatus) bool { return m.Partition == int32(i) }) {
			continue
		}
		var spare []int32
		for x := int32(1); x <= int32(len(r.c.Nodes)); x++ {
			if !slices.Contains(p.Replicas, x) {
				spare = append(spare, x)
			}
		}
		target := slices.Clone(p.Replicas)
		target[slices.Index(target, b)] = spare[r.rng.Intn(len(spare))]
		plan.Partitions = append(plan.Partitions, transport.PlannedMove{Topic: chaosTopic, Partition: int32(i), Replicas: target})
	}
	if len(plan.Partitions) == 0 {
		r.say("decommission of broker %d: it holds no replica that is not moving", b)
		return nil
	}
	data, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := r.c.CtlCommand(ctx, "partition", "reassign", "--plan", "-", "--execute", "--throttle", fmt.Sprint(1+r.rng.Intn(20)))
	cmd.Stdin = strings.NewReader(string(data))
	res, err := ctlResult(cmd)
	if err != nil {
		return err
	}
	r.log("ctl partition reassign --plan - (%s) -> exit %d\n%s%s", data, res.Exit, res.Stdout, res.Stderr)
	if res.Exit != 0 {
		if strings.Contains(res.Stderr, "already moving") {
			r.note("decommission plan refused, a partition started moving meanwhile: " + strings.TrimSpace(res.Stderr))
			return nil
		}
		return fmt.Errorf("decommission of broker %d: exit %d: %s", b, res.Exit, strings.TrimSpace(res.Stderr))
	}
	r.say("decommission of broker %d from %s: %d partitions moving", b, chaosTopic, len(plan.Partitions))
	return nil
}

// moveAndKill starts a slow move and kills -9, in the middle of its copy,
// the broker it adds (target), the partition's leader (source), or the
// active controller; the dead node is failed over and restarted as in
// the other scenarios. The move must go on to its end by itself.
func (r *run) moveAndKill(who string) error {
	p, found, err := r.moveable(chaosTopic)
	if err != nil || p < 0 {
		return err
	}
	target := r.newReplicas(found.From)
	ok, err := r.startMove(chaosTopic, p, target, 0.2+r.rng.Float64())
	if err != nil || !ok {
		return err
	}
	r.sleep(100, 1500)
	switch who {
	case "controller":
		return r.raftControllerKill()
	case "source":
		r.countIfLeader(found.Leader)
		return r.killAndFailover(found.Leader, fmt.Sprintf("the leader of %s/%d, moving to %v", chaosTopic, p, target))
	default:
		var added []int32
		for _, b := range target {
			if !slices.Contains(found.From, b) {
				added = append(added, b)
			}
		}
		x := added[r.rng.Intn(len(added))]
		r.countIfLeader(x)
		return r.killAndFailover(x, fmt.Sprintf("a broker %s/%d is moving to (%v)", chaosTopic, p, target))
	}
}

// moveAndCancel starts a slow move and cancels it a moment later.
func (r *run) moveAndCancel() error {
	p, found, err := r.moveable(chaosTopic)
	if err != nil || p < 0 {
		return err
	}
	ok, err := r.startMove(chaosTopic, p, r.newReplicas(found.From), 0.2)
	if err != nil || !ok {
		return err
	}
	r.sleep(100, 2000)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := r.ctlAt(ctx, r.c.Bootstrap(), "partition", "reassign", "--cancel", chaosTopic, fmt.Sprint(p))
	switch {
	case err != nil:
		return err
	case res.Exit != 0 && strings.Contains(res.Stderr, "is not moving"):
		r.say("%s/%d finished moving before its cancel", chaosTopic, p)
	case res.Exit != 0:
		// A cancel can lose a race with a failover or the move's own
		// steps; the move then goes on, which is also right.
		r.note(fmt.Sprintf("cancel of %s/%d: exit %d: %s", chaosTopic, p, res.Exit, strings.TrimSpace(res.Stderr)))
	default:
		r.say("cancelled the move of %s/%d", chaosTopic, p)
	}
	return nil
}

// waitMovesDone waits until no partition of the cluster moves; one still
// moving after moveWait is a violation (a move that never ends).
func (r *run) waitMovesDone() {
	deadline := time.Now().Add(moveWait)
	for {
		var left []transport.MoveStatus
		var err error
		for _, topic := range []string{chaosTopic, transport.OffsetsTopic} {
			var m []transport.MoveStatus
			if m, err = r.moving(topic); err != nil {
				break
			}
			left = append(left, m...)
		}
		if err == nil && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.violation("moves never ended: %+v (%v)", left, err)
			return
		}
		time.Sleep(time.Second)
	}
}

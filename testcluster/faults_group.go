package testcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gostream/client"
)

// groupFault is one fault of the group-members scenario, on a member of
// the native group or, where it runs, of the Kafka group: a member killed
// (and started again, the static one within its session timeout or not),
// paused (for less or more than its session timeout: a zombie that wakes
// fenced), or restarted at once; or the coordinator's node of the
// member's group killed during a rebalance and its partitions failed
// over, as for any other.
func (r *run) groupFault() error {
	slots := groupMembers
	if r.kgw != nil {
		slots += groupMembers
	}
	slot := 1 + r.rng.Intn(slots)
	g := r.groupOf(slot)
	switch r.rng.Intn(5) {
	case 0:
		g.Kill(slot)
		r.say("killed %s member %d", g.name(), slot)
		r.sleep(500, 2*int(groupSession.Milliseconds()))
		r.say("starting %s member %d again", g.name(), slot)
		return g.startMember(slot)
	case 1:
		g.Pause(slot)
		r.say("paused %s member %d", g.name(), slot)
		r.sleep(500, 2*int(groupSession.Milliseconds()))
		g.Resume(slot)
		r.say("resumed %s member %d", g.name(), slot)
		return nil
	case 2:
		r.say("restarting %s member %d", g.name(), slot)
		return g.Restart(slot)
	default:
		return r.coordinatorKill(g, slot)
	}
}

// groupOf is the group workload of a member slot.
func (r *run) groupOf(slot int) *GroupWorkload {
	if slot >= kafkaFirstSlot {
		return r.kgw
	}
	return r.gw
}

// coordinatorKill restarts a member of g, which makes the group
// rebalance, and kills the group coordinator's node while it does; the
// operator fails the node over, and later restarts and recovers it.
func (r *run) coordinatorKill(g *GroupWorkload, slot int) error {
	coord, err := r.groupCoordinator(g)
	if err != nil {
		r.note("coordinator-kill: no coordinator found: " + err.Error())
		return nil
	}
	if coord == r.c.Nodes[0].ID {
		// One controller: killing it would stop every failover. Make it
		// a member fault instead.
		r.say("%s's coordinator is on the controller's node %d; restarting its member %d instead", g.name(), coord, slot)
		return g.Restart(slot)
	}
	r.say("restarting %s member %d, then killing its coordinator's node %d", g.name(), slot, coord)
	if err := g.Restart(slot); err != nil {
		return err
	}
	r.sleep(50, 400)
	r.countIfLeader(coord)
	return r.killAndFailover(coord, g.name()+"'s coordinator, during a rebalance")
}

// groupCoordinator is the broker that coordinates g's group now.
func (r *run) groupCoordinator(g *GroupWorkload) (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.New(ctx, r.c.Secured(client.Config{Bootstrap: strings.Split(r.liveBootstrap(), ","), RequestTimeout: 3 * time.Second, DialTimeout: time.Second}))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	d, err := cl.DescribeGroup(ctx, g.group)
	if err != nil {
		return 0, fmt.Errorf("describe group %s: %w", g.group, err)
	}
	return d.Coordinator, nil
}

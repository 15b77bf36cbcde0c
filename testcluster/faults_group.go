package testcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gostream/client"
)

// groupFault is one fault of the group-members scenario: a member killed
// (and started again, the static one within its session timeout or not),
// paused (for less or more than its session timeout: a zombie that wakes
// fenced), or restarted at once; or the coordinator's node killed during
// a rebalance and its partitions failed over, as for any other.
func (r *run) groupFault() error {
	slot := 1 + r.rng.Intn(groupMembers)
	switch r.rng.Intn(5) {
	case 0:
		r.gw.Kill(slot)
		r.say("killed group member %d", slot)
		r.sleep(500, 2*int(groupSession.Milliseconds()))
		r.say("starting group member %d again", slot)
		return r.gw.startMember(slot)
	case 1:
		r.gw.Pause(slot)
		r.say("paused group member %d", slot)
		r.sleep(500, 2*int(groupSession.Milliseconds()))
		r.gw.Resume(slot)
		r.say("resumed group member %d", slot)
		return nil
	case 2:
		r.say("restarting group member %d", slot)
		return r.gw.Restart(slot)
	default:
		return r.coordinatorKill(slot)
	}
}

// coordinatorKill restarts a member, which makes the group rebalance, and
// kills the group coordinator's node while it does; the operator fails the
// node over, and later restarts and recovers it.
func (r *run) coordinatorKill(slot int) error {
	coord, err := r.groupCoordinator()
	if err != nil {
		r.note("coordinator-kill: no coordinator found: " + err.Error())
		return nil
	}
	if coord == r.c.Nodes[0].ID {
		// One controller: killing it would stop every failover. Make it
		// a member fault instead.
		r.say("the group's coordinator is on the controller's node %d; restarting group member %d instead", coord, slot)
		return r.gw.Restart(slot)
	}
	if err := r.gw.Restart(slot); err != nil {
		return err
	}
	r.sleep(50, 400)
	r.countIfLeader(coord)
	return r.killAndFailover(coord, "the group's coordinator, during a rebalance")
}

// groupCoordinator is the broker that coordinates the chaos group now.
func (r *run) groupCoordinator() (int32, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.New(ctx, r.c.Secured(client.Config{Bootstrap: strings.Split(r.liveBootstrap(), ","), RequestTimeout: 3 * time.Second, DialTimeout: time.Second}))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	d, err := cl.DescribeGroup(ctx, r.gw.group)
	if err != nil {
		return 0, fmt.Errorf("describe group %s: %w", r.gw.group, err)
	}
	return d.Coordinator, nil
}

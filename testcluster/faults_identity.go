package testcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// duplicateID starts a second node with the --id of a live broker beside
// it, as an operator's slip does: with an empty data directory of its own,
// or (one time in three, for a broker other than the controller's) with a
// copy of the live broker's data directory, as a restored backup would be.
// For broker 1 the impostor also claims to be the controller's node at
// another address. The cluster must refuse it: the impostor exits with an
// error within a minute and the broker's registration still names the
// real node. The workload runs on; the checkers then see that nothing
// acknowledged was lost to it.
func (r *run) duplicateID() error {
	id := int32(1 + r.rng.Intn(3))
	real := r.c.Node(id)
	dataDir, how := "", "an empty data directory"
	if id != 1 && r.rng.Intn(3) == 0 {
		dataDir = filepath.Join(r.dir, fmt.Sprintf("copy-of-node%d-%d", id, r.faults))
		if err := copyTree(real.DataDir, dataDir); err != nil {
			return fmt.Errorf("copy node %d's data directory: %w", id, err)
		}
		how = fmt.Sprintf("a copy of broker %d's data directory", id)
	}
	imp, err := r.c.Impostor(id, dataDir)
	if err != nil {
		return err
	}
	if err := r.c.StartImpostor(imp); err != nil {
		return err
	}
	r.say("started a second node with --id %d and %s, beside the live one", id, how)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	err = imp.Wait(ctx)
	cancel()
	var ee *exec.ExitError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		r.violation("duplicate-id: a second node with --id %d (%s) still runs after 60s; it was not refused:\n%s", id, how, imp.LogTail(10))
		imp.Kill()
	case err == nil:
		r.violation("duplicate-id: a second node with --id %d (%s) exited 0; it must be refused with an error", id, how)
	case errors.As(err, &ee):
		tail := imp.LogTail(5)
		if id != 1 && !strings.Contains(tail, "DuplicateBroker") {
			r.violation("duplicate-id: the second node with --id %d exited %d without naming DuplicateBroker:\n%s", id, ee.ExitCode(), tail)
		} else {
			r.say("the second node with --id %d was refused (exit %d): %s", id, ee.ExitCode(), lastLine(tail))
		}
	default:
		return err
	}
	os.RemoveAll(imp.DataDir)
	return r.checkBrokerAddr(id, real.Addr())
}

// checkBrokerAddr checks that the cluster's metadata still names addr for
// broker id (an impostor did not take the broker over).
func (r *run) checkBrokerAddr(id int32, addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cl, err := r.client(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	md, err := cl.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("metadata after the duplicate node: %w", err)
	}
	for _, b := range md.Brokers {
		if b.ID == id && b.Addr != addr {
			r.violation("duplicate-id: broker %d is registered at %s now, not at the real node's %s", id, b.Addr, addr)
		}
	}
	return nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

package testcluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCutOffControllerDoesNotClaimToBeActive: an active controller cut
// off from the other candidates still holds Raft's Leader state until its
// lease runs out, and one that was paused (SIGSTOP) still holds it when it
// resumes, until a round of heartbeats tells it of the newer term (the
// chaos harness's autopilot scenario saw a candidate paused 16 s answer
// "active" at its old metadata epoch, 107 ms after the next controller had
// answered at a newer one). Its controller status calls it active only
// when a quorum of the group has just confirmed it leads, so it does not
// while it cannot reach them: an operator is never shown two active
// controllers, the one of them with older metadata. Once the network
// heals, one candidate is active again.
func TestCutOffControllerDoesNotClaimToBeActive(t *testing.T) {
	requireNetworkFaults(t)
	c := startClusterWith(t, Config{Nodes: 3, Candidates: 3, Netns: true})
	active, err := c.ActiveController(30*time.Second, 0)
	require.NoError(t, err)
	var others []int32
	for _, n := range c.Nodes {
		if n.ID != active {
			others = append(others, n.ID)
		}
	}
	require.NoError(t, c.Partition([]int32{active}, others))
	cut := time.Now()
	// The status the cut-off candidate answers, from now until the others
	// have a new active controller and a while after.
	var answers, claims int
	var next int32
	for time.Since(cut) < 3*time.Second || next == 0 {
		require.Less(t, time.Since(cut), 30*time.Second, "no new active controller among %v", others)
		st, err := c.Node(active).ControllerStatus(2 * time.Second)
		if err == nil {
			answers++
			if st.Active {
				claims++
				t.Logf("%s after the cut: candidate %d says it is active (%s, term %d, metadata epoch %d)",
					time.Since(cut).Round(time.Millisecond), active, st.State, st.Term, st.MetadataEpoch)
			}
		}
		if next == 0 {
			for _, id := range others {
				if st, err := c.Node(id).ControllerStatus(time.Second); err == nil && st.Active {
					next = id
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("candidate %d active among the others after %s; the cut-off one answered %d times", next, time.Since(cut).Round(time.Millisecond), answers)
	assert.NotZero(t, answers, "the cut-off candidate answers its status")
	assert.Zero(t, claims, "the cut-off candidate says it is active though no quorum confirms it")

	require.NoError(t, c.HealNetwork())
	_, err = c.ActiveController(30*time.Second, 0)
	require.NoError(t, err, "one active controller once the network heals")
}

package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// startCandidates starts a cluster whose nodes 1..candidates are the
// candidates of a replicated controller.
func startCandidates(t *testing.T, nodes, candidates int) *Cluster {
	t.Helper()
	return startClusterWith(t, Config{Nodes: nodes, Candidates: candidates})
}

// ctlOK runs gostream-ctl and requires exit 0.
func ctlOK(t *testing.T, c *Cluster, args ...string) CtlResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", args...)
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, "gostream-ctl %v: %s%s", args, res.Stdout, res.Stderr)
	return res
}

// TestKilledActiveControllerIsReplaced: with three candidates, kill -9 of
// the active controller leaves a new one active within the election
// timeout; every change acknowledged before the kill is there after it,
// and `failover --broker` of the dead node's partitions works.
func TestKilledActiveControllerIsReplaced(t *testing.T) {
	c := startCandidates(t, 3, 3)
	first, err := c.ActiveController(30*time.Second, 0)
	require.NoError(t, err)
	cl := newClient(t, c)
	for i := 0; i < 5; i++ {
		createTopic(t, cl, fmt.Sprintf("before-%d", i), 3, 3)
	}
	ctlOK(t, c, "topic", "seal", "before-0")
	acked := produceTo(t, cl, "before-1", 0, "v", 10)
	var epochBefore int64
	var st transport.NodeStatus
	body, err := c.Node(first).HTTPGet(transport.StatusPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body, &st))
	epochBefore = st.MetadataEpoch

	killed := time.Now()
	require.NoError(t, c.Node(first).Kill())
	next, err := c.ActiveController(10*time.Second, first)
	require.NoError(t, err, "a new active controller after kill -9 of %d", first)
	t.Logf("candidate %d active %s after the kill of %d", next, time.Since(killed).Round(time.Millisecond), first)

	body, err = c.Node(next).HTTPGet(transport.StatusPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body, &st))
	assert.Greater(t, st.MetadataEpoch, epochBefore, "the new controller's metadata does not go back")

	// Every topic and the seal are there.
	res := ctlOK(t, c, "topic", "list", "--output", "json")
	for i := 0; i < 5; i++ {
		assert.Contains(t, res.Stdout, fmt.Sprintf("before-%d", i))
	}
	res = ctlOK(t, c, "topic", "describe", "before-0", "--output", "json")
	assert.Contains(t, res.Stdout, `"sealed":true`)

	// The dead node's partitions fail over on the operator's command.
	res = ctlOK(t, c, "failover", "--broker", fmt.Sprint(first))
	t.Logf("failover: %s", res.Stdout)
	for i := 1; i < 5; i++ {
		tm, err := cl.DescribeTopic(context.Background(), fmt.Sprintf("before-%d", i))
		require.NoError(t, err)
		for _, p := range tm.Partitions {
			assert.NotEqual(t, first, p.Leader, "%s/%d still led by the dead node", tm.Name, p.Partition)
		}
	}
	for k, v := range produceTo(t, cl, "before-1", 0, "after", 10) {
		acked[k] = v
	}
	got := consumeAll(t, cl, "before-1", 0)
	for off, v := range acked {
		assert.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}

	// A change works, and the killed candidate comes back as a follower
	// of the group, its broker given the changes it missed.
	ctlOK(t, c, "topic", "seal", "before-2")
	body, err = c.Node(next).HTTPGet(transport.StatusPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body, &st))
	want := st.MetadataEpoch
	require.NoError(t, c.StartNode(first))
	require.Eventually(t, func() bool {
		body, err := c.Node(first).HTTPGet(transport.StatusPath)
		var st transport.NodeStatus
		if err != nil || json.Unmarshal(body, &st) != nil {
			return false
		}
		return st.Controller == next && st.MetadataEpoch >= want
	}, 30*time.Second, 50*time.Millisecond)
	again, err := c.ActiveController(time.Second, 0)
	require.NoError(t, err)
	assert.Equal(t, next, again, "the returning candidate does not take over")
}

// controllerStatus runs controller status -o json.
func controllerStatus(t *testing.T, c *Cluster) (rep struct {
	Mode       string `json:"mode"`
	Active     int32  `json:"active"`
	Quorum     int    `json:"quorum"`
	Candidates []struct {
		ID      int32 `json:"id"`
		Answers bool  `json:"answers"`
		Status  *struct {
			State  string `json:"state"`
			Active bool   `json:"active"`
			Term   uint64 `json:"term"`
		} `json:"status"`
	} `json:"candidates"`
}) {
	t.Helper()
	res := ctlOK(t, c, "controller", "status", "--output", "json")
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &rep), res.Stdout)
	return rep
}

// TestControllerCommands: controller status shows each candidate's Raft
// state and the active one; transfer moves the active role; add of a
// candidate no --controller lists, and a remove that would leave no
// quorum, are refused and change nothing; cluster status warns of a
// candidate that is down, with the command for a lost disk, which works.
func TestControllerCommands(t *testing.T) {
	c := startCandidates(t, 3, 3)
	active, err := c.ActiveController(30*time.Second, 0)
	require.NoError(t, err)
	rep := controllerStatus(t, c)
	assert.Equal(t, "replicated", rep.Mode)
	assert.Equal(t, active, rep.Active)
	assert.Equal(t, 2, rep.Quorum)
	require.Len(t, rep.Candidates, 3)
	for _, cand := range rep.Candidates {
		require.True(t, cand.Answers, "candidate %d", cand.ID)
		assert.Equal(t, cand.ID == active, cand.Status.Active, "candidate %d", cand.ID)
		assert.Equal(t, map[bool]string{true: "Leader", false: "Follower"}[cand.ID == active], cand.Status.State)
	}
	text := ctlOK(t, c, "controller", "status").Stdout
	assert.Contains(t, text, fmt.Sprintf("Active controller: candidate %d.", active))

	to := active%3 + 1
	ctlOK(t, c, "controller", "transfer", "--to", fmt.Sprint(to))
	got, err := c.ActiveController(10*time.Second, active)
	require.NoError(t, err)
	assert.Equal(t, to, got)
	// A change works through the new active controller.
	cl := newClient(t, c)
	createTopic(t, cl, "after-transfer", 1, 3)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", "controller", "add", "--id", "9", "--addr", "127.0.0.1:1")
	require.NoError(t, err)
	assert.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "InvalidRequest")
	assert.Contains(t, res.Stderr, "not in the active controller's --controller list")

	// One candidate down: cluster status says so, with a command that
	// works; removing a second, live one would leave no quorum.
	down := to%3 + 1
	if down == to {
		down = down%3 + 1
	}
	require.NoError(t, c.Node(down).Kill())
	require.Eventually(t, func() bool {
		res, err := c.Ctl(ctx, "", "cluster", "status")
		return err == nil && strings.Contains(res.Stdout, fmt.Sprintf("controller candidate %d (", down)) &&
			strings.Contains(res.Stdout, fmt.Sprintf("gostream-ctl controller remove --id %d,", down))
	}, 20*time.Second, 200*time.Millisecond, "cluster status warns of candidate %d, with the remove its advice gives (run below)", down)
	other := int32(0)
	for id := int32(1); id <= 3; id++ {
		if id != to && id != down {
			other = id
		}
	}
	require.Eventually(t, func() bool {
		res, err = c.Ctl(ctx, "", "controller", "remove", "--id", fmt.Sprint(other))
		return err == nil && res.Exit == 2 && strings.Contains(res.Stderr, "fewer than the 2 a quorum needs")
	}, 20*time.Second, 200*time.Millisecond, "remove refused for want of a quorum: %s", res.Stderr)
	rep = controllerStatus(t, c)
	assert.Len(t, rep.Candidates, 3, "nothing was removed")
	// The dead one can be removed, as the warning's advice says: two of
	// two live voters are left.
	ctlOK(t, c, "controller", "remove", "--id", fmt.Sprint(down))
	rep = controllerStatus(t, c)
	assert.Len(t, rep.Candidates, 2)
	assert.Equal(t, to, rep.Active)
}

// TestUpgradeFromASingleController follows the README's upgrade: a
// cluster running one controller is given the list of three candidates on
// every node, restarted one node at a time, the old controller last. The
// old controller seeds the group with its metadata and audit trail; no
// topic, epoch or event is lost, its metadata file is retired, and the
// group then survives the loss of the active controller.
func TestUpgradeFromASingleController(t *testing.T) {
	c := startCandidates(t, 3, 1)
	cl := newClient(t, c)
	createTopic(t, cl, "kept", 3, 3)
	acked := produceTo(t, cl, "kept", 0, "v", 10)
	ctlOK(t, c, "topic", "seal", "kept")
	require.NoError(t, c.Node(3).Kill())
	ctlOK(t, c, "failover", "--broker", "3")
	require.NoError(t, c.StartNode(3))
	ctlOK(t, c, "recover", "--broker", "3")
	history := ctlOK(t, c, "cluster", "history", "--output", "json").Stdout
	require.Contains(t, history, `"action":"recover"`)
	var st transport.NodeStatus
	body, err := c.Node(1).HTTPGet(transport.StatusPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body, &st))
	epoch := st.MetadataEpoch

	// Every node gets the list; the old controller restarts last.
	c.cfg.Candidates = 3
	for _, id := range []int32{2, 3, 1} {
		require.NoError(t, c.Node(id).Stop(30*time.Second))
		require.NoError(t, c.StartNode(id))
	}
	active, err := c.ActiveController(30*time.Second, 0)
	require.NoError(t, err)
	assert.Equal(t, int32(1), active, "the old controller seeds the group and leads it first")
	body, err = c.Node(1).HTTPGet(transport.StatusPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(body, &st))
	assert.GreaterOrEqual(t, st.MetadataEpoch, epoch, "the group goes on from the single controller's epoch")
	assert.NoFileExists(t, filepath.Join(c.Node(1).DataDir, "controller", "metadata.json"), "the seed file is retired")
	assert.FileExists(t, filepath.Join(c.Node(1).DataDir, "controller", "metadata.json.seeded"))
	rep := controllerStatus(t, c)
	assert.Equal(t, "replicated", rep.Mode)
	require.Len(t, rep.Candidates, 3)
	assert.Equal(t, history, ctlOK(t, c, "cluster", "history", "--output", "json").Stdout, "the audit trail came along")

	// The group now survives the loss of its active controller.
	require.NoError(t, c.Node(1).Kill())
	next, err := c.ActiveController(10*time.Second, 1)
	require.NoError(t, err)
	t.Logf("candidate %d active after the old controller's kill", next)
	desc := ctlOK(t, c, "topic", "describe", "kept", "--output", "json").Stdout
	assert.Contains(t, desc, `"sealed":true`)
	assert.Equal(t, history, ctlOK(t, c, "cluster", "history", "--output", "json").Stdout)
	ctlOK(t, c, "failover", "--broker", "1")
	got := consumeAll(t, cl, "kept", 0)
	for off, v := range acked {
		assert.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	// Restarted, the old controller does not seed a group again.
	require.NoError(t, c.StartNode(1))
	again, err := c.ActiveController(5*time.Second, 0)
	require.NoError(t, err)
	assert.Equal(t, next, again)
}

// TestActiveControllerKilledMidFailoverIsRedoneByTheNext: three
// candidates and a plain broker; the active controller dies between
// fencing a partition's replicas with its reserved epoch and committing
// the new leader (crash point failover-after-fence). Another candidate is
// active by itself, the same failover sent again succeeds with an epoch
// above the reserved one, and nothing acknowledged is lost.
func TestActiveControllerKilledMidFailoverIsRedoneByTheNext(t *testing.T) {
	c := startCandidates(t, 4, 3)
	cl := newClient(t, c)
	tm := createTopic(t, cl, "mid", 4, 3)
	p3 := tm.Partitions[3]
	require.Equal(t, int32(4), p3.Leader, "round-robin placement: partition 3 led by broker 4")
	acked := produceTo(t, cl, "mid", 3, "before", 10)

	// Candidate 1, active, dies at the crash point.
	require.NoError(t, c.Node(1).Stop(10*time.Second))
	c.Node(1).Env = []string{"GOSTREAM_CRASHPOINT=failover-after-fence"}
	require.NoError(t, c.StartNode(1))
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c.Ctl(ctx, "", "controller", "transfer", "--to", "1")
		id, err := c.ActiveController(2*time.Second, 0)
		return err == nil && id == 1
	}, 30*time.Second, 100*time.Millisecond, "candidate 1 active")
	require.NoError(t, c.Node(4).Kill())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", "failover", "--topic", "mid", "--partition", "3")
	require.NoError(t, err)
	require.NotEqual(t, 0, res.Exit, "the active controller died mid-failover")
	require.Eventually(t, func() bool { return !c.Node(1).Running() }, 10*time.Second, 50*time.Millisecond)

	next, err := c.ActiveController(10*time.Second, 1)
	require.NoError(t, err)
	t.Logf("candidate %d active after the crash", next)
	out := ctlOK(t, c, "failover", "--topic", "mid", "--partition", "3", "--output", "json").Stdout
	var rep struct {
		Results []changeResult `json:"results"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
	require.Len(t, rep.Results, 1)
	assert.Equal(t, int32(2), rep.Results[0].NewEpoch, "the redo takes an epoch above the one the dead controller reserved")
	for k, v := range produceTo(t, cl, "mid", 3, "after", 10) {
		acked[k] = v
	}
	got := consumeAll(t, cl, "mid", 3)
	for off, v := range acked {
		assert.Equal(t, v, got[off], "acknowledged record at offset %d", off)
	}
	c.Node(1).Env = nil
	require.NoError(t, c.StartNode(1))
	_, err = c.ActiveController(10*time.Second, 0)
	require.NoError(t, err)
}

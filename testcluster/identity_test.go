package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/storage"
)

// rootID reads the root id stamped in a node's data directory.
func rootID(t *testing.T, dataDir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, storage.StampFile))
	require.NoError(t, err)
	var st storage.Stamp
	require.NoError(t, json.Unmarshal(data, &st))
	require.NotEmpty(t, st.RootID)
	return st.RootID
}

// waitExit waits for a node process to exit and returns its exit status.
func waitExit(t *testing.T, n *Node, timeout time.Duration) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := n.Wait(ctx)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "node %d did not exit; log:\n%s", n.ID, n.LogTail(20))
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

func produceN(t *testing.T, cl *client.Client, topic string, partition int32, n int, prefix string) {
	t.Helper()
	p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: 5 * time.Second, Linger: -1})
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		_, err := p.Send(ctx, client.ProducerRecord{Topic: topic, Partition: partition, ManualPartition: true, Value: []byte(fmt.Sprintf("%s-%d", prefix, i))})
		require.NoError(t, err)
	}
}

// A second node started with a used --id, its own empty data directory
// and its own ports, is refused by the controller, which names both
// storage roots; it does not take the broker over, and the data the real
// broker holds stays readable.
func TestDuplicateBrokerIDIsRefused(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "one", 3, 1) // partition 1 is led by broker 2, alone
	createTopic(t, cl, "three", 1, 3)
	produceN(t, cl, "one", 1, 20, "real")

	imp, err := c.Impostor(2, "")
	require.NoError(t, err)
	t.Cleanup(func() { imp.Kill() })
	require.NoError(t, c.StartImpostor(imp))
	assert.Equal(t, 2, waitExit(t, imp, 60*time.Second), "refused: exit status 2")
	log := imp.LogTail(30)
	assert.Contains(t, log, "DuplicateBroker")
	assert.Contains(t, log, rootID(t, c.Node(2).DataDir), "names the registered root")
	assert.Contains(t, log, rootID(t, imp.DataDir), "names its own root")
	assert.Contains(t, log, "which answers")
	assert.Contains(t, log, "broker replace 2")

	// Broker 2 is still the one registered, at its own address.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := cl.Metadata(ctx)
	require.NoError(t, err)
	for _, b := range md.Brokers {
		if b.ID == 2 {
			assert.Equal(t, c.Node(2).Addr(), b.Addr)
		}
	}
	got := consumeAll(t, cl, "one", 1)
	require.Len(t, got, 20)
	produceN(t, cl, "three", 0, 5, "after")

	// A copy of broker 2's data directory, started beside it at another
	// address, claims the same root: refused too.
	cp := filepath.Join(t.TempDir(), "node2-copy")
	require.NoError(t, exec.Command("cp", "-a", c.Node(2).DataDir, cp).Run())
	imp2, err := c.Impostor(2, cp)
	require.NoError(t, err)
	t.Cleanup(func() { imp2.Kill() })
	require.NoError(t, c.StartImpostor(imp2))
	assert.Equal(t, 2, waitExit(t, imp2, 60*time.Second))
	assert.Contains(t, imp2.LogTail(30), "is its data directory a copy?")
	got = consumeAll(t, cl, "one", 1)
	require.Len(t, got, 20)
}

// A fresh node with the controller's id at another address does not run a
// second controller: pointed at the cluster's controller it refuses to
// start; made a controller of its own, its gossip is kept out of the
// cluster's view.
func TestSecondControllerIsRefused(t *testing.T) {
	c := startCluster(t, 3)
	imp, err := c.Impostor(1, "")
	require.NoError(t, err)
	t.Cleanup(func() { imp.Kill() })
	require.NoError(t, c.StartImpostor(imp))
	assert.Equal(t, 1, waitExit(t, imp, 60*time.Second), "a configuration error: exit status 1")
	assert.Contains(t, imp.LogTail(10), "a second controller for one cluster is refused")

	// Its own controller (a new cluster), joining this cluster's gossip.
	own, err := c.Impostor(1, "")
	require.NoError(t, err)
	t.Cleanup(func() { own.Kill() })
	var join []string
	for _, n := range c.Nodes {
		join = append(join, n.Gossip)
	}
	require.NoError(t, own.Start("", join))
	require.NoError(t, own.WaitHealthy(30*time.Second))
	require.Eventually(t, func() bool {
		return strings.Contains(c.Node(2).LogTail(200), "belongs to cluster")
	}, 30*time.Second, 100*time.Millisecond, "node 2 refuses the other cluster's member")
	cl := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		v, err := cl.DescribeCluster(ctx, n.Addr())
		require.NoError(t, err)
		for _, m := range v.Members {
			assert.NotEqual(t, own.Gossip, m.Gossip, "node %d shows the other cluster's node as a member", n.ID)
		}
	}
}

// Replacing a broker whose disk is lost: its new empty root is refused
// until the operator runs broker replace, which fails over what it led and
// drops it everywhere; the new node then registers, is rebuilt by recover,
// and never leads while empty.
func TestBrokerReplace(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "r", 3, 3)
	for p := range int32(3) {
		produceN(t, cl, "r", p, 10, fmt.Sprintf("p%d", p))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctl := func(args ...string) CtlResult {
		res, err := c.Ctl(ctx, "", args...)
		require.NoError(t, err)
		t.Logf("ctl %s -> exit %d\n%s%s", strings.Join(args, " "), res.Exit, res.Stdout, res.Stderr)
		return res
	}

	res := ctl("broker", "replace", "2")
	assert.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "BrokerAlive", "refused while broker 2 answers")
	res = ctl("broker", "replace", "99")
	assert.Equal(t, 2, res.Exit)
	assert.Contains(t, res.Stderr, "UnknownBroker")
	for _, op := range []string{"failover", "recover"} {
		res = ctl(op, "--broker", "99")
		assert.Equal(t, 2, res.Exit, op)
		assert.True(t, strings.HasPrefix(res.Stderr, "UnknownBroker"), "%s --broker 99: %s", op, res.Stderr)
	}

	// Broker 2's disk is lost.
	oldRoot := rootID(t, c.Node(2).DataDir)
	require.NoError(t, c.Node(2).Kill())
	require.NoError(t, os.RemoveAll(c.Node(2).DataDir))
	require.NoError(t, c.Node(2).Start(c.Controller(), []string{c.Node(1).Gossip}))
	assert.Equal(t, 2, waitExit(t, c.Node(2), 60*time.Second), "a new root for broker 2 is refused")
	assert.Contains(t, c.Node(2).LogTail(20), oldRoot)
	assert.Contains(t, c.Node(2).LogTail(20), "which does not answer")

	dry := ctl("broker", "replace", "2", "--dry-run")
	require.Equal(t, 0, dry.Exit)
	assert.Contains(t, dry.Stdout, "would be active nowhere")
	res = ctl("broker", "replace", "2")
	require.Equal(t, 0, res.Exit)
	assert.Contains(t, res.Stdout, "recover --broker 2")
	md, err := cl.Metadata(ctx)
	require.NoError(t, err)
	for _, tm := range md.Topics {
		for _, p := range tm.Partitions {
			assert.NotContains(t, p.Active, int32(2), "broker 2 is active nowhere after replace")
			assert.NotEqual(t, int32(2), p.Leader)
		}
	}

	// The new node registers now; it is in no active set, so it leads
	// nothing until recovered.
	require.NoError(t, c.StartNode(2))
	assert.NotEqual(t, oldRoot, rootID(t, c.Node(2).DataDir))
	res = ctl("recover", "--broker", "2")
	require.Equal(t, 0, res.Exit)
	res = ctl("verify")
	require.Equal(t, 0, res.Exit, "every active replica identical to its leader")
	for p := range int32(3) {
		infos, err := ReadReplica(c.Node(2).ReplicaDir("r", p))
		require.NoError(t, err)
		n := 0
		for _, b := range infos {
			n += len(b.Values)
		}
		assert.Equal(t, 10, n, "broker 2's rebuilt replica of r/%d holds every record", p)
	}
	events, err := cl.History(ctx)
	require.NoError(t, err)
	var replaced bool
	for _, ev := range events {
		replaced = replaced || ev.Action == client.ActionReplaceBroker
	}
	assert.True(t, replaced, "the audit trail records the replace")
}

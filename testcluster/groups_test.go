package testcluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// PyStream's cycle on real processes: a consumer that read but did not
// commit gets the records again when it starts over; one that committed
// does not. Never committed is not a committed 0; a commit below the
// committed offset is refused and changes nothing. Then the coordinator's
// node is killed and its offsets partition failed over: the new
// coordinator serves the committed offset, and refuses a regression.
func TestCommittedOffsetsSurviveCoordinatorFailover(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "pay", 1, 3)
	produceTo(t, cl, "pay", 0, "r", 10)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// A group whose coordinator is not the controller's node (broker 1),
	// which this test kills.
	group, victim, err := GroupNotCoordinatedBy(ctx, c, "ledger", 1)
	require.NoError(t, err)

	start := func() *client.Consumer {
		cons, err := client.NewConsumer(cl, "pay", 0, client.ConsumerConfig{Group: group})
		require.NoError(t, err)
		_, err = cons.SeekToCommitted(ctx, client.ResetEarliest)
		require.NoError(t, err)
		return cons
	}
	read := func(cons *client.Consumer, n int) {
		got := 0
		for got < n {
			recs, err := cons.Poll(ctx, time.Second)
			require.NoError(t, err)
			got += len(recs)
		}
	}
	cons := start()
	_, ok, err := cons.Committed(ctx)
	require.NoError(t, err)
	assert.False(t, ok, "never committed")
	assert.Equal(t, int64(0), cons.Position())
	read(cons, 10)
	// Crash before the commit: the next consumer starts where the group
	// is, at the beginning, and reads the ten again.
	cons = start()
	assert.Equal(t, int64(0), cons.Position(), "not committed: delivered again")
	require.NoError(t, cons.CommitOffset(ctx, 0, ""))
	off, ok, err := cons.Committed(ctx)
	require.NoError(t, err)
	assert.True(t, ok, "a committed 0 is committed")
	assert.Equal(t, int64(0), off)
	read(cons, 10)
	require.NoError(t, cons.Commit(ctx))
	cons = start()
	assert.Equal(t, int64(10), cons.Position(), "committed: not delivered again")
	err = cons.CommitOffset(ctx, 4, "")
	require.ErrorIs(t, err, transport.ErrOffsetRegression)
	err = cons.CommitOffset(ctx, 11, "")
	require.ErrorIs(t, err, transport.ErrInvalidOffset, "above the high watermark")

	// Kill the coordinator's node and fail its partitions over.
	require.NoError(t, c.Node(victim).Kill())
	_, err = operator(t, c, transport.APIFailover, map[string]any{"broker": victim})
	require.NoError(t, err)
	off, ok, err = cons.Committed(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, int64(10), off, "the new coordinator serves the acknowledged commit")
	require.ErrorIs(t, cons.CommitOffset(ctx, 9, ""), transport.ErrOffsetRegression)
	produceTo(t, cl, "pay", 0, "s", 5)
	require.NoError(t, cons.CommitOffset(ctx, 15, "done"))
	off, _, err = cons.Committed(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(15), off)

	// The killed node comes back and is recovered; then every node is
	// killed at once and started again: the commit is still there.
	require.NoError(t, c.StartNode(victim))
	_, err = operator(t, c, transport.APIRecover, map[string]any{"broker": victim})
	require.NoError(t, err)
	for _, n := range c.Nodes {
		require.NoError(t, n.Kill())
	}
	for _, n := range c.Nodes {
		require.NoError(t, c.StartNode(n.ID))
	}
	require.Eventually(t, func() bool {
		off, ok, err = cons.Committed(ctx)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the group's coordinator serves again after a full restart: %v", err)
	require.True(t, ok)
	assert.Equal(t, int64(15), off, "a full restart keeps every committed offset")
	require.ErrorIs(t, cons.CommitOffset(ctx, 14, ""), transport.ErrOffsetRegression)
}

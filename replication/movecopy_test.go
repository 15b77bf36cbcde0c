package replication_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/replication"
	"gostream/transport"
)

// A Pacer lets through its rate and no more, whatever the number of
// callers sharing it: 20 sends of 50 KB at 1 MB/s take about a second,
// less what a fresh pacer lets go at once (its credit, 0.2 s: 200 KB).
func TestPacerHoldsItsRate(t *testing.T) {
	var p replication.Pacer
	p.SetRate(1_000_000)
	start := time.Now()
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				require.NoError(t, p.Wait(context.Background(), 50_000))
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	assert.GreaterOrEqual(t, took, 750*time.Millisecond, "1 MB at 1 MB/s, less the credit")
	assert.Less(t, took, 3*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	p.SetRate(1) // a slot a long way off
	require.NoError(t, p.Wait(ctx, 1_000_000))
	cancel()
	require.ErrorIs(t, p.Wait(ctx, 1), context.Canceled)
	p.SetRate(0)
	require.NoError(t, p.Wait(context.Background(), 1<<30), "unpaced")
}

// A paced recovery (a replica being added by a move) sends at the
// throttle's rate, counts what it copied for CopyProgress while it runs,
// and leaves the same copy as an unpaced one; a second recovery of the
// same replica while one runs is refused (their cuts and copies would
// race), not run beside it.
func TestPacedRecoveryCountsAndRefusesASecond(t *testing.T) {
	pair := newRecoveryPair(t, 2*time.Second, time.Hour)
	leader, rp, leaderLog, addedLog := pair.leader, pair.peer, pair.leaderLog, pair.replicaLog
	big := strings.Repeat("v", 20_000)
	for range 25 {
		produceValue(t, leader, big) // about 500 KB
	}
	assert.Equal(t, transport.MoveProgressResponse{}, leader.CopyProgress(3), "no copy yet")

	var p replication.Pacer
	p.SetRate(400_000)
	// The first count seen while the copy runs: the last may be the final
	// one, seen after the last chunk and before the copy ends.
	var seen atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if pr := leader.CopyProgress(3); pr.Running && pr.CopiedBytes > 0 {
				seen.CompareAndSwap(0, pr.CopiedBytes)
			}
		}
	}()
	var second error
	var once sync.Once
	rp.mu.Lock()
	rp.beforeDigest = func() {
		once.Do(func() { _, second = leader.RecoverFollower(context.Background(), 3) })
	}
	rp.mu.Unlock()
	start := time.Now()
	res, err := leader.RecoverFollowerPaced(context.Background(), 3, &p, 400_000)
	took := time.Since(start)
	require.NoError(t, err)
	assert.Equal(t, leaderLog.LogEndOffset(), res.CopiedTo)
	assert.GreaterOrEqual(t, took, 800*time.Millisecond, "500 KB at 0.4 MB/s")
	require.ErrorIs(t, second, replication.ErrNotReady, "a second recovery of broker 3 while one runs")
	assert.Contains(t, second.Error(), "under way")

	pr := leader.CopyProgress(3)
	assert.False(t, pr.Running)
	assert.Greater(t, pr.CopiedBytes, int64(450_000))
	assert.InDelta(t, float64(pr.CopiedBytes), float64(pr.TotalBytes), 0.2*float64(pr.TotalBytes), "the estimate of what to copy")
	assert.Greater(t, seen.Load(), int64(0), "progress is seen while the copy runs")
	assert.Less(t, seen.Load(), pr.CopiedBytes, "and grows")
	assert.Equal(t, leaderLog.DurableEndOffset(), addedLog.DurableEndOffset())
}

// A paced recovery refused because one of the same replica runs (a new
// active controller starting again the copy its predecessor started)
// leaves CopyProgress on the copy that runs. Before, the refused one's
// empty count took its place: --status showed "0 of 0 MB" until that
// copy ended.
func TestRefusedPacedRecoveryLeavesTheRunningCopysProgress(t *testing.T) {
	pair := newRecoveryPair(t, 2*time.Second, time.Hour)
	leader, leaderLog, addedLog := pair.leader, pair.leaderLog, pair.replicaLog
	big := strings.Repeat("v", 20_000)
	for range 25 {
		produceValue(t, leader, big) // about 500 KB
	}

	var p replication.Pacer
	p.SetRate(200_000) // about 2.5 s
	first := make(chan error, 1)
	go func() {
		_, err := leader.RecoverFollowerPaced(context.Background(), 3, &p, 200_000)
		first <- err
	}()
	var running transport.MoveProgressResponse
	require.Eventually(t, func() bool {
		running = leader.CopyProgress(3)
		return running.Running && running.CopiedBytes > 0
	}, 10*time.Second, 10*time.Millisecond, "the first copy runs")

	_, err := leader.RecoverFollowerPaced(context.Background(), 3, &p, 200_000)
	require.ErrorIs(t, err, replication.ErrNotReady, "a second paced recovery of broker 3 while one runs")
	pr := leader.CopyProgress(3)
	assert.True(t, pr.Running, "the running copy's progress: %+v", pr)
	assert.GreaterOrEqual(t, pr.CopiedBytes, running.CopiedBytes)
	assert.Equal(t, running.TotalBytes, pr.TotalBytes)
	assert.Equal(t, running.Started, pr.Started)
	require.NoError(t, <-first)
	assert.Equal(t, leaderLog.DurableEndOffset(), addedLog.DurableEndOffset())
}

// A replica recovered for a move that the metadata then no longer lists
// as a replica (the move was cancelled: it is deleted) stops counting in
// acknowledgements at once, rather than holding writes until the hold.
func TestRecoveredReplicaLeftOutOfTheReplicasStopsCounting(t *testing.T) {
	pair := newRecoveryPair(t, time.Second, time.Hour)
	leader, rp := pair.leader, pair.peer
	produce(t, leader, "before", 3)
	_, err := leader.RecoverFollowerPaced(context.Background(), 3, nil, 0)
	require.NoError(t, err)
	rp.setDown(errors.New("replica deleted"))
	_, err = tryProduce(leader, "held", 1)
	require.Error(t, err, "still counted while the metadata lists it as a replica")

	require.NoError(t, leader.SetState(replication.State{Leader: self, LeaderEpoch: 1, Active: []int32{self}, Replicas: []int32{self, 2}}))
	_, err = tryProduce(leader, "after", 1)
	require.NoError(t, err, "no longer a replica: no longer counted")
}

// produceValue produces one record of value v and waits for its ack.
func produceValue(t *testing.T, p *replication.Partition, v string) {
	t.Helper()
	b, err := record.AppendBatch(nil, []record.Record{{Value: []byte(v)}})
	require.NoError(t, err)
	wait, err := p.Produce(b)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = wait(ctx)
	require.NoError(t, err)
}

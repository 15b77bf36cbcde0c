package controller

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

// fakeClock is a clock the test moves by hand, for the lease keepers of
// several controllers.
type fakeClock struct{ ms atomic.Int64 }

func (f *fakeClock) now() time.Time       { return time.UnixMilli(f.ms.Load()) }
func (f *fakeClock) set(at time.Duration) { f.ms.Store(at.Milliseconds()) }

func lease(t *testing.T, c *Controller, holder string, ttl time.Duration) transport.AutopilotLeaseResponse {
	t.Helper()
	resp, err := c.AutopilotLease(context.Background(), transport.AutopilotLeaseRequest{Holder: holder, TTLMillis: ttl.Milliseconds()})
	require.NoError(t, err)
	return resp
}

func release(t *testing.T, c *Controller, holder string) {
	t.Helper()
	_, err := c.AutopilotLease(context.Background(), transport.AutopilotLeaseRequest{Holder: holder, Release: true})
	require.NoError(t, err)
}

// One autopilot holds the lease at a time: the first asks and gets it,
// persisted; another is told who holds it until when; renewals keep it
// and persist nothing; once it expires the other gets it; a release by
// the holder clears it, by anyone else changes nothing.
func TestAutopilotLeaseOneHolderAtATime(t *testing.T) {
	c := openWith(t, &fakeBrokers{})
	clock := &fakeClock{}
	c.lease.now = clock.now
	const ttl = 10 * time.Second

	got := lease(t, c, "a", ttl)
	assert.Equal(t, transport.AutopilotLeaseResponse{Holder: "a", Granted: true, Expires: ttl.Milliseconds()}, got)
	assert.Equal(t, &metadata.AutopilotLease{Holder: "a", TTLMillis: ttl.Milliseconds()}, c.Metadata().Autopilot, "the holder is persisted")
	epoch := c.Metadata().Epoch

	got = lease(t, c, "b", ttl)
	assert.Equal(t, transport.AutopilotLeaseResponse{Holder: "a", Expires: ttl.Milliseconds()}, got, "b is told who holds it")

	clock.set(9 * time.Second)
	got = lease(t, c, "a", ttl)
	assert.True(t, got.Granted, "a renews")
	assert.Equal(t, (19 * time.Second).Milliseconds(), got.Expires)
	assert.Equal(t, epoch, c.Metadata().Epoch, "a renewal is not a change")

	clock.set(18 * time.Second)
	assert.False(t, lease(t, c, "b", ttl).Granted, "a's renewal holds")
	clock.set(19 * time.Second)
	got = lease(t, c, "b", ttl)
	assert.True(t, got.Granted, "a's lease expired")
	assert.Equal(t, "b", c.Metadata().Autopilot.Holder)
	assert.Greater(t, c.Metadata().Epoch, epoch)

	release(t, c, "a")
	assert.Equal(t, "b", c.Metadata().Autopilot.Holder, "a release by another changes nothing")
	release(t, c, "b")
	assert.Nil(t, c.Metadata().Autopilot, "the holder gave it back")
	assert.True(t, lease(t, c, "a", ttl).Granted, "free again at once")

	for name, req := range map[string]transport.AutopilotLeaseRequest{
		"no holder":      {TTLMillis: 10_000},
		"ttl too short":  {Holder: "x", TTLMillis: 999},
		"ttl too long":   {Holder: "x", TTLMillis: metadata.MaxAutopilotTTLMillis + 1},
		"no ttl":         {Holder: "x"},
		"release, no id": {Release: true},
	} {
		_, err := c.AutopilotLease(context.Background(), req)
		assert.ErrorIs(t, err, ErrInvalidRequest, name)
	}
}

// A controller that starts again over metadata naming a holder counts its
// lease from then: another autopilot waits a whole time to live, however
// long the controller was down.
func TestAutopilotLeaseIsRenewedByARestart(t *testing.T) {
	f := &fakeBrokers{}
	c := openWith(t, f)
	clock := &fakeClock{}
	c.lease.now = clock.now
	require.True(t, lease(t, c, "a", 10*time.Second).Granted)

	self, _ := c.Metadata().Broker(1)
	again, err := Open(Config{Dir: c.cfg.Dir, Self: self, Logger: hclog.NewNullLogger(), Pool: f,
		Apply: func(*metadata.Cluster) error { return nil }, Push: func(context.Context, *metadata.Cluster) {}})
	require.NoError(t, err)
	again.lease.now = clock.now
	clock.set(time.Minute)
	got := lease(t, again, "b", 10*time.Second)
	assert.Equal(t, transport.AutopilotLeaseResponse{Holder: "a", Expires: (70 * time.Second).Milliseconds()}, got)
	clock.set(70 * time.Second)
	assert.True(t, lease(t, again, "b", 10*time.Second).Granted)
}

// A candidate that becomes the active controller again counts the
// holder's lease from its takeover, not from what it remembered of its
// last turn: a renewed the lease on candidate 2 meanwhile, and b must not
// get it on candidate 1 when a's lease as candidate 1 knew it ran out.
func TestAutopilotLeaseIsRenewedByATakeover(t *testing.T) {
	cs := startCandidates(t)
	ctx := context.Background()
	if first := cs.leader(t); first != 1 {
		require.NoError(t, cs.groups[first].Transfer(ctx, 1))
	}
	require.Eventually(t, func() bool { return cs.groups[1].IsLeader() }, 10*time.Second, 10*time.Millisecond)
	one, two := cs.ctrls[1], cs.ctrls[2]
	require.NoError(t, one.TakeOver(ctx, func() (*metadata.Cluster, []transport.HistoryEvent, error) {
		m, err := NewClusterMetadata(one.cfg.Self)
		return m, nil, err
	}))
	clock := &fakeClock{}
	for _, c := range cs.ctrls {
		c.lease.now = clock.now
	}
	const ttl = 10 * time.Second
	require.True(t, lease(t, one, "a", ttl).Granted)

	handOver := func(from, to int32) {
		t.Helper()
		require.NoError(t, cs.groups[from].Transfer(ctx, to))
		require.Eventually(t, func() bool { return cs.groups[to].IsLeader() }, 10*time.Second, 10*time.Millisecond)
		cs.ctrls[from].StepDown()
		require.NoError(t, cs.ctrls[to].TakeOver(ctx, nil))
	}
	handOver(1, 2)
	clock.set(8 * time.Second)
	require.True(t, lease(t, two, "a", ttl).Granted, "a renews on candidate 2")
	handOver(2, 1)
	clock.set(12 * time.Second)
	got := lease(t, one, "b", ttl)
	assert.False(t, got.Granted, "a renewed 4 s ago")
	assert.Equal(t, "a", got.Holder)
	clock.set(22 * time.Second)
	assert.True(t, lease(t, one, "b", ttl).Granted, "a time to live after the takeover")
}

package console

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/transport"
)

// fakeRound is a survey round that counts its calls and answers an
// empty snapshot.
type fakeRound struct{ calls atomic.Int64 }

func (f *fakeRound) round(context.Context) (*snapshot, error) {
	f.calls.Add(1)
	return &snapshot{at: time.Now(), readers: map[string][]groupLag{}}, nil
}

func quickSurvey(round func(context.Context) (*snapshot, error)) *survey {
	v := newSurvey(round, hclog.NewNullLogger())
	v.interval, v.idle = 10*time.Millisecond, 200*time.Millisecond
	return v
}

// The survey starts with the first request, goes round while requests
// come, stops by itself once none came for its idle time (forgetting its
// last round), starts again with the next request, and stops for good
// when closed, its goroutine gone.
func TestSurveyRunsWhileUsedAndStopsWhenIdle(t *testing.T) {
	f := &fakeRound{}
	v := quickSurvey(f.round)
	assert.False(t, v.running(), "nothing runs before the first request")
	assert.Zero(t, f.calls.Load())

	v.touch()
	require.True(t, v.running())
	require.Eventually(t, func() bool { return f.calls.Load() >= 3 }, 5*time.Second, 5*time.Millisecond, "rounds every interval")
	snap, err := v.current(context.Background())
	require.NoError(t, err)
	require.NotNil(t, snap)

	require.Eventually(t, func() bool { return !v.running() }, 5*time.Second, 5*time.Millisecond, "the survey stops when idle")
	stopped := f.calls.Load()
	v.mu.Lock()
	assert.Nil(t, v.mu.snap, "an idle survey forgets its last round")
	v.mu.Unlock()

	v.touch()
	require.Eventually(t, func() bool { return f.calls.Load() > stopped }, 5*time.Second, 5*time.Millisecond, "a request starts it again")
	snap, err = v.current(context.Background())
	require.NoError(t, err)
	assert.NotNil(t, snap)

	v.close()
	assert.False(t, v.running())
	closed := f.calls.Load()
	v.touch()
	assert.False(t, v.running(), "a closed survey does not start again")
	v.wg.Wait() // returns at once: no goroutine is left
	assert.Equal(t, closed, f.calls.Load())
	_, err = v.current(context.Background())
	assert.ErrorIs(t, err, errClosed)
	v.close() // a second close is harmless
}

// Before its first round the survey has nothing to answer from: a list
// waits for the round rather than answer an empty one; a failed round is
// an error, not an empty list; and closing the console ends the wait.
func TestSurveyFirstListWaitsForTheFirstRound(t *testing.T) {
	release := make(chan struct{})
	fail := atomic.Bool{}
	v := quickSurvey(func(ctx context.Context) (*snapshot, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if fail.Load() {
			return nil, transport.ErrBrokerNotAvailable
		}
		return &snapshot{at: time.Now()}, nil
	})
	v.idle = time.Hour
	t.Cleanup(v.close)

	v.touch()
	got := make(chan error, 1)
	go func() {
		snap, err := v.current(context.Background())
		if err == nil && snap == nil {
			err = errors.New("no snapshot and no error")
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the list answered before the first round: %v", err)
	default:
	}
	close(release)
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the list did not answer after the first round")
	}

	// A survey whose rounds fail answers why.
	w := quickSurvey(func(context.Context) (*snapshot, error) { return nil, transport.ErrBrokerNotAvailable })
	t.Cleanup(w.close)
	w.touch()
	_, err := w.current(context.Background())
	assert.ErrorIs(t, err, transport.ErrBrokerNotAvailable)

	// Closing ends a wait.
	block := quickSurvey(func(ctx context.Context) (*snapshot, error) { <-ctx.Done(); return nil, ctx.Err() })
	block.touch()
	go func() {
		_, err := block.current(context.Background())
		got <- err
	}()
	block.close()
	select {
	case err := <-got:
		assert.ErrorIs(t, err, errClosed)
	case <-time.After(10 * time.Second):
		t.Fatal("close did not end the wait")
	}
}

// seededRound is a round of a cluster of two brokers: topic orders (two
// partitions, led by 1 and 2; broker 2's status missing when down2),
// topic stream's __ds.s (a stream at /logs/a, with two live readers on
// broker 1 and one on broker 2), and groups g (committed orders/0 at 3,
// subscribes to orders) and k (a Kafka group whose coordinator did not
// answer).
func seededRound(at time.Time, hw0, hw1 int64, down2 bool) *snapshot {
	md := client.Metadata{
		Brokers: []client.Broker{{ID: 1, HTTP: "h1"}, {ID: 2, HTTP: "h2"}},
		Topics: []client.TopicMetadata{
			{Name: "orders", ID: "o1", ReplicationFactor: 2, Partitions: []client.PartitionMetadata{
				{Partition: 0, Leader: 1, Replicas: []int32{1, 2}, Active: []int32{1, 2}},
				{Partition: 1, Leader: 2, Replicas: []int32{2, 1}, Active: []int32{2, 1}},
			}},
			{Name: "__ds.s", ID: "s1", ReplicationFactor: 1, Stream: &client.StreamMetadata{Path: "/logs/a", ContentType: "text/plain"},
				Partitions: []client.PartitionMetadata{{Partition: 0, Leader: 1, Replicas: []int32{1}, Active: []int32{1}}}},
		},
	}
	st1 := &transport.NodeStatus{Node: 1, Partitions: []transport.PartitionStatus{
		{Topic: "orders", Partition: 0, Leader: 1, HighWatermark: hw0, LogStartOffset: 1, SizeBytes: 100},
		{Topic: "orders", Partition: 1, Leader: 2, HighWatermark: hw1 - 1, SizeBytes: 999}, // a follower: not counted
		{Topic: "__ds.s", Partition: 0, Leader: 1, HighWatermark: 4, SizeBytes: 40},
	}, StreamReaders: []transport.StreamReaderCount{{Path: "/logs/a", Readers: 2}}}
	st2 := &transport.NodeStatus{Node: 2, Partitions: []transport.PartitionStatus{
		{Topic: "orders", Partition: 1, Leader: 2, HighWatermark: hw1, LogStartOffset: 0, SizeBytes: 200},
	}, StreamReaders: []transport.StreamReaderCount{{Path: "/logs/a", Readers: 1}, {Path: "/logs/old", Readers: 1}}}
	if down2 {
		st2 = nil
	}
	groups := []client.GroupSummary{{Name: "g", State: "stable", Members: 1}, {Name: "k", State: "Stable", Members: 2}}
	descs := []client.GroupDescription{
		{Group: "g", State: "stable", Members: []client.GroupMember{{MemberID: "m", Topics: []string{"orders"}}},
			Partitions: []client.GroupPartition{{Topic: "orders", Partition: 0, Committed: 3}}},
		{},
	}
	errs := []error{nil, transport.ErrCoordinatorLoading}
	snap := &snapshot{at: at}
	snap.build(md, []*transport.NodeStatus{st1, st2}, groups, descs, errs)
	return snap
}

func TestSnapshotSizesRatesAndLag(t *testing.T) {
	t0 := time.Unix(1000, 0)
	first := seededRound(t0, 10, 5, false)
	orders, ok := first.topic("orders")
	require.True(t, ok)
	bytes, records, unknown := orders.sums()
	assert.Equal(t, int64(300), bytes, "one copy: the leaders' replicas")
	assert.Equal(t, int64(9+5), records, "high watermark minus log start, per partition")
	assert.Zero(t, unknown)
	assert.Nil(t, orders.rate, "no rate from one round")

	g := first.groups[0]
	require.Equal(t, "g", g.name)
	// orders/0: committed 3, HW 10: 7; orders/1 never committed but
	// subscribed: from its log start 0 to HW 5.
	assert.Equal(t, map[string]int64{"orders": 7 + 5}, g.lag)
	assert.Equal(t, "native", g.protocol)
	k := first.groups[1]
	assert.Nil(t, k.lag, "a group whose coordinator did not answer has no lag, not 0")
	assert.Equal(t, []groupLag{{"g", 12}}, first.readers["orders"])
	assert.True(t, first.readersKnown)
	assert.Equal(t, map[string]int{"/logs/a": 2 + 1, "/logs/old": 1}, first.streamReaders, "every broker's readers of a stream")
	assert.Contains(t, first.unavailable, "group k: "+transport.ErrCoordinatorLoading.Error())

	// Ten seconds later, 100 more records in each partition: 20/s.
	second := seededRound(t0.Add(10*time.Second), 110, 105, false)
	second.rateFrom(first)
	orders, _ = second.topic("orders")
	require.NotNil(t, orders.rate)
	assert.InDelta(t, 20.0, *orders.rate, 0.001)

	// Broker 2 silent: its partition is unknown, left out of sizes, lag
	// and rate rather than counted as 0.
	third := seededRound(t0.Add(20*time.Second), 210, 105, true)
	third.rateFrom(second)
	orders, _ = third.topic("orders")
	bytes, _, unknown = orders.sums()
	assert.Equal(t, int64(100), bytes)
	assert.Equal(t, 1, unknown)
	assert.InDelta(t, 10.0, *orders.rate, 0.001, "only the partition both rounds know")
	assert.Equal(t, map[string]int64{"orders": 207}, third.groups[0].lag)
	assert.False(t, third.readersKnown, "broker 2's readers are unknown, so the streams' are")
}

func TestLagHistoryKeepsAnHourOfRounds(t *testing.T) {
	var h lagHistory
	t0 := time.Unix(1000, 0)
	round := func(i int, groups ...surveyGroup) *snapshot {
		return &snapshot{at: t0.Add(time.Duration(i) * 10 * time.Second), groups: groups}
	}
	h.add(round(0, surveyGroup{name: "g", lag: map[string]int64{"a": 5}}))
	h.add(round(1, surveyGroup{name: "g", lag: map[string]int64{"a": 6, "b": 1}}, surveyGroup{name: "k"}))
	assert.Equal(t, []int64{5, 6}, h.series[groupTopic{"g", "a"}])
	assert.Equal(t, []int64{-1, 1}, h.series[groupTopic{"g", "b"}], "not measured before it appeared")
	for i := 2; i < lagRounds+5; i++ {
		h.add(round(i, surveyGroup{name: "g", lag: map[string]int64{"a": int64(i)}}))
	}
	assert.Len(t, h.times, lagRounds)
	assert.Equal(t, t0.Add(5*10*time.Second), h.times[0], "the oldest rounds are dropped")
	a := h.series[groupTopic{"g", "a"}]
	require.Len(t, a, lagRounds)
	assert.Equal(t, int64(5), a[0])
	assert.Equal(t, int64(lagRounds+4), a[lagRounds-1])
	assert.NotContains(t, h.series, groupTopic{"g", "b"}, "a series no kept round measured is dropped")
}

// A replica's broker the metadata does not list, or lists without an
// HTTP address, has no status, and the answer says so rather than ask.
func TestReplicaStatusesWithoutAnAddress(t *testing.T) {
	brokers := []client.Broker{{ID: 1, Addr: "n1:9400"}}
	topic := client.TopicMetadata{Name: "orders", Partitions: []client.PartitionMetadata{
		{Partition: 0, Leader: 1, Replicas: []int32{1, 7}},
	}}
	statuses, unavailable := replicaStatuses(context.Background(), nil, brokers, topic)
	assert.Empty(t, statuses)
	assert.Equal(t, []string{"broker 1: no HTTP address to ask its status", "broker 7: no HTTP address to ask its status"}, unavailable)
}

package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// A topic that grew gets a Producer's keyed records by its new partition
// count once the producer's metadata of it is older than MetadataMaxAge:
// without asking again, the producer routed by the count it first saw for
// as long as it lived, and a key's new partition never got its records.
func TestProducerRoutesByTheGrownPartitionCount(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("grows", 2)
	c := newTestClient(t, fc, func(cfg *Config) { cfg.MetadataMaxAge = 100 * time.Millisecond })
	p := newTestProducer(t, c, ProducerConfig{Linger: -1})
	ctx := testCtx(t)

	// A key whose partition is another among 4 than among 2.
	var key []byte
	for i := 0; key == nil; i++ {
		if k := []byte(fmt.Sprint("key-", i)); Partition(k, 4) != Partition(k, 2) {
			key = k
		}
	}
	ack, err := p.Send(ctx, ProducerRecord{Topic: "grows", Key: key, Value: []byte("before")})
	require.NoError(t, err)
	require.Equal(t, int32(Partition(key, 2)), ack.Partition)

	fc.set(func(fc *fakeCluster) {
		tp := fc.topics["grows"]
		for p := range 2 {
			tp.parts = append(tp.parts, &fakePartition{leader: int32(p%2 + 1), epoch: 1, changed: make(chan struct{})})
		}
		fc.epoch++
	})
	want := int32(Partition(key, 4))
	require.Eventually(t, func() bool {
		ack, err := p.Send(ctx, ProducerRecord{Topic: "grows", Key: key, Value: []byte("after")})
		require.NoError(t, err)
		return ack.Partition == want
	}, 10*time.Second, 20*time.Millisecond, "the producer never routed by the new count")
	assert.Contains(t, fc.values("grows", int(want)), "after")

	// Until the age passes, the producer does not ask again: at most one
	// metadata request per MetadataMaxAge, not one per record.
	asked := func() int { return fc.count(1, transport.APIMetadata) + fc.count(2, transport.APIMetadata) }
	before, start := asked(), time.Now()
	for range 50 {
		_, err := p.Send(ctx, ProducerRecord{Topic: "grows", Key: key, Value: []byte("x")})
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, asked()-before, int(time.Since(start)/(100*time.Millisecond))+1)
}

// A record for a partition the producer's metadata does not have yet
// makes it ask again at once: the topic may have grown. Without that it
// failed with UnknownPartition until the producer's metadata aged out.
func TestProducerAsksAgainForAPartitionItDoesNotKnow(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("grows", 1)
	c := newTestClient(t, fc, nil) // MetadataMaxAge: 30s
	p := newTestProducer(t, c, ProducerConfig{Linger: -1})
	ctx := testCtx(t)
	_, err := p.Send(ctx, ProducerRecord{Topic: "grows", Value: []byte("a")})
	require.NoError(t, err)

	fc.set(func(fc *fakeCluster) {
		fc.topics["grows"].parts = append(fc.topics["grows"].parts, &fakePartition{leader: 2, epoch: 1, changed: make(chan struct{})})
		fc.epoch++
	})
	ack, err := p.Send(ctx, ProducerRecord{Topic: "grows", Value: []byte("b"), Partition: 1, ManualPartition: true})
	require.NoError(t, err)
	assert.Equal(t, int32(1), ack.Partition)
	assert.Equal(t, []string{"b"}, fc.values("grows", 1))

	_, err = p.Send(ctx, ProducerRecord{Topic: "grows", Value: []byte("c"), Partition: 2, ManualPartition: true})
	assert.ErrorIs(t, err, transport.ErrUnknownPartition, "a partition it does not have after asking")
}

// CreatePartitions returns once every new partition's leader answers: a
// metadata answer that does not show the new partitions yet (a broker the
// change has not reached) is asked again, not taken as the last word.
// Without that it reported the grown topic NotServing at the first such
// answer.
func TestCreatePartitionsWaitsForTheNewPartitions(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("grows", 1)
	c := newTestClient(t, fc, nil)
	var answers atomic.Int32
	fc.set(func(fc *fakeCluster) {
		fc.operator = func(context.Context, transport.API, []byte) ([]byte, error) {
			return []byte(`{"results":[{"topic":"grows","partition":1,"action":"create-partition","old_leader":2,"new_leader":2,"old_epoch":0,"new_epoch":0,"old_active":null,"new_active":[2]}]}`), nil
		}
		// The brokers show the new partition from the fifth metadata
		// answer on (the first was New's).
		fc.onMetadata = func() {
			if answers.Add(1) == 5 {
				fc.set(func(fc *fakeCluster) {
					fc.topics["grows"].parts = append(fc.topics["grows"].parts, &fakePartition{leader: 2, epoch: 1, changed: make(chan struct{})})
					fc.epoch++
				})
			}
		}
	})
	rep, err := c.CreatePartitions(testCtx(t), CreatePartitionsRequest{Topic: "grows", Count: 2, Requester: "me"})
	require.NoError(t, err)
	require.Len(t, rep.Results, 1)
	assert.Equal(t, ActionCreatePartition, rep.Results[0].Action)
	assert.GreaterOrEqual(t, answers.Load(), int32(5))
	fc.mu.Lock()
	defer fc.mu.Unlock()
	require.Len(t, fc.operatorBodies, 1)
	assert.JSONEq(t, `{"topic":"grows","count":2,"dry_run":false,"requester":"me"}`, fc.operatorBodies[0])
}

package client

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
	"gostream/transport"
)

func TestNewTriesEveryBootstrapAddress(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("t", 2)
	c := newTestClient(t, fc, func(cfg *Config) { cfg.Bootstrap = []string{deadAddr(t), fc.brokers[2].addr} })
	m, err := c.Metadata(testCtx(t))
	require.NoError(t, err)
	assert.Equal(t, "fake", m.ClusterID)
	require.Len(t, m.Brokers, 2)
	assert.Equal(t, fc.brokers[1].addr, m.Brokers[0].Addr)
	require.Len(t, m.Topics, 1)
	assert.Equal(t, "t", m.Topics[0].Name)
	assert.Equal(t, []int32{1, 2}, []int32{m.Topics[0].Partitions[0].Leader, m.Topics[0].Partitions[1].Leader})
}

func TestNewFailsWhenNoBrokerAnswers(t *testing.T) {
	// It retries until the deadline: a cluster may be starting.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := New(ctx, Config{Bootstrap: []string{deadAddr(t), deadAddr(t)}, Logger: testLogger(t), DialTimeout: time.Second})
	assert.ErrorIs(t, err, transport.ErrBrokerNotAvailable)
	assert.Contains(t, err.Error(), " attempts in ")

	_, err = New(testCtx(t), Config{})
	assert.ErrorIs(t, err, ErrInvalidConfig)
}

func TestClientCloseIsIdempotent(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newTestClient(t, fc, nil)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close())
	_, err := c.Metadata(testCtx(t))
	assert.ErrorIs(t, err, ErrClosed)
}

// TestTopicConfig: a configuration goes to the controller with the create
// and the alter, the answer carries it, and a bad key or value is refused
// before anything is sent, naming the key.
func TestTopicConfig(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.set(func(fc *fakeCluster) { fc.controller = 2 })
	c := newTestClient(t, fc, nil)
	ctx := testCtx(t)

	for _, bad := range []struct {
		config metadata.TopicConfig
		key    string
	}{
		{metadata.TopicConfig{"retention.hours": 1}, `unknown key "retention.hours"`},
		{metadata.TopicConfig{"retention.bytes": 1, "segment.bytes": 12}, "segment.bytes 12"},
		{metadata.TopicConfig{"retention.ms": 0}, "retention.ms 0"},
	} {
		_, err := c.CreateTopicWithConfig(ctx, "logs", 1, 1, bad.config)
		require.ErrorIs(t, err, transport.ErrInvalidConfig)
		assert.ErrorIs(t, err, metadata.ErrInvalidConfig)
		assert.Contains(t, err.Error(), bad.key)
	}
	assert.Zero(t, fc.count(2, transport.APICreateTopic), "refused before anything is sent")

	tm, err := c.CreateTopicWithConfig(ctx, "logs", 1, 1, metadata.TopicConfig{"retention.bytes": 1 << 30, "segment.ms": 60000})
	require.NoError(t, err)
	assert.Equal(t, []TopicConfigValue{{Key: "retention.bytes", Value: 1 << 30}, {Key: "segment.ms", Value: 60000}}, tm.Config)

	for _, bad := range []struct {
		set    metadata.TopicConfig
		remove []string
		want   string
	}{
		{metadata.TopicConfig{"segment.bytes": -1}, nil, "segment.bytes -1"},
		{nil, []string{"retention.hours"}, `unknown key "retention.hours"`},
		{metadata.TopicConfig{"segment.ms": 60000}, []string{"segment.ms"}, "segment.ms is both set and removed"},
		{nil, nil, "nothing to change"},
	} {
		_, err := c.AlterTopicConfig(ctx, "logs", bad.set, bad.remove)
		require.ErrorIs(t, err, transport.ErrInvalidConfig)
		assert.Contains(t, err.Error(), bad.want)
	}
	assert.Zero(t, fc.count(2, transport.APIAlterTopicConfig), "refused before anything is sent")

	tm, err = c.AlterTopicConfig(ctx, "logs", metadata.TopicConfig{"retention.ms": -1}, []string{"segment.ms"})
	require.NoError(t, err)
	assert.Equal(t, 1, fc.count(2, transport.APIAlterTopicConfig))
	assert.Equal(t, []TopicConfigValue{{Key: "retention.bytes", Value: 1 << 30}, {Key: "retention.ms", Value: -1}}, tm.Config)
	got, err := c.DescribeTopic(ctx, "logs")
	require.NoError(t, err)
	assert.Equal(t, tm.Config, got.Config)

	_, err = c.AlterTopicConfig(ctx, "nope", metadata.TopicConfig{"retention.ms": -1}, nil)
	assert.ErrorIs(t, err, transport.ErrUnknownTopic)
}

func TestAdmin(t *testing.T) {
	fc := newFakeCluster(t, 3)
	fc.set(func(fc *fakeCluster) { fc.controller = 2 })
	c := newTestClient(t, fc, nil)
	ctx := testCtx(t)

	tm, err := c.CreateTopic(ctx, "orders", 3, 2)
	require.NoError(t, err)
	assert.Equal(t, "orders", tm.Name)
	assert.Equal(t, 2, tm.ReplicationFactor)
	require.Len(t, tm.Partitions, 3)
	assert.Equal(t, 1, fc.count(2, transport.APICreateTopic), "admin requests go to the controller")
	assert.Zero(t, fc.count(1, transport.APICreateTopic)+fc.count(3, transport.APICreateTopic))

	_, err = c.CreateTopic(ctx, "orders", 3, 2)
	assert.ErrorIs(t, err, transport.ErrTopicExists)
	_, err = c.CreateTopic(ctx, "bad", 0, 1)
	assert.ErrorIs(t, err, transport.ErrInvalidPartitions)
	sent := fc.count(2, transport.APICreateTopic)
	_, err = c.CreateTopic(ctx, "../x", 1, 1)
	assert.ErrorIs(t, err, transport.ErrInvalidTopicName)
	assert.Equal(t, sent, fc.count(2, transport.APICreateTopic), "a bad name is refused before anything is sent")

	got, err := c.DescribeTopic(ctx, "orders")
	require.NoError(t, err)
	assert.Equal(t, tm, got)
	topics, err := c.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, topics, 1)
	assert.Equal(t, "orders", topics[0].Name)

	p := newTestProducer(t, c, ProducerConfig{})
	for range 2 {
		_, err := p.Send(ctx, ProducerRecord{Topic: "orders", Value: []byte("x"), Partition: 1, ManualPartition: true})
		require.NoError(t, err)
	}
	offs, err := c.ListOffsets(ctx, "orders", 1)
	require.NoError(t, err)
	assert.Equal(t, PartitionOffsets{LogStartOffset: 0, HighWatermark: 2, LogEndOffset: 2}, offs)

	require.NoError(t, c.SealTopic(ctx, "orders"))
	got, err = c.DescribeTopic(ctx, "orders")
	require.NoError(t, err)
	assert.True(t, got.Sealed)
	_, err = p.Send(ctx, ProducerRecord{Topic: "orders", Value: []byte("x"), Partition: 1, ManualPartition: true})
	assert.ErrorIs(t, err, transport.ErrTopicSealed)

	require.NoError(t, c.DeleteTopic(ctx, "orders"))
	_, err = c.DescribeTopic(ctx, "orders")
	assert.ErrorIs(t, err, transport.ErrUnknownTopic)
	assert.ErrorIs(t, c.DeleteTopic(ctx, "orders"), transport.ErrUnknownTopic)
}

func TestAdminFollowsTheController(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestClient(t, fc, nil) // caches controller 1
	fc.set(func(fc *fakeCluster) {
		fc.controller = 2
		fc.epoch++
	})
	_, err := c.CreateTopic(testCtx(t), "t", 1, 1)
	require.NoError(t, err)
	assert.Equal(t, 1, fc.count(1, transport.APICreateTopic), "tried the old controller, which refused")
	assert.Equal(t, 1, fc.count(2, transport.APICreateTopic))
}

func TestListOffsetsFollowsLeaderChange(t *testing.T) {
	fc := newFakeCluster(t, 2)
	fc.addTopic("t", 1)
	fc.appendValues("t", 0, "a", "b")
	c := newTestClient(t, fc, nil)
	fc.moveLeader("t", 0, 2)
	offs, err := c.ListOffsets(testCtx(t), "t", 0)
	require.NoError(t, err)
	assert.Equal(t, int64(2), offs.HighWatermark)
	assert.Equal(t, 1, fc.count(1, transport.APIListOffsets))
	assert.Equal(t, 1, fc.count(2, transport.APIListOffsets))

	_, err = c.ListOffsets(testCtx(t), "t", 5)
	assert.ErrorIs(t, err, transport.ErrUnknownPartition)
}

func TestMetadataKeepsTheNewestEpoch(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, nil)
	newer := &transport.MetadataResponse{ClusterID: "fake", MetadataEpoch: 100, Topics: []transport.TopicInfo{{Name: "t", Partitions: []transport.PartitionInfo{{Leader: 7, LeaderEpoch: 9}}}}}
	require.True(t, c.apply(newer, nil))
	require.NoError(t, c.RefreshMetadata(testCtx(t), "t"), "an older answer is not an error")
	assert.Equal(t, int32(7), c.state().topics["t"].Partitions[0].Leader, "an older answer does not replace a newer one")
}

func TestRefreshMetadataSharesConcurrentRequests(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, nil)
	release := make(chan struct{})
	entered := make(chan struct{}, 16)
	fc.set(func(fc *fakeCluster) {
		fc.onMetadata = func() {
			entered <- struct{}{}
			<-release
		}
	})
	ctx := testCtx(t)
	errs := make(chan error, 4)
	go func() { errs <- c.RefreshMetadata(ctx, "t") }()
	<-entered
	for range 3 {
		go func() { errs <- c.RefreshMetadata(ctx, "t") }()
	}
	// Were the three to make their own requests, they would enter the hook.
	require.Never(t, func() bool { return len(entered) > 0 }, 200*time.Millisecond, time.Millisecond)
	close(release)
	for range 4 {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal(context.Cause(ctx))
		}
	}
}

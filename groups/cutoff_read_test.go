package groups

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

// cutOffLog is a coordinator's log cut off from its followers after its
// partition was failed over: nothing appended from now on is ever
// acknowledged, and the followers, once asked, say a newer leader exists.
type cutOffLog struct {
	memLog
	cut      bool
	ackedEnd int64
}

func (l *cutOffLog) WaitAcked(ctx context.Context, end int64) error {
	if !l.cut || end <= l.ackedEnd {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (l *cutOffLog) Confirm(context.Context) error {
	if l.cut {
		return fmt.Errorf("%w: a follower has seen a newer leader epoch", ErrNotCoordinator)
	}
	return nil
}

// A coordinator cut off with an append that can no longer be
// acknowledged (a commit that reached it after the failover) answers the
// reads of its groups NotCoordinator at once, which sends readers to the
// new coordinator: it waited out each reader's deadline instead
// (TestCutOffCoordinatorDoesNotServeStaleOffsets saw it time out).
func TestCutOffCoordinatorAnswersReadsNotCoordinator(t *testing.T) {
	log, clock := &cutOffLog{}, &fakeClock{t: time.Unix(1000, 0)}
	c := NewCoordinator(CoordinatorConfig{Log: log, Topics: fakeTopics{"t": 6}, Now: clock.now,
		NewMemberID: func() string { return "m" }})
	c.Start(0)
	commit := func(off int64) error {
		return c.Commit(context.Background(), &transport.OffsetCommitRequest{Group: "g", MemberEpoch: transport.NoMemberEpoch,
			Offsets: []transport.CommitOffset{{Topic: "t", Partition: 0, Offset: off}}})
	}
	require.NoError(t, commit(3))
	log.ackedEnd = int64(log.len())
	log.cut = true
	require.NoError(t, commit(7), "appended; its acknowledgement is what never comes")

	for name, read := range map[string]func(context.Context) error{
		"OffsetFetch": func(ctx context.Context) error {
			_, err := c.Committed(ctx, &transport.OffsetFetchRequest{Group: "g"})
			return err
		},
		"DescribeGroup": func(ctx context.Context) error { _, err := c.Describe(ctx, "g"); return err },
		"ListGroups":    func(ctx context.Context) error { _, err := c.List(ctx); return err },
		"Kafka DescribeGroups": func(ctx context.Context) error {
			_, err := c.KafkaDescribe(ctx, "g")
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := read(ctx)
		cancel()
		assert.ErrorIs(t, err, ErrNotCoordinator, name)
		assert.Less(t, time.Since(start), 5*time.Second, "%s waited for an acknowledgement that cannot come", name)
	}
}

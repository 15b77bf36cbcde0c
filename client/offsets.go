package client

import (
	"context"
	"errors"
	"fmt"

	"gostream/transport"
)

// CommitOffset is an offset to commit for a partition: the offset of the
// next record to process (one past the last record processed), and an
// optional metadata string (at most 4 KiB) kept with it.
type CommitOffset struct {
	Topic     string
	Partition int32
	Offset    int64
	Metadata  string
}

// CommittedOffset is a committed offset as the group's coordinator holds
// it.
type CommittedOffset struct {
	Topic       string
	Partition   int32
	Offset      int64
	Metadata    string
	MemberID    string // empty for a commit from outside a membership
	MemberEpoch int32
	TimeMs      int64 // when the coordinator accepted it, Unix milliseconds
}

// CommitOffsets commits offsets for group from outside any membership: the
// group is a durable progress identity (a consumer of explicit
// partitions). Every offset is checked and then all are written, or none:
// an offset below the one committed fails with an error matching
// transport.ErrOffsetRegression, one that is negative or above the
// partition's high watermark with transport.ErrInvalidOffset, one of a
// partition that does not exist with transport.ErrUnknownPartition, and a
// group that has members refuses commits from outside them
// (transport.ErrUnknownMember). It returns once every active replica of
// the group's partition of __consumer_offsets holds the commit.
func (c *Client) CommitOffsets(ctx context.Context, group string, offsets ...CommitOffset) error {
	return c.commit(ctx, &transport.OffsetCommitRequest{Group: group, MemberEpoch: transport.NoMemberEpoch, Offsets: wireOffsets(offsets)})
}

func wireOffsets(offsets []CommitOffset) []transport.CommitOffset {
	out := make([]transport.CommitOffset, len(offsets))
	for i, o := range offsets {
		out[i] = transport.CommitOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata}
	}
	return out
}

func (c *Client) commit(ctx context.Context, req *transport.OffsetCommitRequest) error {
	if err := c.coordinatorCall(ctx, req.Group, transport.APIOffsetCommit, req, nil); err != nil {
		return fmt.Errorf("commit offsets of group %q: %w", req.Group, err)
	}
	return nil
}

// CommittedOffsets returns group's committed offsets of the topics named
// (of every topic with none named), sorted by topic and partition. A
// partition that is not in the answer was never committed, which is not a
// committed 0.
func (c *Client) CommittedOffsets(ctx context.Context, group string, topics ...string) ([]CommittedOffset, error) {
	var resp transport.OffsetFetchResponse
	if err := c.coordinatorCall(ctx, group, transport.APIOffsetFetch, &transport.OffsetFetchRequest{Group: group, Topics: topics}, &resp); err != nil {
		return nil, fmt.Errorf("committed offsets of group %q: %w", group, err)
	}
	out := make([]CommittedOffset, len(resp.Offsets))
	for i, o := range resp.Offsets {
		out[i] = CommittedOffset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Metadata: o.Metadata,
			MemberID: o.MemberID, MemberEpoch: o.MemberEpoch, TimeMs: o.TimeMs}
	}
	return out, nil
}

// Committed returns group's committed offset of one partition, and false
// when it was never committed.
func (c *Client) Committed(ctx context.Context, group, topic string, partition int32) (CommittedOffset, bool, error) {
	offs, err := c.CommittedOffsets(ctx, group, topic)
	if err != nil {
		return CommittedOffset{}, false, err
	}
	for _, o := range offs {
		if o.Partition == partition {
			return o, true, nil
		}
	}
	return CommittedOffset{}, false, nil
}

// coordinatorCall makes a group request of the group's coordinator. It
// finds the coordinator (any broker names it; the first use of groups
// creates __consumer_offsets), and after an error that may pass
// (NotCoordinator, CoordinatorLoading, a broker that does not answer)
// finds it again and retries, as the retry policy paces it, until ctx's
// deadline or RetryTimeout. A commit sent twice (its answer lost) commits
// the same offset twice, which changes nothing.
func (c *Client) coordinatorCall(ctx context.Context, group string, api transport.API, req, resp transport.Message) error {
	retry := newRetrier(ctx, c.retryPolicy())
	for {
		addr, err := c.coordinator(ctx, group)
		if err == nil {
			if err = c.call(ctx, addr, 0, api, req, resp); err == nil {
				return nil
			}
		}
		if !retryOn(ctx, err, retriable) {
			return err
		}
		c.coordinators.Delete(group)
		c.log.Debug("retrying a group request", "group", group, "api", api.String(), "err", err)
		if gaveUp := retry.again(ctx, err); gaveUp != nil {
			return gaveUp
		}
	}
}

// coordinator returns the address of group's coordinator, cached or asked
// of the brokers in turn.
func (c *Client) coordinator(ctx context.Context, group string) (string, error) {
	if c.closed() {
		return "", ErrClosed
	}
	if a, ok := c.coordinators.Load(group); ok {
		return a.(string), nil
	}
	var errs []error
	for _, addr := range c.candidates() {
		var resp transport.FindCoordinatorResponse
		actx, cancel := context.WithTimeout(ctx, metadataAttemptTimeout)
		err := c.pool.Call(actx, addr, transport.APIFindCoordinator, &transport.FindCoordinatorRequest{Group: group}, &resp)
		cancel()
		switch {
		case err == nil && resp.Addr != "" && resp.Leader >= 0:
			c.coordinators.Store(group, resp.Addr)
			return resp.Addr, nil
		case err == nil:
			return "", fmt.Errorf("%w: partition %d of %s, group %q's, has no leader now", transport.ErrNotCoordinator, resp.Partition, transport.OffsetsTopic, group)
		case !retriable(err) && !isContextErr(err):
			return "", err // the group name is refused, say
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
		if ctx.Err() != nil {
			break
		}
	}
	return "", fmt.Errorf("%w: no broker named group %q's coordinator: %w", transport.ErrBrokerNotAvailable, group, errors.Join(errs...))
}

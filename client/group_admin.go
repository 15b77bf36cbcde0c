package client

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gostream/record"
	"gostream/transport"
)

// GroupSummary is one group in ListGroups.
type GroupSummary struct {
	Name       string
	State      string // stable, rebalancing or empty
	Members    int
	GroupEpoch int32
}

// GroupList is the cluster's groups. Unavailable lists the partitions of
// __consumer_offsets whose coordinator did not answer, each with its
// error: their groups are missing from Groups.
type GroupList struct {
	Groups      []GroupSummary
	Unavailable []error
}

// ListGroups lists every group of every coordinator, sorted by name. With
// no __consumer_offsets topic (no group has been used) the list is empty.
func (c *Client) ListGroups(ctx context.Context) (GroupList, error) {
	t, err := c.DescribeTopic(ctx, transport.OffsetsTopic)
	if errors.Is(err, transport.ErrUnknownTopic) {
		return GroupList{}, nil
	}
	if err != nil {
		return GroupList{}, fmt.Errorf("list groups: %w", err)
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out GroupList
	)
	for _, p := range t.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp transport.ListGroupsResponse
			err := c.withLeader(ctx, transport.OffsetsTopic, p.Partition, func(ctx context.Context, r route) error {
				return c.call(ctx, r.addr, 0, transport.APIListGroups, &transport.ListGroupsRequest{Partition: p.Partition}, &resp)
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.Unavailable = append(out.Unavailable, fmt.Errorf("partition %d of %s: %w", p.Partition, transport.OffsetsTopic, err))
				return
			}
			for _, g := range resp.Groups {
				out.Groups = append(out.Groups, GroupSummary{Name: g.Name, State: g.State, Members: int(g.Members), GroupEpoch: g.GroupEpoch})
			}
		}()
	}
	wg.Wait()
	slices.SortFunc(out.Groups, func(a, b GroupSummary) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// GroupMember is one member of a described group.
type GroupMember struct {
	MemberID       string
	InstanceID     string // empty for a dynamic member
	Host           string
	MemberEpoch    int32
	Topics         []string // its subscription
	SessionTimeout time.Duration
	// Owned is what the member owns now; Target, what the group's
	// assignment gives it. They differ while partitions move.
	Owned  []TopicPartition
	Target []TopicPartition
	// SinceHeartbeat is how long ago the member last heartbeat; negative
	// when it has not since its coordinator took over.
	SinceHeartbeat time.Duration
	// ClientID is a Kafka-protocol member's client id.
	ClientID string
}

// GroupPartition is the progress of a group in one partition.
type GroupPartition struct {
	Topic     string
	Partition int32
	// Committed is the committed offset, Never when none was.
	Committed int64
	Metadata  string
	// LogEnd is the partition's high watermark (the end a consumer can
	// read to) and Lag the records between Committed (or the log start
	// when never committed) and it; both are Unknown when the
	// partition's leader did not answer (LogEndErr says why).
	LogEnd    int64
	Lag       int64
	LogEndErr error
}

// Never and Unknown are the committed offset of a partition never
// committed and the log end and lag that could not be learned.
const (
	Never   int64 = -1
	Unknown int64 = -1
)

// GroupDescription is a group as its coordinator describes it, with the
// log end and lag of every partition it has committed or that its
// members subscribe to.
type GroupDescription struct {
	Group       string
	State       string
	GroupEpoch  int32 // the generation
	Assignor    string
	Coordinator int32
	Members     []GroupMember
	Partitions  []GroupPartition // sorted by topic and partition
	// ProtocolType is a Kafka-protocol group's protocol type ("consumer",
	// "connect"...), empty for a group of gostream's own protocol.
	ProtocolType string
}

func tpsFromWire(in []transport.TopicPartitions) []TopicPartition {
	var out []TopicPartition
	for _, t := range in {
		for _, p := range t.Partitions {
			out = append(out, TopicPartition{t.Topic, p})
		}
	}
	return sortedParts(out)
}

// DescribeGroupCommitted describes group as its coordinator alone
// answers: its state, members and committed offsets, in one request.
// Partitions are the partitions committed, with LogEnd and Lag Unknown
// (DescribeGroup learns them, at a request per partition). A group that
// holds nothing is transport.ErrUnknownGroup.
func (c *Client) DescribeGroupCommitted(ctx context.Context, group string) (GroupDescription, error) {
	var resp transport.DescribeGroupResponse
	if err := c.coordinatorCall(ctx, group, transport.APIDescribeGroup, &transport.GroupRequest{Group: group}, &resp); err != nil {
		return GroupDescription{}, fmt.Errorf("describe group %q: %w", group, err)
	}
	d := GroupDescription{Group: resp.Group, State: resp.State, GroupEpoch: resp.GroupEpoch, Assignor: resp.Assignor, Coordinator: resp.Coordinator,
		ProtocolType: resp.ProtocolType}
	for _, m := range resp.Members {
		d.Members = append(d.Members, GroupMember{MemberID: m.MemberID, InstanceID: m.InstanceID, Host: m.Host, MemberEpoch: m.MemberEpoch,
			Topics: m.Topics, SessionTimeout: time.Duration(m.SessionTimeoutMs) * time.Millisecond,
			Owned: tpsFromWire(m.Owned), Target: tpsFromWire(m.Target), SinceHeartbeat: time.Duration(m.SinceHeartbeatMs) * time.Millisecond,
			ClientID: m.ClientID})
	}
	for _, o := range resp.Offsets {
		d.Partitions = append(d.Partitions, GroupPartition{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, Metadata: o.Metadata,
			LogEnd: Unknown, Lag: Unknown})
	}
	slices.SortFunc(d.Partitions, func(a, b GroupPartition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return d, nil
}

// DescribeGroup describes group. A group that holds nothing (no member,
// no committed offset) is transport.ErrUnknownGroup.
func (c *Client) DescribeGroup(ctx context.Context, group string) (GroupDescription, error) {
	d, err := c.DescribeGroupCommitted(ctx, group)
	if err != nil {
		return GroupDescription{}, err
	}
	topics := map[string]bool{}
	for _, m := range d.Members {
		for _, t := range m.Topics {
			topics[t] = true
		}
	}
	committed := map[TopicPartition]GroupPartition{}
	for _, p := range d.Partitions {
		committed[TopicPartition{p.Topic, p.Partition}] = p
		topics[p.Topic] = true
	}
	var parts []TopicPartition
	for t := range topics {
		md, err := c.DescribeTopic(ctx, t)
		if err != nil {
			// A subscribed topic that does not exist has no partitions; a
			// committed one that is gone shows what was committed.
			for tp := range committed {
				if tp.Topic == t {
					parts = append(parts, tp)
				}
			}
			continue
		}
		for _, p := range md.Partitions {
			parts = append(parts, TopicPartition{t, p.Partition})
		}
	}
	parts = sortedParts(parts)
	d.Partitions = make([]GroupPartition, len(parts))
	var wg sync.WaitGroup
	for i, tp := range parts {
		gp := &d.Partitions[i]
		*gp = GroupPartition{Topic: tp.Topic, Partition: tp.Partition, Committed: Never, LogEnd: Unknown, Lag: Unknown}
		if o, ok := committed[tp]; ok {
			gp.Committed, gp.Metadata = o.Committed, o.Metadata
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			offs, err := c.ListOffsets(ctx, tp.Topic, tp.Partition)
			if err != nil {
				gp.LogEndErr = err
				return
			}
			gp.LogEnd = offs.HighWatermark
			gp.Lag = Lag(gp.Committed, offs.LogStartOffset, offs.HighWatermark)
		}()
	}
	wg.Wait()
	return d, nil
}

// Lag is how many records a group has to read in a partition: from its
// committed offset (the log start when it never committed: Never) to the
// high watermark, never below 0.
func Lag(committed, logStart, highWatermark int64) int64 {
	if committed == Never {
		committed = logStart
	}
	return max(highWatermark-committed, 0)
}

// DeleteGroup deletes a group that has no members, and its committed
// offsets. A group with members is transport.ErrGroupNotEmpty; one that
// holds nothing, transport.ErrUnknownGroup.
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	if err := c.coordinatorCall(ctx, group, transport.APIDeleteGroup, &transport.GroupRequest{Group: group}, nil); err != nil {
		return fmt.Errorf("delete group %q: %w", group, err)
	}
	return nil
}

// ResetOffsets sets group's committed offsets to offsets, backwards as
// well as forwards: the explicit reset that may move a committed offset
// back. It is refused while the group has members
// (transport.ErrGroupNotEmpty); requester is kept with the reset, for the
// record. All are written, or none.
func (c *Client) ResetOffsets(ctx context.Context, group, requester string, offsets ...CommitOffset) error {
	return c.commit(ctx, &transport.OffsetCommitRequest{Group: group, MemberEpoch: transport.NoMemberEpoch, Reset: true,
		Requester: requester, Offsets: wireOffsets(offsets)})
}

// OffsetForTime returns the offset of the first batch of the partition
// appended at or after t, or its high watermark when none was. It
// searches by bisection, reading one batch per step, so it assumes
// append times rise along the partition, as they do while one leader
// appends (a leader whose clock is behind the last one's can break that,
// and then the answer is a batch near t, not the first).
func (c *Client) OffsetForTime(ctx context.Context, topic string, partition int32, t time.Time) (int64, error) {
	offs, err := c.ListOffsets(ctx, topic, partition)
	if err != nil {
		return 0, err
	}
	want := t.UnixMilli()
	lo, hi := offs.LogStartOffset, offs.HighWatermark
	for lo < hi {
		mid := lo + (hi-lo)/2
		b, err := c.batchAt(ctx, topic, partition, mid)
		if err != nil {
			return 0, fmt.Errorf("offset for time %s of %s/%d: %w", t.Format(time.RFC3339), topic, partition, err)
		}
		if b.AppendTime() >= want {
			hi = max(b.BaseOffset(), lo)
		} else {
			lo = b.NextOffset()
		}
	}
	return lo, nil
}

// batchAt returns the batch that holds offset.
func (c *Client) batchAt(ctx context.Context, topic string, partition int32, offset int64) (record.Batch, error) {
	var resp transport.FetchResponse
	err := c.withLeader(ctx, topic, partition, func(ctx context.Context, r route) error {
		resp = transport.FetchResponse{}
		return c.call(ctx, r.addr, 0, transport.APIFetch, &transport.FetchRequest{Topic: topic, TopicID: r.topicID, Partition: partition,
			Offset: offset, MaxBytes: 1}, &resp)
	})
	if err != nil {
		return nil, err
	}
	b, _, err := record.Frame(resp.Batches, record.MaxBatchSize)
	if err != nil {
		return nil, fmt.Errorf("%w: batch at offset %d: %w", ErrCorruptBatch, offset, err)
	}
	return b, nil
}

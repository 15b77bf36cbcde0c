package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gostream/metadata"
)

// Durable Streams streams are topics of one partition whose names begin
// with StreamPrefix (metadata.StreamTopic); the controller creates and deletes
// them, keeping the forks' reference counts (docs/durable-streams.md).

// StreamPrefix begins the topic name of every Durable Streams stream.
const StreamPrefix = metadata.StreamTopicPrefix

// StreamOutcome says what a stream change found, besides success.
type StreamOutcome string

// Outcomes of CreateStream and DeleteStream.
const (
	StreamCreated        StreamOutcome = "created"
	StreamExists         StreamOutcome = "exists"           // created before: Topic is the existing one
	StreamDeleted        StreamOutcome = "deleted"          // removed, with any soft-deleted sources whose last fork it was
	StreamSoftDeleted    StreamOutcome = "soft-deleted"     // kept for its forks
	StreamNotFound       StreamOutcome = "not-found"        // no such stream
	StreamGone           StreamOutcome = "gone"             // soft-deleted before
	StreamPathBlocked    StreamOutcome = "path-blocked"     // create over a soft-deleted stream
	StreamSourceNotFound StreamOutcome = "source-not-found" // fork of a stream that does not exist
	StreamSourceGone     StreamOutcome = "source-gone"      // fork of a soft-deleted stream
)

// StreamResult is the answer to a stream change.
type StreamResult struct {
	Outcome StreamOutcome   `json:"outcome"`
	Topic   *metadata.Topic `json:"topic,omitempty"`
	// Epoch is the metadata epoch the answer was read from: a broker
	// whose metadata is that new or newer and lacks Topic knows that the
	// topic went since (an expired stream deleted, say).
	Epoch int64 `json:"epoch,omitempty"`
}

// StreamSegmentBytes is the segment size of a stream's log.
var StreamSegmentBytes int64 = 64 << 20

// CreateStream creates the topic of a stream unless it exists (then the
// existing topic is returned, for the caller to compare), with its
// replication factor capped at the registered brokers. A fork counts
// against its source, which must exist and not be soft-deleted.
func (c *Controller) CreateStream(ctx context.Context, topic string, rf int, s *metadata.Stream) (*StreamResult, error) {
	if !strings.HasPrefix(topic, StreamPrefix) || s == nil || s.Path == "" {
		return nil, fmt.Errorf("%w: %q is not the topic of a stream", ErrInvalidRequest, topic)
	}
	if rf <= 0 {
		rf = 3
	}
	rf = max(1, min(rf, len(c.Metadata().Brokers)))
	var brokers []int32
	if c.Metadata().Topic(topic) == nil {
		if err := c.Refusal(); err != nil {
			return nil, err
		}
		var err error
		if brokers, err = c.placeable(ctx, "stream "+s.Path, rf, notAnswering); err != nil {
			return nil, err
		}
	}
	var res StreamResult
	err := c.change(ctx, "create stream "+s.Path, func(m *metadata.Cluster) error {
		if t := m.Topic(topic); t != nil {
			res = StreamResult{Outcome: StreamExists, Topic: t}
			if t.Stream != nil && t.Stream.Deleted {
				res.Outcome = StreamPathBlocked
			}
			return errNoChange
		}
		if s.ForkedFrom != "" {
			src := m.Topic(streamTopicOf(m, s.ForkedFrom))
			switch {
			case src == nil || src.Stream == nil:
				res = StreamResult{Outcome: StreamSourceNotFound}
				return errNoChange
			case src.Stream.Deleted:
				res = StreamResult{Outcome: StreamSourceGone}
				return errNoChange
			}
			src.Stream.Forks++
		}
		if brokers == nil {
			return fmt.Errorf("%w: stream %s was deleted meanwhile; create it again", notAnswering, s.Path)
		}
		// AddTopicOn spreads leaders over the whole cluster, so that one
		// broker does not lead every stream (a topic of one partition).
		t, err := m.AddTopicOn(topic, 1, rf, brokers)
		if err != nil {
			return err
		}
		t.Config = metadata.TopicConfig{metadata.ConfigRetentionMs: -1, metadata.ConfigRetentionBytes: -1, metadata.ConfigSegmentBytes: StreamSegmentBytes}
		t.Stream = s.Clone()
		t.Stream.Forks, t.Stream.Deleted = 0, false
		t.Stream.CreatedMs = time.Now().UnixMilli()
		res = StreamResult{Outcome: StreamCreated, Topic: t}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res.Outcome == StreamCreated || res.Outcome == StreamExists {
		m := c.Metadata()
		res.Epoch = m.Epoch
		if t := m.Topic(topic); t != nil && t.ID == res.Topic.ID {
			res.Topic = t
		}
	}
	return &res, nil
}

// DeleteStream deletes a stream: it is soft-deleted while forks of it
// exist, else removed, and so is each soft-deleted source whose last fork
// it was, up the chain. An expired stream is deleted the same way, naming
// the incarnation that expired (id): once that is gone, a stream created
// at the same path since is not it, and is left alone (StreamNotFound).
func (c *Controller) DeleteStream(ctx context.Context, topic, id string) (*StreamResult, error) {
	var res StreamResult
	err := c.change(ctx, "delete stream "+topic, func(m *metadata.Cluster) error {
		t := m.Topic(topic)
		if t == nil || t.Stream == nil || id != "" && t.ID != id {
			res.Outcome = StreamNotFound
			return errNoChange
		}
		if t.Stream.Deleted {
			res.Outcome = StreamGone
			return errNoChange
		}
		if t.Stream.Forks > 0 {
			t.Stream.Deleted = true
			res.Outcome = StreamSoftDeleted
			return nil
		}
		res.Outcome = StreamDeleted
		for t != nil {
			from := t.Stream.ForkedFrom
			if err := m.RemoveTopic(t.Name); err != nil {
				return err
			}
			if from == "" {
				return nil
			}
			t = m.Topic(streamTopicOf(m, from))
			if t == nil || t.Stream == nil {
				return nil
			}
			if t.Stream.Forks--; t.Stream.Forks > 0 || !t.Stream.Deleted {
				if t.Stream.Forks < 0 {
					t.Stream.Forks = 0
				}
				return nil
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &res, nil
}

// streamTopicOf names the topic of the stream at path.
func streamTopicOf(_ *metadata.Cluster, path string) string {
	name, err := metadata.StreamTopic(path)
	if err != nil {
		return ""
	}
	return name
}

package streams

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"gostream/controller"
	"gostream/durable"
	"gostream/metadata"
	"gostream/transport"
)

// Creating a stream (PUT) takes up to three steps, each of which can be
// run again: the controller creates the topic (or finds it); a fork's
// leader is given the source's records below the fork offset, copied
// record for record so that every token of the source up to there means
// the same position in the fork; and a last batch holds the initial body,
// the close when asked, and the record that makes the stream ready. Until
// that batch is acknowledged the stream answers 404, and a PUT with the
// same configuration finishes what an interrupted one began.

// copyChunk bounds the data of one copy step of a fork.
const copyChunk = 1 << 20

// Create implements durable.Backend.
func (s *Server) Create(ctx context.Context, req *durable.CreateRequest) (*durable.CreateResult, error) {
	name, err := metadata.StreamTopic(req.Path)
	if err != nil {
		return nil, durable.Refuse(http.StatusBadRequest, "%v", err)
	}
	cfg := req.Config
	want := &metadata.Stream{Path: req.Path, ContentType: cfg.ContentType, TTL: cfg.TTL, ExpiresAt: cfg.ExpiresAt, ForkedFrom: cfg.ForkedFrom}
	var fork *forkPlan
	if cfg.ForkedFrom != "" {
		if fork, err = s.planFork(ctx, req, want); err != nil {
			return nil, err
		}
	}
	// The body is checked before anything is created.
	body, err := streamData(want.ContentType, req.Body, true)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		// A topic found may go before it is used: an expired stream is
		// deleted by its leader. Then the controller is asked again.
		again := attempt < createAttempts
		res, err := s.createTopic(ctx, name, want)
		if err != nil {
			return nil, err
		}
		switch res.Outcome {
		case controller.StreamSourceNotFound:
			return nil, durable.Refuse(http.StatusNotFound, "source stream %q not found", cfg.ForkedFrom)
		case controller.StreamSourceGone:
			return nil, durable.Refuse(http.StatusConflict, "source stream %q was deleted; it is kept only for its forks", cfg.ForkedFrom)
		case controller.StreamPathBlocked:
			return nil, durable.Refuse(http.StatusConflict, "stream %q was deleted while forks of it remain: its path cannot be used until they are gone", req.Path)
		}
		t := res.Topic
		if t == nil || t.Stream == nil {
			return nil, durable.Refuse(http.StatusConflict, "topic %s exists and is not a stream", name)
		}
		if t.Stream.Path != req.Path {
			return nil, durable.Refuse(http.StatusConflict, "stream path %q collides with the stream %q", req.Path, t.Stream.Path)
		}
		// The controller's push may still be on its way to this broker.
		switch err := s.waitTopic(ctx, t, res.Epoch); {
		case errors.Is(err, errTopicGone) && again:
			continue
		case errors.Is(err, errTopicGone):
			return nil, durable.Refuse(http.StatusServiceUnavailable, "stream %q was deleted and created again while this request ran; retry", req.Path)
		case err != nil:
			return nil, err
		}
		h, err := s.head(ctx, t)
		if err != nil {
			if ref, ok := err.(*durable.Refusal); ok && ref.Status == http.StatusNotFound && again {
				// It had expired and is deleted now: create it anew.
				continue
			}
			if errors.Is(err, transport.ErrUnknownTopicID) && again {
				continue // deleted meanwhile
			}
			return nil, err
		}
		created := res.Outcome == controller.StreamCreated
		if !created && !sameStream(t.Stream, want, cfg, h) {
			return nil, durable.Refuse(http.StatusConflict, "stream %q exists with another configuration", req.Path)
		}
		if !h.Ready {
			if h, err = s.initialize(ctx, t, fork, body, cfg.Closed, h); err != nil {
				return nil, err
			}
			created = true
		}
		return &durable.CreateResult{Info: h.Info, Created: created}, nil
	}
}

// initStep has the leader of t's stream append one step of a creation.
func (s *Server) initStep(ctx context.Context, t *metadata.Topic, req *initRequest) (*headResult, error) {
	return onLeader(ctx, s, t, 0,
		func(ctx context.Context, t *metadata.Topic) (*headResult, error) {
			return s.leader.init(ctx, t.Name, t.ID, req)
		},
		func(ctx context.Context, addr string, t *metadata.Topic) (*headResult, error) {
			return s.forwardInit(ctx, addr, t, req)
		})
}

// readLog has the leader of t's stream read records of its log.
func (s *Server) readLog(ctx context.Context, t *metadata.Topic, req *logRequest) (*logResult, error) {
	return onLeader(ctx, s, t, 0,
		func(ctx context.Context, t *metadata.Topic) (*logResult, error) {
			return s.leader.readLog(ctx, t.Name, t.ID, req)
		},
		func(ctx context.Context, addr string, t *metadata.Topic) (*logResult, error) {
			return s.forwardLog(ctx, addr, t, req)
		})
}

// createAttempts bounds the times a create asks the controller for the
// topic because the one it was given went meanwhile.
const createAttempts = 4

// errTopicGone says this broker's metadata, at least as new as the
// controller's answer, no longer has the topic the answer gave.
var errTopicGone = errors.New("the topic went after the controller gave it")

// waitTopic waits, briefly, until this broker's metadata has t, given by
// the controller from metadata of epoch. It returns errTopicGone once
// this broker's metadata is that new and has no t.
func (s *Server) waitTopic(ctx context.Context, t *metadata.Topic, epoch int64) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		if m := s.cfg.Metadata(); m != nil {
			if have := m.Topic(t.Name); have != nil && have.ID == t.ID {
				return nil
			}
			if epoch > 0 && m.Epoch >= epoch {
				return errTopicGone
			}
		}
		if time.Now().After(deadline) {
			return nil // the call reports what is wrong
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// sameStream reports whether a PUT asks for the stream that exists:
// content type, expiry, closed state and lineage.
func sameStream(have, want *metadata.Stream, cfg durable.Config, h *headResult) bool {
	if cfg.ForkedFrom == "" || want.ContentType != "" {
		if !durable.SameContentType(have.ContentType, want.ContentType) {
			return false
		}
	}
	if (have.TTL == nil) != (want.TTL == nil) || have.TTL != nil && *have.TTL != *want.TTL || have.ExpiresAt != want.ExpiresAt {
		return false
	}
	if h.Ready && h.Info.Closed != cfg.Closed {
		return false
	}
	if have.ForkedFrom != want.ForkedFrom || have.ForkSubOffset != want.ForkSubOffset {
		return false
	}
	return cfg.ForkOffset == "" || have.ForkOffset == cfg.ForkOffset
}

// forkPlan is what a fork copies: the source's records below Offset,
// the fillers up to the anchor record and, with a sub-offset, the prefix
// of the anchor's data.
type forkPlan struct {
	source *metadata.Topic
	offset durable.Offset
	anchor int64  // the record the prefix comes from
	prefix []byte // nil without a sub-offset
}

// planFork checks a fork request against its source and fills in the
// fork's configuration: content type and expiry inherited as the
// protocol says, and the fork offset resolved.
func (s *Server) planFork(ctx context.Context, req *durable.CreateRequest, want *metadata.Stream) (*forkPlan, error) {
	cfg := req.Config
	src, err := s.topic(ctx, cfg.ForkedFrom)
	if ref, ok := err.(*durable.Refusal); ok {
		switch ref.Status {
		case http.StatusNotFound:
			return nil, durable.Refuse(http.StatusNotFound, "source stream %q not found", cfg.ForkedFrom)
		case http.StatusGone:
			return nil, durable.Refuse(http.StatusConflict, "source stream %q was deleted; it is kept only for its forks", cfg.ForkedFrom)
		}
	}
	if err != nil {
		return nil, err
	}
	h, err := s.head(ctx, src)
	if ref, ok := err.(*durable.Refusal); ok && ref.Status == http.StatusGone {
		return nil, durable.Refuse(http.StatusConflict, "source stream %q was deleted; it is kept only for its forks", cfg.ForkedFrom)
	}
	if err != nil {
		return nil, err
	}
	if !h.Ready {
		return nil, durable.Refuse(http.StatusNotFound, "source stream %q not found", cfg.ForkedFrom)
	}
	if req.ContentTypeGiven && !durable.SameContentType(cfg.ContentType, src.Stream.ContentType) {
		return nil, durable.Refuse(http.StatusConflict, "content type %q does not match the source's %q", cfg.ContentType, src.Stream.ContentType)
	}
	want.ContentType = src.Stream.ContentType
	switch {
	case cfg.TTL != nil || cfg.ExpiresAt != "":
	case src.Stream.TTL != nil:
		v := *src.Stream.TTL
		want.TTL = &v
	case src.Stream.ExpiresAt != "":
		want.ExpiresAt = src.Stream.ExpiresAt
	}
	tail, _, _ := durable.ParseOffset(h.Info.Tail)
	plan := &forkPlan{source: src, offset: tail}
	if cfg.ForkOffset != "" {
		off, _, err := durable.ParseOffset(cfg.ForkOffset)
		if err != nil {
			return nil, durable.Refuse(http.StatusBadRequest, "%v", err)
		}
		if cfg.ForkOffset > h.Info.Tail {
			return nil, durable.Refuse(http.StatusBadRequest, "fork offset %s is past the source's tail %s", cfg.ForkOffset, h.Info.Tail)
		}
		// A read from the offset checks that it is a position of the source.
		if _, err := s.Read(ctx, &durable.ReadRequest{Path: cfg.ForkedFrom, Offset: cfg.ForkOffset, MaxBytes: 1}); err != nil {
			return nil, err
		}
		plan.offset = off
	}
	want.ForkOffset = plan.offset.Token()
	if sub := cfg.ForkSubOffset; sub > 0 {
		want.ForkSubOffset = sub
		anchor, data, err := s.anchor(ctx, src, plan.offset, tail)
		if err != nil {
			return nil, err
		}
		if durable.IsJSON(src.Stream.ContentType) {
			vals, err := durable.SplitJSON(append(append([]byte{'['}, data...), ']'))
			if err != nil || sub > int64(len(vals)) {
				return nil, durable.Refuse(http.StatusBadRequest, "fork sub-offset %d is past the %d messages of the append at the fork offset", sub, len(vals))
			}
			data = bytes.Join(vals[:sub], []byte{','})
		} else {
			if sub > int64(len(data)) {
				return nil, durable.Refuse(http.StatusBadRequest, "fork sub-offset %d is past the %d bytes of the append at the fork offset", sub, len(data))
			}
			data = data[:sub]
		}
		plan.anchor, plan.prefix = anchor, data
	}
	return plan, nil
}

// anchor finds the first data record at or after off in the source.
func (s *Server) anchor(ctx context.Context, src *metadata.Topic, off, tail durable.Offset) (int64, []byte, error) {
	if off.Record >= tail.Record {
		return 0, nil, durable.Refuse(http.StatusBadRequest, "a fork sub-offset needs data past the fork offset, and the source has none")
	}
	from := off.Record
	for from < tail.Record {
		lr, err := s.readLog(ctx, src, &logRequest{From: from, To: tail.Record, MaxBytes: copyChunk})
		if err != nil {
			return 0, nil, err
		}
		if len(lr.Records) == 0 {
			break
		}
		for _, rec := range lr.Records {
			if rec.Kind == kindData {
				return rec.Offset, rec.Data, nil
			}
			from = rec.Offset + 1
		}
	}
	return 0, nil, durable.Refuse(http.StatusBadRequest, "a fork sub-offset needs data past the fork offset, and the source has none")
}

// initialize brings a created stream to ready: a fork's copy, then the
// last batch. Each step is appended only where the log ends as expected,
// so steps done by an earlier attempt are skipped.
func (s *Server) initialize(ctx context.Context, t *metadata.Topic, fork *forkPlan, body []byte, closed bool, h *headResult) (*headResult, error) {
	end := h.LogEnd
	step := func(recs []logRecord) error {
		res, err := s.initStep(ctx, t, &initRequest{ExpectEnd: end, Records: recs})
		if err != nil {
			return err
		}
		h, end = res, res.LogEnd
		return nil
	}
	if fork != nil {
		// Every record below the fork offset, data as data and anything
		// else as a filler, then fillers up to the anchor.
		stop := fork.offset.Record
		if fork.prefix != nil {
			stop = fork.anchor
		}
		for end < stop {
			lr, err := s.readLog(ctx, fork.source, &logRequest{From: end, To: stop, MaxBytes: copyChunk})
			if err != nil {
				return nil, err
			}
			if len(lr.Records) == 0 || lr.Records[0].Offset != end {
				return nil, durable.Refuse(http.StatusServiceUnavailable, "the source's records from %d cannot be read now", end)
			}
			recs := make([]logRecord, len(lr.Records))
			for i, rec := range lr.Records {
				recs[i] = logRecord{Kind: kindFiller}
				if rec.Kind == kindData {
					recs[i] = logRecord{Kind: kindData, Data: rec.Data}
				}
			}
			if err := step(recs); err != nil {
				return nil, err
			}
			if h.Ready {
				return h, nil
			}
		}
		if fork.prefix != nil && end == fork.anchor {
			if err := step([]logRecord{{Kind: kindData, Data: fork.prefix}}); err != nil {
				return nil, err
			}
		}
	}
	last := []logRecord{{Kind: kindInit}}
	if len(body) > 0 {
		last = append(last, logRecord{Kind: kindData, Data: body})
	}
	if closed {
		last = append(last, logRecord{Kind: kindClose})
	}
	if err := step(last); err != nil {
		return nil, err
	}
	if !h.Ready {
		return nil, durable.Refuse(http.StatusConflict, "stream %q is being created by another request", t.Stream.Path)
	}
	return h, nil
}

package streams

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/controller"
	"gostream/durable"
	"gostream/metadata"
	"gostream/replication"
	"gostream/transport"
)

// Config is what a Server needs of the broker it runs on.
type Config struct {
	// Broker is the broker's id.
	Broker int32
	// Metadata returns the broker's metadata, nil before it has any.
	Metadata func() *metadata.Cluster
	// RefreshMetadata asks for metadata newer than the broker's, when a
	// stream may have been created or moved through another node that
	// this broker has not heard of yet.
	RefreshMetadata func(ctx context.Context) error
	// Lookup returns a topic's metadata and the broker's replica of its
	// partition 0, nil when it hosts none. A topic id (id != "") other
	// than the topic's is an error matching transport.ErrUnknownTopicID,
	// and a replica that is offline here is an error that says why.
	Lookup func(topic, id string) (*metadata.Topic, *replication.Partition, error)
	// Call makes an RPC to the broker at addr.
	Call func(ctx context.Context, addr string, api transport.API, req, resp transport.Message) error
	// Controller returns the controller when this broker runs the active
	// one, else nil.
	Controller func() *controller.Controller
	// CallController makes an RPC to the active controller (wherever it
	// is), and names the one it asked.
	CallController func(ctx context.Context, api transport.API, req, resp transport.Message) (string, error)
	// ReplicationFactor of new streams (0: min(3, brokers)).
	ReplicationFactor int
	// ForwardTimeout bounds an operation forwarded to a stream's leader,
	// besides its wait.
	ForwardTimeout time.Duration
	// Authorizer checks each request on a stream (Authorize); nil allows
	// everything: authorization is off.
	Authorizer Authorizer
	// OnTails, when set, is called with +1 and -1 as the node's
	// subscriptions to streams' tails (one per stream with live readers
	// here) begin and end.
	OnTails func(delta int)
	Logger  hclog.Logger
}

// Authorizer decides what a principal may do (the node's authorizer,
// as broker.Config's).
type Authorizer interface {
	// Authorize returns nil when principal may do op on the resource, and
	// otherwise an error matching transport.ErrUnauthorized (or
	// transport.ErrUnauthenticated).
	Authorize(principal string, op metadata.Operation, rt metadata.ResourceType, name string) error
}

// Server is a node's Durable Streams server: it implements durable.Backend
// for the node's HTTP handler, finds each stream's topic in the metadata
// and has the operation done by the stream's leader, here (no encoding)
// or forwarded over the transport; it serves the stream APIs other
// brokers forward to it (Handle), creates and deletes streams through the
// controller, and serves the node's live readers from one subscription
// per stream (see the package documentation).
type Server struct {
	cfg    Config
	log    hclog.Logger
	leader *leader
	tails  *tails
}

var _ durable.Backend = (*Server)(nil)

// New returns a server; its leader side keeps no state until it is asked
// about a stream, and expires no stream until Run.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.OnTails == nil {
		cfg.OnTails = func(int) {}
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.leader = newLeader(&cfg, s.deleteTopic)
	s.tails = newTails(s.pollTail, tailWait, cfg.OnTails)
	return s
}

// Run deletes the expired streams this broker leads, every second, until
// ctx ends; then it ends the subscriptions to streams' tails and drops the
// state of the streams it leads, and returns nil.
func (s *Server) Run(ctx context.Context) error {
	s.leader.sweep(ctx, s.cfg.Metadata)
	s.tails.close()
	return nil
}

// topic finds a stream's topic; a stream deleted while forks of it remain
// is Gone. A stream this broker does not know may be one created through
// another node that this broker has not heard of yet: it asks for newer
// metadata before it answers 404.
func (s *Server) topic(ctx context.Context, path string) (*metadata.Topic, error) {
	name, err := metadata.StreamTopic(path)
	if err != nil {
		return nil, durable.Refuse(http.StatusBadRequest, "%v", err)
	}
	meta := s.cfg.Metadata()
	if meta == nil {
		return nil, fmt.Errorf("%w: broker %d has no metadata yet", transport.ErrNotReady, s.cfg.Broker)
	}
	t := meta.Topic(name)
	if t == nil {
		s.refresh(ctx)
		t = s.cfg.Metadata().Topic(name)
	}
	if t == nil || t.Stream == nil {
		return nil, durable.NotFound(path)
	}
	if t.Stream.Path != path {
		// Two paths with one hash: the second is refused, never merged.
		return nil, durable.Refuse(http.StatusConflict, "stream path %q collides with the stream %q", path, t.Stream.Path)
	}
	if t.Stream.Deleted {
		return nil, durable.Gone(path)
	}
	return t, nil
}

func (s *Server) refresh(ctx context.Context) {
	if err := s.cfg.RefreshMetadata(ctx); err != nil {
		s.log.Debug("cannot refresh metadata", "err", err)
	}
}

// current returns the broker's metadata of t's topic when it is still
// the same incarnation, else t.
func (s *Server) current(t *metadata.Topic) *metadata.Topic {
	if m := s.cfg.Metadata(); m != nil {
		if nt := m.Topic(t.Name); nt != nil && nt.ID == t.ID {
			return nt
		}
	}
	return t
}

// retryable reports an error after which the operation was provably not
// done, so it may be made again: no leader yet, the metadata moving, a
// new leader not ready, a leader's state dropped before it appended.
func retryable(err error) bool {
	return errors.Is(err, transport.ErrNotLeader) || errors.Is(err, transport.ErrNotReady) ||
		errors.Is(err, transport.ErrUnknownTopicID) || errors.Is(err, transport.ErrNotSent) ||
		errors.Is(err, replication.ErrNotLeader) || errors.Is(err, replication.ErrStateDropped)
}

// retryFor is how long an operation is made again while it fails in a
// way that shows it was not done.
const retryFor = 3 * time.Second

// onLeader has an operation done by the leader of t's stream: by this
// broker's leader side (local: the request as it is, no encoding), or
// forwarded to the broker that leads it (remote, bounded by
// ForwardTimeout and wait). It makes it again for a few seconds while it
// fails in a way that shows it was not done.
func onLeader[T any](ctx context.Context, s *Server, t *metadata.Topic, wait time.Duration,
	local func(ctx context.Context, t *metadata.Topic) (T, error),
	remote func(ctx context.Context, addr string, t *metadata.Topic) (T, error)) (T, error) {
	deadline := time.Now().Add(retryFor)
	for attempt := 0; ; attempt++ {
		res, err := onLeaderOnce(ctx, s, t, wait, local, remote)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return res, err
		}
		if errors.Is(err, transport.ErrUnknownTopicID) {
			// The leader does not know this incarnation of the topic: it
			// is behind, or the topic went and this broker missed it.
			s.refresh(ctx)
			if nt := s.cfg.Metadata().Topic(t.Name); nt == nil || nt.ID != t.ID {
				var zero T
				return zero, durable.NotFound(t.Stream.Path)
			}
		}
		if time.Now().After(deadline) {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(time.Duration(20*(attempt+1)) * time.Millisecond):
		}
		t = s.current(t)
	}
}

func onLeaderOnce[T any](ctx context.Context, s *Server, t *metadata.Topic, wait time.Duration,
	local func(ctx context.Context, t *metadata.Topic) (T, error),
	remote func(ctx context.Context, addr string, t *metadata.Topic) (T, error)) (T, error) {
	leader := t.Partitions[0].Leader
	if leader == s.cfg.Broker {
		return local(ctx, t)
	}
	var zero T
	b, ok := s.cfg.Metadata().Broker(leader)
	if !ok || b.Addr == "" {
		return zero, fmt.Errorf("%w: the stream's leader %d has no address", transport.ErrBrokerNotAvailable, leader)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.ForwardTimeout+wait)
	defer cancel()
	res, err := remote(cctx, b.Addr, t)
	if err != nil {
		var ref *durable.Refusal
		if errors.As(err, &ref) {
			return zero, err
		}
		return zero, fmt.Errorf("the stream's leader, broker %d: %w", leader, err)
	}
	return res, nil
}

// Head implements durable.Backend.
func (s *Server) Head(ctx context.Context, path string) (*durable.Info, error) {
	t, err := s.topic(ctx, path)
	if err != nil {
		return nil, err
	}
	h, err := s.head(ctx, t)
	if err != nil {
		return nil, err
	}
	if !h.Ready {
		return nil, durable.NotFound(path)
	}
	return &h.Info, nil
}

func (s *Server) head(ctx context.Context, t *metadata.Topic) (*headResult, error) {
	return onLeader(ctx, s, t, 0,
		func(ctx context.Context, t *metadata.Topic) (*headResult, error) {
			return s.leader.head(ctx, t.Name, t.ID)
		}, s.forwardHead)
}

// Append implements durable.Backend.
func (s *Server) Append(ctx context.Context, req *durable.AppendRequest) (*durable.AppendResult, error) {
	t, err := s.topic(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	return onLeader(ctx, s, t, 0,
		func(ctx context.Context, t *metadata.Topic) (*durable.AppendResult, error) {
			return s.leader.append(ctx, t.Name, t.ID, req)
		},
		func(ctx context.Context, addr string, t *metadata.Topic) (*durable.AppendResult, error) {
			return s.forwardAppend(ctx, addr, t, req)
		})
}

// Read implements durable.Backend. A read that waits (a long poll, the
// SSE stream's next read) waits on the node's subscription to the
// stream's tail (see the package documentation), not on a call of its
// own to the leader.
func (s *Server) Read(ctx context.Context, req *durable.ReadRequest) (*durable.ReadResult, error) {
	t, err := s.topic(ctx, req.Path)
	if err != nil {
		return nil, err
	}
	if req.Wait <= 0 {
		return s.read(ctx, t, req)
	}
	if res, ok, err := s.tails.waitAtTail(ctx, t, req); ok {
		return s.readAgain(ctx, t, req, res, err)
	}
	now := *req
	now.Wait = 0
	res, err := s.read(ctx, t, &now)
	if err != nil || len(res.Messages) > 0 || res.Closed || !res.UpToDate {
		return res, err
	}
	res, err = s.tails.wait(ctx, t, res, req)
	return s.readAgain(ctx, t, req, res, err)
}

// readAgain is the answer of a wait on a tail: its result, or, when the
// tail moved past the reader (errBehind), a read from where the reader
// is.
func (s *Server) readAgain(ctx context.Context, t *metadata.Topic, req *durable.ReadRequest, res *durable.ReadResult, err error) (*durable.ReadResult, error) {
	var b *behindError
	if !errors.As(err, &b) {
		return res, err
	}
	now := *req
	now.Offset, now.Wait = b.at, 0
	return s.read(ctx, s.current(t), &now)
}

// read has the leader read.
func (s *Server) read(ctx context.Context, t *metadata.Topic, req *durable.ReadRequest) (*durable.ReadResult, error) {
	return onLeader(ctx, s, t, req.Wait,
		func(ctx context.Context, t *metadata.Topic) (*durable.ReadResult, error) {
			return s.leader.read(ctx, t.Name, t.ID, req)
		},
		func(ctx context.Context, addr string, t *metadata.Topic) (*durable.ReadResult, error) {
			return s.forwardRead(ctx, addr, t, req)
		})
}

// pollTail is a tail's read from the leader: from a token, waiting up to
// wait for data.
func (s *Server) pollTail(ctx context.Context, t *metadata.Topic, from string, maxBytes int, wait time.Duration) (*durable.ReadResult, error) {
	return s.read(ctx, s.current(t), &durable.ReadRequest{Path: t.Stream.Path, Offset: from, MaxBytes: maxBytes, Wait: wait})
}

// Authorize implements durable.Backend: op on the stream at path is
// authorized here, once for every front end, as the core authorizes
// topics and groups. A refusal is 403, or 401 for a principal not
// authenticated.
func (s *Server) Authorize(_ context.Context, principal, op, path string) error {
	if s.cfg.Authorizer == nil {
		return nil
	}
	err := s.cfg.Authorizer.Authorize(principal, metadata.Operation(op), metadata.ResourceStream, path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, transport.ErrUnauthenticated):
		return durable.Refuse(http.StatusUnauthorized, "%v", err)
	}
	return durable.Refuse(http.StatusForbidden, "%v", err)
}

// Delete implements durable.Backend.
func (s *Server) Delete(ctx context.Context, path string) error {
	t, err := s.topic(ctx, path)
	if err != nil {
		return err
	}
	res, err := s.deleteTopic(ctx, t.Name, "")
	if err != nil {
		return err
	}
	switch res.Outcome {
	case controller.StreamNotFound:
		return durable.NotFound(path)
	case controller.StreamGone:
		return durable.Gone(path)
	}
	return nil
}

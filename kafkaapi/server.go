package kafkaapi

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/internal/bufpool"
	"gostream/metadata"
)

// Endpoint is where clients reach a broker on one Kafka listener.
type Endpoint struct {
	Broker int32
	Host   string
	Port   int32
}

// Config is what a Server serves with.
type Config struct {
	// Broker is this node's broker id.
	Broker int32
	// Listener is the name of the listener this server serves (its
	// endpoints are the ones Metadata answers with).
	Listener string
	Core     *broker.Broker
	// Endpoints are every broker's endpoints on a listener, from the
	// cluster's metadata (nil: MetadataEndpoints).
	Endpoints func(meta *metadata.Cluster, listener string) []Endpoint
	// MaxRequestBytes bounds one request frame (default 100 MiB; at least
	// the node's batch limit and room for a request's other fields).
	MaxRequestBytes int
	// IdleTimeout closes a connection that sends nothing for that long
	// (default 10 minutes).
	IdleTimeout time.Duration
	// Classify gives a core error its code (a *transport.Error), as the
	// native protocol's table does; the Kafka code follows from it
	// (errors.go).
	Classify func(error) error
	// Security is what the listener asks of its clients (TLS, SASL).
	Security Security
	// AutoCreate, when set, has a Metadata request that names a topic
	// that does not exist, and allows auto-creation, create it (Kafka's
	// auto.create.topics.enable).
	AutoCreate *AutoCreate
	// Observe, when set, is told of every request read: its API's name
	// (kmsg.NameForKey: "Unknown" for a key Kafka does not have), when it
	// was read, and nil once its answer is written, or why the connection
	// closed on it instead (it could not be answered, or the answer not
	// written). Errors inside an answer (a partition's error code) are
	// answers.
	Observe func(api string, start time.Time, err error)
	Logger  hclog.Logger
}

// AutoCreate is how topics are auto-created: Partitions partitions (0:
// one) of ReplicationFactor replicas (0: min(3, the brokers)).
type AutoCreate struct {
	Partitions        int
	ReplicationFactor int
}

// Server serves Kafka's protocol on one listener.
type Server struct {
	cfg  Config
	log  hclog.Logger
	mu   sync.Mutex
	lns  []net.Listener
	conn map[net.Conn]struct{}
	wg   sync.WaitGroup
	done bool
}

// New returns the server of cfg.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = 100 << 20
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 10 * time.Minute
	}
	if cfg.Endpoints == nil {
		cfg.Endpoints = MetadataEndpoints
	}
	return &Server{cfg: cfg, log: cfg.Logger, conn: map[net.Conn]struct{}{}}
}

// Serve accepts connections on ln until it is closed or Close is called,
// and serves each in its own goroutine. It returns nil once Close was
// called, else the accept error.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			done := s.done
			s.mu.Unlock()
			if done || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.done {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conn[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conn, c)
			s.mu.Unlock()
		}()
	}
}

// Close closes the listeners Serve was given and every connection, and
// waits for the connections' goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	s.done = true
	for _, ln := range s.lns {
		ln.Close()
	}
	for c := range s.conn {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// request is one decoded request and its header.
type request struct {
	key, version int16
	corr         int32
	clientID     string
	kreq         kmsg.Request // nil for a key kmsg does not know
	body         []byte       // the body, for a request not decoded
}

// errClose ends a connection: the bytes cannot be answered.
var errClose = errors.New("kafkaapi: closing the connection")

// errNotAnswered is what Config.Observe is told of a request read before
// its connection closed on an earlier one.
var errNotAnswered = errors.New("kafkaapi: not answered: the connection closed on an earlier request")

// maxPipelined bounds the requests of one connection read and not yet
// answered.
const maxPipelined = 16

// reply computes a request's answer once the answers before it are
// written: nil is no answer (acks=0); an error closes the connection.
type reply func(context.Context) (response, error)

// pending is a request read, waiting for its answer to be written.
type pending struct {
	req   *request // nil for the bare answer to a bare SASL message
	reply reply
	size  int64     // its frame's bytes, held in the connection's budget
	last  bool      // the connection closes once it is answered
	start time.Time // when it was read
}

// serveConn reads a connection's requests in order and writes their
// answers in the same order (docs/kafka.md, "Failure cases"). A produce
// is appended as it is read, so that the next request is read while its
// replicas make it durable, and answered when they have; every other
// answer is computed when its turn to be written comes, one at a time
// (a fetch reads then, and holds its memory only while it is written).
// The frames read and not yet answered hold at most MaxRequestBytes.
func (s *Server) serveConn(raw net.Conn) {
	defer raw.Close()
	c, st, err := s.secure(raw)
	if err != nil {
		s.log.Debug("closing a Kafka connection: TLS handshake failed", "peer", raw.RemoteAddr(), "err", err)
		return
	}
	defer c.Close()
	defer func() { st.sess.Close() }() // the reader may replace it (SASL)
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), connKey{}, st))
	defer cancel()
	budget := semaphore.NewWeighted(int64(s.cfg.MaxRequestBytes))
	queue := make(chan pending, maxPipelined)
	written := make(chan struct{})
	go func() {
		defer close(written)
		s.writeAnswers(ctx, cancel, c, queue, budget)
	}()
	s.readRequests(ctx, c, st, queue, budget)
	close(queue)
	<-written
}

// readRequests reads frames and queues their answers until the
// connection ends, a frame cannot be answered, or ctx ends.
func (s *Server) readRequests(ctx context.Context, c net.Conn, st *connState, queue chan<- pending, budget *semaphore.Weighted) {
	r := bufio.NewReaderSize(c, 64<<10)
	var size [4]byte
	for {
		c.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
		if _, err := io.ReadFull(r, size[:]); err != nil {
			return
		}
		n := int32(binary.BigEndian.Uint32(size[:]))
		if n < 8 || int(n) > s.cfg.MaxRequestBytes {
			s.log.Debug("closing a Kafka connection: request frame size out of bounds", "peer", c.RemoteAddr(), "size", n, "limit", s.cfg.MaxRequestBytes)
			return
		}
		if err := budget.Acquire(ctx, int64(n)); err != nil {
			return
		}
		frame := bufpool.Get(int(n))
		if _, err := io.ReadFull(r, frame); err != nil {
			return
		}
		start := time.Now()
		if st.rawToken && st.principal == "" {
			// After SaslHandshake v0 the client sends its SASL message
			// bare, and is answered with a bare (empty) one.
			st.rawToken = false
			if err := s.authenticate(st, frame); err != nil {
				s.log.Debug("closing a Kafka connection: SASL authentication failed", "peer", c.RemoteAddr(), "err", err)
				return
			}
			queue <- pending{size: int64(n)}
			continue
		}
		req, err := parseRequest(frame)
		if err != nil {
			s.log.Debug("closing a Kafka connection: request does not parse", "peer", c.RemoteAddr(), "err", err)
			return
		}
		rep, err := s.handle(ctx, req)
		if req.key == kmsg.Produce.Int16() {
			// A produce's batches were copied into batches of the log's
			// format (batch) as it was handled: nothing refers to its
			// frame any more. Other requests keep theirs (their decoded
			// bytes alias it) for the collector.
			req.kreq, req.body = nil, nil
			bufpool.Put(frame)
		}
		if err != nil {
			s.log.Debug("closing a Kafka connection", "peer", c.RemoteAddr(), "key", req.key, "version", req.version, "err", err)
			s.observe(req, start, err)
			return
		}
		// A failed authentication is answered, then the connection closed.
		last := req.key == kmsg.SASLAuthenticate.Int16() && st.principal == ""
		select {
		case queue <- pending{req: req, reply: rep, size: int64(n), last: last, start: start}:
		case <-ctx.Done():
			return
		}
		if last {
			return
		}
	}
}

// writeAnswers writes the queued answers in order. A write that fails,
// an answer that cannot be computed, or the last answer ends the
// connection (cancel). Every answer is computed, also after that (then
// with ctx ended, at once): a produce's wait is what lets the leader
// count its batch as durable, and a batch appended must be counted even
// when its producer is gone.
func (s *Server) writeAnswers(ctx context.Context, cancel context.CancelFunc, c net.Conn, queue <-chan pending, budget *semaphore.Weighted) {
	var scratch []byte
	failed := false
	for p := range queue {
		if failed {
			if p.reply != nil {
				if resp, _ := p.reply(ctx); resp != nil { // nobody to answer
					resp.release()
				}
			}
			if p.req != nil {
				s.observe(p.req, p.start, errNotAnswered)
			}
			budget.Release(p.size)
			continue
		}
		var resp response
		var err error
		if p.reply != nil {
			resp, err = p.reply(ctx)
		}
		c.SetWriteDeadline(time.Now().Add(s.cfg.IdleTimeout))
		switch {
		case err != nil:
			s.log.Debug("closing a Kafka connection", "peer", c.RemoteAddr(), "key", p.req.key, "version", p.req.version, "err", err)
			failed = true
		case p.req == nil:
			_, err = c.Write([]byte{0, 0, 0, 0})
		case resp != nil:
			err = writeResponse(c, p.req, resp, &scratch)
		}
		if resp != nil {
			resp.release()
		}
		if p.req != nil {
			s.observe(p.req, p.start, err)
		}
		budget.Release(p.size)
		if err != nil || failed || p.last {
			failed = true
			cancel()
			c.Close() // the reader stops too
		}
	}
}

// observe tells Config.Observe of a request.
func (s *Server) observe(req *request, start time.Time, err error) {
	if s.cfg.Observe != nil {
		s.cfg.Observe(kmsg.NameForKey(req.key), start, err)
	}
}

// parseRequest parses the request header (v1, or v2 for a flexible
// version: tagged fields after the client id) and decodes the body with
// kmsg when the key and version are ones it knows.
func parseRequest(frame []byte) (*request, error) {
	if len(frame) < 10 {
		return nil, fmt.Errorf("a request of %d bytes", len(frame))
	}
	req := &request{
		key:     int16(binary.BigEndian.Uint16(frame[0:])),
		version: int16(binary.BigEndian.Uint16(frame[2:])),
		corr:    int32(binary.BigEndian.Uint32(frame[4:])),
	}
	p := 8
	idLen := int16(binary.BigEndian.Uint16(frame[p:]))
	p += 2
	if idLen > 0 {
		if int(idLen) > len(frame)-p {
			return nil, fmt.Errorf("a client id of %d bytes overruns the request", idLen)
		}
		req.clientID = string(frame[p : p+int(idLen)])
		p += int(idLen)
	}
	req.body = frame[p:]
	kreq := kmsg.RequestForKey(req.key)
	if kreq == nil || req.version < 0 || req.version > kreq.MaxVersion() {
		return req, nil // answered without decoding: see handle
	}
	kreq.SetVersion(req.version)
	if kreq.IsFlexible() {
		var err error
		if req.body, err = skipTags(req.body); err != nil {
			return nil, err
		}
	}
	if v, ok := versions[req.key]; !ok || req.version < v.min || req.version > v.max {
		return req, nil // not served at this version: see handle
	}
	if err := kreq.ReadFrom(req.body); err != nil {
		return nil, fmt.Errorf("%s v%d does not decode: %w", kmsg.NameForKey(req.key), req.version, err)
	}
	req.kreq = kreq
	return req, nil
}

// skipTags skips a tagged-fields section.
func skipTags(b []byte) ([]byte, error) {
	n, w := binary.Uvarint(b)
	if w <= 0 {
		return nil, errors.New("bad tagged fields count")
	}
	b = b[w:]
	for ; n > 0; n-- {
		_, w := binary.Uvarint(b)
		if w <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[w:]
		size, w := binary.Uvarint(b)
		if w <= 0 || size > uint64(len(b)-w) {
			return nil, errors.New("bad tagged field size")
		}
		b = b[w+int(size):]
	}
	return b, nil
}

// handle begins one request and returns its answer to come: a produce
// or an offset commit is appended now and answered once durable, a fetch
// reads when its turn comes, everything else is answered now. An error closes the
// connection.
func (s *Server) handle(ctx context.Context, req *request) (reply, error) {
	st, _ := ctx.Value(connKey{}).(*connState)
	if st != nil && !s.admitted(st, req.key) {
		return nil, fmt.Errorf("%w: %s before authentication (only ApiVersions and SASL are served before it)", errClose, kmsg.NameForKey(req.key))
	}
	switch k := req.kreq.(type) {
	case *kmsg.ProduceRequest:
		return s.produce(ctx, k)
	case *kmsg.FetchRequest:
		return func(ctx context.Context) (response, error) { return s.fetch(ctx, k) }, nil
	case *kmsg.JoinGroupRequest:
		// Both wait for the group: answered in turn, the reader reading on.
		return func(ctx context.Context) (response, error) { return kresp2(s.joinGroup(ctx, req.clientID, k)) }, nil
	case *kmsg.SyncGroupRequest:
		return func(ctx context.Context) (response, error) { return kresp2(s.syncGroup(ctx, k)) }, nil
	case *kmsg.OffsetCommitRequest:
		// Appended as it is read, answered once durable, as a produce.
		return s.offsetCommit(ctx, k), nil
	}
	resp, err := s.answer(ctx, st, req)
	if err != nil {
		return nil, err
	}
	return func(context.Context) (response, error) { return kresp(resp), nil }, nil
}

// answer answers a request at once; st is its connection's state.
func (s *Server) answer(ctx context.Context, st *connState, req *request) (kmsg.Response, error) {
	if req.key == kmsg.ApiVersions.Int16() {
		return s.apiVersions(req), nil
	}
	v, served := versions[req.key]
	if req.kreq == nil {
		if served && (req.version < v.min || req.version > v.max) || !served && kmsg.RequestForKey(req.key) != nil {
			return unsupported(req)
		}
		return nil, fmt.Errorf("%w: API key %d is not Kafka's", errClose, req.key)
	}
	switch k := req.kreq.(type) {
	case *kmsg.MetadataRequest:
		return s.metadata(ctx, k)
	case *kmsg.ListOffsetsRequest:
		return s.listOffsets(ctx, k)
	case *kmsg.CreateTopicsRequest:
		return s.createTopics(ctx, k)
	case *kmsg.DeleteTopicsRequest:
		return s.deleteTopics(ctx, k)
	case *kmsg.CreatePartitionsRequest:
		return s.createPartitions(ctx, k)
	case *kmsg.DescribeConfigsRequest:
		return s.describeConfigs(ctx, k)
	case *kmsg.IncrementalAlterConfigsRequest:
		return s.incrementalAlterConfigs(ctx, k)
	case *kmsg.DescribeClusterRequest:
		return s.describeCluster(ctx, k)
	case *kmsg.SASLHandshakeRequest:
		return s.saslHandshake(st, k), nil
	case *kmsg.SASLAuthenticateRequest:
		return s.saslAuthenticate(st, k)
	case *kmsg.InitProducerIDRequest:
		return s.initProducerID(ctx, k)
	case *kmsg.FindCoordinatorRequest:
		return s.findCoordinator(ctx, k)
	case *kmsg.HeartbeatRequest:
		return s.heartbeat(ctx, k)
	case *kmsg.LeaveGroupRequest:
		return s.leaveGroup(ctx, k)
	case *kmsg.OffsetFetchRequest:
		return s.offsetFetch(ctx, k)
	case *kmsg.ListGroupsRequest:
		return s.listGroups(ctx, k)
	case *kmsg.DescribeGroupsRequest:
		return s.describeGroups(ctx, k)
	case *kmsg.DeleteGroupsRequest:
		return s.deleteGroups(ctx, k)
	case *kmsg.OffsetDeleteRequest:
		return s.offsetDelete(ctx, k)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return s.consumerGroupHeartbeat(ctx, k)
	case *kmsg.AlterPartitionAssignmentsRequest:
		return s.alterPartitionAssignments(ctx, k)
	case *kmsg.ListPartitionReassignmentsRequest:
		return s.listPartitionReassignments(ctx, k)
	}
	return unsupported(req)
}

// unsupported answers a request of a key or version this server does
// not serve, as Kafka does: the response of its key at the request's
// version (or the lowest one kmsg knows) with UNSUPPORTED_VERSION where it
// has a top-level error code. A response without one cannot say it: the
// connection is closed.
func unsupported(req *request) (kmsg.Response, error) {
	resp := kmsg.ResponseForKey(req.key)
	if resp == nil {
		return nil, fmt.Errorf("%w: API key %d", errClose, req.key)
	}
	if req.version >= 0 && req.version <= resp.MaxVersion() {
		resp.SetVersion(req.version)
	}
	if !setErrorCode(resp, kerr.UnsupportedVersion.Code) {
		return nil, fmt.Errorf("%w: %s v%d is not served and its response has no error code", errClose, kmsg.NameForKey(req.key), req.version)
	}
	return resp, nil
}

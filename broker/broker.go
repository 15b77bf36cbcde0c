package broker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"gostream/controller"
	"gostream/groups"
	"gostream/metadata"
	"gostream/producers"
	"gostream/record"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// Authorizer decides what a principal may do (security.Authorizer behind
// the node's refusal counting and logging). A nil Authorizer in Config
// allows everything: authorization is off.
type Authorizer interface {
	// Authorize returns nil when principal may do op on the resource, and
	// otherwise an error matching transport.ErrUnauthorized (counted and
	// logged as a refusal).
	Authorize(principal string, op metadata.Operation, rt metadata.ResourceType, name string) error
	// CanDescribe reports, without counting a refusal, whether principal
	// may see a resource: lists leave out what it may not.
	CanDescribe(principal string, rt metadata.ResourceType, name string) bool
	// Allowed reports, without counting a refusal, whether principal may
	// do op on a resource.
	Allowed(principal string, op metadata.Operation, rt metadata.ResourceType, name string) bool
}

// Config is what a node gives its Broker.
type Config struct {
	// Broker is this node's broker id.
	Broker   int32
	Replicas *Replicas
	// Authorizer checks every operation; nil allows everything.
	Authorizer Authorizer
	// MaxBatchBytes is the largest batch a partition takes
	// (--max-batch-bytes).
	MaxBatchBytes int
	// OnProduced and OnFetched, if set, feed the node's metrics: a batch
	// acknowledged (its bytes, its records, and how long its replication
	// took when it had followers, else 0), and the bytes of a fetch, its
	// records from the offset asked, and whether the bytes were lent as a
	// range of a file (FetchResult.Range) rather than read.
	OnProduced func(bytes int, records int64, replicated time.Duration)
	OnFetched  func(bytes int, records int64, fromFile bool)
	// ActiveController returns this node's controller when it is the
	// active one, else an error matching transport.ErrNotController that
	// names the active one as this node knows it. CallController sends a
	// request to the active controller wherever it runs.
	ActiveController func() (*controller.Controller, error)
	CallController   func(ctx context.Context, api transport.API, req, resp transport.Message) error
	// Groups hosts this broker's group coordinators; OffsetsPartitions is
	// the partition count of __consumer_offsets when the first use of
	// groups creates it.
	Groups            *groups.Host
	OffsetsPartitions int
	// Producers keeps the idempotent producers' state on the partitions
	// this broker leads; nil refuses their batches.
	Producers *producers.Host
}

// Broker is the core of a node: the typed operations its front ends call,
// each authorized here, once, whatever protocol asked. Errors are the
// sentinels of this package and those below (transport's codes among
// them); each front end maps them to its protocol once.
type Broker struct {
	cfg Config
	ids producerIDs
}

// New returns the core of a node.
func New(cfg Config) *Broker {
	return &Broker{cfg: cfg}
}

// Replicas returns the replicas the broker serves by.
func (b *Broker) Replicas() *Replicas { return b.cfg.Replicas }

// Authorize is the check of every operation: nil when principal may do op
// on the resource (or authorization is off).
func (b *Broker) Authorize(principal string, op metadata.Operation, rt metadata.ResourceType, name string) error {
	if b.cfg.Authorizer == nil {
		return nil
	}
	return b.cfg.Authorizer.Authorize(principal, op, rt, name)
}

// CanDescribe reports whether principal may see a resource.
func (b *Broker) CanDescribe(principal string, rt metadata.ResourceType, name string) bool {
	return b.cfg.Authorizer == nil || b.cfg.Authorizer.CanDescribe(principal, rt, name)
}

// CanDo reports, without counting a refusal, whether principal may do op
// on a resource: for a check that another stands in for (create on the
// cluster, else on the topic).
func (b *Broker) CanDo(principal string, op metadata.Operation, rt metadata.ResourceType, name string) bool {
	return b.cfg.Authorizer == nil || b.cfg.Authorizer.Allowed(principal, op, rt, name)
}

// Limits of the operations, whatever the protocol.
const (
	// DefaultAckWait is how long a produce waits for its acknowledgement
	// when the request names no timeout; MaxAckWait bounds one that does.
	DefaultAckWait = 30 * time.Second
	MaxAckWait     = 5 * time.Minute
	// MaxFetchWait bounds a fetch's long poll.
	MaxFetchWait = 5 * time.Minute
)

// ProduceRequest is a batch for one partition.
type ProduceRequest struct {
	Topic string
	// TopicID, when set, is the incarnation of the topic the batch is for
	// (transport.ErrUnknownTopicID for another).
	TopicID   string
	Partition int32
	Batch     record.Batch
	// Timeout bounds the wait for the acknowledgement (0: DefaultAckWait;
	// at most MaxAckWait).
	Timeout time.Duration
	// Hold, when set, keeps Batch's memory from being reused while a
	// follower's sender still needs it (transport.Request.Hold; see
	// replication.Partition.ProduceHeld). Without it the caller leaves the
	// batch's memory to the garbage collector.
	Hold func() (release func())
}

// ProduceResult is the acknowledgement of a produced batch.
type ProduceResult struct {
	BaseOffset, NextOffset int64
	LeaderEpoch            int32
	AppendTime             int64   // the leader's clock, Unix milliseconds
	Replicas               []int32 // the replicas that hold it durably
}

// Produce appends a batch to a partition this broker leads, for principal
// (write on the topic), and returns the wait for its acknowledgement by
// every active replica. The append happens before Produce returns, so
// batches produced one after another are in the log in that order; the
// waits may run concurrently.
func (b *Broker) Produce(principal string, req ProduceRequest) (func(context.Context) (ProduceResult, error), error) {
	if err := b.Authorize(principal, metadata.OpWrite, metadata.ResourceTopic, req.Topic); err != nil {
		return nil, err
	}
	t, rep, err := b.cfg.Replicas.Lookup(req.Topic, req.TopicID, req.Partition)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(req.Topic, metadata.InternalPrefix):
		return nil, fmt.Errorf("%w: %s is an internal topic of the cluster: only its brokers write to it", transport.ErrInvalidRequest, req.Topic)
	case t.Sealed:
		return nil, fmt.Errorf("%w: topic %q is sealed: it takes no more records, reads go on", transport.ErrTopicSealed, req.Topic)
	case rep == nil:
		return nil, notLeader(t, req.Partition)
	case req.Timeout < 0:
		return nil, fmt.Errorf("%w: negative timeout %s", transport.ErrInvalidRequest, req.Timeout)
	case len(req.Batch) > b.cfg.MaxBatchBytes:
		return nil, transport.BatchTooLarge(len(req.Batch), b.cfg.MaxBatchBytes)
	}
	if err := req.Batch.CheckProduced(); err != nil {
		return nil, fmt.Errorf("%w: %v", transport.ErrInvalidBatch, err)
	}
	start := time.Now()
	size := len(req.Batch)
	timeout := DefaultAckWait
	if req.Timeout > 0 {
		timeout = min(req.Timeout, MaxAckWait)
	}
	var wait func(context.Context) (replication.Ack, error)
	if id, _, _ := req.Batch.Producer(); id >= 0 {
		if b.cfg.Producers == nil {
			return nil, fmt.Errorf("%w: this node takes no idempotent producer's batch", transport.ErrInvalidRequest)
		}
		// The first batch after a change of leader waits for the
		// producers' state to be read from the log.
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		wait, err = b.cfg.Producers.Produce(ctx, rep.Part, req.Batch, req.Hold)
		cancel()
	} else {
		wait, err = rep.Part.ProduceHeld(req.Batch, req.Hold)
	}
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (ProduceResult, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		ack, err := wait(ctx)
		if err != nil {
			return ProduceResult{}, err
		}
		if b.cfg.OnProduced != nil {
			var replicated time.Duration
			if len(ack.Replicas) > 1 {
				replicated = time.Since(start)
			}
			b.cfg.OnProduced(size, ack.NextOffset-ack.BaseOffset, replicated)
		}
		return ProduceResult{BaseOffset: ack.BaseOffset, NextOffset: ack.NextOffset, LeaderEpoch: ack.LeaderEpoch,
			AppendTime: ack.AppendTime, Replicas: ack.Replicas}, nil
	}, nil
}

// hosted finds this broker's replica of a partition for a client's
// request; a broker that holds none answers NotLeader, so the client
// looks again. The partition itself refuses what only its leader may
// serve.
func (b *Broker) hosted(topic, id string, partition int32) (*Replica, error) {
	t, rep, err := b.cfg.Replicas.Lookup(topic, id, partition)
	if err != nil {
		return nil, err
	}
	if rep == nil {
		return nil, notLeader(t, partition)
	}
	return rep, nil
}

func notLeader(t *metadata.Topic, partition int32) error {
	p := t.Partitions[partition]
	return fmt.Errorf("%w: partition %s/%d is led by broker %d", transport.ErrNotLeader, t.Name, partition, p.Leader)
}

// FetchRequest asks for a partition's records from an offset.
type FetchRequest struct {
	Topic     string
	TopicID   string
	Partition int32
	Offset    int64
	// MaxBytes bounds the batches returned, but for a first batch larger
	// than it, which is returned whole.
	MaxBytes int
	// MaxWait is how long to wait for records below the high watermark
	// when there are none (a long poll; at most MaxFetchWait).
	MaxWait time.Duration
	// RangeMin, when above 0, asks for the batches as a range of a
	// segment's file (FetchResult.Range) rather than read, when the log
	// can lend them so and they come to at least RangeMin bytes: for a
	// front end that sends them from the file (transport.SendFile).
	RangeMin int
}

// FetchResult is what a fetch read: whole batches, from the one holding
// the offset asked, all below the high watermark.
type FetchResult struct {
	HighWatermark, LogStartOffset int64
	Batches                       []byte
	// Range, when the request asked for one and got it, holds the
	// batches in place of Batches: where they lie in a segment's file
	// (storage.Log.ReadRange).
	Range *storage.Range
	// Release gives the read's buffer or its Range back once the batches
	// are no longer used (written out); it may be called once.
	Release func()
}

// Fetch reads a partition this broker leads, for principal (read on the
// topic). reserve, if set, is called with the memory the read may
// allocate, at most, once there is data to read (never while a long poll
// waits): a front end charges it to its connection, and an error from it
// ends the fetch.
func (b *Broker) Fetch(ctx context.Context, principal string, req FetchRequest, reserve func(context.Context, int) error) (FetchResult, error) {
	if err := b.Authorize(principal, metadata.OpRead, metadata.ResourceTopic, req.Topic); err != nil {
		return FetchResult{}, err
	}
	rep, err := b.hosted(req.Topic, req.TopicID, req.Partition)
	if err != nil {
		return FetchResult{}, err
	}
	switch {
	case req.Offset < 0:
		return FetchResult{}, fmt.Errorf("%w: negative offset %d", transport.ErrOffsetOutOfRange, req.Offset)
	case req.MaxBytes < 1:
		return FetchResult{}, fmt.Errorf("%w: max bytes %d below 1", transport.ErrInvalidRequest, req.MaxBytes)
	case req.MaxWait < 0 || req.MaxWait > MaxFetchWait:
		return FetchResult{}, fmt.Errorf("%w: max wait %s outside [0, %s]", transport.ErrInvalidRequest, req.MaxWait, MaxFetchWait)
	}
	var buf []byte
	res, err := rep.Part.FetchInto(ctx, req.Offset, req.MaxBytes, req.MaxWait, req.RangeMin, func() ([]byte, error) {
		if reserve != nil {
			if err := reserve(ctx, readReservation(req.MaxBytes, b.cfg.MaxBatchBytes)); err != nil {
				return nil, err
			}
		}
		buf = getReadBuffer(req.MaxBytes)
		return buf, nil
	})
	if err != nil {
		putReadBuffer(buf)
		return FetchResult{}, err
	}
	if r := res.Range; r != nil {
		if b.cfg.OnFetched != nil {
			b.cfg.OnFetched(r.Len(), max(0, r.NextOffset()-max(r.BaseOffset(), req.Offset)), true)
		}
		return FetchResult{HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset, Range: r, Release: r.Release}, nil
	}
	if len(res.Batches) == 0 || cap(buf) == 0 || &res.Batches[:1][0] != &buf[:1][0] {
		// The batches are not in buf (nothing read, or a first batch
		// larger than buf read into a buffer of its own).
		putReadBuffer(buf)
		buf = nil
	}
	if b.cfg.OnFetched != nil {
		b.cfg.OnFetched(len(res.Batches), fetchedRecords(res.Batches, req.Offset), false)
	}
	return FetchResult{HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset, Batches: res.Batches,
		Release: func() { putReadBuffer(buf) }}, nil
}

// fetchedRecords counts the records of the batches in buf from offset
// on, by their headers alone: they come from this node's log, and the
// fetcher verifies them. It stops at bytes that do not frame.
func fetchedRecords(buf []byte, offset int64) int64 {
	var n int64
	for len(buf) > 0 {
		size, err := record.FrameSize(buf, len(buf))
		if err != nil {
			break
		}
		b := record.Batch(buf[:size])
		n += max(0, b.NextOffset()-max(b.BaseOffset(), offset))
		buf = buf[size:]
	}
	return n
}

// readReservation is the memory a fetch of maxBytes may allocate for its
// read, at most: its read buffer (a pooled one, or one of maxBytes), plus,
// when a first batch larger than maxBytes can exist, a buffer for that
// batch alone.
func readReservation(maxBytes, maxBatchBytes int) int {
	n := maxBytes
	if maxBytes <= pooledReadBuffer {
		n = pooledReadBuffer
	}
	if maxBytes < maxBatchBytes {
		n += maxBatchBytes
	}
	return n
}

// Fetch read buffers are reused: a consumer reading 1 MiB at a time would
// otherwise make the node allocate (and collect) a megabyte per request.
// Only buffers of the common size are pooled.
const pooledReadBuffer = 1 << 20

var readBuffers = sync.Pool{New: func() any { b := make([]byte, pooledReadBuffer); return &b }}

func getReadBuffer(maxBytes int) []byte {
	if maxBytes > pooledReadBuffer {
		return nil // Read allocates what it needs
	}
	return (*readBuffers.Get().(*[]byte))[:0]
}

func putReadBuffer(b []byte) {
	if b != nil && cap(b) == pooledReadBuffer {
		b = b[:cap(b)]
		readBuffers.Put(&b)
	}
}

// Offsets are a partition's log start, high watermark and log end, as its
// leader knows them.
type Offsets struct {
	LogStartOffset, HighWatermark, LogEndOffset int64
}

// ListOffsets returns the offsets of a partition this broker leads, for
// principal (describe on the topic).
func (b *Broker) ListOffsets(principal, topic, topicID string, partition int32) (Offsets, error) {
	if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceTopic, topic); err != nil {
		return Offsets{}, err
	}
	rep, err := b.hosted(topic, topicID, partition)
	if err != nil {
		return Offsets{}, err
	}
	start, hw, end, err := rep.Part.LeaderOffsets()
	if err != nil {
		return Offsets{}, err
	}
	return Offsets{LogStartOffset: start, HighWatermark: hw, LogEndOffset: end}, nil
}

// TopicView is a topic as a client is told of it: its metadata and the
// value this node applies for each key of its configuration.
type TopicView struct {
	*metadata.Topic
	Config []transport.TopicConfigValue
}

// Metadata returns the cluster's metadata as principal may see it: the
// topics named (describe on each, refused otherwise, before it is known
// whether the topic exists), or with none named every topic it may
// describe. It is this node's cached copy: the data plane serves while
// the controller is away.
func (b *Broker) Metadata(principal string, topics []string) (*metadata.Cluster, []TopicView, error) {
	meta := b.cfg.Replicas.Metadata()
	if meta == nil {
		return nil, nil, fmt.Errorf("%w: this node has no metadata yet", transport.ErrControllerUnavailable)
	}
	var out []TopicView
	if len(topics) == 0 {
		for i := range meta.Topics {
			if b.CanDescribe(principal, metadata.ResourceTopic, meta.Topics[i].Name) {
				out = append(out, b.view(&meta.Topics[i]))
			}
		}
		return meta, out, nil
	}
	for _, name := range topics {
		if err := b.Authorize(principal, metadata.OpDescribe, metadata.ResourceTopic, name); err != nil {
			return nil, nil, err
		}
		t := meta.Topic(name)
		if t == nil {
			return nil, nil, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, name)
		}
		out = append(out, b.view(t))
	}
	return meta, out, nil
}

func (b *Broker) view(t *metadata.Topic) TopicView {
	return TopicView{Topic: t, Config: b.cfg.Replicas.TopicConfigValues(t)}
}

package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/metadata"
	"gostream/record"
	"gostream/transport"
)

// ProducerConfig configures a Producer. Zero values take the defaults named.
type ProducerConfig struct {
	// Linger is how long a partition's batch waits for more records once
	// it holds one; default 5ms, negative to send what is there at once.
	Linger time.Duration
	// BatchBytes closes a batch when the next record would make it larger
	// (a larger record gets a batch of its own); default 256 KiB.
	BatchBytes int
	// MaxInFlightPerPartition is how many batches of one partition may be
	// awaiting their answer at once; default 5.
	MaxInFlightPerPartition int
	// DeliveryTimeout bounds how long after a record is given a batch
	// holding it may still be sent again after an attempt that provably
	// did not append it, or, for an idempotent producer, whose outcome is
	// unknown (see the package documentation); a Send whose context has a
	// deadline is bounded by that deadline instead. Default the client's
	// RetryTimeout; for an idempotent producer at least four
	// RequestTimeouts (as Kafka's delivery.timeout.ms is four of its
	// request.timeout.ms), so that an attempt whose answer never came can
	// be sent again.
	DeliveryTimeout time.Duration
	// Retries, if positive, caps how many times a batch is sent again,
	// besides DeliveryTimeout; negative for never; default 0: the
	// deadline alone bounds them.
	Retries int
	// RetryBackoff is the wait before sending batches again the first
	// time; it doubles with each further attempt of a batch, up to the
	// client's RetryBackoffMax, drawn at random from its upper half.
	// Default the client's RetryBackoff.
	RetryBackoff time.Duration
	// BufferBytes bounds the records buffered or in flight; a send waits
	// for room. Default 32 MiB.
	BufferBytes int
	// MaxBlock bounds how long SendAsync waits for metadata and buffer
	// room; default the client's RequestTimeout.
	MaxBlock time.Duration
	// RequestTimeout bounds one produce request, replication included;
	// default the client's RequestTimeout.
	RequestTimeout time.Duration
	// MaxRequestBytes, if set, bounds one produce request below what the
	// cluster's batch limit allows (Metadata.MaxBatchBytes, a broker's
	// --max-batch-bytes). A record whose batch would exceed either limit
	// fails with transport.ErrMessageTooLarge before anything is sent.
	// Default: the cluster's limit alone.
	MaxRequestBytes int
	// Idempotent makes an idempotent producer (see the package
	// documentation, "Producing: idempotence"): NewProducer asks the
	// cluster for a producer id, every batch carries it with its
	// sequence, and a batch whose outcome is unknown is sent again, which
	// the partition's leader answers with the original's offsets. Each
	// acknowledged record is then in its partition exactly once.
	// MaxInFlightPerPartition must be at most 5. Default off.
	Idempotent bool
}

// requestOverhead is room for a produce request's frame header and fields
// besides the batch (a topic name is at most 249 bytes).
const requestOverhead = 1 << 10

func (cfg *ProducerConfig) setDefaults(c *Config) error {
	if cfg.Linger == 0 {
		cfg.Linger = 5 * time.Millisecond
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 256 << 10
	}
	if cfg.MaxInFlightPerPartition <= 0 {
		cfg.MaxInFlightPerPartition = 5
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = c.RequestTimeout
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = c.RetryTimeout
		if cfg.Idempotent {
			cfg.DeliveryTimeout = max(cfg.DeliveryTimeout, 4*cfg.RequestTimeout)
		}
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = c.RetryBackoff
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = 32 << 20
	}
	if cfg.MaxBlock <= 0 {
		cfg.MaxBlock = c.RequestTimeout
	}
	if cfg.MaxRequestBytes < 0 || cfg.MaxRequestBytes > 0 && cfg.MaxRequestBytes <= requestOverhead+cfg.batchOverhead() {
		return fmt.Errorf("%w: MaxRequestBytes %d", ErrInvalidConfig, cfg.MaxRequestBytes)
	}
	if cfg.Idempotent && cfg.MaxInFlightPerPartition > maxIdempotentInFlight {
		return fmt.Errorf("%w: MaxInFlightPerPartition %d: an idempotent producer may have at most %d batches of a partition in flight (a leader finds a batch sent again among a producer's last %d)",
			ErrInvalidConfig, cfg.MaxInFlightPerPartition, maxIdempotentInFlight, maxIdempotentInFlight)
	}
	return nil
}

// batchOverhead is the size of a batch without its records: its header,
// and for an idempotent producer the Kafka batch header inside it.
func (cfg *ProducerConfig) batchOverhead() int {
	if cfg.Idempotent {
		return record.HeaderSize + record.KafkaHeaderSize
	}
	return record.HeaderSize
}

// batchOverhead is the size of the producer's batches without their
// records.
func (p *Producer) batchOverhead() int { return p.cfg.batchOverhead() }

// recordSize is what r takes in the producer's batches, at most.
func (p *Producer) recordSize(r *record.Record) int {
	if p.cfg.Idempotent {
		return r.KafkaEncodedSize()
	}
	return r.EncodedSize()
}

// batchLimit is the largest batch a request can carry, and whether the
// cluster's limit (not MaxRequestBytes) is the one that binds.
func (p *Producer) batchLimit() (limit int, cluster bool) {
	limit = transport.DefaultMaxBatchBytes
	if st := p.c.state(); st != nil {
		limit = st.maxBatch
	}
	if p.cfg.MaxRequestBytes > 0 && p.cfg.MaxRequestBytes-requestOverhead < limit {
		return p.cfg.MaxRequestBytes - requestOverhead, false
	}
	return limit, true
}

// ProducerRecord is a record to produce.
type ProducerRecord struct {
	Topic string
	// Key chooses the partition (see Partition) unless ManualPartition is
	// set. A nil key is no key: such records go round robin. An empty,
	// non-nil key is a key like any other.
	Key     []byte
	Value   []byte
	Headers []record.Header
	// Partition is the partition to write to when ManualPartition is set.
	Partition       int32
	ManualPartition bool
}

// Ack acknowledges a produced record: it is durable on every active
// replica of its partition. Passed with an error, it names only the topic
// and partition (-1 if none was chosen yet), and Offset is -1.
type Ack struct {
	Topic       string
	Partition   int32
	Offset      int64
	LeaderID    int32
	LeaderEpoch int32
	Timestamp   int64 // the leader's append time, Unix milliseconds
}

// Partition returns the partition, in [0, n), of a record with key key in a
// topic of n partitions: the SHA-256 digest of key read as a big-endian
// unsigned 256-bit integer, modulo n. It is the same in every process and
// release (a group's partition of __consumer_offsets is its name's). It
// panics if n is not positive.
func Partition(key []byte, n int) int { return metadata.KeyPartition(key, n) }

type topicPartition struct {
	topic     string
	partition int32
}

// Producer sends records to the partition leaders in batches. It is safe
// for concurrent use. See the package documentation for what it promises.
type Producer struct {
	c         *Client
	cfg       ProducerConfig
	pid       producerID // an idempotent producer's, from NewProducer
	log       hclog.Logger
	budget    *byteBudget
	callbacks *callbackQueue
	stop      chan struct{} // closed to stop the partition goroutines
	wg        sync.WaitGroup
	closeOnce sync.Once

	mu struct {
		sync.Mutex
		closed bool
		parts  map[topicPartition]*partitionProducer
		rr     map[string]uint32 // next round-robin partition per topic
	}
}

// NewProducer returns a Producer that sends through c. It returns
// ErrInvalidConfig for a config that cannot work. An idempotent producer
// (ProducerConfig.Idempotent) first asks the cluster for a producer id,
// retrying for up to the client's RetryTimeout while no broker gives one;
// a cluster whose nodes hand out none (older than the client) is an error
// matching transport.ErrUnsupportedVersion.
func NewProducer(c *Client, cfg ProducerConfig) (*Producer, error) {
	if err := cfg.setDefaults(&c.cfg); err != nil {
		return nil, err
	}
	var pid producerID
	if cfg.Idempotent {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RetryTimeout)
		defer cancel()
		var err error
		if pid, err = c.newProducerID(ctx); err != nil {
			return nil, fmt.Errorf("idempotent producer: %w", err)
		}
		c.log.Debug("idempotent producer", "producer_id", pid.id, "epoch", pid.epoch)
	}
	p := &Producer{
		c:         c,
		cfg:       cfg,
		pid:       pid,
		log:       c.log.Named("producer"),
		budget:    newByteBudget(cfg.BufferBytes),
		callbacks: newCallbackQueue(),
		stop:      make(chan struct{}),
	}
	p.mu.parts = make(map[topicPartition]*partitionProducer)
	p.mu.rr = make(map[string]uint32)
	return p, nil
}

// Send produces rec and waits for its outcome. The error matches
// ErrNotAppended or ErrUnknownOutcome, besides the cluster's sentinel (see
// the package documentation); an error before the record was accepted
// (ErrClosed, ErrBufferFull, transport.ErrUnknownTopic,
// transport.ErrUnknownPartition, transport.ErrMessageTooLarge) means it
// was not sent. If ctx ends while the record is in flight, Send returns
// an error matching ErrUnknownOutcome and the record may still be
// appended.
func (p *Producer) Send(ctx context.Context, rec ProducerRecord) (Ack, error) {
	type result struct {
		ack Ack
		err error
	}
	ch := make(chan result, 1)
	done := func(a Ack, err error) { ch <- result{a, err} }
	if err := p.enqueue(ctx, time.Now(), rec, done, true); err != nil {
		return Ack{}, err
	}
	select {
	case r := <-ch:
		return r.ack, r.err
	case <-ctx.Done():
		return Ack{}, fmt.Errorf("produce to %s: %w: %w", rec.Topic, ErrUnknownOutcome, ctx.Err())
	}
}

// SendAsync produces rec and calls cb with its outcome. Callbacks of one
// partition run in the order their records were given, one at a time, on
// a goroutine the Producer owns; they must not block for long and must not
// call Send, Flush or Close (SendAsync is fine). When rec cannot be
// accepted, cb runs before SendAsync returns. SendAsync waits up to
// ProducerConfig.MaxBlock for metadata and for buffer room. cb may be nil.
// The producer keeps rec's Key, Value and Headers, uncopied, until its
// batch is first sent: they must not change before cb runs.
func (p *Producer) SendAsync(rec ProducerRecord, cb func(Ack, error)) {
	if cb == nil {
		cb = func(Ack, error) {}
	}
	now := time.Now() // read once for the record's deadlines and its routing
	ctx := newLazyDeadline(now.Add(p.cfg.MaxBlock))
	defer ctx.stop()
	if err := p.enqueue(ctx, now, rec, cb, false); err != nil {
		cb(Ack{Topic: rec.Topic, Partition: -1, Offset: -1}, err)
	}
}

// enqueue picks rec's partition and hands it to that partition's batcher.
// direct callbacks run on the partition's goroutine instead of the
// callback goroutine; they must not block. now is when the record was
// given.
func (p *Producer) enqueue(ctx context.Context, now time.Time, rec ProducerRecord, cb func(Ack, error), direct bool) error {
	p.mu.Lock()
	closed := p.mu.closed
	p.mu.Unlock()
	if closed {
		return ErrClosed
	}
	r := record.Record{Key: rec.Key, Value: rec.Value, Headers: rec.Headers}
	size := p.recordSize(&r)
	t, err := p.c.routedTopic(ctx, rec.Topic, now)
	if err != nil {
		return fmt.Errorf("produce to %s: %w", rec.Topic, err)
	}
	// The metadata is known now, and with it the cluster's limit.
	if limit, cluster := p.batchLimit(); size+p.batchOverhead() > limit {
		if cluster {
			return fmt.Errorf("produce to %s: %w", rec.Topic, transport.BatchTooLarge(size+p.batchOverhead(), limit))
		}
		return fmt.Errorf("produce to %s: %w: a batch of %d bytes exceeds the producer's limit of %d bytes (MaxRequestBytes %d less %d for the request)",
			rec.Topic, transport.ErrMessageTooLarge, size+p.batchOverhead(), limit, p.cfg.MaxRequestBytes, requestOverhead)
	}
	n := len(t.Partitions)
	if n == 0 {
		return fmt.Errorf("produce to %s: %w: topic has no partitions", rec.Topic, transport.ErrUnknownPartition)
	}
	if rec.ManualPartition && int(rec.Partition) >= n {
		// The topic may have grown since the producer asked.
		if t, err = p.c.grownTopic(ctx, rec.Topic); err != nil {
			return fmt.Errorf("produce to %s: %w", rec.Topic, err)
		}
		n = len(t.Partitions)
	}
	var partition int32
	switch {
	case rec.ManualPartition:
		if rec.Partition < 0 || int(rec.Partition) >= n {
			return fmt.Errorf("produce to %s: %w: %s", rec.Topic, transport.ErrUnknownPartition, metadata.NoSuchPartition(rec.Topic, n, rec.Partition))
		}
		partition = rec.Partition
	case rec.Key != nil:
		partition = int32(Partition(rec.Key, n))
	default:
		p.mu.Lock()
		partition = int32(p.mu.rr[rec.Topic] % uint32(n))
		p.mu.rr[rec.Topic]++
		p.mu.Unlock()
	}
	if err := p.budget.acquire(ctx, size); err != nil {
		return fmt.Errorf("produce to %s/%d: %w", rec.Topic, partition, err)
	}
	pp := p.partition(topicPartition{rec.Topic, partition})
	// Send's context bounds its record's retries; a SendAsync's record
	// (whose context bounds only this wait) has DeliveryTimeout.
	deadline, ok := ctx.Deadline()
	if !direct || !ok {
		// DeliveryTimeout counts from when the record is taken: past a
		// wait for metadata or buffer room (which started the lazy
		// deadline's timer), the clock is read again.
		if l, lazy := ctx.(*lazyDeadline); !lazy || l.started.Load() {
			now = time.Now()
		}
		deadline = now.Add(p.cfg.DeliveryTimeout)
	}
	if pp == nil || !pp.add(pending{rec: r, size: size, cb: cb, direct: direct, deadline: deadline}) {
		p.budget.release(size)
		return ErrClosed
	}
	return nil
}

// partition returns the batcher of tp, starting it if needed, or nil once
// the Producer is closed.
func (p *Producer) partition(tp topicPartition) *partitionProducer {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.closed {
		return nil
	}
	pp, ok := p.mu.parts[tp]
	if !ok {
		pp = newPartitionProducer(p, tp)
		p.mu.parts[tp] = pp
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pp.run(p.stop)
		}()
	}
	return pp
}

// Flush sends every record given before it without waiting for Linger, and
// returns once each has its outcome and its callback has returned, or when
// ctx ends.
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	parts := make([]*partitionProducer, 0, len(p.mu.parts))
	for _, pp := range p.mu.parts {
		parts = append(parts, pp)
	}
	p.mu.Unlock()
	waits := make([]<-chan struct{}, 0, len(parts))
	for _, pp := range parts {
		waits = append(waits, pp.flush())
	}
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close flushes, then stops the Producer's goroutines. Records given after
// Close starts fail with ErrClosed. It is idempotent; it does not close
// the Client.
func (p *Producer) Close() error {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.mu.closed = true
		parts := p.mu.parts
		p.mu.Unlock()
		for _, pp := range parts {
			pp.close()
		}
		// Every batch is bounded by its request timeout and retries, so
		// this ends.
		p.Flush(context.Background())
		close(p.stop)
		p.wg.Wait()
		p.callbacks.close()
	})
	return nil
}

// byteBudget bounds the bytes of records buffered or in flight.
type byteBudget struct {
	max int
	mu  struct {
		sync.Mutex
		used    int
		changed chan struct{} // closed and replaced on every release
	}
}

func newByteBudget(max int) *byteBudget {
	b := &byteBudget{max: max}
	b.mu.changed = make(chan struct{})
	return b
}

// acquire takes n bytes, waiting for room. A record larger than the whole
// budget is let in when nothing else is buffered.
func (b *byteBudget) acquire(ctx context.Context, n int) error {
	for {
		b.mu.Lock()
		if b.mu.used == 0 || b.mu.used+n <= b.max {
			b.mu.used += n
			b.mu.Unlock()
			return nil
		}
		ch := b.mu.changed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrBufferFull, ctx.Err())
		}
	}
}

func (b *byteBudget) release(n int) {
	b.mu.Lock()
	b.mu.used -= n
	close(b.mu.changed)
	b.mu.changed = make(chan struct{})
	b.mu.Unlock()
}

// callbackQueue runs functions one at a time, in the order pushed, on a
// goroutine it owns.
type callbackQueue struct {
	wake chan struct{}
	done chan struct{}
	mu   struct {
		sync.Mutex
		fns    []func()
		closed bool
	}
}

func newCallbackQueue() *callbackQueue {
	q := &callbackQueue{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

func (q *callbackQueue) push(fn func()) {
	q.mu.Lock()
	q.mu.fns = append(q.mu.fns, fn)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

func (q *callbackQueue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		fns, closed := q.mu.fns, q.mu.closed
		q.mu.fns = nil
		q.mu.Unlock()
		for _, fn := range fns {
			fn()
		}
		if closed && len(fns) == 0 {
			return
		}
		if len(fns) == 0 {
			<-q.wake
		}
	}
}

// close runs what is queued, then stops the goroutine.
func (q *callbackQueue) close() {
	q.mu.Lock()
	q.mu.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

// lazyDeadline is a context that ends at a deadline, as
// context.WithDeadline's, but makes its timer only when something first
// waits for its end (Done). SendAsync bounds its record's waits (for
// metadata, for buffer room) by MaxBlock, and a record usually waits for
// nothing: a timer made and stopped for every record was a seventh of a
// pipelined producer's CPU.
type lazyDeadline struct {
	deadline time.Time
	started  atomic.Bool
	once     sync.Once
	ctx      context.Context
	cancel   context.CancelFunc
}

func newLazyDeadline(deadline time.Time) *lazyDeadline {
	return &lazyDeadline{deadline: deadline}
}

// start makes the context that keeps the deadline, once.
func (l *lazyDeadline) start() context.Context {
	l.once.Do(func() {
		l.ctx, l.cancel = context.WithDeadline(context.Background(), l.deadline)
		l.started.Store(true)
	})
	return l.ctx
}

// stop releases the timer, if one was made.
func (l *lazyDeadline) stop() {
	if l.started.Load() {
		l.cancel()
	}
}

// Deadline implements context.Context.
func (l *lazyDeadline) Deadline() (time.Time, bool) { return l.deadline, true }

// Done implements context.Context.
func (l *lazyDeadline) Done() <-chan struct{} { return l.start().Done() }

// Err implements context.Context: DeadlineExceeded once the deadline has
// passed (Done, when asked for, is closed by then too). A context that was
// started and stopped before its deadline says Canceled.
func (l *lazyDeadline) Err() error {
	if l.started.Load() {
		return l.ctx.Err()
	}
	if time.Now().Before(l.deadline) {
		return nil
	}
	return context.DeadlineExceeded
}

// Value implements context.Context. Once started it answers as the context
// that keeps the deadline, so that a context derived from this one is
// cancelled with it directly rather than by a goroutine watching Done.
func (l *lazyDeadline) Value(key any) any {
	if l.started.Load() {
		return l.ctx.Value(key)
	}
	return nil
}

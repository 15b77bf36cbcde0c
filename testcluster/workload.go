package testcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gostream/client"
)

// WorkloadConfig describes the chaos workload.
type WorkloadConfig struct {
	Topic      string
	Partitions int
	Producers  int
	Consumers  int
	// SendTimeout bounds one Send (default 2s).
	SendTimeout time.Duration
	// Backoff is the wait after a failed operation (default 100ms).
	Backoff time.Duration
	// Secured, if set, completes each client's configuration (TLS and a
	// token for a secure cluster: Cluster.Secured).
	Secured func(client.Config) client.Config
	// Kafka, if set, are the nodes' Kafka listeners: a Kafka producer and a
	// Kafka reader (franz-go) join the workload (kafkaload.go). With
	// KafkaTLS they speak TLS and SASL/PLAIN as KafkaUser.
	Kafka                    []string
	KafkaTLS                 *tls.Config
	KafkaUser, KafkaPassword string
}

// Workload is concurrent producers writing unique values "p<id>-<seq>" to
// the partitions of one topic and consumers reading every partition from
// offset 0, each recording what it did in a History.
type Workload struct {
	cfg       WorkloadConfig
	bootstrap []string
	hist      *History

	prodCancel context.CancelFunc
	consCancel context.CancelFunc
	prodWG     sync.WaitGroup
	consWG     sync.WaitGroup

	mu        sync.Mutex
	consumers [][]*client.Consumer // per consumer worker, per partition
	clients   []*client.Client
	sending   map[int]time.Time // producer id -> start of its send in flight
	// kafkaPos is the Kafka reader's position per partition: one past the
	// last record it read (nil without a Kafka reader).
	kafkaPos []int64
}

// NewWorkload returns a workload against the cluster at bootstrap.
func NewWorkload(bootstrap []string, cfg WorkloadConfig, hist *History) *Workload {
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 2 * time.Second
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 100 * time.Millisecond
	}
	return &Workload{cfg: cfg, bootstrap: bootstrap, hist: hist, sending: map[int]time.Time{}}
}

// Settle waits until every send that began before t has ended and is in
// the history, or until timeout; it reports whether they all had.
func (w *Workload) Settle(t time.Time, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		w.mu.Lock()
		busy := false
		for _, start := range w.sending {
			busy = busy || start.Before(t)
		}
		w.mu.Unlock()
		if !busy {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (w *Workload) setSending(id int, start time.Time) {
	w.mu.Lock()
	if start.IsZero() {
		delete(w.sending, id)
	} else {
		w.sending[id] = start
	}
	w.mu.Unlock()
}

func (w *Workload) newClient() (*client.Client, error) {
	var cl *client.Client
	var err error
	for try := 0; try < 50; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		cfg := client.Config{Bootstrap: w.bootstrap, RequestTimeout: 2 * time.Second, DialTimeout: time.Second}
		if w.cfg.Secured != nil {
			cfg = w.cfg.Secured(cfg)
		}
		cl, err = client.New(ctx, cfg)
		cancel()
		if err == nil {
			w.mu.Lock()
			w.clients = append(w.clients, cl)
			w.mu.Unlock()
			return cl, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil, err
}

// Start starts the producers and the consumers.
func (w *Workload) Start() error {
	pctx, pcancel := context.WithCancel(context.Background())
	cctx, ccancel := context.WithCancel(context.Background())
	w.prodCancel, w.consCancel = pcancel, ccancel
	for i := 0; i < w.cfg.Consumers; i++ {
		cl, err := w.newClient()
		if err != nil {
			return err
		}
		var cons []*client.Consumer
		for p := 0; p < w.cfg.Partitions; p++ {
			c, err := client.NewConsumer(cl, w.cfg.Topic, int32(p), client.ConsumerConfig{MaxBytes: 256 << 10})
			if err != nil {
				return err
			}
			cons = append(cons, c)
		}
		w.mu.Lock()
		w.consumers = append(w.consumers, cons)
		w.mu.Unlock()
		w.consWG.Add(1)
		go w.consume(cctx, i+1, cl, cons)
	}
	for i := 0; i < w.cfg.Producers; i++ {
		cl, err := w.newClient()
		if err != nil {
			return err
		}
		p, err := client.NewProducer(cl, client.ProducerConfig{RequestTimeout: w.cfg.SendTimeout, Linger: -1})
		if err != nil {
			return err
		}
		w.prodWG.Add(1)
		go w.produce(pctx, i+1, cl, p)
	}
	if len(w.cfg.Kafka) > 0 {
		return w.startKafka(pctx, cctx, w.cfg.Producers+1, w.cfg.Consumers+1)
	}
	return nil
}

func (w *Workload) produce(ctx context.Context, id int, cl *client.Client, p *client.Producer) {
	defer w.prodWG.Done()
	defer p.Close()
	for seq := 0; ctx.Err() == nil; seq++ {
		part := int32((seq + id) % w.cfg.Partitions)
		value := fmt.Sprintf("p%d-%d", id, seq)
		op := Op{Kind: OpProduce, Worker: id, Topic: w.cfg.Topic, Partition: part, Value: value, Offset: -1, Start: time.Now()}
		w.setSending(id, op.Start)
		sctx, cancel := context.WithTimeout(context.Background(), w.cfg.SendTimeout)
		ack, err := p.Send(sctx, client.ProducerRecord{Topic: w.cfg.Topic, Partition: part, ManualPartition: true, Value: []byte(value)})
		cancel()
		op.End = time.Now()
		// The op goes into the history before the send stops counting as
		// in flight, so Settle never returns between the two.
		if err != nil {
			// Nothing tells the producer for sure that the record was not
			// appended: it may be read back, but never twice.
			op.Result, op.Err = ResultUnknown, err.Error()
			w.hist.Add(op)
			w.setSending(id, time.Time{})
			sleepCtx(ctx, w.cfg.Backoff)
			rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
			cl.RefreshMetadata(rctx, w.cfg.Topic)
			rcancel()
			continue
		}
		op.Result, op.Offset = ResultOK, ack.Offset
		if ack.Partition != part {
			op.Err = fmt.Sprintf("acknowledged on partition %d", ack.Partition)
		}
		w.hist.Add(op)
		w.setSending(id, time.Time{})
	}
}

func (w *Workload) consume(ctx context.Context, id int, cl *client.Client, cons []*client.Consumer) {
	defer w.consWG.Done()
	for ctx.Err() == nil {
		for p, c := range cons {
			if ctx.Err() != nil {
				return
			}
			start := time.Now()
			pos := c.Position()
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			recs, err := c.Poll(pctx, 100*time.Millisecond)
			cancel()
			end := time.Now()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				w.hist.Add(Op{Kind: OpRead, Worker: id, Topic: w.cfg.Topic, Partition: int32(p), Start: start, End: end,
					Result: ResultFail, Offset: pos, HW: c.HighWatermark(), Err: err.Error()})
				sleepCtx(ctx, w.cfg.Backoff)
				rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
				cl.RefreshMetadata(rctx, w.cfg.Topic)
				rcancel()
				continue
			}
			hw := c.HighWatermark()
			if len(recs) == 0 {
				w.hist.Add(Op{Kind: OpRead, Worker: id, Topic: w.cfg.Topic, Partition: int32(p), Start: start, End: end,
					Result: ResultOK, Offset: -1, HW: hw})
				continue
			}
			for _, r := range recs {
				w.hist.Add(Op{Kind: OpRead, Worker: id, Topic: w.cfg.Topic, Partition: int32(p), Start: start, End: end,
					Result: ResultOK, Offset: r.Offset, Value: string(r.Value), HW: hw})
			}
		}
	}
}

// StopProducers stops the producers and waits for them.
func (w *Workload) StopProducers() {
	if w.prodCancel != nil {
		w.prodCancel()
	}
	w.prodWG.Wait()
}

// Drain waits until every consumer, the Kafka reader too, has read every
// partition up to its high watermark as the leaders report it now, then
// stops the consumers.
// It returns an error naming what was not read by timeout.
func (w *Workload) Drain(timeout time.Duration) error {
	defer func() {
		w.consCancel()
		w.consWG.Wait()
		w.mu.Lock()
		for _, cl := range w.clients {
			cl.Close()
		}
		w.mu.Unlock()
	}()
	deadline := time.Now().Add(timeout)
	cl, err := w.newClient()
	if err != nil {
		return err
	}
	targets := make([]int64, w.cfg.Partitions)
	for p := range targets {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			cl.RefreshMetadata(ctx, w.cfg.Topic)
			off, err := cl.ListOffsets(ctx, w.cfg.Topic, int32(p))
			cancel()
			if err == nil {
				targets[p] = off.HighWatermark
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("drain: list offsets of partition %d: %v", p, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	for {
		var behind []string
		w.mu.Lock()
		for i, cons := range w.consumers {
			for p, c := range cons {
				if pos := c.Position(); pos < targets[p] {
					behind = append(behind, fmt.Sprintf("consumer %d partition %d at %d of %d", i+1, p, pos, targets[p]))
				}
			}
		}
		// The Kafka reader is held to the same: after a leader moved it
		// may take a metadata refresh to read on.
		for p, pos := range w.kafkaPos {
			if pos < targets[p] {
				behind = append(behind, fmt.Sprintf("the Kafka reader partition %d at %d of %d", p, pos, targets[p]))
			}
		}
		w.mu.Unlock()
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("drain: not read by %s: %s", timeout, strings.Join(behind, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ReadFinal reads every partition once more, from its log start to its
// high watermark, with a client of its own, and records what it found in
// the history as OpFinal operations: one per record and one per partition
// read whole (see OpFinal). Call it after Drain, once the faults have
// healed and the operator's commands have run: the checkers then hold
// every record read before to what its offset holds at the end. A
// partition not read whole within timeout is left out of the history and
// named in the error.
func (w *Workload) ReadFinal(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cfg := client.Config{Bootstrap: w.bootstrap, RequestTimeout: 3 * time.Second, DialTimeout: time.Second}
	if w.cfg.Secured != nil {
		cfg = w.cfg.Secured(cfg)
	}
	cl, err := client.New(ctx, cfg)
	if err != nil {
		return fmt.Errorf("final read: %w", err)
	}
	defer cl.Close()
	var errs []error
	for p := range int32(w.cfg.Partitions) {
		ops, err := w.readFinal(ctx, cl, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, op := range ops {
			w.hist.Add(op)
		}
	}
	return errors.Join(errs...)
}

// readFinal reads partition p from its log start to its high watermark.
func (w *Workload) readFinal(ctx context.Context, cl *client.Client, p int32) ([]Op, error) {
	start := time.Now()
	var offs client.PartitionOffsets
	for {
		err := cl.RefreshMetadata(ctx, w.cfg.Topic)
		if err == nil {
			offs, err = cl.ListOffsets(ctx, w.cfg.Topic, p)
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("final read of partition %d: list offsets: %w", p, err)
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	c, err := client.NewConsumer(cl, w.cfg.Topic, p, client.ConsumerConfig{MaxBytes: 1 << 20})
	if err != nil {
		return nil, err
	}
	c.SeekTo(offs.LogStartOffset)
	var recs []Op
	for c.Position() < offs.HighWatermark {
		got, err := c.Poll(ctx, 100*time.Millisecond)
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("final read of partition %d: at offset %d of %d: %w", p, c.Position(), offs.HighWatermark, err)
			}
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		for _, r := range got {
			if r.Offset < offs.HighWatermark {
				recs = append(recs, Op{Kind: OpFinal, Topic: w.cfg.Topic, Partition: p, Result: ResultOK, Offset: r.Offset, Value: string(r.Value)})
			}
		}
	}
	end := time.Now()
	out := append(make([]Op, 0, len(recs)+1), Op{Kind: OpFinal, Topic: w.cfg.Topic, Partition: p, Result: ResultOK, Offset: -1,
		LogStart: offs.LogStartOffset, HW: offs.HighWatermark})
	out = append(out, recs...)
	for i := range out {
		out[i].Start, out[i].End = start, end
	}
	return out, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

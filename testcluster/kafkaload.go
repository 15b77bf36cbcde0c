package testcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// The workload's Kafka side (WorkloadConfig.Kafka): one producer, franz-go
// with its defaults (idempotent, acks=all), writing unique values
// "k<id>-<seq>" one at a time as the native producers do, and one reader
// of every partition from its start, outside any group. They record what
// they did in the same History, so every checker holds them to what it
// holds the native clients to.

// kafkaOpts are the franz-go options every Kafka client of the workload
// shares.
func (w *Workload) kafkaOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(w.cfg.Kafka...), kgo.RequestTimeoutOverhead(w.cfg.SendTimeout),
		kgo.RetryBackoffFn(func(int) time.Duration { return w.cfg.Backoff }), kgo.MetadataMinAge(250 * time.Millisecond)}
	if w.cfg.KafkaTLS != nil {
		opts = append(opts, kgo.DialTLSConfig(w.cfg.KafkaTLS.Clone()),
			kgo.SASL(plain.Auth{User: w.cfg.KafkaUser, Pass: w.cfg.KafkaPassword}.AsMechanism()))
	}
	return opts
}

// startKafka starts the Kafka producer (worker id) on pctx and the Kafka
// reader (worker rid) on cctx.
func (w *Workload) startKafka(pctx, cctx context.Context, id, rid int) error {
	pr, err := kgo.NewClient(append(w.kafkaOpts(), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0), kgo.RecordDeliveryTimeout(4*w.cfg.SendTimeout))...)
	if err != nil {
		return err
	}
	parts := map[int32]kgo.Offset{}
	for p := 0; p < w.cfg.Partitions; p++ {
		parts[int32(p)] = kgo.NewOffset().AtStart()
	}
	rd, err := kgo.NewClient(append(w.kafkaOpts(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{w.cfg.Topic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		pr.Close()
		return err
	}
	w.mu.Lock()
	w.kafkaPos = make([]int64, w.cfg.Partitions)
	w.mu.Unlock()
	w.prodWG.Add(1)
	go w.kafkaProduce(pctx, id, pr)
	w.consWG.Add(1)
	go w.kafkaRead(cctx, rid, rd)
	return nil
}

// kafkaProduce sends one record at a time. A record whose answer does not
// come within SendTimeout is recorded as unknown and the next one is
// sent: franz-go may still deliver it, once (it is idempotent).
func (w *Workload) kafkaProduce(ctx context.Context, id int, cl *kgo.Client) {
	defer w.prodWG.Done()
	defer cl.Close()
	for seq := 0; ctx.Err() == nil; seq++ {
		part := int32((seq + id) % w.cfg.Partitions)
		value := fmt.Sprintf("k%d-%d", id, seq)
		op := Op{Kind: OpProduce, Worker: id, Topic: w.cfg.Topic, Partition: part, Value: value, Offset: -1, Start: time.Now()}
		w.setSending(id, op.Start)
		type result struct {
			r   *kgo.Record
			err error
		}
		done := make(chan result, 1)
		cl.Produce(context.Background(), &kgo.Record{Topic: w.cfg.Topic, Partition: part, Value: []byte(value)}, func(r *kgo.Record, err error) {
			done <- result{r, err}
		})
		var res result
		select {
		case res = <-done:
		case <-time.After(w.cfg.SendTimeout):
			res.err = fmt.Errorf("no answer within %s", w.cfg.SendTimeout)
		}
		op.End = time.Now()
		if res.err != nil {
			op.Result, op.Err = ResultUnknown, res.err.Error()
			w.hist.Add(op)
			w.setSending(id, time.Time{})
			sleepCtx(ctx, w.cfg.Backoff)
			continue
		}
		op.Result, op.Offset = ResultOK, res.r.Offset
		if res.r.Partition != part {
			op.Err = fmt.Sprintf("acknowledged on partition %d", res.r.Partition)
		}
		w.hist.Add(op)
		w.setSending(id, time.Time{})
	}
}

// kafkaRead records each fetch's records of a partition as one read,
// with the high watermark the fetch answered.
func (w *Workload) kafkaRead(ctx context.Context, id int, cl *kgo.Client) {
	defer w.consWG.Done()
	defer cl.Close()
	for ctx.Err() == nil {
		start := time.Now()
		fs := cl.PollFetches(ctx)
		end := time.Now()
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			w.hist.Add(Op{Kind: OpRead, Worker: id, Topic: topic, Partition: p, Start: start, End: end,
				Result: ResultFail, Offset: -1, HW: -1, Err: err.Error()})
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err != nil {
				return
			}
			for _, r := range p.Records {
				w.hist.Add(Op{Kind: OpRead, Worker: id, Topic: p.Topic, Partition: p.Partition, Start: start, End: end,
					Result: ResultOK, Offset: r.Offset, Value: string(r.Value), HW: p.HighWatermark})
			}
			if n := len(p.Records); n > 0 {
				w.mu.Lock()
				if int(p.Partition) < len(w.kafkaPos) {
					w.kafkaPos[p.Partition] = max(w.kafkaPos[p.Partition], p.Records[n-1].Offset+1)
				}
				w.mu.Unlock()
			}
		})
	}
}

// kafkaTLS is the TLS of the workload's Kafka clients of a secure
// cluster: its CA, no client certificate (they authenticate with SASL).
func kafkaTLS(s *Secure) *tls.Config {
	if s == nil {
		return nil
	}
	cfg := s.TLS()
	cfg.Certificates, cfg.GetClientCertificate = nil, nil
	return cfg
}

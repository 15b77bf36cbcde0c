package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// committer is one of commit's committers: one group, one partition, one
// offset.
type committer struct {
	cl        *kgo.Client
	group     string
	partition int32
	offset    int64
	lat       []time.Duration
}

// commit sends one OffsetCommit of c's offset as its group, from outside
// any membership (generation -1, no member id: Kafka's "simple" commit,
// which the coordinator takes while the group has no members), and
// waits for its answer. franz-go sends it to the group's coordinator,
// which it finds (and finds again on NOT_COORDINATOR) by itself.
func (c *committer) commit(ctx context.Context, topic string) error {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group = c.group
	req.Generation = -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition = c.partition
	rp.Offset = c.offset
	rp.LeaderEpoch = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return fmt.Errorf("commit of group %s: %w", c.group, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("commit of group %s, %s/%d: %w", c.group, t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// runCommit is commit: -committers goroutines, each committing
// synchronously, one commit at a time, as its own group (P-i) and from
// outside any membership, one offset of its own partition (i modulo the
// partitions): the partition's high watermark at start, the same at
// every commit. That is gostream-ctl bench commit's shape, so that the
// two can be set side by side. The committers share one kgo.Client, as
// bench commit's share one client; with -client-per-committer each has a
// kgo.Client (and so connections) of its own.
func runCommit(ctx context.Context, cfg config) (result, error) {
	clients := "sharing one client"
	if cfg.clientPerCommitter {
		clients = "each with a client of its own"
	}
	settings := fmt.Sprintf("%d committers %s, each its own group (%s-i) and partition, OffsetCommit with generation -1, one commit at a time each",
		cfg.committers, clients, cfg.groupPrefix)
	r := result{Mode: "commit", Client: clientName(), Topic: cfg.topic, Committers: cfg.committers, Settings: settings}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(cfg.topic))
	if err != nil {
		return r, fmt.Errorf("new client: %w", err)
	}
	defer cl.Close()
	ids, err := partitions(ctx, cl, cfg.topic)
	if err != nil {
		return r, err
	}
	r.Partitions = len(ids)
	hw, err := offsets(ctx, cl, cfg.topic, ids, -1)
	if err != nil {
		return r, err
	}
	// A partition committed to that holds no record is given one, so that
	// there is an offset above 0 to commit.
	for i := range min(cfg.committers, len(ids)) {
		p := ids[i]
		if hw[p] > 0 {
			continue
		}
		res := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("kafkabench commit")})
		if err := res.FirstErr(); err != nil {
			return r, fmt.Errorf("produce to %s/%d: %w", cfg.topic, p, err)
		}
		rec, _ := res.First()
		hw[p] = rec.Offset + 1
	}
	cs := make([]*committer, cfg.committers)
	for i := range cs {
		p := ids[i%len(ids)]
		ccl := cl
		if cfg.clientPerCommitter {
			if ccl, err = kgo.NewClient(kgo.SeedBrokers(cfg.brokers...)); err != nil {
				return r, fmt.Errorf("new client: %w", err)
			}
			defer ccl.Close()
		}
		cs[i] = &committer{cl: ccl, group: fmt.Sprintf("%s-%d", cfg.groupPrefix, i), partition: p, offset: hw[p],
			lat: make([]time.Duration, 0, shareOf(cfg.commits, cfg.committers, i))}
	}

	// One untimed commit each: the coordinators are found before the
	// clock starts.
	var (
		wg     sync.WaitGroup
		failed atomic.Pointer[error]
	)
	fail := func(err error) { failed.CompareAndSwap(nil, &err) }
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.commit(ctx, cfg.topic); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return r, *p
	}

	var counted atomic.Int64
	start := time.Now()
	for i, c := range cs {
		quota := shareOf(cfg.commits, cfg.committers, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range quota {
				if failed.Load() != nil || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := c.commit(ctx, cfg.topic); err != nil {
					fail(err)
					return
				}
				c.lat = append(c.lat, time.Since(t0))
				counted.Add(1)
			}
		}()
	}
	if err := waitFor(ctx, &wg); err != nil {
		return r, err
	}
	elapsed := time.Since(start)
	if p := failed.Load(); p != nil {
		return r, *p
	}
	all := make([][]time.Duration, len(cs))
	for i, c := range cs {
		all[i] = c.lat
	}
	r.summarize(counted.Load(), 0, elapsed, slices.Concat(all...))
	return r, nil
}

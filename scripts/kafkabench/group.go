package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// groupTracker counts what the members of consume -group read, as
// gostream-ctl bench consume --group counts: each record of a partition
// from its log start up to its high watermark at start, once, whichever
// member read it.
type groupTracker struct {
	mu       sync.Mutex
	parts    map[int32]*trackedPartition
	left     int   // partitions not read up to their stop
	target   int64 // records to count in all
	start    time.Time
	end      time.Time // when done closed
	records  int64
	bytes    int64
	again    int64         // records read again (their partition moved before a commit), not counted
	firstAt  atomic.Int64  // nanoseconds from start to the first records; 0 before
	done     chan struct{} // closed once every partition is read, or target records
	finished bool
}

type trackedPartition struct {
	next int64 // the first offset not yet counted
	stop int64 // the high watermark at start
}

// add counts recs, records of one partition, and returns how many it
// counted.
func (t *groupTracker) add(partition int32, recs []*kgo.Record) int64 {
	if len(recs) > 0 {
		t.firstAt.CompareAndSwap(0, int64(max(time.Since(t.start), 1)))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[partition]
	if p == nil || t.finished {
		return 0
	}
	var n int64
	for _, r := range recs {
		switch {
		case r.Offset < p.next:
			t.again++
			continue
		case r.Offset >= p.stop || t.records+n >= t.target:
			continue
		}
		was := p.next < p.stop
		p.next = r.Offset + 1
		if was && p.next >= p.stop {
			t.left--
		}
		n++
		t.bytes += int64(len(r.Key) + len(r.Value))
	}
	t.records += n
	t.finishLocked()
	return n
}

func (t *groupTracker) finishLocked() {
	if !t.finished && (t.left == 0 || t.records >= t.target) {
		t.finished, t.end = true, time.Now()
		close(t.done)
	}
}

// runGroupConsume is consume -group: -members franz-go group members,
// each a kgo.Client of its own, read the topic up to the high watermarks
// found at start, as gostream-ctl bench consume --group --members does
// with the native client. The clock starts when the members are created,
// so seconds include the join; first_records_s says when the first
// records came, so that the read can be timed apart from the join.
func runGroupConsume(ctx context.Context, cfg config) (result, error) {
	settings := fmt.Sprintf("group %s, %d members (each its own client), franz-go's default balancer (cooperative-sticky), no commits, from the log start, %d bytes a partition per fetch",
		cfg.group, cfg.members, cfg.fetchPartBytes)
	r := result{Mode: "consume", Client: clientName(), Topic: cfg.topic, Members: cfg.members, Settings: settings}
	probe, err := kgo.NewClient(kgo.SeedBrokers(cfg.brokers...))
	if err != nil {
		return r, fmt.Errorf("new client: %w", err)
	}
	defer probe.Close()
	ids, err := partitions(ctx, probe, cfg.topic)
	if err != nil {
		return r, err
	}
	r.Partitions = len(ids)
	starts, err := offsets(ctx, probe, cfg.topic, ids, -2)
	if err != nil {
		return r, err
	}
	stops, err := offsets(ctx, probe, cfg.topic, ids, -1)
	if err != nil {
		return r, err
	}
	t := &groupTracker{parts: map[int32]*trackedPartition{}, done: make(chan struct{})}
	var available int64
	for _, id := range ids {
		t.parts[id] = &trackedPartition{next: starts[id], stop: stops[id]}
		if starts[id] < stops[id] {
			available += stops[id] - starts[id]
			t.left++
		}
	}
	t.target = available
	if cfg.records > 0 {
		t.target = min(cfg.records, available)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg      sync.WaitGroup
		failed  atomic.Pointer[error]
		lats    = make([][]time.Duration, cfg.members)
		counted = make([]int64, cfg.members)
		members = make([]*kgo.Client, 0, cfg.members)
	)
	defer func() {
		// Leaving is not timed.
		for _, cl := range members {
			cl.Close()
		}
	}()
	t.start = time.Now()
	if t.left == 0 {
		t.finished, t.end = true, t.start
		close(t.done)
	}
	for i := range cfg.members {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(cfg.brokers...),
			kgo.ConsumerGroup(cfg.group),
			kgo.ConsumeTopics(cfg.topic),
			kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxPartitionBytes(int32(cfg.fetchPartBytes)),
		)
		if err != nil {
			return r, fmt.Errorf("new client: %w", err)
		}
		members = append(members, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-t.done:
					return
				default:
				}
				t0 := time.Now()
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil || fs.IsClientClosed() {
					return
				}
				var ferr error
				fs.EachError(func(topic string, p int32, err error) {
					if ferr == nil {
						ferr = fmt.Errorf("fetch %s/%d: %w", topic, p, err)
					}
				})
				if ferr != nil {
					failed.CompareAndSwap(nil, &ferr)
					cancel()
					return
				}
				n := 0
				fs.EachPartition(func(p kgo.FetchTopicPartition) {
					n += len(p.Records)
					counted[i] += t.add(p.Partition, p.Records)
				})
				if n > 0 {
					lats[i] = append(lats[i], time.Since(t0))
				}
			}
		}()
	}
	select {
	case <-t.done:
	case <-ctx.Done():
	}
	cancel()
	wg.Wait()
	if p := failed.Load(); p != nil {
		return r, *p
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.finished {
		return r, fmt.Errorf("%d of %d records within -timeout: %w", t.records, t.target, context.DeadlineExceeded)
	}
	r.summarize(t.records, t.bytes, t.end.Sub(t.start), slices.Concat(lats...))
	first := time.Duration(t.firstAt.Load()).Seconds()
	r.FirstRecordsS = &first
	r.MemberRecords = counted
	r.ReadAgain = &t.again
	return r, nil
}

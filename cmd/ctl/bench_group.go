package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/transport"
)

// benchGroupConsume is bench consume --group G: --members members of G
// read the topic up to the high watermarks found at start.
func benchGroupConsume(c *cli.Context, g globals, topic string, limit int64) error {
	group, members, commit := c.String("group"), c.Int("members"), c.Bool("commit")
	setup, cancelSetup := context.WithTimeout(c.Context, g.timeout)
	defer cancelSetup()
	cl, err := connect(setup, g)
	if err != nil {
		return err
	}
	defer cl.Close()
	t, err := describeTopic(setup, cl, topic)
	if err != nil {
		return failed(err)
	}
	switch d, err := cl.DescribeGroup(setup, group); {
	case errors.Is(err, transport.ErrUnknownGroup):
	case err != nil:
		return failed(err)
	case len(d.Members) > 0:
		return exitcode.Fail("GroupNotEmpty", fmt.Errorf(
			"group %s has %s; bench consume --group reads every partition with members of its own only: name another group, or wait until they leave",
			group, plural(len(d.Members), "member")))
	}
	committed, err := cl.CommittedOffsets(setup, group, topic)
	if err != nil {
		return failed(err)
	}
	from := map[int32]int64{}
	for _, o := range committed {
		from[o.Partition] = o.Offset
	}
	tracker := &groupTracker{parts: map[int32]*trackedPartition{}, done: make(chan struct{})}
	var available int64
	for _, p := range t.Partitions {
		offs, err := cl.ListOffsets(setup, topic, p.Partition)
		if err != nil {
			return failed(err)
		}
		next := offs.LogStartOffset
		if o, ok := from[p.Partition]; ok && o > next {
			next = o
		}
		tp := &trackedPartition{next: next, stop: offs.HighWatermark}
		tracker.parts[p.Partition] = tp
		if next < tp.stop {
			available += tp.stop - next
			tracker.left++
		}
	}
	tracker.target = available
	if limit > 0 {
		tracker.target = min(limit, available)
	}
	// Each member has a client of its own, as a member in a process of its
	// own would; they connect before the clock starts.
	bms := make([]*benchMember, members)
	for i := range bms {
		mcl, err := connect(setup, g)
		if err != nil {
			return err
		}
		defer mcl.Close()
		bms[i] = &benchMember{cl: mcl, hist: new(histogram)}
	}
	cancelSetup()
	mode := "no commits"
	if commit {
		mode = "a commit after every Poll"
	}
	fmt.Fprintf(c.App.ErrWriter, "bench consume: %s from %s, %s, as %s of group %s, %s\n",
		plural(tracker.target, "record"), topic, plural(len(t.Partitions), "partition"), plural(members, "member"), group, mode)
	if len(committed) > 0 {
		fmt.Fprintf(c.App.ErrWriter, "bench consume: group %s has committed offsets of %s: its members start there\n", group, topic)
	}

	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	var (
		fail firstError
		wg   sync.WaitGroup
	)
	// The members join paused and settle (each given its share, what
	// moves released) before the clock starts: the group reads as a
	// group of --members, not as its first member alone while the
	// others join.
	for _, bm := range bms {
		gc, err := client.NewGroupConsumer(bm.cl, client.GroupConfig{Group: group, Topics: []string{topic}, Reset: client.ResetEarliest, Paused: true})
		if err != nil {
			return failed(err)
		}
		bm.gc = gc
	}
	joined := time.Now()
	if err := settle(ctx, bms, len(t.Partitions), g.timeout); err != nil {
		return failed(err)
	}
	fmt.Fprintf(c.App.ErrWriter, "bench consume: the members settled in %.3f s (not timed)\n", time.Since(joined).Seconds())
	start := time.Now()
	tracker.start = start
	tracker.finishIfDone()
	prog := startProgress(c.App.ErrWriter, "bench consume", &tracker.counters)
	for _, bm := range bms {
		bm.gc.Resume()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := bm.run(ctx, tracker, commit, g.timeout, c.App.ErrWriter); err != nil {
				fail.set(err)
				cancel()
			}
		}()
	}
	select {
	case <-tracker.done:
	case <-ctx.Done():
	}
	elapsed := tracker.elapsed()
	cancel()
	wg.Wait()
	prog.close()

	// Leaving is not timed; a member that cannot leave is expired by the
	// coordinator after its session timeout.
	closing, cancelClose := context.WithTimeout(context.WithoutCancel(c.Context), g.timeout)
	defer cancelClose()
	var closed sync.WaitGroup
	for _, bm := range bms {
		closed.Add(1)
		go func() {
			defer closed.Done()
			if err := bm.gc.Close(closing); err != nil {
				fmt.Fprintf(c.App.ErrWriter, "warning: %v\n", err)
			}
		}()
	}
	closed.Wait()

	if first := tracker.firstAt.Load(); first > 0 {
		counted := make([]string, len(bms))
		for i, bm := range bms {
			counted[i] = fmt.Sprint(bm.counted)
		}
		fmt.Fprintf(c.App.ErrWriter, "bench consume: first records after %.3f s; records counted per member: %s; %s read again after their partition moved (not counted)\n",
			time.Duration(first).Seconds(), strings.Join(counted, ", "), plural(tracker.again.Load(), "record"))
	}
	var h histogram
	for _, bm := range bms {
		h.add(bm.hist)
	}
	sum := newBenchSummary(tracker.counters.records.Load(), tracker.counters.bytes.Load(), elapsed, &h)
	if err := printBenchSummary(c.App.Writer, g.output, "bench consume", "one Poll", sum); err != nil {
		return exitcode.Fail("WriteFailed", err)
	}
	if err := fail.get(); err != nil && !interrupted(c.Context, err) {
		return failed(err)
	}
	return nil
}

// settle polls the paused members until the group's partitions are
// shared out: every partition owned by one member, and every member
// owning some (while there are partitions enough), within timeout.
func settle(ctx context.Context, bms []*benchMember, partitions int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		owned, idle := map[client.TopicPartition]int{}, 0
		for _, bm := range bms {
			if _, err := bm.gc.Poll(ctx, 10*time.Millisecond); err != nil && ctx.Err() == nil && !passing(err) {
				return err
			}
			a := bm.gc.Assignment()
			if len(a) == 0 {
				idle++
			}
			for _, tp := range a {
				owned[tp]++
			}
		}
		shared := len(owned) == partitions && idle <= max(len(bms)-partitions, 0)
		for _, n := range owned {
			shared = shared && n == 1
		}
		if shared {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: the members did not share out the %s within %v", ctx.Err(), plural(int64(partitions), "partition"), timeout)
		}
	}
}

// groupTracker counts what the members of bench consume --group read:
// each record of a partition from where the partition started up to its
// high watermark at start, once, whichever member read it.
type groupTracker struct {
	mu       sync.Mutex
	parts    map[int32]*trackedPartition
	left     int   // partitions not read up to their stop
	target   int64 // records to count in all
	start    time.Time
	end      time.Time // when done closed
	counters benchCounters
	again    atomic.Int64 // records read again, not counted
	firstAt  atomic.Int64 // nanoseconds from start to the first records; 0 before
	done     chan struct{}
	finished bool
}

type trackedPartition struct {
	next int64 // the first offset not yet counted
	stop int64 // the high watermark at start
}

// add counts a Poll's records of one partition and returns how many it
// counted.
func (t *groupTracker) add(pr client.PartitionRecords) int64 {
	if len(pr.Records) > 0 {
		t.firstAt.CompareAndSwap(0, int64(max(time.Since(t.start), 1)))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.parts[pr.Partition]
	if p == nil || t.finished {
		return 0
	}
	var n, size int64
	for i := range pr.Records {
		r := &pr.Records[i]
		switch {
		case r.Offset < p.next:
			t.again.Add(1)
			continue
		case r.Offset >= p.stop || t.counters.records.Load()+n >= t.target:
			continue
		}
		was := p.next < p.stop
		p.next = r.Offset + 1
		if was && p.next >= p.stop {
			t.left--
		}
		n++
		size += int64(len(r.Key) + len(r.Value))
	}
	t.counters.records.Add(n)
	t.counters.bytes.Add(size)
	t.finishLocked()
	return n
}

func (t *groupTracker) finishIfDone() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.finishLocked()
}

func (t *groupTracker) finishLocked() {
	if !t.finished && (t.left == 0 || t.counters.records.Load() >= t.target) {
		t.finished, t.end = true, time.Now()
		close(t.done)
	}
}

// elapsed is the time from start to the last record counted, or to now
// when the read did not finish.
func (t *groupTracker) elapsed() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.finished {
		return t.end.Sub(t.start)
	}
	return time.Since(t.start)
}

func (t *groupTracker) isDone() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// benchMember is one member of bench consume --group.
type benchMember struct {
	cl      *client.Client
	gc      *client.GroupConsumer
	hist    *histogram
	counted int64 // records of this member's that the tracker counted
}

// run polls until the tracker is done or ctx ends; with commit it commits
// after every Poll that returned records, and a commit that has begun
// finishes (within timeout) even when ctx ends meanwhile, so that what
// the bench read is committed. An error that may pass (a partition's
// fetch failed, a commit raced a rebalance) is a warning. A Poll that
// returns once the read is done is not counted.
func (m *benchMember) run(ctx context.Context, t *groupTracker, commit bool, timeout time.Duration, log io.Writer) error {
	for !t.isDone() {
		t0 := time.Now()
		got, err := m.gc.Poll(ctx, catchUpWait)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && passing(err):
			fmt.Fprintf(log, "warning: %v\n", err)
			continue
		case err != nil:
			return err
		case len(got) == 0:
			continue
		}
		if !t.isDone() {
			m.hist.record(time.Since(t0))
			for _, pr := range got {
				m.counted += t.add(pr)
			}
		}
		if !commit {
			continue
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		err = m.gc.CommitSync(cctx)
		cancel()
		switch {
		case err == nil:
		case passing(err) || errors.Is(err, transport.ErrUnknownMember) || errors.Is(err, transport.ErrFencedMember) ||
			errors.Is(err, transport.ErrIllegalGeneration):
			fmt.Fprintf(log, "warning: %v\n", err)
		default:
			return err
		}
	}
	return nil
}

// passing reports whether err is a cluster error that may pass by itself.
func passing(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.Code.Retriable()
}

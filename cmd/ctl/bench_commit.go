package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
)

// benchCommitAction is bench commit: --committers committers, each
// committing one offset of its own partition as its own group, one
// commit at a time.
func benchCommitAction(c *cli.Context) error {
	g := globalsOf(c)
	topic, prefix := c.String("topic"), c.String("group-prefix")
	commits := c.Int64("commits")
	if c.IsSet("duration") && !c.IsSet("commits") {
		commits = -1
	}
	committers, rf := c.Int("committers"), c.Int("replication-factor")
	switch {
	case commits == 0 || commits < -1:
		return exitcode.Usagef("InvalidFlag", "--commits %d: want a positive number", commits)
	case committers < 1:
		return exitcode.Usagef("InvalidFlag", "--committers %d: want a positive number", committers)
	case rf < 1:
		return exitcode.Usagef("InvalidFlag", "--replication-factor %d: want a positive number", rf)
	case c.Duration("duration") < 0:
		return exitcode.Usagef("InvalidFlag", "--duration %s: want a positive duration", c.Duration("duration"))
	case prefix == "":
		return exitcode.Usagef("InvalidFlag", "--group-prefix: want a group name prefix")
	}

	setup, cancelSetup := context.WithTimeout(c.Context, g.timeout)
	defer cancelSetup()
	cl, err := connect(setup, g)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := ensureTopic(setup, cl, topic, committers, rf, benchTopicConfig, c.App.ErrWriter); err != nil {
		return failed(err)
	}
	offsets, err := commitTargets(setup, cl, topic, committers)
	if err != nil {
		return failed(err)
	}
	cancelSetup()

	bcs := make([]*benchCommitter, committers)
	for i := range bcs {
		bcs[i] = &benchCommitter{cl: cl, group: fmt.Sprintf("%s-%d", prefix, i), off: offsets[i], hist: new(histogram)}
	}
	fmt.Fprintf(c.App.ErrWriter, "bench commit: %s to %s, %s (groups %s to %s), one commit at a time each\n",
		countText(commits, "commit"), topic, plural(committers, "committer"), bcs[0].group, bcs[len(bcs)-1].group)

	// One untimed commit each: the coordinators are found (and, on a new
	// cluster, __consumer_offsets is created) before the clock starts.
	var (
		warm sync.WaitGroup
		fail firstError
	)
	for _, bc := range bcs {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if err := bc.commit(c.Context); err != nil {
				fail.set(err)
			}
		}()
	}
	warm.Wait()
	if err := fail.get(); err != nil {
		return failed(err)
	}

	// committing ends at --duration or Ctrl-C; commits in flight then finish.
	committing, cancelCommitting := benchWindow(c)
	defer cancelCommitting()
	var (
		counters benchCounters
		wg       sync.WaitGroup
	)
	start := time.Now()
	prog := startProgressOf(c.App.ErrWriter, "bench commit", "commit", &counters)
	for i, bc := range bcs {
		quota := shareOf(commits, committers, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			bc.run(c.Context, committing, quota, &counters, &fail)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	prog.close()

	var h histogram
	for _, bc := range bcs {
		h.add(bc.hist)
	}
	sum := newBenchSummary(counters.records.Load(), 0, elapsed, &h)
	if err := printCountSummary(c.App.Writer, g.output, "bench commit", "commit", "request to acknowledgment", sum); err != nil {
		return exitcode.Fail("WriteFailed", err)
	}
	if err := fail.get(); err != nil && !interrupted(c.Context, err) {
		return failed(err)
	}
	return nil
}

// commitTargets returns what each of n committers commits: partition i of
// topic (i modulo its partitions) at its high watermark, after giving a
// record to each such partition that has none, so that the offset is
// above 0.
func commitTargets(ctx context.Context, cl *client.Client, topic string, n int) ([]client.CommitOffset, error) {
	t, err := describeTopic(ctx, cl, topic)
	if err != nil {
		return nil, err
	}
	parts := len(t.Partitions)
	if parts == 0 {
		return nil, fmt.Errorf("topic %q has no partitions", topic)
	}
	hw := map[int32]int64{}
	var prod *client.Producer
	defer func() {
		if prod != nil {
			prod.Close()
		}
	}()
	for p := range int32(min(n, parts)) {
		offs, err := cl.ListOffsets(ctx, topic, p)
		if err != nil {
			return nil, err
		}
		hw[p] = offs.HighWatermark
		if hw[p] > 0 {
			continue
		}
		if prod == nil {
			if prod, err = client.NewProducer(cl, client.ProducerConfig{Linger: -1}); err != nil {
				return nil, err
			}
		}
		ack, err := prod.Send(ctx, client.ProducerRecord{Topic: topic, Partition: p, ManualPartition: true, Value: []byte("bench commit")})
		if err != nil {
			return nil, err
		}
		hw[p] = ack.Offset + 1
	}
	out := make([]client.CommitOffset, n)
	for i := range out {
		p := int32(i % parts)
		out[i] = client.CommitOffset{Topic: topic, Partition: p, Offset: hw[p]}
	}
	return out, nil
}

// benchCommitter is one of bench commit's committers: one group, one
// partition, one offset.
type benchCommitter struct {
	cl    *client.Client
	group string
	off   client.CommitOffset
	hist  *histogram
}

func (b *benchCommitter) commit(ctx context.Context) error {
	return b.cl.CommitOffsets(ctx, b.group, b.off)
}

// run commits quota times (no limit if negative), each after the last
// one's acknowledgment, until committing ends or a commit fails. A commit
// still waiting when committing ends finishes: only ctx abandons it.
func (b *benchCommitter) run(ctx, committing context.Context, quota int64, counters *benchCounters, fail *firstError) {
	for i := int64(0); quota < 0 || i < quota; i++ {
		if committing.Err() != nil || fail.get() != nil {
			return
		}
		t0 := time.Now()
		if err := b.commit(ctx); err != nil {
			fail.set(err)
			return
		}
		b.hist.record(time.Since(t0))
		counters.records.Add(1)
	}
}

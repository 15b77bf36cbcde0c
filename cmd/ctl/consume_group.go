package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
)

// commitEvery is how often consume --group commits what it has printed
// while it reads; it commits at the end, and before it gives up a
// partition, too.
const commitEvery = 200 * time.Millisecond

// printedOffsets is, for each partition of the topic consume reads, the
// position after the last record printed and not yet committed, and when
// consume last committed.
type printedOffsets struct {
	topic string
	next  map[int32]int64
	last  time.Time
}

func (p *printedOffsets) printed(partition int32, next int64) {
	if p.next == nil {
		p.next = map[int32]int64{}
	}
	p.next[partition] = next
}

// due reports whether the last commit is commitEvery old.
func (p *printedOffsets) due() bool { return time.Since(p.last) >= commitEvery }

// take returns, sorted, the offsets to commit of the partitions named (of
// every partition with none named) and forgets them: the caller commits
// them now.
func (p *printedOffsets) take(only ...int32) []client.CommitOffset {
	var offs []client.CommitOffset
	for _, part := range slices.Sorted(maps.Keys(p.next)) {
		if len(only) == 0 || slices.Contains(only, part) {
			offs = append(offs, client.CommitOffset{Topic: p.topic, Partition: part, Offset: p.next[part]})
			delete(p.next, part)
		}
	}
	p.last = time.Now()
	return offs
}

// explicitCommits commits, for consume --group G --partition P, what
// consume printed. A nil *explicitCommits does nothing.
type explicitCommits struct {
	cl      *client.Client
	group   string
	timeout time.Duration
	offs    printedOffsets
}

func (e *explicitCommits) printed(partition int32, next int64) {
	if e != nil {
		e.offs.printed(partition, next)
	}
}

// maybe commits when the last commit is commitEvery old.
func (e *explicitCommits) maybe(ctx context.Context) error {
	if e == nil || !e.offs.due() {
		return nil
	}
	return e.flush(ctx)
}

// flush commits what is printed and not committed.
func (e *explicitCommits) flush(ctx context.Context) error {
	if e == nil {
		return nil
	}
	offs := e.offs.take()
	if len(offs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	return e.cl.CommitOffsets(ctx, e.group, offs...)
}

// groupStart places a reader of consume --group G --partition P: at
// --offset N (refused below G's committed offset, which only a reset may
// move back), else at G's committed offset, else where --from-end or the
// default says. It returns the start the caller still has to seek to.
func groupStart(ctx context.Context, cl *client.Client, o consumeOptions, p int32, cons *client.Consumer) (consumeStart, error) {
	c, ok, err := cl.Committed(ctx, o.group, o.topic, p)
	if err != nil {
		return 0, err
	}
	switch {
	case o.start == startOffset && ok && o.offset < c.Offset:
		return 0, exitcode.Fail("OffsetRegression", fmt.Errorf(
			"group %s committed offset %d of %s/%d; --offset %d is below it, and what consume prints is committed (nothing written; gostream-ctl group reset-offsets %s --topic %s --partition %d --to-offset %d --execute moves it back)",
			o.group, c.Offset, o.topic, p, o.offset, o.group, o.topic, p, o.offset))
	case o.start == startOffset:
		return startOffset, nil
	case ok:
		cons.SeekTo(c.Offset)
		return startCommitted, nil
	}
	return o.start, nil
}

// groupConsume is consume --group G without --partition: a member of G.
func groupConsume(c *cli.Context, cl *client.Client, g globals, o consumeOptions) error {
	if o.start == startOffset {
		return exitcode.Usagef("InvalidFlag", "--offset needs --partition")
	}
	// The topic must exist: a subscription to nothing would wait for ever.
	setup, cancel := context.WithTimeout(c.Context, g.timeout)
	_, err := describeTopic(setup, cl, o.topic)
	cancel()
	if err != nil {
		return failed(err)
	}
	reset := client.ResetEarliest
	if o.start == startEnd {
		reset = client.ResetLatest
	}
	// What is printed and not committed; the callbacks run on this
	// goroutine, in Poll.
	printed := printedOffsets{topic: o.topic}
	var gc *client.GroupConsumer
	commit := func(ctx context.Context, only ...int32) {
		offs := printed.take(only...)
		if len(offs) == 0 {
			return
		}
		cctx, cancel := context.WithTimeout(ctx, g.timeout)
		defer cancel()
		if err := gc.CommitOffsets(cctx, offs...); err != nil {
			// Lost partitions are not this member's to commit: their next
			// owner reads again from the last commit.
			fmt.Fprintf(c.App.ErrWriter, "warning: commit failed: %v\n", err)
		}
	}
	partitionsOf := func(tps []client.TopicPartition) []int32 {
		out := make([]int32, len(tps))
		for i, tp := range tps {
			out[i] = tp.Partition
		}
		return out
	}
	gc, err = client.NewGroupConsumer(cl, client.GroupConfig{
		Group: o.group, Topics: []string{o.topic}, InstanceID: o.instance, SessionTimeout: o.session, Reset: reset,
		OnRevoked: func(ctx context.Context, parts []client.TopicPartition) {
			if len(parts) > 0 {
				commit(context.WithoutCancel(ctx), partitionsOf(parts)...)
			}
		},
		OnLost: func(parts []client.TopicPartition) {
			if len(parts) > 0 {
				printed.take(partitionsOf(parts)...) // not this member's to commit any more
			}
		},
	})
	if err != nil {
		return failed(err)
	}
	ctx := c.Context
	bw := bufio.NewWriter(c.App.Writer)
	var count int64
	runErr := func() error {
		for {
			got, err := gc.Poll(ctx, followWait)
			if err != nil {
				if interrupted(ctx, err) {
					return nil
				}
				if errors.Is(err, client.ErrMemberStopped) || errors.Is(err, client.ErrClosed) || ctx.Err() != nil {
					return err
				}
				// A partition's fetch failed; its fetcher tries again.
				fmt.Fprintf(c.App.ErrWriter, "warning: %v\n", err)
				continue
			}
			if len(got) == 0 && !o.follow && gc.CaughtUp() {
				return nil
			}
			for _, pr := range got {
				for i := range pr.Records {
					if count == 0 && g.output == outputTable {
						bw.WriteString(consumeHeader)
					}
					if err := printRecord(bw, g.output, o.topic, pr.Partition, &pr.Records[i]); err != nil {
						return exitcode.Fail("WriteFailed", fmt.Errorf("write output: %w", err))
					}
					count++
					printed.printed(pr.Partition, pr.Records[i].Offset+1)
					if o.max > 0 && count >= o.max {
						return flushOutput(bw)
					}
				}
			}
			if err := flushOutput(bw); err != nil {
				return err
			}
			if printed.due() {
				commit(ctx)
			}
		}
	}()
	end, cancelEnd := context.WithTimeout(context.WithoutCancel(ctx), g.timeout)
	defer cancelEnd()
	commit(end)
	closeErr := gc.Close(end)
	switch {
	case runErr != nil:
		return failed(runErr)
	case closeErr != nil:
		return failed(closeErr)
	}
	return nil
}

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/metadata"
	"gostream/record"
	"gostream/transport"
)

func consumeCommand() *cli.Command {
	cmd := leaf("consume", "print records; without --follow stop at the high watermark, with it tail",
		"TOPIC", args(1, 1), consumeAction,
		&cli.IntFlag{Name: "partition", Usage: "read partition `P` only", DefaultText: "every partition"},
		&cli.Int64Flag{Name: "offset", Usage: "start at offset `N` (needs --partition)", DefaultText: "the log start offset"},
		&cli.BoolFlag{Name: "from-beginning", Usage: "start at the log start offset", DefaultText: "consume starts there anyway"},
		&cli.BoolFlag{Name: "from-end", Usage: "start at the high watermark: only records appended from now on"},
		&cli.Int64Flag{Name: "max", Usage: "stop after `N` records", DefaultText: "no limit"},
		&cli.BoolFlag{Name: "follow", Usage: "keep waiting for new records until Ctrl-C, --max, or the end of a sealed topic"},
		&cli.StringFlag{Name: "group", Usage: "commit what is printed as group `G`: with --partition, a progress identity with no membership; without it, a member of G given partitions by the group's coordinator"},
		&cli.StringFlag{Name: "instance-id", Usage: "with --group alone: a static member with instance id `ID` (a restart within the session timeout gets its partitions back with no rebalance)"},
		&cli.DurationFlag{Name: "session-timeout", Usage: "with --group alone: how long the coordinator keeps the member without a heartbeat, `D` from 1s to 5m", DefaultText: "10s"},
	)
	cmd.Description = `Reads every partition (one consumer each) or the one --partition names.
It starts at the beginning of each partition unless --offset or --from-end
says otherwise, with or without --follow (unlike Kafka's console consumer,
which starts at the end).

Without --follow it reads each partition up to the high watermark it had
when the command started, and prints the partitions one after another,
partition 0 first. With --follow it prints records as they arrive, from all
partitions merged, until Ctrl-C or --max, or, on a sealed topic (sealed
before or while it reads), until it has printed every partition to its
end; each of these is a normal end (exit 0).

A partition that cannot be read (its leader down and not failed over, or
no leader) does not hold up the others; its leader is waited for at most
3s at the start. Without --follow, consume prints what it can read and
then names each partition it could not on stderr, one line each
(BrokerNotAvailable: orders/1: its leader, broker 2, does not answer:
...), and exits 2. With --follow it tails the others, says so once on
stderr, and reads the partition once it can (gostream-ctl: orders/1 can
be read again ...); at the end it exits 2 if one still cannot be read.

Table output, one record per line, tab-separated, under a header line
(printed with the first record; nothing at all when there is none):
   PARTITION  OFFSET  KEY  VALUE
A null key prints as (null), an empty one as "". Text with control
characters is quoted Go-style; bytes that are not UTF-8 print as
base64:<base64>.

-o json, one object per line:
   {"topic","partition","offset","timestamp","key","value","headers"}
timestamp is the append time in RFC 3339, UTC, with milliseconds
(2024-05-01T12:00:00.123Z); key is null for a record without one; headers
is a list of {"key","value"}. When a key, value or header value is not
valid UTF-8, all of that record's are base64 and it has "encoding":"base64".

With --group G and --partition P, G is a durable progress identity: the
read starts at G's committed offset of P (when there is none, at the log
start, or the high watermark with --from-end), and what is printed is
committed as it is printed and at the end. --offset N starts at N
instead; below the committed offset that is OffsetRegression (exit 2,
nothing written: gostream-ctl group reset-offsets moves it back).

With --group G alone, consume is a member of G: the group's coordinator
gives it partitions of TOPIC (range assignment), moves them as members
come and go, and the member commits what it printed of a partition
before it gives it up, as it goes, and at the end, when it leaves the
group. Without --follow it ends once a one-second poll of its partitions
finds nothing new.

--timeout bounds setup and each request, not the whole read.`
	return cmd
}

// followWait is how long one fetch long-polls for new records with
// --follow. Without it a fetch below the high watermark answers at once;
// catchUpWait only keeps a reader from spinning should one come back empty.
const (
	followWait  = time.Second
	catchUpWait = 100 * time.Millisecond
)

// partitionBuffer is how many fetched batches of records a partition may
// hold before they are printed.
const partitionBuffer = 4

// consumeStart is where each partition's reading starts.
type consumeStart int

const (
	startBeginning consumeStart = iota
	startEnd
	startOffset
	startCommitted // the group's committed offset, already sought
)

// consumeOptions are consume's flags, checked.
type consumeOptions struct {
	topic     string
	partition int32 // -1 for every partition
	start     consumeStart
	offset    int64
	max       int64 // 0 for no limit
	follow    bool
	group     string
	instance  string        // static membership, with group alone
	session   time.Duration // with group alone; 0 for the default
}

func consumeOptionsOf(c *cli.Context) (consumeOptions, error) {
	o := consumeOptions{topic: c.Args().First(), partition: -1, follow: c.Bool("follow")}
	o.group = c.String("group")
	if c.IsSet("group") && o.group == "" {
		return o, exitcode.Usagef("InvalidFlag", "--group \"\": want a group name")
	}
	// The cluster's rule for a group name, checked before anything is
	// read: a partition that cannot be read at once would otherwise end
	// the command quietly before the coordinator refuses the name.
	if o.group != "" {
		if err := metadata.ValidateTopicName(o.group); err != nil {
			return o, exitcode.Fail("InvalidGroupName", fmt.Errorf("group %q: %v (nothing read, nothing written)", o.group, err))
		}
	}
	if c.IsSet("partition") {
		p := c.Int("partition")
		if p < 0 {
			return o, exitcode.Usagef("InvalidFlag", "--partition %d: want a partition number, 0 or more", p)
		}
		o.partition = int32(p)
	}
	var starts []string
	if c.Bool("from-beginning") {
		starts = append(starts, "--from-beginning")
	}
	if c.Bool("from-end") {
		starts = append(starts, "--from-end")
		o.start = startEnd
	}
	if c.IsSet("offset") {
		starts = append(starts, "--offset")
		o.start, o.offset = startOffset, c.Int64("offset")
		if o.partition < 0 {
			return o, exitcode.Usagef("InvalidFlag", "--offset needs --partition: offsets belong to one partition")
		}
		if o.offset < 0 {
			return o, exitcode.Usagef("InvalidFlag", "--offset %d: want an offset, 0 or more", o.offset)
		}
	}
	if len(starts) > 1 {
		return o, exitcode.Usagef("InvalidFlag", "%s and %s: give at most one place to start", starts[0], starts[1])
	}
	for _, f := range []string{"instance-id", "session-timeout"} {
		if c.IsSet(f) && (o.group == "" || o.partition >= 0) {
			return o, exitcode.Usagef("InvalidFlag", "--%s is for a member of a group: with --group and without --partition", f)
		}
	}
	o.instance, o.session = c.String("instance-id"), c.Duration("session-timeout")
	if c.IsSet("session-timeout") && (o.session < time.Second || o.session > 5*time.Minute) {
		return o, exitcode.Usagef("InvalidFlag", "--session-timeout %v: want 1s to 5m", o.session)
	}
	if c.IsSet("max") {
		o.max = c.Int64("max")
		if o.max < 1 {
			return o, exitcode.Usagef("InvalidFlag", "--max %d: want a positive number", o.max)
		}
	}
	return o, nil
}

// unreadableAfter is how long consume waits for a partition's leader to
// answer its first request before it names the partition on stderr and
// goes on with the others (--timeout instead, when shorter). A leader
// that is restarting answers within it; one that is down, with no
// failover yet, never does, and waiting the whole --timeout for it would
// hold up what can be read.
const unreadableAfter = 3 * time.Second

// retryUnreadable is how long a reader of --follow waits before it tries
// a partition that cannot be read again.
const retryUnreadable = time.Second

// partitionReader reads one partition from its start to stop (-1 with
// --follow: no end) and hands what it reads to the printer. A partition
// whose leader does not answer is not read: without --follow the reader
// ends and says why (unreadable); with it, it says so once on stderr and
// tries again until it can read the partition.
type partitionReader struct {
	cl        *client.Client
	o         consumeOptions
	topic     string
	partition int32
	leader    int32 // the leader the metadata named at the start, for messages
	cons      *client.Consumer
	stop      int64
	out       chan fetched
	timeout   time.Duration // --timeout
	notes     *lockedWriter // stderr, with --follow; nil without
	started   bool          // the start offset is set; owned by run

	mu struct {
		sync.Mutex
		err error // why the partition cannot be read now; nil when it can
	}
}

// lockedWriter is a writer that readers of several partitions share.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}

// fetched is records of one partition, in offset order.
type fetched struct {
	partition int32
	recs      []record.Record
}

func consumeAction(c *cli.Context) error {
	o, err := consumeOptionsOf(c)
	if err != nil {
		return err
	}
	g := globalsOf(c)
	setup, cancelSetup := context.WithTimeout(c.Context, g.timeout)
	defer cancelSetup()
	cl, err := connect(setup, g)
	if err != nil {
		return err
	}
	defer cl.Close()
	if o.group != "" && o.partition < 0 {
		cancelSetup()
		return groupConsume(c, cl, g, o)
	}
	readers, merged, err := newPartitionReaders(setup, cl, o, g.timeout)
	if err != nil {
		if interrupted(c.Context, err) {
			return nil
		}
		return failed(err)
	}
	cancelSetup()
	if o.follow {
		notes := &lockedWriter{w: c.App.ErrWriter}
		for _, r := range readers {
			r.notes = notes
		}
	}

	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	var (
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.run(ctx, o.follow); err != nil && ctx.Err() == nil {
				errOnce.Do(func() { firstErr = err })
				cancel()
			}
			// Closed once its error is noted: the printer, done with the
			// last channel, cancels ctx, and a reader that looked at ctx
			// only after that took its own error for the cancellation's
			// (the command said nothing and exited 0).
			if merged == nil {
				close(r.out)
			}
		}()
	}
	// The channels the printer drains, in order: each partition's own, or
	// one they share with --follow.
	var sources []<-chan fetched
	if merged != nil {
		sources = []<-chan fetched{merged}
		go func() {
			wg.Wait()
			close(merged)
		}()
	} else {
		for _, r := range readers {
			sources = append(sources, r.out)
		}
	}
	var commits *explicitCommits
	if o.group != "" {
		commits = &explicitCommits{cl: cl, group: o.group, timeout: g.timeout, offs: printedOffsets{topic: o.topic}}
	}
	drained, printErr := printConsumed(ctx, c.App.Writer, g.output, o, sources, cancel, commits)
	cancel()
	wg.Wait()
	var commitErr error
	if commits != nil {
		commitErr = commits.flush(context.WithoutCancel(c.Context))
	}
	switch {
	case printErr != nil:
		return printErr
	case commitErr != nil:
		return failed(commitErr)
	case firstErr != nil:
		return failed(firstErr)
	}
	// The partitions that could not be read: without --follow those the
	// printer passed over (all, unless --max ended it first), with it
	// those that still cannot be read at the end. One line each; the
	// last is the command's error.
	if !o.follow {
		readers = readers[:drained]
	}
	var unread []error
	for _, r := range readers {
		if err := r.unreadable(); err != nil {
			unread = append(unread, err)
		}
	}
	if len(unread) == 0 {
		return nil
	}
	for _, err := range unread[:len(unread)-1] {
		exitcode.Report(c.App.ErrWriter, err)
	}
	return unread[len(unread)-1]
}

// newPartitionReaders makes a reader of every partition to read; each
// finds its starting position when it runs. With --follow the readers
// share one channel, which it returns; otherwise each has its own.
func newPartitionReaders(ctx context.Context, cl *client.Client, o consumeOptions, timeout time.Duration) ([]*partitionReader, chan fetched, error) {
	t, err := describeTopic(ctx, cl, o.topic)
	if err != nil {
		return nil, nil, err
	}
	parts := make([]int32, 0, len(t.Partitions))
	if o.partition >= 0 {
		if int(o.partition) >= len(t.Partitions) {
			return nil, nil, fmt.Errorf("%w: %s", transport.ErrUnknownPartition, metadata.NoSuchPartition(o.topic, len(t.Partitions), o.partition))
		}
		parts = append(parts, o.partition)
	} else {
		for _, p := range t.Partitions {
			parts = append(parts, p.Partition)
		}
	}
	var merged chan fetched
	if o.follow {
		merged = make(chan fetched, partitionBuffer*len(parts))
	}
	readers := make([]*partitionReader, 0, len(parts))
	for _, p := range parts {
		cons, err := client.NewConsumer(cl, o.topic, p, client.ConsumerConfig{})
		if err != nil {
			return nil, nil, err
		}
		r := &partitionReader{cl: cl, o: o, topic: o.topic, partition: p, leader: t.Partitions[p].Leader,
			cons: cons, stop: -1, out: merged, timeout: timeout}
		if !o.follow {
			r.out = make(chan fetched, partitionBuffer)
		}
		readers = append(readers, r)
	}
	return readers, merged, nil
}

// setup sets the reader at its starting position and, without --follow,
// its stop at the high watermark. It waits for the leader's offsets at
// most unreadableAfter (or --timeout, if shorter).
func (r *partitionReader) setup(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, min(r.timeout, unreadableAfter))
	offs, err := r.cl.ListOffsets(octx, r.topic, r.partition)
	cancel()
	if err != nil {
		return err
	}
	if !r.o.follow {
		r.stop = offs.HighWatermark
	}
	start := r.o.start
	if r.o.group != "" {
		gctx, cancel := context.WithTimeout(ctx, r.timeout)
		start, err = groupStart(gctx, r.cl, r.o, r.partition, r.cons)
		cancel()
		if err != nil {
			return final{err} // the group's, not the partition's
		}
	}
	switch start {
	case startCommitted:
	case startBeginning:
		r.cons.SeekTo(offs.LogStartOffset)
	case startEnd:
		r.cons.SeekTo(offs.HighWatermark)
	case startOffset:
		// Past the high watermark is a place to wait: nothing to
		// print without --follow, what arrives there with it.
		if r.o.offset < offs.LogStartOffset {
			return fmt.Errorf("%w: partition %s/%d starts at offset %d, not %d (older records are gone)",
				transport.ErrOffsetOutOfRange, r.topic, r.partition, offs.LogStartOffset, r.o.offset)
		}
		r.cons.SeekTo(r.o.offset)
	}
	return nil
}

// run finds the reader's start, then reads until the stop offset (or,
// following, until ctx ends); its caller closes the reader's channel. An
// error that a moment may cure (a leader that does not answer) makes the
// partition unreadable, not the command fail: run returns nil without
// --follow, and tries again with it. Any other error is returned.
func (r *partitionReader) run(ctx context.Context, follow bool) error {
	wait := catchUpWait
	if follow {
		wait = followWait
	}
	for {
		if !r.started {
			if err := r.setup(ctx); err != nil {
				if again, err := r.failed(ctx, err); !again {
					return err
				}
				continue
			}
			r.started = true
			r.readable()
		}
		if !follow && r.cons.Position() >= r.stop {
			return nil
		}
		recs, err := r.cons.Poll(ctx, wait)
		if err != nil {
			if again, err := r.failed(ctx, err); !again {
				return err
			}
			continue
		}
		r.readable()
		if !follow {
			// The stop is the high watermark at start; records appended
			// since are for a later run.
			for len(recs) > 0 && recs[len(recs)-1].Offset >= r.stop {
				recs = recs[:len(recs)-1]
			}
		}
		if len(recs) == 0 {
			if follow && r.sealedAndRead(ctx) {
				return nil
			}
			continue
		}
		select {
		case r.out <- fetched{partition: r.partition, recs: recs}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// failed handles an error of the reader's setup or poll, and reports
// whether to try again. An error that a moment may cure makes the
// partition unreadable: without --follow the reader ends (nil); with it,
// stderr hears of it the first time, and the reader tries again after a
// pause. Any other error, and ctx's end, is returned as it is.
func (r *partitionReader) failed(ctx context.Context, err error) (bool, error) {
	if ctx.Err() != nil || !leaderUnavailable(err) {
		return false, err
	}
	why := r.why(ctx, err)
	r.mu.Lock()
	was := r.mu.err
	r.mu.err = why
	r.mu.Unlock()
	if !r.o.follow {
		return false, nil
	}
	if was == nil {
		var b strings.Builder
		exitcode.Report(&b, why)
		r.notes.printf("%s; consume goes on with the other partitions, and reads this one once it can\n", strings.TrimSuffix(b.String(), "\n"))
	}
	select {
	case <-time.After(retryUnreadable):
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// readable notes that the partition could be read, on stderr when it
// could not before (with --follow).
func (r *partitionReader) readable() {
	r.mu.Lock()
	was := r.mu.err
	r.mu.err = nil
	r.mu.Unlock()
	if was != nil && r.notes != nil {
		r.notes.printf("gostream-ctl: %s/%d can be read again; reading it from offset %d\n", r.topic, r.partition, r.cons.Position())
	}
}

// unreadable is why the partition cannot be read now, as the error to
// report, or nil when it can.
func (r *partitionReader) unreadable() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.err
}

// leaderUnavailable reports whether err may pass in a moment: a leader
// that does not answer (also within the wait of setup: a deadline), or
// answers that it cannot serve yet, or no leader at all.
func leaderUnavailable(err error) bool {
	var f final
	if errors.As(err, &f) || errors.Is(err, client.ErrTopicRecreated) || errors.Is(err, client.ErrClosed) {
		return false
	}
	return passing(err) || errors.Is(err, context.DeadlineExceeded)
}

// final marks an error of a reader that no retry cures.
type final struct{ err error }

func (f final) Error() string { return f.err.Error() }
func (f final) Unwrap() error { return f.err }

// why is the error that names the partition and says why it cannot be
// read, under the name of err.
func (r *partitionReader) why(ctx context.Context, err error) error {
	leader := r.leader
	mctx, cancel := context.WithTimeout(ctx, time.Second)
	if t, derr := r.cl.DescribeTopic(mctx, r.topic); derr == nil && int(r.partition) < len(t.Partitions) {
		leader = t.Partitions[r.partition].Leader
	}
	cancel()
	var what string
	switch {
	case errors.Is(err, client.ErrNoLeader) || leader < 0:
		what = "it has no leader"
	case errors.Is(err, transport.ErrBrokerNotAvailable), errors.Is(err, transport.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		what = fmt.Sprintf("its leader, broker %d, does not answer", leader)
	default:
		what = fmt.Sprintf("its leader, broker %d, cannot serve it", leader)
	}
	return failed(fmt.Errorf("%s/%d: %s: %w", r.topic, r.partition, what, err))
}

// sealedAndRead reports whether, following, the reader has read its whole
// partition for good: the topic is sealed (it takes no more appends) and
// the reader is at the high watermark, which has reached the log end (no
// record is on its way to it). Asked when a long-poll came back empty.
func (r *partitionReader) sealedAndRead(ctx context.Context) bool {
	if err := r.cl.RefreshMetadata(ctx, r.topic); err != nil {
		return false
	}
	t, err := r.cl.DescribeTopic(ctx, r.topic)
	if err != nil || !t.Sealed {
		return false
	}
	offs, err := r.cl.ListOffsets(ctx, r.topic, r.partition)
	return err == nil && r.cons.Position() >= offs.HighWatermark && offs.HighWatermark >= offs.LogEndOffset
}

// consumeHeader heads consume's table, before its first record.
const consumeHeader = "PARTITION\tOFFSET\tKEY\tVALUE\n"

// printConsumed prints what arrives on sources, each drained in turn,
// until they are closed, --max records are printed or ctx ends. It calls
// stop once it wants no more. It returns how many sources it drained to
// their close.
func printConsumed(ctx context.Context, w io.Writer, format string, o consumeOptions, sources []<-chan fetched, stop func(), commits *explicitCommits) (int, error) {
	bw := bufio.NewWriter(w)
	var printed int64
	for i, src := range sources {
		for {
			var f fetched
			var ok bool
			select {
			case f, ok = <-src:
			case <-ctx.Done():
			}
			if !ok {
				break
			}
			for j := range f.recs {
				if printed == 0 && format == outputTable {
					// With the first record, so that a read that finds
					// nothing prints nothing.
					bw.WriteString(consumeHeader)
				}
				if err := printRecord(bw, format, o.topic, f.partition, &f.recs[j]); err != nil {
					stop()
					return i, exitcode.Fail("WriteFailed", fmt.Errorf("write output: %w", err))
				}
				printed++
				commits.printed(f.partition, f.recs[j].Offset+1)
				if o.max > 0 && printed >= o.max {
					stop()
					return i, flushOutput(bw)
				}
			}
			// Flush per batch, so that a reader of --follow sees records
			// as they arrive; then what is printed may be committed.
			if err := flushOutput(bw); err != nil {
				stop()
				return i, err
			}
			if err := commits.maybe(ctx); err != nil {
				stop()
				return i, failed(err)
			}
		}
		if ctx.Err() != nil {
			return i, flushOutput(bw)
		}
	}
	return len(sources), flushOutput(bw)
}

func flushOutput(bw *bufio.Writer) error {
	if err := bw.Flush(); err != nil {
		return exitcode.Fail("WriteFailed", fmt.Errorf("write output: %w", err))
	}
	return nil
}

func printRecord(w io.Writer, format, topic string, partition int32, r *record.Record) error {
	if format == outputJSON {
		return writeJSON(w, newConsumedRecord(topic, partition, r))
	}
	_, err := fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", partition, r.Offset, tableKey(r.Key), tableText(r.Value))
	return err
}

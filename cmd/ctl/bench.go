package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/metadata"
	"gostream/transport"
)

func benchCommand() *cli.Command {
	produce := leaf("produce", "measure producing: records/s, MB/s, latency from send to acknowledgment",
		"", args(0, 0), benchProduceAction,
		&cli.StringFlag{Name: "topic", Usage: "topic `T` to write to (created if missing)", Value: "bench"},
		&cli.Int64Flag{Name: "records", Usage: "number of records `N` in all", Value: 100000, DefaultText: "100000, or no limit with --duration"},
		&cli.IntFlag{Name: "record-size", Usage: "value size in `BYTES`", Value: 1024},
		&cli.IntFlag{Name: "producers", Usage: "`N` producers sending at once, each with its share of --records", Value: 1},
		&cli.BoolFlag{Name: "sync", Usage: "each producer sends one record and waits for its acknowledgment"},
		&cli.IntFlag{Name: "partitions", Usage: "partitions `P` of the topic when it has to be created", Value: 1},
		&cli.IntFlag{Name: "replication-factor", Usage: "replicas `R` of the topic when it has to be created", Value: 1},
		&cli.DurationFlag{Name: "linger", Usage: "how long a batch waits for more records, `DURATION`", Value: 5 * time.Millisecond, DefaultText: "5ms, none with --sync"},
		&cli.IntFlag{Name: "batch-bytes", Usage: "close a batch at `BYTES`", Value: 256 << 10},
		&cli.IntFlag{Name: "max-in-flight", Usage: "batches `N` of one partition awaiting their answer at once (at most 5 with --idempotent)", Value: 5},
		&cli.BoolFlag{Name: "idempotent", Usage: "idempotent producers (client.ProducerConfig Idempotent), each with its producer id"},
		&cli.DurationFlag{Name: "duration", Usage: "stop sending after `DURATION` (or at --records if set, whichever is first)", DefaultText: "none"},
		&cli.Int64Flag{Name: "rate", Usage: "send `N` records a second in all, each producer its share", DefaultText: "as fast as the producers can"},
		&cli.StringSliceFlag{Name: "config", Usage: "configuration `KEY=VALUE` of the topic when it has to be created, over the bench's " +
			"retention.bytes=268435456 (256 MiB a partition) and segment.bytes=67108864; repeat for more"},
	)
	produce.Description = `Sends --records records of --record-size random bytes, without keys (round
robin across the partitions), and measures each record from the moment it
is given to the producer to its acknowledgment, so without --sync the
latency includes the wait in the producer's buffer (32 MiB) behind the
records sent before. With --rate N the producers send N records a second
together, a steady load rather than the most they can: each its share,
record i of a producer given to it at i / share seconds from the start (a
producer that fell behind sends at once until it is back on time). With --sync each producer has one record in flight
at a time. With --idempotent each producer is idempotent: it asks the
cluster for a producer id, and its batches carry it with their sequences
(magic 2), as a Kafka producer's do by default.

A topic it creates keeps at most about 256 MiB a partition
(retention.bytes=268435456, in 64 MiB segments), so that a bench cannot
fill the disk: retention deletes the oldest segments at its next run
(gostream-node --retention-check-interval, a minute by default), and what
is written between runs is kept until then. --config changes it (-1 for
retention.bytes keeps everything). A topic that exists keeps its own
configuration.

While it runs, a progress line goes to stderr about once a second. Then it
prints a summary; -o json prints one object:
   {"records","bytes","seconds","records_per_sec","mb_per_sec","p50_ms","p99_ms","p999_ms"}
bytes counts record values; MB is 2^20 bytes. Ctrl-C stops sending early
and still prints the summary. --timeout bounds each request.`

	consume := leaf("consume", "measure consuming: records/s, MB/s, fetch latency",
		"", args(0, 0), benchConsumeAction,
		&cli.StringFlag{Name: "topic", Usage: "topic `T` to read", Value: "bench"},
		&cli.Int64Flag{Name: "records", Usage: "stop after `N` records", DefaultText: "every record below the high watermark"},
		&cli.StringFlag{Name: "group", Usage: "read as members of group `G` (client.GroupConsumer) instead of one reader per partition"},
		&cli.IntFlag{Name: "members", Usage: "with --group: `N` members in this process, each with its own client", Value: 1},
		&cli.BoolFlag{Name: "commit", Usage: "with --group: each member commits its position (CommitSync) after every Poll that returned records"},
	)
	consume.Description = `Reads every partition from its log start offset, all at once, as fast as
it can, up to --records records in all or the high watermarks it found at
start. The summary has the same fields as bench produce; bytes counts keys
and values, and the latency percentiles are those of one fetch.

With --group G it reads as --members members of group G instead, each a
client.GroupConsumer with its own client, which the group's coordinator
assigns partitions; a partition starts at G's committed offset, else at
its log start. The members join paused, and the clock starts once they
have shared out the partitions (the time is the group's reading, not
its joining). It ends
when every partition has been read up to the high watermark found at
start (or at --records). A record that a member reads again (its
partition moved before it was committed) is not counted again; stderr
says how many there were. The latency percentiles are those of one Poll
that returned records. Nothing is committed unless --commit is given. The
group must have no members when it starts.`

	commit := leaf("commit", "measure offset commits: commits/s, latency from request to acknowledgment",
		"", args(0, 0), benchCommitAction,
		&cli.StringFlag{Name: "topic", Usage: "topic `T` whose offsets are committed (created if missing)", Value: "bench-commit"},
		&cli.StringFlag{Name: "group-prefix", Usage: "committer i commits as group `P`-i", Value: "bench-commit"},
		&cli.IntFlag{Name: "committers", Usage: "`N` committers at once, each its own group and partition", Value: 16},
		&cli.Int64Flag{Name: "commits", Usage: "number of commits `N` in all", Value: 20000, DefaultText: "20000, or no limit with --duration"},
		&cli.IntFlag{Name: "replication-factor", Usage: "replicas `R` of the topic when it has to be created", Value: 1},
		&cli.DurationFlag{Name: "duration", Usage: "stop committing after `DURATION` (or at --commits if set, whichever is first)", DefaultText: "none"},
	)
	commit.Description = `Runs --committers committers at once. Committer i commits, as group P-i
(--group-prefix) and from outside any membership, one offset of partition
i of --topic (i modulo the partitions of a topic that exists with fewer),
one commit at a time: each waits for the last one's acknowledgment, which
comes when every replica of the group's partition of __consumer_offsets
holds it. The offset is the partition's high watermark at start, the same
every time (a commit equal to the stored offset is accepted, and written
like any other). A topic it creates has one partition a committer and
--replication-factor replicas; a partition with no record is given one,
so that there is an offset above 0 to commit.

Before the clock starts each committer commits once, untimed: it finds its
group's coordinator, and on a new cluster has __consumer_offsets created.

While it runs, a progress line goes to stderr about once a second. The
summary has the same fields as bench produce: records counts the commits,
bytes is 0, and the latency percentiles are those of one commit.`

	return parent("bench", "load generator: records/s, MB/s, latency p50/p99/p999", produce, consume, commit)
}

// benchSummary is what bench produce, bench consume and bench commit print
// (-o json).
type benchSummary struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
	P999Ms        float64 `json:"p999_ms"`
}

const mebibyte = 1 << 20

func newBenchSummary(records, bytes int64, elapsed time.Duration, h *histogram) benchSummary {
	s := benchSummary{Records: records, Bytes: bytes, Seconds: elapsed.Seconds()}
	if s.Seconds > 0 {
		s.RecordsPerSec = float64(records) / s.Seconds
		s.MBPerSec = float64(bytes) / mebibyte / s.Seconds
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	s.P50Ms, s.P99Ms, s.P999Ms = ms(h.quantile(0.50)), ms(h.quantile(0.99)), ms(h.quantile(0.999))
	return s
}

func printBenchSummary(w io.Writer, format, name, latency string, s benchSummary) error {
	if format == outputJSON {
		return writeJSON(w, s)
	}
	_, err := fmt.Fprintf(w, "%s: %s (%.2f MB) in %.3f s\n"+
		"  throughput  %.1f records/s, %.2f MB/s\n"+
		"  latency     p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms (%s)\n",
		name, plural(s.Records, "record"), float64(s.Bytes)/mebibyte, s.Seconds,
		s.RecordsPerSec, s.MBPerSec, s.P50Ms, s.P99Ms, s.P999Ms, latency)
	return err
}

// printCountSummary is printBenchSummary for a bench that counts
// operations of no size (unit, such as "commit"): its table has no bytes;
// its JSON is the same object, records counting the operations and bytes
// 0.
func printCountSummary(w io.Writer, format, name, unit, latency string, s benchSummary) error {
	if format == outputJSON {
		return writeJSON(w, s)
	}
	_, err := fmt.Fprintf(w, "%s: %s in %.3f s\n"+
		"  throughput  %.1f %ss/s\n"+
		"  latency     p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms (%s)\n",
		name, plural(s.Records, unit), s.Seconds,
		s.RecordsPerSec, unit, s.P50Ms, s.P99Ms, s.P999Ms, latency)
	return err
}

// benchCounters count what a bench has done; the progress line reads them
// while it runs.
type benchCounters struct {
	records atomic.Int64
	bytes   atomic.Int64
}

// firstError keeps the first error that several goroutines report.
type firstError struct {
	once sync.Once
	err  atomic.Pointer[error]
}

func (f *firstError) set(err error) { f.once.Do(func() { f.err.Store(&err) }) }

func (f *firstError) get() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// progress writes a line about a running bench to stderr once a second:
// rewritten in place with \r on a terminal, one line each time otherwise.
type progress struct {
	w        io.Writer
	tty      bool
	name     string
	unit     string // what counters.records counts; "record" shows bytes too
	counters *benchCounters
	stop     chan struct{}
	done     chan struct{}
}

func startProgress(w io.Writer, name string, counters *benchCounters) *progress {
	return startProgressOf(w, name, "record", counters)
}

// startProgressOf is startProgress for a bench that counts unit (such as
// "commit") and no bytes, unless unit is "record".
func startProgressOf(w io.Writer, name, unit string, counters *benchCounters) *progress {
	p := &progress{w: w, tty: isTerminal(w), name: name, unit: unit, counters: counters,
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

func (p *progress) run() {
	defer close(p.done)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	start, last, lastAt := time.Now(), int64(0), time.Now()
	for {
		select {
		case <-p.stop:
			if p.tty {
				fmt.Fprint(p.w, "\r\033[K")
			}
			return
		case now := <-t.C:
			n, b := p.counters.records.Load(), p.counters.bytes.Load()
			rate := float64(n-last) / now.Sub(lastAt).Seconds()
			last, lastAt = n, now
			var line string
			if p.unit == "record" {
				line = fmt.Sprintf("%s: %s, %.1f MB, %.0f records/s now, %s elapsed",
					p.name, plural(n, "record"), float64(b)/mebibyte, rate, now.Sub(start).Round(time.Second))
			} else {
				line = fmt.Sprintf("%s: %s, %.0f %ss/s now, %s elapsed",
					p.name, plural(n, p.unit), rate, p.unit, now.Sub(start).Round(time.Second))
			}
			if p.tty {
				fmt.Fprintf(p.w, "\r\033[K%s", line)
			} else {
				fmt.Fprintln(p.w, line)
			}
		}
	}
}

// close stops the progress line and waits until it is gone.
func (p *progress) close() {
	close(p.stop)
	<-p.done
}

// benchTopicConfig is the configuration of a topic bench produce creates,
// unless --config says otherwise: a bench writes as fast as the disks
// take it, and must not fill them.
var benchTopicConfig = metadata.TopicConfig{
	metadata.ConfigRetentionBytes: 256 << 20,
	metadata.ConfigSegmentBytes:   64 << 20,
}

// ensureTopic creates topic with partitions, rf and config unless it
// exists, and says what it keeps.
func ensureTopic(ctx context.Context, cl *client.Client, topic string, partitions, rf int, config metadata.TopicConfig, log io.Writer) error {
	t, err := cl.DescribeTopic(ctx, topic)
	if err == nil {
		fmt.Fprintf(log, "bench: topic %s exists; it keeps its configuration (%s)\n", topic, retentionText(t.Config))
		return nil
	}
	if !errors.Is(err, transport.ErrUnknownTopic) {
		return err
	}
	t, err = cl.CreateTopicWithConfig(ctx, topic, partitions, rf, config)
	switch {
	case errors.Is(err, transport.ErrTopicExists):
		return nil // someone else was quicker
	case err != nil:
		return err
	}
	fmt.Fprintf(log, "bench: created topic %s: %s, replication factor %d, %s\n", topic, plural(partitions, "partition"), rf, retentionText(t.Config))
	return nil
}

// retentionText says what a topic's configuration keeps, for bench.
func retentionText(config []client.TopicConfigValue) string {
	var parts []string
	for _, v := range config {
		if v.Key == metadata.ConfigRetentionBytes || v.Key == metadata.ConfigRetentionMs {
			parts = append(parts, fmt.Sprintf("%s=%s", v.Key, configValueText(v.Key, v.Value)))
		}
	}
	return "keeping per partition " + strings.Join(parts, ", ")
}

func benchProduceAction(c *cli.Context) error {
	g := globalsOf(c)
	topic := c.String("topic")
	records := c.Int64("records")
	if c.IsSet("duration") && !c.IsSet("records") {
		records = -1
	}
	size, producers := c.Int("record-size"), c.Int("producers")
	switch {
	case records == 0 || records < -1:
		return exitcode.Usagef("InvalidFlag", "--records %d: want a positive number", records)
	case size < 0:
		return exitcode.Usagef("InvalidFlag", "--record-size %d: want 0 or more bytes", size)
	case producers < 1:
		return exitcode.Usagef("InvalidFlag", "--producers %d: want a positive number", producers)
	case c.Int("partitions") < 1 || c.Int("replication-factor") < 1:
		return exitcode.Usagef("InvalidFlag", "--partitions and --replication-factor: want positive numbers")
	case c.Duration("duration") < 0:
		return exitcode.Usagef("InvalidFlag", "--duration %s: want a positive duration", c.Duration("duration"))
	case c.Int64("rate") < 0:
		return exitcode.Usagef("InvalidFlag", "--rate %d: want records a second, 1 or more (0 or none: as fast as the producers can)", c.Int64("rate"))
	case c.Bool("idempotent") && c.Int("max-in-flight") > 5:
		return exitcode.Usagef("InvalidFlag", "--max-in-flight %d: an idempotent producer has at most 5 batches of a partition in flight (a leader finds a batch sent again among a producer's last 5)", c.Int("max-in-flight"))
	}
	own, err := configFromFlags(c)
	if err != nil {
		return err
	}
	topicConfig := benchTopicConfig.Clone()
	maps.Copy(topicConfig, own)
	syncMode := c.Bool("sync")
	cfg := client.ProducerConfig{
		Linger:                  c.Duration("linger"),
		BatchBytes:              c.Int("batch-bytes"),
		MaxInFlightPerPartition: c.Int("max-in-flight"),
		MaxBlock:                g.timeout,
		RequestTimeout:          g.timeout,
		Idempotent:              c.Bool("idempotent"),
	}
	if syncMode && !c.IsSet("linger") {
		cfg.Linger = -1 // one record at a time: waiting for more only adds latency
	}

	setup, cancelSetup := context.WithTimeout(c.Context, g.timeout)
	defer cancelSetup()
	cl, err := connect(setup, g)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := ensureTopic(setup, cl, topic, c.Int("partitions"), c.Int("replication-factor"), topicConfig, c.App.ErrWriter); err != nil {
		return failed(err)
	}

	// sending ends at --duration or Ctrl-C; records in flight then finish.
	sending, cancelSending := benchWindow(c)
	defer cancelSending()
	value := make([]byte, size)
	rng := rand.NewChaCha8([32]byte{})
	rng.Read(value)

	var (
		counters benchCounters
		fail     firstError
		wg       sync.WaitGroup
	)
	bps := make([]*benchProducer, producers)
	for i := range bps {
		prod, err := client.NewProducer(cl, cfg)
		if errors.Is(err, client.ErrInvalidConfig) {
			return exitcode.Usagef("InvalidFlag", "%v", err)
		}
		if err != nil {
			return failed(err) // an idempotent producer's id was not given
		}
		defer prod.Close()
		bps[i] = &benchProducer{prod: prod, hist: new(histogram), counters: &counters, fail: &fail,
			rec: client.ProducerRecord{Topic: topic, Value: value}}
	}
	mode := "async"
	if syncMode {
		mode = "sync"
	}
	if cfg.Idempotent {
		mode += ", idempotent"
	}
	linger := "none"
	if cfg.Linger > 0 {
		linger = cfg.Linger.String()
	}
	rate := c.Int64("rate")
	if rate > 0 {
		mode += fmt.Sprintf(", %d records/s", rate)
	}
	fmt.Fprintf(c.App.ErrWriter, "bench produce: %s of %s to %s, %s, %s, linger %s\n",
		countText(records, "record"), plural(size, "byte"), topic, plural(producers, "producer"), mode, linger)
	start := time.Now()
	prog := startProgress(c.App.ErrWriter, "bench produce", &counters)
	for i, bp := range bps {
		quota := shareOf(records, producers, i)
		bp.pace = pacer{start: start}
		if rate > 0 {
			bp.pace.interval = time.Duration(float64(time.Second) * float64(producers) / float64(rate))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if syncMode {
				bp.runSync(c.Context, sending, quota)
			} else {
				bp.runAsync(sending, quota)
			}
		}()
	}
	wg.Wait()
	for _, bp := range bps {
		bp.prod.Close() // waits for every outcome and callback
	}
	elapsed := time.Since(start)
	prog.close()

	var h histogram
	for _, bp := range bps {
		h.add(bp.hist)
	}
	sum := newBenchSummary(counters.records.Load(), counters.bytes.Load(), elapsed, &h)
	if err := printBenchSummary(c.App.Writer, g.output, "bench produce", "send to acknowledgment", sum); err != nil {
		return exitcode.Fail("WriteFailed", err)
	}
	if err := fail.get(); err != nil && !interrupted(c.Context, err) {
		return failed(err)
	}
	return nil
}

// countText is a bench's count of unit for people: "1000 records", or
// "unlimited records" for no limit (negative).
func countText(n int64, unit string) string {
	if n < 0 {
		return "unlimited " + unit + "s"
	}
	return plural(n, unit)
}

// shareOf is worker i's share of total operations among workers, the
// remainder going to the first ones; -1 (no limit) when total is.
func shareOf(total int64, workers, i int) int64 {
	if total < 0 {
		return -1
	}
	share := total / int64(workers)
	if int64(i) < total%int64(workers) {
		share++
	}
	return share
}

// benchWindow is the context of a bench's timed work: it ends at
// --duration, when set, or with the command (Ctrl-C).
func benchWindow(c *cli.Context) (context.Context, context.CancelFunc) {
	if d := c.Duration("duration"); d > 0 {
		return context.WithTimeout(c.Context, d)
	}
	return context.WithCancel(c.Context)
}

// benchProducer is one of bench produce's producers. hist is written by
// one goroutine at a time: the sender with --sync, the Producer's callback
// goroutine otherwise; it is read after the Producer is closed.
type benchProducer struct {
	prod     *client.Producer
	rec      client.ProducerRecord
	pace     pacer
	hist     *histogram
	counters *benchCounters
	fail     *firstError
}

// pacer spaces a producer's records at its share of --rate: record i is
// due interval × i after start. A producer ahead of time waits; one
// behind (its buffer full, the cluster slow) sends at once until it is
// back on time. A zero interval never waits.
type pacer struct {
	start    time.Time
	interval time.Duration
}

// wait returns true when record i is due, false when ctx ended first.
func (p pacer) wait(ctx context.Context, i int64) bool {
	if ctx.Err() != nil {
		return false
	}
	if p.interval <= 0 {
		return true // no clock read: a pipelined producer's records come as fast as it takes them
	}
	d := time.Until(p.start.Add(time.Duration(i) * p.interval))
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// runAsync sends quota records (no limit if negative) without waiting,
// until sending ends or a record fails.
func (b *benchProducer) runAsync(sending context.Context, quota int64) {
	size := int64(len(b.rec.Value))
	for i := int64(0); quota < 0 || i < quota; i++ {
		if !b.pace.wait(sending, i) || b.fail.get() != nil {
			return
		}
		t0 := time.Now()
		b.prod.SendAsync(b.rec, func(_ client.Ack, err error) {
			if err != nil {
				b.fail.set(err)
				return
			}
			b.hist.record(time.Since(t0))
			b.counters.records.Add(1)
			b.counters.bytes.Add(size)
		})
	}
}

// runSync sends quota records (no limit if negative) one at a time, each
// after the last one's acknowledgment, until sending ends or a record
// fails. A Send still waiting when sending ends (at --duration) finishes:
// only ctx, the command's, abandons it.
func (b *benchProducer) runSync(ctx, sending context.Context, quota int64) {
	size := int64(len(b.rec.Value))
	for i := int64(0); quota < 0 || i < quota; i++ {
		if !b.pace.wait(sending, i) || b.fail.get() != nil {
			return
		}
		t0 := time.Now()
		if _, err := b.prod.Send(ctx, b.rec); err != nil {
			b.fail.set(err)
			return
		}
		b.hist.record(time.Since(t0))
		b.counters.records.Add(1)
		b.counters.bytes.Add(size)
	}
}

func benchConsumeAction(c *cli.Context) error {
	g := globalsOf(c)
	topic := c.String("topic")
	limit := c.Int64("records")
	switch {
	case c.IsSet("records") && limit < 1:
		return exitcode.Usagef("InvalidFlag", "--records %d: want a positive number", limit)
	case c.IsSet("group") && c.String("group") == "":
		return exitcode.Usagef("InvalidFlag", "--group: want a group name")
	case !c.IsSet("group") && c.IsSet("members"):
		return exitcode.Usagef("InvalidFlag", "--members needs --group")
	case !c.IsSet("group") && c.Bool("commit"):
		return exitcode.Usagef("InvalidFlag", "--commit needs --group")
	case c.Int("members") < 1:
		return exitcode.Usagef("InvalidFlag", "--members %d: want a positive number", c.Int("members"))
	}
	if c.IsSet("group") {
		return benchGroupConsume(c, g, topic, limit)
	}
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
	readers := make([]*benchReader, 0, len(t.Partitions))
	var available int64
	for _, p := range t.Partitions {
		offs, err := cl.ListOffsets(setup, topic, p.Partition)
		if err != nil {
			return failed(err)
		}
		// Each poll's records are counted before the next: the fetches
		// can share one buffer.
		cons, err := client.NewConsumer(cl, topic, p.Partition, client.ConsumerConfig{ReuseMemory: true})
		if err != nil {
			return failed(err)
		}
		cons.SeekTo(offs.LogStartOffset)
		available += offs.HighWatermark - offs.LogStartOffset
		readers = append(readers, &benchReader{cons: cons, stop: offs.HighWatermark, hist: new(histogram)})
	}
	target := available
	if limit > 0 {
		target = min(limit, available)
	}
	fmt.Fprintf(c.App.ErrWriter, "bench consume: %s from %s, %s\n", plural(target, "record"), topic, plural(len(readers), "partition"))

	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	var (
		counters benchCounters
		fail     firstError
		wg       sync.WaitGroup
	)
	start := time.Now()
	prog := startProgress(c.App.ErrWriter, "bench consume", &counters)
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := r.run(ctx, &counters, target); err != nil && ctx.Err() == nil {
				fail.set(err)
				cancel()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	prog.close()

	var h histogram
	for _, r := range readers {
		h.add(r.hist)
	}
	sum := newBenchSummary(counters.records.Load(), counters.bytes.Load(), elapsed, &h)
	if err := printBenchSummary(c.App.Writer, g.output, "bench consume", "one fetch", sum); err != nil {
		return exitcode.Fail("WriteFailed", err)
	}
	return failed(fail.get())
}

// benchReader reads one partition for bench consume.
type benchReader struct {
	cons *client.Consumer
	stop int64 // the high watermark at start
	hist *histogram
}

// run fetches until the partition's stop offset or until the readers
// together have taken target records, counting only records up to target.
func (r *benchReader) run(ctx context.Context, counters *benchCounters, target int64) error {
	for r.cons.Position() < r.stop && counters.records.Load() < target {
		t0 := time.Now()
		recs, err := r.cons.Poll(ctx, catchUpWait)
		if err != nil {
			return err
		}
		r.hist.record(time.Since(t0))
		n := 0
		for n < len(recs) && recs[n].Offset < r.stop {
			n++
		}
		took := take(&counters.records, target, int64(n))
		var size int64
		for i := range took {
			size += int64(len(recs[i].Key) + len(recs[i].Value))
		}
		counters.bytes.Add(size)
	}
	return nil
}

// take adds up to k to n without passing target and returns how much it
// added.
func take(n *atomic.Int64, target, k int64) int64 {
	for {
		cur := n.Load()
		k = min(k, target-cur)
		if k <= 0 {
			return 0
		}
		if n.CompareAndSwap(cur, cur+k) {
			return k
		}
	}
}

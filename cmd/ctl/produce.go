package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/record"
)

func produceCommand() *cli.Command {
	cmd := leaf("produce", "append one record per VALUE, or per stdin line when none is given",
		"TOPIC [VALUE ...]", args(1, -1), produceAction,
		&cli.StringFlag{Name: "key", Usage: "record key `K` (an empty key is a key too)", DefaultText: "none: round robin"},
		&cli.IntFlag{Name: "partition", Usage: "write to partition `P`", Value: -1, DefaultText: "chosen by the key"},
		&cli.StringSliceFlag{Name: "header", Usage: "record header `KEY=VALUE`; repeat for more"},
		&cli.BoolFlag{Name: "idempotent", Usage: "an idempotent producer: a record whose answer is lost is sent again, and stored once"},
	)
	cmd.Description = `Every VALUE is one record; with no VALUE every line of stdin is one
record (its newline, or CRLF, removed; empty lines are empty records;
lines of any length up to the request limit, a few MiB).

Records without --key go round robin across the partitions. With --key
all go to the partition the client's Partition function picks for that
key, so records of one key keep their order. --partition overrides both.

Output: for VALUE arguments one line per record acknowledged,
topic/partition@offset (value N), N the VALUE's place among them from 1;
for stdin one summary line. With -o json one object per record
acknowledged, a line each, in input order, line being the number of the
stdin line (or of the VALUE) from 1:
   {"topic","partition","offset","leader","leader_epoch","line"}

With --idempotent the producer is idempotent (client.ProducerConfig
Idempotent): it asks the cluster for a producer id first, and a record
whose outcome is unknown (a timeout, a lost connection, ReplicationFailed)
is sent again, for up to 4 x --timeout after it was read, and the leader
answers the copy as the original: each record acknowledged is stored
once. A cluster older than the client has no producer ids:
UnsupportedVersion.

--timeout bounds each request, not the whole stream. Records are sent
while earlier ones wait for their answers, so when one fails, others sent
after it may be stored. Once one has failed no more are read: the command
waits for those in flight, prints every one acknowledged, and exits 2
with the first failure, naming the lines (or VALUEs) sent and not
acknowledged (past 20 ranges, how many more), and the last one sent:
   NoSpace: line 7: ... (7 of 9 records acknowledged; not acknowledged:
   lines 7, 9; no line after line 9 was sent)`
	return cmd
}

// produceWindow bounds the records sent but not yet printed: the output
// is in input order, so acknowledgments that arrive early wait for their
// turn, and reading stops while the window is full.
const produceWindow = 8192

// ackJSON is one record of produce -o json (docs/cli.md).
type ackJSON struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	Leader      int32  `json:"leader"`
	LeaderEpoch int32  `json:"leader_epoch"`
	// Line is the number, from 1, of the stdin line or the VALUE argument
	// the record was made of.
	Line int `json:"line"`
}

func produceAction(c *cli.Context) error {
	g := globalsOf(c)
	topic := c.Args().First()
	values := c.Args().Slice()[1:]
	base := client.ProducerRecord{Topic: topic}
	if c.IsSet("key") {
		base.Key = []byte(c.String("key"))
	}
	if c.IsSet("partition") {
		p := c.Int("partition")
		if p < 0 {
			return exitcode.Usagef("InvalidFlag", "--partition %d: want a partition number, 0 or more", p)
		}
		base.Partition, base.ManualPartition = int32(p), true
	}
	for _, h := range c.StringSlice("header") {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return exitcode.Usagef("InvalidFlag", "--header %q: want KEY=VALUE", h)
		}
		base.Headers = append(base.Headers, record.Header{Key: k, Value: []byte(v)})
	}

	setup, cancel := context.WithTimeout(c.Context, g.timeout)
	defer cancel()
	cl, err := connect(setup, g)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Fail before reading stdin when the topic does not exist.
	if _, err := describeTopic(setup, cl, topic); err != nil {
		return failed(err)
	}
	prod, err := client.NewProducer(cl, client.ProducerConfig{MaxBlock: g.timeout, RequestTimeout: g.timeout, Idempotent: c.Bool("idempotent")})
	if err != nil {
		return failed(err)
	}
	defer prod.Close()

	var next func() ([]byte, error)
	fromStdin := len(values) == 0
	total := len(values) // -1: stdin's lines are not counted ahead
	if fromStdin {
		total = -1
		lines := newLineReader(c.App.Reader)
		defer lines.stop()
		next = func() ([]byte, error) { return lines.next(c.Context) }
	} else {
		next = func() ([]byte, error) {
			if len(values) == 0 {
				return nil, io.EOF
			}
			v := []byte(values[0])
			values = values[1:]
			return v, nil
		}
	}

	out := newAckPrinter(c.App.Writer, g.output, !fromStdin)
	sent := 0
	var readErr error
	for !out.failed() {
		v, err := next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				readErr = err
			}
			break
		}
		if !out.reserve(c.Context) {
			break
		}
		rec := base
		rec.Value = v
		seq := sent
		sent++
		prod.SendAsync(rec, func(a client.Ack, err error) { out.done(seq, a, err) })
	}
	// Close waits for every record's outcome and callback.
	prod.Close()
	if err := out.finish(); err != nil {
		return err
	}
	switch {
	case out.firstErr != nil:
		return failed(fmt.Errorf("%s %d: %w (%s)", out.noun(), out.firstErr.seq+1, out.firstErr.err, out.outcomes(sent, total)))
	case readErr != nil && !interrupted(c.Context, readErr):
		return exitcode.Fail("ReadFailed", fmt.Errorf("read stdin after %s: %w", plural(sent, "record"), readErr))
	}
	if fromStdin && g.output == outputTable {
		return out.summary(topic)
	}
	return nil
}

// produceResult is one record's outcome.
type produceResult struct {
	seq int
	ack client.Ack
	err error
}

// ackPrinter prints the outcomes of produced records in input order, from
// a goroutine it owns, while the producer calls done in any order. At most
// produceWindow records are between reserve and being printed, so the
// results channel never blocks the producer's callbacks.
type ackPrinter struct {
	w         io.Writer
	format    string
	perRecord bool // VALUE arguments: table lines per record, rather than a summary

	slots   chan struct{}
	results chan produceResult
	stopped chan struct{}
	hasErr  atomic.Bool

	// Written by the printer goroutine, read after finish.
	firstErr   *produceResult
	acked      int
	unacked    []int // the seq of every record that failed, in input order
	partitions map[int32]int
	writeErr   error
	finishOnce sync.Once
}

func newAckPrinter(w io.Writer, format string, perRecord bool) *ackPrinter {
	p := &ackPrinter{
		w: w, format: format, perRecord: perRecord,
		slots:      make(chan struct{}, produceWindow),
		results:    make(chan produceResult, produceWindow),
		stopped:    make(chan struct{}),
		partitions: make(map[int32]int),
	}
	go p.run()
	return p
}

// reserve waits for room in the window; false when ctx ended first.
func (p *ackPrinter) reserve(ctx context.Context) bool {
	select {
	case p.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// done takes the outcome of record seq. It never blocks.
func (p *ackPrinter) done(seq int, a client.Ack, err error) {
	if err != nil {
		p.hasErr.Store(true)
	}
	p.results <- produceResult{seq: seq, ack: a, err: err}
}

// failed reports whether some record has failed, so that no more are sent.
func (p *ackPrinter) failed() bool { return p.hasErr.Load() }

func (p *ackPrinter) run() {
	defer close(p.stopped)
	bw := bufio.NewWriter(p.w)
	ring := make([]*produceResult, produceWindow)
	next := 0
	for r := range p.results {
		ring[r.seq%produceWindow] = &r
		for ring[next%produceWindow] != nil {
			res := ring[next%produceWindow]
			ring[next%produceWindow] = nil
			next++
			p.print(bw, res)
			<-p.slots
		}
		// Flush when caught up, so that a slow stream shows each record
		// as it is acknowledged.
		if len(p.results) == 0 && p.writeErr == nil {
			p.writeErr = bw.Flush()
		}
	}
	if p.writeErr == nil {
		p.writeErr = bw.Flush()
	}
}

func (p *ackPrinter) print(w io.Writer, r *produceResult) {
	if r.err != nil {
		if p.firstErr == nil {
			p.firstErr = r
		}
		p.unacked = append(p.unacked, r.seq)
		return
	}
	p.acked++
	p.partitions[r.ack.Partition]++
	if p.writeErr != nil {
		return
	}
	switch {
	case p.format == outputJSON:
		p.writeErr = writeJSON(w, ackJSON{Topic: r.ack.Topic, Partition: r.ack.Partition, Offset: r.ack.Offset,
			Leader: r.ack.LeaderID, LeaderEpoch: r.ack.LeaderEpoch, Line: r.seq + 1})
	case p.perRecord:
		_, p.writeErr = fmt.Fprintf(w, "%s/%d@%d (value %d)\n", r.ack.Topic, r.ack.Partition, r.ack.Offset, r.seq+1)
	}
}

// noun is what the input's records are called: stdin lines, or VALUE
// arguments.
func (p *ackPrinter) noun() string {
	if p.perRecord {
		return "value"
	}
	return "line"
}

// maxRangesNamed bounds the ranges of numbers a failure names.
const maxRangesNamed = 20

// outcomes says, after a failure, which of the sent records were
// acknowledged and which were not, by their numbers in the input: of the
// sent records those not named were acknowledged. total is the number of
// VALUE arguments, or -1 for stdin, where nothing after the last record
// sent was read. Call it after finish.
func (p *ackPrinter) outcomes(sent, total int) string {
	noun := p.noun()
	var b strings.Builder
	if len(p.unacked) > 1 {
		noun += "s"
	}
	fmt.Fprintf(&b, "%d of %s acknowledged; not acknowledged: %s %s", p.acked, plural(sent, "record"), noun, numberRanges(p.unacked, maxRangesNamed))
	switch {
	case total < 0:
		fmt.Fprintf(&b, "; no line after line %d was sent", sent)
	case sent == total-1:
		fmt.Fprintf(&b, "; value %d was not sent", total)
	case sent < total:
		fmt.Fprintf(&b, "; values %d to %d were not sent", sent+1, total)
	}
	return b.String()
}

// numberRanges writes the seqs (0-based, ascending) as the 1-based
// numbers they are, consecutive ones as a range: "7, 9-12, 15". Past
// limit ranges it says how many numbers it left out.
func numberRanges(seqs []int, limit int) string {
	var b strings.Builder
	ranges := 0
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if ranges == limit {
			fmt.Fprintf(&b, " and %d more", len(seqs)-i)
			break
		}
		if ranges > 0 {
			b.WriteString(", ")
		}
		if i == j {
			fmt.Fprintf(&b, "%d", seqs[i]+1)
		} else {
			fmt.Fprintf(&b, "%d-%d", seqs[i]+1, seqs[j]+1)
		}
		ranges++
		i = j + 1
	}
	return b.String()
}

// finish waits until every outcome is printed. Call it once every
// callback has run.
func (p *ackPrinter) finish() error {
	p.finishOnce.Do(func() { close(p.results) })
	<-p.stopped
	if p.writeErr != nil {
		return exitcode.Fail("WriteFailed", fmt.Errorf("write output: %w", p.writeErr))
	}
	return nil
}

// summary prints how many records went to which partitions.
func (p *ackPrinter) summary(topic string) error {
	parts := make([]int32, 0, len(p.partitions))
	for id := range p.partitions {
		parts = append(parts, id)
	}
	slices.Sort(parts)
	noun := "records"
	if p.acked == 1 {
		noun = "record"
	}
	var where string
	switch len(parts) {
	case 0:
	case 1:
		where = fmt.Sprintf(" (partition %d)", parts[0])
	default:
		where = fmt.Sprintf(" (partitions %s)", joinIDs(parts))
	}
	_, err := fmt.Fprintf(p.w, "produced %d %s to %s%s\n", p.acked, noun, topic, where)
	return err
}

// lineReader reads lines from r on a goroutine of its own, so that Ctrl-C
// ends the command even while the read is blocked on a terminal or a pipe.
// A read cannot be stopped: after stop, the goroutine ends at its next
// line or at EOF, or with the process.
type lineReader struct {
	lines chan lineOrErr
	quit  chan struct{}
	once  sync.Once
}

type lineOrErr struct {
	line []byte
	err  error
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan lineOrErr, 64), quit: make(chan struct{})}
	go lr.run(r)
	return lr
}

func (lr *lineReader) run(r io.Reader) {
	// bufio.Reader, unlike bufio.Scanner, has no line length limit:
	// ReadBytes grows its result to the whole line, and returns a fresh
	// slice each time, which the producer may keep.
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		var item lineOrErr
		switch {
		case err == nil:
			line = bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})
			item = lineOrErr{line: line}
		case errors.Is(err, io.EOF) && len(line) > 0:
			item = lineOrErr{line: bytes.TrimSuffix(line, []byte{'\r'})}
		default:
			item = lineOrErr{err: err}
		}
		select {
		case lr.lines <- item:
		case <-lr.quit:
			return
		}
		if item.err != nil {
			return
		}
	}
}

// next returns the next line, io.EOF at the end, or ctx's error.
func (lr *lineReader) next(ctx context.Context) ([]byte, error) {
	select {
	case item := <-lr.lines:
		return item.line, item.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (lr *lineReader) stop() { lr.once.Do(func() { close(lr.quit) }) }

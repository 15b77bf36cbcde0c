package console

import (
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"gostream/client"
	"gostream/metadata"
	"gostream/record"
	"gostream/transport"
)

// Limits of GET /ui/api/topics/{topic}/messages (docs/console.md,
// "Messages").
const (
	defaultLimit = 50
	maxLimit     = 500
	// maxScanRecords and maxScanBytes bound what one request reads,
	// matched or not, so that a search costs the node a bounded read
	// however large the topic.
	maxScanRecords = 10_000
	maxScanBytes   = 32 << 20
	// maxShownBytes bounds the bytes of the records one answer carries
	// (each key and value cut at maxShown first): once the records kept
	// hold that much, the read stops and Next says where.
	maxShownBytes = 4 << 20
	// scanTime bounds how long one request reads; past it the answer
	// holds what was read, and Next says where.
	scanTime = 5 * time.Second
	// maxReads is how many requests for records a node answers at once;
	// another waits up to readWait for its turn, then gets a 429.
	maxReads = 4
	readWait = 2 * time.Second
	// maxSearch bounds q.
	maxSearch = 1 << 10
	// scanFetchBytes is what one fetch of a read asks for.
	scanFetchBytes = 1 << 20
	// listConcurrency bounds the calls made at once to find where each
	// partition's read starts.
	listConcurrency = 8
)

// maxShown is how much of a key, a value or a header value an answer
// carries: the rest is cut (Bytes.Cut), so that a huge record does not
// make a huge page.
const maxShown = 64 << 10

// Messages is the answer of GET /ui/api/topics/{topic}/messages.
type Messages struct {
	// Records are the records found, oldest first: in offset order when
	// one partition is read, else by timestamp, then partition and
	// offset.
	Records []Message `json:"records"`
	// Scanned is how many records the node read to answer, matching or
	// not.
	Scanned int `json:"scanned"`
	// Next holds, for each partition not read to its end, the offset to
	// go on from (start=offsets:P=N,...): every record before it that
	// matched is in Records or was in an earlier answer. JSON object
	// keys are the partitions, as strings.
	Next map[int32]int64 `json:"next"`
	// Done is whether every partition asked was read to its end (its
	// high watermark when the request began): Next is empty.
	Done bool `json:"done"`
}

// Message is one record as the API sends it.
type Message struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Timestamp is the record's time, Unix milliseconds: the leader's
	// append time, or the producer's own for a Kafka client's record
	// with CreateTime.
	Timestamp int64 `json:"timestamp"`
	// Key is null for a record without a key; Value is null for a
	// Kafka client's null value (a tombstone).
	Key     *Bytes   `json:"key"`
	Value   *Bytes   `json:"value"`
	Headers []Header `json:"headers"`
}

// Header is a record header. Its name is text (bytes that are not valid
// UTF-8 read as U+FFFD); its value is null for a Kafka client's null
// header value.
type Header struct {
	Key   string `json:"key"`
	Value *Bytes `json:"value"`
}

// Bytes is a key, a value or a header value as the API sends it: the
// first 64 KiB (maxShown) of it, in base64, and as text when the whole
// is valid UTF-8.
type Bytes struct {
	// Text is the bytes sent, as a string, present when the whole is
	// valid UTF-8 (then a cut falls between two characters).
	Text *string `json:"text,omitempty"`
	// B64 is the bytes sent, in standard base64 with padding.
	B64 string `json:"b64"`
	// Size is the length of the whole, in bytes.
	Size int `json:"size"`
	// Cut is set when only the first 64 KiB are sent.
	Cut bool `json:"cut,omitempty"`
}

// bytesOf is b as the API sends it; nil for nil.
func bytesOf(b []byte) *Bytes {
	if b == nil {
		return nil
	}
	out := &Bytes{Size: len(b)}
	text := utf8.Valid(b)
	if len(b) > maxShown {
		n := maxShown
		for text && n > 0 && !utf8.RuneStart(b[n]) {
			n--
		}
		b, out.Cut = b[:n], true
	}
	out.B64 = base64.StdEncoding.EncodeToString(b)
	if text {
		s := string(b)
		out.Text = &s
	}
	return out
}

// messageOf is record r of partition p as the API sends it. It copies
// what it keeps: the result does not alias r.
func messageOf(p int32, r *record.Record) Message {
	m := Message{Partition: p, Offset: r.Offset, Timestamp: r.Timestamp, Key: bytesOf(r.Key), Value: bytesOf(r.Value),
		Headers: make([]Header, 0, len(r.Headers))}
	for _, h := range r.Headers {
		m.Headers = append(m.Headers, Header{Key: strings.ToValidUTF8(h.Key, "\uFFFD"), Value: bytesOf(h.Value)})
	}
	return m
}

// shownSize is about how many bytes of r an answer carries.
func shownSize(r *record.Record) int {
	n := min(len(r.Key), maxShown) + min(len(r.Value), maxShown)
	for _, h := range r.Headers {
		n += len(h.Key) + min(len(h.Value), maxShown)
	}
	return n
}

// startKind is where a read starts in each partition.
type startKind int

const (
	startEarliest startKind = iota // the log start
	startLatest                    // limit records before the high watermark
	startOffset                    // an offset
	startTime                      // the first batch appended at or after a time
	startOffsets                   // an offset for each partition named; the others are not read
)

// messagesQuery is the query of GET .../messages, parsed.
type messagesQuery struct {
	partition int32 // -1: every partition
	start     startKind
	at        int64           // the offset (startOffset) or the time (startTime)
	offsets   map[int32]int64 // startOffsets
	limit     int
	search    string // "": every record
	in        searchIn
}

// searchIn is where a search looks.
type searchIn struct{ key, value, headers bool }

// parseMessagesQuery parses the raw query of GET .../messages strictly:
// anything it does not take, or takes but cannot read, is an error
// saying what is wrong.
func parseMessagesQuery(raw string) (messagesQuery, error) {
	v, err := strictQuery(raw, "partition", "start", "limit", "q", "in")
	if err != nil {
		return messagesQuery{}, err
	}
	mq := messagesQuery{partition: -1, limit: defaultLimit, in: searchIn{key: true, value: true, headers: true}}
	if s, ok := param(v, "partition"); ok {
		p, err := parseInt("partition", s, 0, math.MaxInt32)
		if err != nil {
			return messagesQuery{}, err
		}
		mq.partition = int32(p)
	}
	if s, ok := param(v, "limit"); ok {
		n, err := parseInt("limit", s, 1, maxLimit)
		if err != nil {
			return messagesQuery{}, err
		}
		mq.limit = int(n)
	}
	if s, ok := param(v, "start"); ok {
		if err := mq.parseStart(s); err != nil {
			return messagesQuery{}, err
		}
	}
	if s, ok := param(v, "q"); ok {
		if len(s) > maxSearch {
			return messagesQuery{}, fmt.Errorf("q of %d bytes: a search is for at most %d", len(s), maxSearch)
		}
		mq.search = s
	}
	if s, ok := param(v, "in"); ok {
		if mq.search == "" {
			return messagesQuery{}, errors.New("in narrows a search: give q too")
		}
		if mq.in, err = parseIn(s); err != nil {
			return messagesQuery{}, err
		}
	}
	if mq.start == startOffsets && mq.partition >= 0 {
		return messagesQuery{}, errors.New("start=offsets: names its partitions: give it without partition")
	}
	return mq, nil
}

func (mq *messagesQuery) parseStart(s string) error {
	kind, arg, _ := strings.Cut(s, ":")
	var err error
	switch {
	case s == "earliest":
		mq.start = startEarliest
	case s == "latest":
		mq.start = startLatest
	case kind == "offset":
		mq.start = startOffset
		mq.at, err = parseInt("start=offset:", arg, 0, math.MaxInt64)
	case kind == "time":
		mq.start = startTime
		mq.at, err = parseInt("start=time: (Unix milliseconds)", arg, 0, math.MaxInt64)
	case kind == "offsets":
		mq.start = startOffsets
		mq.offsets, err = parseOffsets(arg)
	default:
		err = fmt.Errorf("start %s: want earliest, latest, offset:N, time:MS or offsets:P=N,P=N,...", quote(s))
	}
	return err
}

// parseOffsets parses the P=N,P=N,... of start=offsets:.
func parseOffsets(s string) (map[int32]int64, error) {
	if s == "" {
		return nil, errors.New("start=offsets: names no partition: want offsets:P=N,P=N,...")
	}
	out := map[int32]int64{}
	for e := range strings.SplitSeq(s, ",") {
		ps, ns, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("start=offsets: %s is not P=N (a partition and its offset)", quote(e))
		}
		p, err := parseInt("start=offsets: partition", ps, 0, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		n, err := parseInt("start=offsets: offset", ns, 0, math.MaxInt64)
		if err != nil {
			return nil, err
		}
		if _, dup := out[int32(p)]; dup {
			return nil, fmt.Errorf("start=offsets: partition %d named twice", p)
		}
		out[int32(p)] = n
	}
	return out, nil
}

// parseIn parses in: key, value and headers, comma-separated, each at
// most once.
func parseIn(s string) (searchIn, error) {
	var in searchIn
	for e := range strings.SplitSeq(s, ",") {
		var f *bool
		switch e {
		case "key":
			f = &in.key
		case "value":
			f = &in.value
		case "headers":
			f = &in.headers
		default:
			return searchIn{}, fmt.Errorf("in %s: want key, value or headers, comma-separated", quote(e))
		}
		if *f {
			return searchIn{}, fmt.Errorf("in names %s twice", e)
		}
		*f = true
	}
	return in, nil
}

// matches reports whether r is a record the query asks for.
func (mq *messagesQuery) matches(r *record.Record) bool {
	if mq.search == "" {
		return true
	}
	q := []byte(mq.search)
	if mq.in.key && bytes.Contains(r.Key, q) || mq.in.value && bytes.Contains(r.Value, q) {
		return true
	}
	if mq.in.headers {
		for _, h := range r.Headers {
			if strings.Contains(h.Key, mq.search) || bytes.Contains(h.Value, q) {
				return true
			}
		}
	}
	return false
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if err := s.allowed(r, metadata.OpRead, metadata.ResourceTopic, topic); err != nil {
		writeErr(w, err)
		return
	}
	mq, err := parseMessagesQuery(r.URL.RawQuery)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	release, ok := s.beginRead(r.Context())
	if !ok {
		writeError(w, http.StatusTooManyRequests, transport.CodeBusy.String(),
			fmt.Sprintf("this node answers %d reads of records at once and none ended within %s; try again", maxReads, readWait))
		return
	}
	defer release()
	c, ctx, cancel, ok := s.dial(w, r)
	if !ok {
		return
	}
	defer cancel()
	t, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		writeErr(w, err)
		return
	}
	parts, err := partitionsOf(t, mq.partition, mq.offsets)
	if err != nil {
		writeErr(w, err)
		return
	}
	plan, err := planRead(ctx, c, topic, &mq, parts)
	if err != nil {
		writeErr(w, err)
		return
	}
	sc := newScan(&mq, len(plan) == 1)
	if err := sc.run(ctx, c, topic, plan); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sc.answer(plan))
}

// beginRead waits, up to readWait, for one of the maxReads turns to read
// records; release gives it back.
func (s *Server) beginRead(ctx context.Context) (release func(), ok bool) {
	t := time.NewTimer(readWait)
	defer t.Stop()
	select {
	case s.reads <- struct{}{}:
		return func() { <-s.reads }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

// partitionsOf is the partitions of t a read asks for: partition (-1 for
// every one), or those offsets names; an error matching
// transport.ErrUnknownPartition for one t does not have.
func partitionsOf(t client.TopicMetadata, partition int32, offsets map[int32]int64) ([]int32, error) {
	n := len(t.Partitions)
	check := func(p int32) error {
		if int(p) >= n {
			return fmt.Errorf("%w: %s", transport.ErrUnknownPartition, metadata.NoSuchPartition(t.Name, n, p))
		}
		return nil
	}
	switch {
	case partition >= 0:
		return []int32{partition}, check(partition)
	case offsets != nil:
		ps := slices.Sorted(maps.Keys(offsets))
		for _, p := range ps {
			if err := check(p); err != nil {
				return nil, err
			}
		}
		return ps, nil
	}
	ps := make([]int32, n)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps, nil
}

// partRead is one partition's part of a read: where it starts and ends
// (its high watermark when the read began), and where reading stopped:
// the offset after the last record read.
type partRead struct {
	partition  int32
	start, end int64
	stop       int64
}

// planRead finds where the read of each partition starts and ends, a few
// partitions at a time. A start outside the log is moved into it: below
// the log start to the log start, past the high watermark to it.
func planRead(ctx context.Context, c *client.Client, topic string, mq *messagesQuery, parts []int32) ([]partRead, error) {
	plan := make([]partRead, len(parts))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listConcurrency)
	for i, p := range parts {
		g.Go(func() error {
			offs, err := c.ListOffsets(gctx, topic, p)
			if err != nil {
				return err
			}
			start := offs.LogStartOffset
			switch mq.start {
			case startLatest:
				start = offs.HighWatermark - int64(mq.limit)
			case startOffset:
				start = mq.at
			case startOffsets:
				start = mq.offsets[p]
			case startTime:
				if start, err = c.OffsetForTime(gctx, topic, p, time.UnixMilli(mq.at)); err != nil {
					return err
				}
			}
			start = min(max(start, offs.LogStartOffset), offs.HighWatermark)
			plan[i] = partRead{partition: p, start: start, end: offs.HighWatermark, stop: start}
			return nil
		})
	}
	return plan, g.Wait()
}

// at is where a record is, to order the answer.
type at struct {
	timestamp int64
	partition int32
	offset    int64
}

// kept is a record the answer holds, so far.
type kept struct {
	at    at
	m     Message
	shown int
}

// scan reads the records of one request within its bounds and keeps the
// limit first (or, for start=latest, last) that match, in a heap whose
// root is the one to give up next.
type scan struct {
	q       *messagesQuery
	single  bool      // one partition: order by offset alone
	until   time.Time // the read stops then
	scanned int
	bytes   int
	shown   int // of the records kept
	kept    []kept
	// dropped is, per partition, the first offset of a record that
	// matched but was given up for others that come before it.
	dropped map[int32]int64
}

func newScan(mq *messagesQuery, single bool) *scan {
	return &scan{q: mq, single: single, until: time.Now().Add(scanTime), dropped: map[int32]int64{}}
}

// newest is whether the read keeps the last records rather than the
// first.
func (sc *scan) newest() bool { return sc.q.start == startLatest }

// first reports whether a comes before b in the answer.
func (sc *scan) first(a, b at) bool {
	if sc.single {
		return a.offset < b.offset
	}
	if c := cmp.Compare(a.timestamp, b.timestamp); c != 0 {
		return c < 0
	}
	if a.partition != b.partition {
		return a.partition < b.partition
	}
	return a.offset < b.offset
}

// The heap of kept records: its root is the last in the answer's order,
// or for start=latest the first.
func (sc *scan) Len() int { return len(sc.kept) }
func (sc *scan) Less(i, j int) bool {
	if sc.newest() {
		return sc.first(sc.kept[i].at, sc.kept[j].at)
	}
	return sc.first(sc.kept[j].at, sc.kept[i].at)
}
func (sc *scan) Swap(i, j int) { sc.kept[i], sc.kept[j] = sc.kept[j], sc.kept[i] }
func (sc *scan) Push(x any)    { sc.kept = append(sc.kept, x.(kept)) }
func (sc *scan) Pop() any {
	k := sc.kept[len(sc.kept)-1]
	sc.kept = sc.kept[:len(sc.kept)-1]
	return k
}

// exhausted reports whether the read has used what one request may.
func (sc *scan) exhausted() bool {
	return sc.scanned >= maxScanRecords || sc.bytes >= maxScanBytes || sc.shown >= maxShownBytes || time.Now().After(sc.until)
}

// run reads the partitions of plan in turn until each is read to its end
// or the read is exhausted.
func (sc *scan) run(ctx context.Context, c *client.Client, topic string, plan []partRead) error {
	for i := range plan {
		if sc.exhausted() {
			break
		}
		if err := sc.partition(ctx, c, topic, &plan[i]); err != nil {
			return err
		}
	}
	return nil
}

// partition reads one partition from where its read stopped, until its
// end, the read is exhausted, or (keeping the first records) it has given
// limit matches: later ones of it cannot come before those.
func (sc *scan) partition(ctx context.Context, c *client.Client, topic string, pr *partRead) error {
	if pr.stop >= pr.end {
		return nil
	}
	cons, err := client.NewConsumer(c, topic, pr.partition, client.ConsumerConfig{MaxBytes: scanFetchBytes})
	if err != nil {
		return err
	}
	cons.SeekTo(pr.stop)
	matches := 0
	for pr.stop < pr.end && !sc.exhausted() {
		recs, err := cons.Poll(ctx, 0)
		if errors.Is(err, transport.ErrOffsetOutOfRange) {
			// Retention removed records since the read began: go on from
			// the log start, if it moved past the position.
			offs, lerr := c.ListOffsets(ctx, topic, pr.partition)
			if lerr == nil && offs.LogStartOffset > pr.stop {
				pr.stop = min(offs.LogStartOffset, pr.end)
				cons.SeekTo(pr.stop)
				continue
			}
		}
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil // the leader has nothing below its high watermark there now: Next says to look again
		}
		for i := range recs {
			r := &recs[i]
			if r.Offset >= pr.end {
				pr.stop = pr.end
				return nil
			}
			if sc.exhausted() {
				return nil
			}
			sc.scanned++
			sc.bytes += r.EncodedSize()
			pr.stop = r.Offset + 1
			if !sc.q.matches(r) {
				continue
			}
			sc.offer(pr.partition, r)
			if matches++; !sc.newest() && matches == sc.q.limit {
				return nil
			}
		}
	}
	return nil
}

// offer keeps r in the answer if it comes before (for start=latest,
// after) one kept, giving that one up when the answer is full.
func (sc *scan) offer(p int32, r *record.Record) {
	a := at{timestamp: r.Timestamp, partition: p, offset: r.Offset}
	if len(sc.kept) == sc.q.limit {
		root := sc.kept[0].at
		replaces := sc.first(a, root)
		if sc.newest() {
			replaces = sc.first(root, a)
		}
		if !replaces {
			sc.giveUp(a)
			return
		}
		old := heap.Pop(sc).(kept)
		sc.shown -= old.shown
		sc.giveUp(old.at)
	}
	k := kept{at: a, m: messageOf(p, r), shown: shownSize(r)}
	heap.Push(sc, k)
	sc.shown += k.shown
}

// giveUp notes a matching record the answer leaves out. Keeping the
// first records, a later request must go on from it; keeping the last
// (start=latest), it is older than those shown, and left behind.
func (sc *scan) giveUp(a at) {
	if sc.newest() {
		return
	}
	if d, ok := sc.dropped[a.partition]; !ok || a.offset < d {
		sc.dropped[a.partition] = a.offset
	}
}

// answer is what the read found and where each partition goes on.
func (sc *scan) answer(plan []partRead) Messages {
	slices.SortFunc(sc.kept, func(a, b kept) int {
		switch {
		case sc.first(a.at, b.at):
			return -1
		case sc.first(b.at, a.at):
			return 1
		}
		return 0
	})
	out := Messages{Records: make([]Message, len(sc.kept)), Scanned: sc.scanned, Next: map[int32]int64{}}
	for i := range sc.kept {
		out.Records[i] = sc.kept[i].m
	}
	for _, pr := range plan {
		next := pr.stop
		if d, ok := sc.dropped[pr.partition]; ok && d < next {
			next = d
		}
		if next < pr.end {
			out.Next[pr.partition] = next
		}
	}
	out.Done = len(out.Next) == 0
	return out
}

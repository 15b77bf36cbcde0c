package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/durable"
	"gostream/metadata"
)

// fakeLeader is the leader a tail reads from: each read waits until the
// test answers it (answer), or its context ends.
type fakeLeader struct {
	polls   atomic.Int64
	pending chan fakePoll
}

type fakePoll struct {
	from string
	res  chan fakeAnswer
}

type fakeAnswer struct {
	res *durable.ReadResult
	err error
}

func newFakeLeader() *fakeLeader { return &fakeLeader{pending: make(chan fakePoll, 100)} }

func (f *fakeLeader) poll(ctx context.Context, _ *metadata.Topic, from string, _ int, _ time.Duration) (*durable.ReadResult, error) {
	f.polls.Add(1)
	p := fakePoll{from: from, res: make(chan fakeAnswer, 1)}
	f.pending <- p
	select {
	case a := <-p.res:
		return a.res, a.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// next returns the read the tail is waiting on.
func (f *fakeLeader) next(t *testing.T) fakePoll {
	t.Helper()
	select {
	case p := <-f.pending:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("the tail does not read")
		return fakePoll{}
	}
}

func tok(rec, b int64) string { return durable.Offset{Record: rec, Byte: b}.Token() }

var tailTopic = &metadata.Topic{Name: "__ds.t", ID: "id", Stream: &metadata.Stream{Path: "s", ContentType: "text/plain"}}

func startTails(t *testing.T) (*tails, *fakeLeader, *atomic.Int64) {
	f := newFakeLeader()
	var open atomic.Int64
	ts := newTails(f.poll, time.Minute, func(d int) { open.Add(int64(d)) })
	t.Cleanup(ts.close)
	return ts, f, &open
}

// readers waits n readers at position at, each for up to wait; it
// returns their answers once all have one.
func readers(ts *tails, n int, at string, wait time.Duration) func() ([]*durable.ReadResult, []error) {
	res := make([]*durable.ReadResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			now := &durable.ReadResult{Info: durable.Info{ContentType: "text/plain", Tail: at}, Start: at, Next: at, UpToDate: true}
			res[i], errs[i] = ts.wait(context.Background(), tailTopic, now, &durable.ReadRequest{Path: "s", Offset: at, MaxBytes: 1 << 20, Wait: wait})
		}()
	}
	return func() ([]*durable.ReadResult, []error) {
		wg.Wait()
		return res, errs
	}
}

func waiting(ts *tails) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, tl := range ts.mu.m {
		tl.mu.Lock()
		n += tl.mu.waiting
		tl.mu.Unlock()
	}
	return n
}

// The readers of one stream wait on one read from the leader, and each
// gets its answer when it comes; the next read starts where that one
// ended, and a reader answered from the tail waits on it again without
// a read of its own.
func TestTailServesItsReadersFromOneRead(t *testing.T) {
	ts, f, open := startTails(t)
	at := tok(3, 30)
	done := readers(ts, 200, at, time.Minute)
	p := f.next(t)
	assert.Equal(t, at, p.from)
	require.Eventually(t, func() bool { return waiting(ts) == 200 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, int64(1), open.Load(), "one tail for the stream")
	next := tok(4, 35)
	p.res <- fakeAnswer{res: &durable.ReadResult{Info: durable.Info{ContentType: "text/plain", Tail: next},
		Messages: []durable.Message{{Data: []byte("hello"), Next: next}}, Start: at, Next: next, UpToDate: true}}
	res, errs := done()
	for i := range res {
		require.NoError(t, errs[i])
		require.Len(t, res[i].Messages, 1)
		assert.Equal(t, "hello", string(res[i].Messages[0].Data))
		assert.Equal(t, next, res[i].Next)
	}
	p = f.next(t)
	assert.Equal(t, next, p.from, "the tail reads on from where it is")
	assert.Equal(t, int64(2), f.polls.Load(), "two reads from the leader for 200 readers")

	// The next read of a reader answered from the tail waits on it.
	var got *durable.ReadResult
	var ok bool
	var err error
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		got, ok, err = ts.waitAtTail(context.Background(), tailTopic, &durable.ReadRequest{Path: "s", Offset: next, MaxBytes: 1 << 20, Wait: time.Minute})
	}()
	require.Eventually(t, func() bool { return waiting(ts) == 1 }, 5*time.Second, time.Millisecond)
	last := tok(5, 36)
	p.res <- fakeAnswer{res: &durable.ReadResult{Messages: []durable.Message{{Data: []byte("!"), Next: last}}, Start: next, Next: last, UpToDate: true}}
	<-waited
	require.True(t, ok)
	require.NoError(t, err)
	assert.Equal(t, last, got.Next)
	p = f.next(t)
	assert.Equal(t, last, p.from)
	assert.Equal(t, int64(3), f.polls.Load(), "one read from the leader per answer")
}

// A reader behind the tail (the tail moved past it by another answer)
// is told to read from where it is; one whose wait ends gets the
// timed-out answer at its position; an answer larger than a reader's
// MaxBytes is cut for it.
func TestTailAnswersBehindTimedOutAndCut(t *testing.T) {
	ts, f, _ := startTails(t)
	a, b, c := tok(1, 1), tok(2, 2), tok(3, 4)
	done := readers(ts, 1, a, time.Minute)
	p := f.next(t)
	p.res <- fakeAnswer{res: &durable.ReadResult{Messages: []durable.Message{{Data: []byte("x"), Next: b}, {Data: []byte("yy"), Next: c}},
		Start: a, Next: c, UpToDate: true, Closed: false}}
	res, errs := done()
	require.NoError(t, errs[0])
	assert.Len(t, res[0].Messages, 2)
	f.next(t) // the tail waits at c

	// b is behind c, and the answer held is from a.
	_, err := ts.wait(context.Background(), tailTopic, &durable.ReadResult{Start: b, Next: b, UpToDate: true},
		&durable.ReadRequest{Offset: b, MaxBytes: 1 << 20, Wait: time.Minute})
	var behind *behindError
	require.ErrorAs(t, err, &behind)
	assert.Equal(t, b, behind.at)

	// A reader at a with room for one message gets the first, not up to
	// date.
	got, err := ts.wait(context.Background(), tailTopic, &durable.ReadResult{Start: a, Next: a, UpToDate: true},
		&durable.ReadRequest{Offset: a, MaxBytes: 1, Wait: time.Minute})
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	assert.Equal(t, b, got.Next)
	assert.False(t, got.UpToDate)

	start := time.Now()
	got, err = ts.wait(context.Background(), tailTopic, &durable.ReadResult{Info: durable.Info{Tail: c}, Start: c, Next: c, UpToDate: true},
		&durable.ReadRequest{Offset: c, MaxBytes: 1 << 20, Wait: 50 * time.Millisecond})
	require.NoError(t, err)
	assert.True(t, got.TimedOut)
	assert.Equal(t, c, got.Next)
	assert.Empty(t, got.Messages)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
}

// A read from the leader that fails reaches every reader waiting on it,
// at once: none is left waiting on a tail that does not read. A reader
// that comes after waits on the tail's next read.
func TestTailFailureReachesItsReaders(t *testing.T) {
	ts, f, _ := startTails(t)
	at := tok(7, 70)
	done := readers(ts, 50, at, time.Minute)
	p := f.next(t)
	require.Eventually(t, func() bool { return waiting(ts) == 50 }, 5*time.Second, time.Millisecond)
	boom := errors.New("the stream's leader, broker 1: presumed dead")
	p.res <- fakeAnswer{err: boom}
	_, errs := done()
	for _, err := range errs {
		assert.ErrorIs(t, err, boom)
	}

	later := readers(ts, 1, at, time.Minute)
	p = f.next(t) // after the backoff
	assert.Equal(t, at, p.from)
	next := tok(8, 71)
	p.res <- fakeAnswer{res: &durable.ReadResult{Messages: []durable.Message{{Data: []byte("z"), Next: next}}, Start: at, Next: next, UpToDate: true}}
	res, errs := later()
	require.NoError(t, errs[0], "a reader that came after the failure is not handed it")
	assert.Equal(t, next, res[0].Next)
}

// A tail ends once a read returns with no reader left, and ends at once
// when the stream is closed at its tail; close stops every tail, wakes
// their readers and refuses new ones.
func TestTailEnds(t *testing.T) {
	ts, f, open := startTails(t)
	at := tok(1, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go ts.wait(ctx, tailTopic, &durable.ReadResult{Start: at, Next: at}, &durable.ReadRequest{Offset: at, Wait: time.Minute})
	p := f.next(t)
	require.Eventually(t, func() bool { return waiting(ts) == 1 }, 5*time.Second, time.Millisecond)
	cancel()
	require.Eventually(t, func() bool { return waiting(ts) == 0 }, 5*time.Second, time.Millisecond)
	p.res <- fakeAnswer{res: &durable.ReadResult{Start: at, Next: at, UpToDate: true, TimedOut: true}}
	require.Eventually(t, func() bool { return open.Load() == 0 }, 5*time.Second, time.Millisecond, "no reader left: the tail ends")

	done := readers(ts, 3, at, time.Minute)
	p = f.next(t)
	require.Eventually(t, func() bool { return waiting(ts) == 3 }, 5*time.Second, time.Millisecond)
	p.res <- fakeAnswer{res: &durable.ReadResult{Start: at, Next: at, UpToDate: true, Closed: true}}
	res, errs := done()
	for i := range res {
		require.NoError(t, errs[i])
		assert.True(t, res[i].Closed)
	}
	require.Eventually(t, func() bool { return open.Load() == 0 }, 5*time.Second, time.Millisecond, "closed at its tail: the tail ends")

	done = readers(ts, 2, at, time.Minute)
	f.next(t)
	require.Eventually(t, func() bool { return waiting(ts) == 2 }, 5*time.Second, time.Millisecond)
	ts.close()
	assert.Equal(t, int64(0), open.Load())
	_, errs = done()
	for _, err := range errs {
		assert.ErrorIs(t, err, errTailsClosed, "a reader of a stopped tail joins none")
	}
}

// Tails of different streams are apart: a reader of one is never woken
// by another's answer.
func TestTailsOfStreamsAreApart(t *testing.T) {
	ts, f, open := startTails(t)
	other := &metadata.Topic{Name: "__ds.u", ID: "id2", Stream: &metadata.Stream{Path: "u"}}
	at := tok(1, 1)
	first := readers(ts, 1, at, time.Minute)
	p1 := f.next(t)
	var res2 *durable.ReadResult
	done2 := make(chan error, 1)
	go func() {
		var err error
		res2, err = ts.wait(context.Background(), other, &durable.ReadResult{Start: at, Next: at}, &durable.ReadRequest{Offset: at, Wait: 200 * time.Millisecond})
		done2 <- err
	}()
	p2 := f.next(t)
	assert.Equal(t, int64(2), open.Load())
	next := tok(2, 2)
	p1.res <- fakeAnswer{res: &durable.ReadResult{Messages: []durable.Message{{Data: []byte("a"), Next: next}}, Start: at, Next: next}}
	res, errs := first()
	require.NoError(t, errs[0])
	assert.Equal(t, next, res[0].Next)
	require.NoError(t, <-done2)
	assert.True(t, res2.TimedOut, fmt.Sprintf("%+v", res2))
	p2.res <- fakeAnswer{res: &durable.ReadResult{Start: at, Next: at, TimedOut: true}}
}

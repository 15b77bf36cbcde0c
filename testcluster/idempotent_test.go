package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
)

// resendLine is what the Go client's producer logs when it decides to
// send batches again.
const resendLine = "sending batches again"

// logWatch is a client's logger output: it passes each line to the
// test's log while the test runs, and counts the lines that hold want.
type logWatch struct {
	t    testing.TB
	want string
	seen atomic.Int32
	mu   sync.Mutex
	done bool
}

func newLogWatch(t testing.TB, want string) *logWatch {
	w := &logWatch{t: t, want: want}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *logWatch) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.seen.Add(1)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// idempotentClient is a Go client of c whose producer's decisions to send
// batches again are counted by the returned watch.
func idempotentClient(t *testing.T, c *Cluster, requestTimeout time.Duration) (*client.Client, *logWatch) {
	t.Helper()
	w := newLogWatch(t, resendLine)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, c.Secured(client.Config{Bootstrap: strings.Split(c.Bootstrap(), ","), RequestTimeout: requestTimeout,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: w})}))
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close() })
	return cl, w
}

// partitionValues reads a partition with gostream-ctl consume -o json:
// each record's value (a number) by offset, in offset order. A value
// found twice fails the test.
func partitionValues(t *testing.T, c *Cluster, topic string, partition int32) (values []int, offsets map[int]int64) {
	t.Helper()
	out := ctlOK(t, c, "consume", topic, "--partition", fmt.Sprint(partition), "-o", "json").Stdout
	offsets = map[int]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r ctlRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		v, err := strconv.Atoi(r.Value)
		require.NoError(t, err, line)
		if off, dup := offsets[v]; dup {
			t.Fatalf("record %d is in %s/%d twice, at offsets %d and %d", v, topic, partition, off, r.Offset)
		}
		offsets[v] = r.Offset
		values = append(values, v)
	}
	return values, offsets
}

// An idempotent Go producer sends a batch to a leader that is paused
// (SIGSTOP) past the request timeout: the attempt's answer never comes,
// so the producer sends the batch again, and again, until the leader runs
// again (SIGCONT). The leader then reads the first attempt, appends it,
// and answers every copy as a duplicate: each record is in the partition
// once, acknowledged at the offset it has. (A producer without
// idempotence ends such a record with ErrUnknownOutcome.)
func TestIdempotentGoProducerResendsWhileTheLeaderIsPaused(t *testing.T) {
	c := startCluster(t, 3)
	admin := newClient(t, c)
	tm := createTopic(t, admin, "idem", 2, 3)
	const part = 1
	leader := c.Node(tm.Partitions[part].Leader)
	require.NotEqual(t, int32(1), leader.ID, "round-robin placement: the controller's node leads partition 0 only")

	cl, resends := idempotentClient(t, c, time.Second)
	p, err := client.NewProducer(cl, client.ProducerConfig{Idempotent: true, DeliveryTimeout: 2 * time.Minute})
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	send := func(v int) (client.Ack, error) {
		return p.Send(ctx, client.ProducerRecord{Topic: "idem", Partition: part, ManualPartition: true, Value: []byte(strconv.Itoa(v))})
	}
	acks := map[int]int64{}
	for v := range 10 {
		ack, err := send(v)
		require.NoError(t, err)
		acks[v] = ack.Offset
	}

	require.NoError(t, leader.Pause())
	resumed := false
	defer func() {
		if !resumed {
			_ = leader.Resume()
		}
	}()
	type result struct {
		v   int
		ack client.Ack
		err error
	}
	results := make(chan result, 10)
	for v := 10; v < 20; v++ {
		p.SendAsync(client.ProducerRecord{Topic: "idem", Partition: part, ManualPartition: true, Value: []byte(strconv.Itoa(v))},
			func(a client.Ack, err error) { results <- result{v, a, err} })
	}
	// The first attempt timed out, and its batch is being sent again:
	// twice, so that the leader has copies to find duplicate. (Without
	// idempotence the records end with an error instead.)
	require.Eventually(t, func() bool { return resends.seen.Load() >= 2 || len(results) > 0 }, 30*time.Second, 20*time.Millisecond,
		"the producer sends the batch again while the leader is paused")
	require.NoError(t, leader.Resume())
	resumed = true
	for range 10 {
		select {
		case r := <-results:
			require.NoError(t, r.err, "record %d", r.v)
			acks[r.v] = r.ack.Offset
		case <-ctx.Done():
			t.Fatal("records sent while the leader was paused have no outcome")
		}
	}
	ack, err := send(20)
	require.NoError(t, err)
	acks[20] = ack.Offset

	values, offsets := partitionValues(t, c, "idem", part)
	want := make([]int, 21)
	for i := range want {
		want[i] = i
	}
	assert.Equal(t, want, values, "every record once, in the order sent")
	for v, off := range acks {
		assert.Equal(t, offsets[v], off, "record %d acknowledged at the offset it has", v)
	}
	t.Logf("the producer decided %d times to send batches again", resends.seen.Load())
}

// An idempotent Go producer writes a steady stream to a partition of an
// RF=3 topic while the node that leads it is paused, then killed (-9),
// and the operator fails it over: every record is acknowledged (the
// batches the dead leader never answered are sent again to the new one,
// which answers those it has as duplicates and appends the others), and
// the partition holds each record once, in the order given.
func TestIdempotentGoProducerAcrossFailover(t *testing.T) {
	c := startCluster(t, 3)
	admin := newClient(t, c)
	tm := createTopic(t, admin, "idem", 3, 3)
	// A partition the controller's node (1) does not lead: that node
	// must live to fail the other over.
	part, victim := int32(-1), int32(0)
	for _, p := range tm.Partitions {
		if p.Leader != 1 {
			part, victim = p.Partition, p.Leader
			break
		}
	}
	require.NotEqual(t, int32(-1), part, "a partition led by node 2 or 3: %+v", tm.Partitions)

	cl, resends := idempotentClient(t, c, 2*time.Second)
	p, err := client.NewProducer(cl, client.ProducerConfig{Idempotent: true, Linger: 2 * time.Millisecond, DeliveryTimeout: 2 * time.Minute})
	require.NoError(t, err)
	defer p.Close()

	var (
		mu     sync.Mutex
		given  int
		acked  = map[int]int64{}
		failed []error
	)
	counts := func() (int, int, int) {
		mu.Lock()
		defer mu.Unlock()
		return given, len(acked), len(failed)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p.SendAsync(client.ProducerRecord{Topic: "idem", Partition: part, ManualPartition: true, Value: []byte(strconv.Itoa(i))},
				func(a client.Ack, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						failed = append(failed, fmt.Errorf("record %d: %w", i, err))
						return
					}
					acked[i] = a.Offset
				})
			mu.Lock()
			given = i + 1
			mu.Unlock()
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond) // a steady stream, not a flood
			}
		}
	}()
	waitAcked := func(n int, what string) {
		t.Helper()
		require.Eventually(t, func() bool { _, a, _ := counts(); return a >= n }, 90*time.Second, 20*time.Millisecond,
			"%s: %d acknowledged", what, n)
	}
	waitAcked(2000, "before the pause")

	// Paused, the leader answers nothing: batches sent to it stay in
	// flight until they time out, and are then sent again (or, without
	// idempotence, fail as their outcome is unknown).
	require.NoError(t, c.Node(victim).Pause())
	require.Eventually(t, func() bool { _, _, f := counts(); return resends.seen.Load() > 0 || f > 0 }, 30*time.Second, 20*time.Millisecond,
		"a batch sent to the paused leader timed out")
	require.NoError(t, c.Node(victim).Kill())
	ctlOK(t, c, "failover", "--broker", fmt.Sprint(victim))
	_, before, _ := counts()
	waitAcked(before+2000, "after the failover")
	close(stop)
	<-done
	flushCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, p.Flush(flushCtx))

	mu.Lock()
	defer mu.Unlock()
	require.Zero(t, len(failed), "every record is acknowledged; the first failures: %v", failed[:min(3, len(failed))])
	require.Len(t, acked, given)
	values, offsets := partitionValues(t, c, "idem", part)
	for i, v := range values {
		require.Equal(t, i, v, "the partition holds every record once, in the order given")
	}
	require.Len(t, values, given)
	for v, off := range acked {
		assert.Equal(t, offsets[v], off, "record %d acknowledged at the offset it has", v)
	}
	t.Logf("%d records, %d of them acknowledged after the failover command returned; the producer decided %d times to send batches again",
		given, given-before, resends.seen.Load())
}

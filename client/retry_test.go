package client

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/transport"
)

func TestRetryBackoffIsCappedExponentialWithJitter(t *testing.T) {
	p := retryPolicy{backoff: 25 * time.Millisecond, backoffMax: time.Second}
	for i, want := range []time.Duration{25, 50, 100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.wait(i + 1)
			require.GreaterOrEqual(t, d, want/2, "retry %d", i+1)
			require.LessOrEqual(t, d, want, "retry %d", i+1)
			seen[d] = true
		}
		assert.Greater(t, len(seen), 1, "retry %d: the wait is drawn at random", i+1)
	}
	assert.LessOrEqual(t, p.wait(1000), time.Second, "no overflow after many retries")
	huge := retryPolicy{backoff: time.Hour, backoffMax: 2 * time.Hour}
	assert.Equal(t, 2*time.Hour, huge.ceiling(40), "no overflow of a long backoff")
}

// failTimes makes a fault hook that fails n times with err, then passes.
// It runs under the fake's lock; read *calls through fc.set.
func failTimes(n int, err error, calls *int) func() error {
	return func() error {
		*calls++
		if *calls <= n {
			return err
		}
		return nil
	}
}

// TestRetriesNotReadyUntilItPasses: a partition that is not ready yet
// (NotReady), reached by every kind of call, is asked again until it
// answers; nothing is done twice.
func TestRetriesNotReadyUntilItPasses(t *testing.T) {
	notReady := fmt.Errorf("%w: broker 1 has no metadata yet", transport.ErrNotReady)
	tests := []struct {
		name   string
		inject func(fc *fakeCluster, hook func() error)
		call   func(ctx context.Context, c *Client) error
		check  func(t *testing.T, fc *fakeCluster)
	}{
		{
			name: "list offsets",
			inject: func(fc *fakeCluster, hook func() error) {
				fc.listOffsetsErr = func(int32, string, int32) error { return hook() }
			},
			call: func(ctx context.Context, c *Client) error {
				offs, err := c.ListOffsets(ctx, "t", 0)
				if err == nil && offs.HighWatermark != 1 {
					err = fmt.Errorf("high watermark %d", offs.HighWatermark)
				}
				return err
			},
		},
		{
			name:   "fetch",
			inject: func(fc *fakeCluster, hook func() error) { fc.fetchErr = hook },
			call: func(ctx context.Context, c *Client) error {
				cons, err := NewConsumer(c, "t", 0, ConsumerConfig{})
				if err != nil {
					return err
				}
				recs, err := cons.Poll(ctx, 0)
				if err == nil && len(recs) != 1 {
					err = fmt.Errorf("%d records", len(recs))
				}
				return err
			},
		},
		{
			name: "produce",
			inject: func(fc *fakeCluster, hook func() error) {
				fc.produceErr = func(int32, []string) error { return hook() }
			},
			call: func(ctx context.Context, c *Client) error {
				p, err := NewProducer(c, ProducerConfig{Linger: -1})
				if err != nil {
					return err
				}
				defer p.Close()
				_, err = p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("new")})
				return err
			},
			check: func(t *testing.T, fc *fakeCluster) {
				assert.Equal(t, 1, fc.appendedCount("new"), "appended once")
			},
		},
		{
			name: "create topic",
			inject: func(fc *fakeCluster, hook func() error) {
				fc.adminErr = func(transport.API) error { return hook() }
			},
			call: func(ctx context.Context, c *Client) error {
				_, err := c.CreateTopic(ctx, "u", 2, 1)
				return err
			},
			check: func(t *testing.T, fc *fakeCluster) {
				fc.set(func(fc *fakeCluster) { assert.Contains(t, fc.topics, "u") })
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			fc.addTopic("t", 1)
			fc.appendValues("t", 0, "old")
			c := newTestClient(t, fc, nil)
			calls := 0
			// More refusals than a fixed count of retries would outlast.
			fc.set(func(fc *fakeCluster) { tt.inject(fc, failTimes(8, notReady, &calls)) })
			require.NoError(t, tt.call(testCtx(t), c))
			fc.set(func(*fakeCluster) { assert.Equal(t, 9, calls, "eight refusals, then the answer") })
			if tt.check != nil {
				tt.check(t, fc)
			}
		})
	}
}

// TestFinalErrorsAreNotRetried: an error that a retry cannot fix comes
// back at once, after one request.
func TestFinalErrorsAreNotRetried(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, nil)
	ctx := testCtx(t)
	calls := 0
	storage := fmt.Errorf("%w: injected", transport.ErrStorageFailed)

	fc.set(func(fc *fakeCluster) {
		fc.listOffsetsErr = func(int32, string, int32) error { return failTimes(1, storage, &calls)() }
	})
	_, err := c.ListOffsets(ctx, "t", 0)
	require.ErrorIs(t, err, transport.ErrStorageFailed)
	fc.set(func(*fakeCluster) { assert.Equal(t, 1, calls) })

	start := time.Now()
	_, err = c.ListOffsets(ctx, "nope", 0)
	require.ErrorIs(t, err, transport.ErrUnknownTopic)
	_, err = c.ListOffsets(ctx, "t", 3)
	require.ErrorIs(t, err, transport.ErrUnknownPartition)
	assert.Less(t, time.Since(start), time.Second, "a topic or partition the cluster does not have is not waited for")

	fc.set(func(fc *fakeCluster) {
		fc.adminErr = func(transport.API) error { return transport.ErrInvalidPartitions }
	})
	_, err = c.CreateTopic(ctx, "u", 1, 1)
	require.ErrorIs(t, err, transport.ErrInvalidPartitions)
	assert.Equal(t, 1, fc.count(1, transport.APICreateTopic))
}

// TestRetriesStopAtTheDeadline: a partition that never gets ready fails
// the call before its context's deadline (or RetryTimeout, for a context
// without one), with the last error, naming the partition.
func TestRetriesStopAtTheDeadline(t *testing.T) {
	for _, withDeadline := range []bool{true, false} {
		t.Run(fmt.Sprintf("context deadline %v", withDeadline), func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			fc.addTopic("t", 2)
			const budget = 400 * time.Millisecond
			c := newTestClient(t, fc, func(cfg *Config) {
				cfg.RetryBackoff = 10 * time.Millisecond
				if !withDeadline {
					cfg.RetryTimeout = budget
				}
			})
			calls := 0
			fc.set(func(fc *fakeCluster) {
				fc.listOffsetsErr = func(_ int32, _ string, p int32) error {
					if p != 1 {
						return nil
					}
					calls++
					return fmt.Errorf("%w: attempt %d", transport.ErrNotReady, calls)
				}
			})
			ctx := context.Background()
			if withDeadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, budget)
				defer cancel()
			}
			start := time.Now()
			_, err := c.ListOffsets(ctx, "t", 1)
			took := time.Since(start)
			require.ErrorIs(t, err, transport.ErrNotReady)
			assert.LessOrEqual(t, took, budget+50*time.Millisecond)
			assert.GreaterOrEqual(t, took, budget/2, "retried for most of the budget")
			var n int
			fc.set(func(*fakeCluster) { n = calls })
			assert.Greater(t, n, 3)
			assert.Contains(t, err.Error(), "list offsets of t/1: ")
			assert.Contains(t, err.Error(), fmt.Sprintf("attempt %d", n), "the last attempt's error")
			assert.Contains(t, err.Error(), fmt.Sprintf("%d attempts in ", n))
		})
	}
}

// TestCanceledRetryKeepsTheLastError: a context that ends while the call
// waits to retry gives the error that made it wait, matching the
// context's error too.
func TestCanceledRetryKeepsTheLastError(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, func(cfg *Config) {
		cfg.RetryBackoff, cfg.RetryBackoffMax, cfg.RetryTimeout = time.Minute, time.Minute, time.Hour
	})
	fc.set(func(fc *fakeCluster) {
		fc.listOffsetsErr = func(int32, string, int32) error { return fmt.Errorf("%w: injected", transport.ErrNotLeader) }
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := c.ListOffsets(ctx, "t", 0)
	require.ErrorIs(t, err, transport.ErrNotLeader)
	assert.ErrorIs(t, err, context.Canceled)
}

// TestProduceRetriesEndBeforeTheSendDeadline: a batch refused with
// NotLeader (provably not appended) is sent again until its Send's
// deadline nears, and then fails as not appended, with the last error,
// before the deadline: not as an unknown outcome.
func TestProduceRetriesEndBeforeTheSendDeadline(t *testing.T) {
	fc := newFakeCluster(t, 1)
	fc.addTopic("t", 1)
	c := newTestClient(t, fc, func(cfg *Config) { cfg.RetryBackoff = 20 * time.Millisecond })
	fc.set(func(fc *fakeCluster) {
		fc.produceErr = func(int32, []string) error { return fmt.Errorf("%w: injected", transport.ErrNotLeader) }
	})
	p := newTestProducer(t, c, ProducerConfig{Linger: -1})
	const budget = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	_, err := p.Send(ctx, ProducerRecord{Topic: "t", Value: []byte("x")})
	require.ErrorIs(t, err, ErrNotAppended)
	require.ErrorIs(t, err, transport.ErrNotLeader)
	assert.NotErrorIs(t, err, ErrUnknownOutcome)
	assert.NoError(t, ctx.Err(), "the outcome came before the deadline")
	assert.Contains(t, err.Error(), "produce to t/0")
	assert.Contains(t, err.Error(), "not sent again: its deadline leaves no time for another attempt")
	assert.Greater(t, fc.produceRequests(), 3)
	assert.Zero(t, fc.appendedCount("x"))

	// SendAsync's records have DeliveryTimeout.
	p2 := newTestProducer(t, c, ProducerConfig{Linger: -1, DeliveryTimeout: 300 * time.Millisecond})
	done := make(chan error, 1)
	start := time.Now()
	p2.SendAsync(ProducerRecord{Topic: "t", Value: []byte("y")}, func(_ Ack, err error) { done <- err })
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrNotAppended)
		assert.ErrorIs(t, err, transport.ErrNotLeader)
		assert.Less(t, time.Since(start), 300*time.Millisecond+100*time.Millisecond)
	case <-time.After(10 * time.Second):
		t.Fatal("DeliveryTimeout did not end the retries")
	}
}

// TestAmbiguousProduceIsNotRetried: an answer after which the batch may
// be in the log is the record's outcome, sent once.
func TestAmbiguousProduceIsNotRetried(t *testing.T) {
	for _, wireErr := range []*transport.Error{transport.ErrReplicationFailed, transport.ErrTimeout, transport.ErrShuttingDown, transport.ErrNoSpace, transport.ErrStorageFailed} {
		t.Run(wireErr.Code.String(), func(t *testing.T) {
			fc := newFakeCluster(t, 1)
			fc.addTopic("t", 1)
			c := newTestClient(t, fc, nil)
			fc.set(func(fc *fakeCluster) {
				fc.produceErr = func(int32, []string) error { return fmt.Errorf("%w: injected", wireErr) }
			})
			p := newTestProducer(t, c, ProducerConfig{Linger: -1})
			_, err := p.Send(testCtx(t), ProducerRecord{Topic: "t", Value: []byte("x")})
			require.ErrorIs(t, err, ErrUnknownOutcome)
			require.ErrorIs(t, err, wireErr)
			assert.Equal(t, 1, fc.produceRequests())
		})
	}
}

// TestNewRetriesUntilABrokerAnswers: a client started while its cluster
// is still starting connects once a broker listens.
func TestNewRetriesUntilABrokerAnswers(t *testing.T) {
	fc := newFakeCluster(t, 1)
	addr := fc.brokers[1].addr
	fc.stop(1)
	up := make(chan struct{})
	const startsAfter = 300 * time.Millisecond
	time.AfterFunc(startsAfter, func() {
		defer close(up)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		fc.brokers[1].serve(ln)
	})
	defer func() { <-up }()
	start := time.Now()
	c, err := New(testCtx(t), Config{Bootstrap: []string{addr}, Logger: testLogger(t), RetryBackoff: 10 * time.Millisecond})
	require.NoError(t, err)
	defer c.Close()
	assert.GreaterOrEqual(t, time.Since(start), startsAfter)
}

// TestCreateTopicWaitsUntilEveryPartitionServes: CreateTopic returns once
// every partition's leader answers, so that what follows it works.
func TestCreateTopicWaitsUntilEveryPartitionServes(t *testing.T) {
	fc := newFakeCluster(t, 3)
	c := newTestClient(t, fc, nil)
	ready := false
	asked := map[int32]int{}
	fc.set(func(fc *fakeCluster) {
		fc.listOffsetsErr = func(_ int32, _ string, p int32) error {
			asked[p]++
			if p == 2 && !ready {
				return fmt.Errorf("%w: partition t/2 is led by broker -1", transport.ErrNotLeader)
			}
			return nil
		}
	})
	type created struct {
		t   TopicMetadata
		err error
	}
	done := make(chan created, 1)
	go func() {
		tm, err := c.CreateTopic(testCtx(t), "t", 4, 1)
		done <- created{tm, err}
	}()
	require.Never(t, func() bool { return len(done) > 0 }, 300*time.Millisecond, 10*time.Millisecond,
		"CreateTopic returned while partition 2 could not serve")
	fc.set(func(*fakeCluster) { ready = true })
	select {
	case r := <-done:
		require.NoError(t, r.err)
		assert.Len(t, r.t.Partitions, 4)
	case <-time.After(10 * time.Second):
		t.Fatal("CreateTopic did not return once every partition served")
	}
	fc.set(func(*fakeCluster) {
		for p := int32(0); p < 4; p++ {
			assert.Positive(t, asked[p], "partition %d was asked", p)
		}
		assert.Greater(t, asked[2], 1, "partition 2 was asked again")
	})
}

// TestCreateTopicNamesThePartitionsThatCannotServe: when the deadline
// ends first, CreateTopic returns the topic and an error that names the
// partitions that cannot serve yet, with their last errors.
func TestCreateTopicNamesThePartitionsThatCannotServe(t *testing.T) {
	fc := newFakeCluster(t, 2)
	c := newTestClient(t, fc, nil)
	fc.set(func(fc *fakeCluster) {
		fc.listOffsetsErr = func(_ int32, topic string, p int32) error {
			if p == 1 || p == 3 {
				return fmt.Errorf("%w: partition %s/%d is waiting to hear from its followers", transport.ErrNotReady, topic, p)
			}
			return nil
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	tm, err := c.CreateTopic(ctx, "orders", 4, 1)
	require.ErrorIs(t, err, ErrNotServing)
	require.ErrorIs(t, err, transport.ErrNotReady)
	assert.Equal(t, "orders", tm.Name, "the topic was created")
	assert.Len(t, tm.Partitions, 4)
	msg := err.Error()
	assert.Contains(t, msg, `topic "orders" was created, but 2 of its 4 partitions cannot serve yet`)
	assert.Contains(t, msg, "(orders/1, orders/3)")
	assert.Contains(t, msg, "orders/1: NotReady: partition orders/1 is waiting to hear from its followers")
	assert.Contains(t, msg, "orders/3: NotReady: partition orders/3 is waiting")
	assert.NotContains(t, msg, "orders/0")
}

// TestAdminChangesRetryOnlyWhatWasNotDone: a change the controller refused
// before acting (Busy) is sent again; one whose answer leaves it unknown
// (ShuttingDown may come after the change) is not.
func TestAdminChangesRetryOnlyWhatWasNotDone(t *testing.T) {
	fc := newFakeCluster(t, 1)
	c := newTestClient(t, fc, nil)
	calls := 0
	busy := fmt.Errorf("%w: the node's request memory is in use; retry", transport.ErrBusy)
	fc.set(func(fc *fakeCluster) { fc.adminErr = func(transport.API) error { return failTimes(2, busy, &calls)() } })
	_, err := c.CreateTopic(testCtx(t), "a", 1, 1)
	require.NoError(t, err)
	assert.Equal(t, 3, fc.count(1, transport.APICreateTopic))

	fc.set(func(fc *fakeCluster) {
		fc.adminErr = func(transport.API) error { return fmt.Errorf("%w: injected", transport.ErrShuttingDown) }
	})
	err = c.SealTopic(testCtx(t), "a")
	require.ErrorIs(t, err, transport.ErrShuttingDown)
	assert.Equal(t, 1, fc.count(1, transport.APISealTopic))
}

// deadlineOnly is a context whose deadline has passed and that does not
// say so yet, as a context is a moment after its deadline, before its
// timer fires.
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }

// TestRetrierKeepsTheAnswerOverTheDeadlinesCut: an attempt that failed
// only because the deadline cut it off (a dial's i/o timeout, returned
// before the context's own timer fired) does not hide the answer before
// it.
func TestRetrierKeepsTheAnswerOverTheDeadlinesCut(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := newRetrier(ctx, retryPolicy{backoff: time.Millisecond, backoffMax: time.Millisecond})
	answer := fmt.Errorf("%w: partition t/1 is waiting to hear from its followers", transport.ErrNotReady)
	require.NoError(t, r.again(ctx, answer))
	late := deadlineOnly{Context: context.Background(), d: time.Now().Add(-time.Millisecond)}
	err := r.again(late, fmt.Errorf("%w: dial 127.0.0.1:1: i/o timeout", transport.ErrBrokerNotAvailable))
	require.Error(t, err)
	assert.ErrorIs(t, err, transport.ErrNotReady, "the last answer is kept")
	assert.NotContains(t, err.Error(), "i/o timeout")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestADialTimeoutIsRetriable: a broker that did not take a connection
// within the dial timeout (a partitioned or stopped host) is
// BrokerNotAvailable, worth another attempt while the caller's deadline
// lasts, although Go's dial timeout also matches context.DeadlineExceeded.
// Only the caller's own context ending stops the retries. A client that
// took the dial's timeout for the caller's gave up at once with the dial
// error, hiding the answer before it.
func TestADialTimeoutIsRetriable(t *testing.T) {
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, err := transport.Dial(expired, "127.0.0.1:1", transport.ConnConfig{})
	require.ErrorIs(t, err, transport.ErrBrokerNotAvailable)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Go's dial timeout matches the context's error")
	assert.True(t, retriable(err), "%v", err)
	assert.True(t, retriableRoute(err), "%v", err)

	// The caller's own context ending is still final.
	assert.False(t, retriable(context.DeadlineExceeded))
	assert.False(t, retriable(fmt.Errorf("list offsets: %w", context.Canceled)))

	// And within a call: the retrier hands it to again, which gives up
	// at the caller's deadline with the answer before it.
	live, cancelLive := context.WithTimeout(context.Background(), time.Minute)
	defer cancelLive()
	assert.True(t, retryOn(live, err, retriableRoute))
	late := deadlineOnly{Context: context.Background(), d: time.Now().Add(-time.Millisecond)}
	assert.True(t, retryOn(late, err, retriableRoute))
}

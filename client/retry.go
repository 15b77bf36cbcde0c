package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"gostream/transport"
)

// Retry defaults (see Config and the package documentation).
const (
	// DefaultRetryTimeout is Config.RetryTimeout unless configured: how
	// long a call whose context has no deadline goes on retrying.
	DefaultRetryTimeout = 15 * time.Second
	// DefaultRetryBackoff is Config.RetryBackoff unless configured: the
	// wait before the first retry.
	DefaultRetryBackoff = 25 * time.Millisecond
	// DefaultRetryBackoffMax is Config.RetryBackoffMax unless configured:
	// the longest wait between two attempts.
	DefaultRetryBackoffMax = time.Second
)

// retryPolicy is the part of a config that paces retries.
type retryPolicy struct {
	timeout    time.Duration // the budget of a call whose context has no deadline
	backoff    time.Duration // the first wait
	backoffMax time.Duration // the cap of every wait
	retries    int           // 0: no cap but the deadline; negative: none
}

func (c *Client) retryPolicy() retryPolicy {
	return retryPolicy{timeout: c.cfg.RetryTimeout, backoff: c.cfg.RetryBackoff, backoffMax: c.cfg.RetryBackoffMax, retries: c.cfg.Retries}
}

// ceiling is the longest wait before retry n (n >= 1): the first backoff
// doubled n-1 times, capped.
func (p retryPolicy) ceiling(n int) time.Duration {
	d := p.backoff
	for i := 1; i < n && d < p.backoffMax; i++ {
		d *= 2
	}
	return min(d, p.backoffMax)
}

// wait returns the wait before retry n (n >= 1): its ceiling drawn
// uniformly from the upper half, so that clients that failed together do
// not come back together.
func (p retryPolicy) wait(n int) time.Duration {
	d := p.ceiling(n)
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2+1)
}

// retrier paces the attempts of one call: after each failed attempt it
// waits a capped exponential backoff with jitter, until the call's
// deadline (its context's, or RetryTimeout after it began), and then
// gives up with the last attempt's error.
type retrier struct {
	policy   retryPolicy
	start    time.Time
	deadline time.Time
	attempts int   // attempts that failed so far
	last     error // the last failure not caused by the caller's context ending
}

func newRetrier(ctx context.Context, p retryPolicy) *retrier {
	r := &retrier{policy: p, start: time.Now()}
	if d, ok := ctx.Deadline(); ok {
		r.deadline = d
	} else {
		r.deadline = r.start.Add(p.timeout)
	}
	return r
}

// again is called after an attempt failed with a retriable error err. It
// waits before the next attempt and returns nil, or returns the error to
// give up with when no attempt is left: the context ended, the next one
// could not begin before the deadline, or Retries are used up. That error
// is the last attempt's (an attempt cut short by the context's end does
// not hide the one before it), with how many attempts were made and for
// how long, and it matches the context's error when the context ended.
func (r *retrier) again(ctx context.Context, err error) error {
	r.attempts++
	ended := ctxEnded(ctx)
	if !ended || r.last == nil {
		r.last = err
	}
	if ended {
		if r.attempts == 1 {
			return err // the only attempt ended with the context: no retry to tell of
		}
		why := ctx.Err()
		if why == nil {
			why = context.DeadlineExceeded
		}
		return r.giveUp(why)
	}
	if r.policy.retries < 0 || r.policy.retries > 0 && r.attempts > r.policy.retries {
		return r.giveUp(fmt.Errorf("%d retries allowed", max(r.policy.retries, 0)))
	}
	// The last wait is cut short so that one more attempt begins before
	// the deadline, with the first backoff's time left for it.
	d := min(r.policy.wait(r.attempts), time.Until(r.deadline)-r.policy.backoff)
	if d <= 0 {
		return r.giveUp(errors.New("the deadline leaves no time for another"))
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return r.giveUp(ctx.Err())
	}
}

func (r *retrier) giveUp(why error) error {
	return fmt.Errorf("%w (%s in %s: %w)", r.last, plural(r.attempts, "attempt"),
		time.Since(r.start).Round(time.Millisecond), why)
}

// retriable reports whether a request that changes nothing (or whose
// answer proves it changed nothing) may succeed if sent again: its error
// has a retriable code in transport's table (NotLeader, NotReady,
// BrokerNotAvailable, ShuttingDown, Busy, Timeout, UnknownTopicID, ...).
// The client's own final errors (ErrClosed, ErrTopicRecreated) and the
// caller's context ending are not. The transport's code decides first: a
// dial that timed out is BrokerNotAvailable even though Go's dial timeout
// also matches context.DeadlineExceeded; if it was the caller's deadline
// that cut it, the retrier's again sees that and gives up.
func retriable(err error) bool {
	if err == nil || errors.Is(err, ErrClosed) || errors.Is(err, ErrTopicRecreated) {
		return false
	}
	var te *transport.Error
	return errors.As(err, &te) && te.Code.Retriable()
}

// retriableRoute is retriable for a partition request, which may also
// have gone to a broker that does not know the topic or partition yet
// (UnknownTopic, UnknownPartition): a metadata refresh between attempts
// tells whether it exists.
func retriableRoute(err error) bool {
	if retriable(err) {
		return true
	}
	if errors.Is(err, ErrClosed) || isContextErr(err) {
		return false
	}
	return errors.Is(err, transport.ErrUnknownTopic) || errors.Is(err, transport.ErrUnknownPartition)
}

// retryOn reports whether a call's loop should hand err to again: err is
// retriable by ok, or the caller's context ended during the attempt (then
// again gives up with the error before it).
func retryOn(ctx context.Context, err error, ok func(error) bool) bool {
	return ok(err) || ctxEnded(ctx) && isContextErr(err)
}

// ctxEnded reports whether ctx has ended. A dial or read cut off by the
// deadline may return a moment before the context says it ended (its
// timer has not fired yet): past the deadline counts as ended.
func ctxEnded(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// refreshRetrying is RefreshMetadata retried, within ctx's deadline (or
// RetryTimeout), while no broker answers or the brokers are not ready.
// An unknown topic is final.
func (c *Client) refreshRetrying(ctx context.Context, topics ...string) error {
	r := newRetrier(ctx, c.retryPolicy())
	for {
		err := c.RefreshMetadata(ctx, topics...)
		if err == nil || errors.Is(err, transport.ErrUnknownTopic) || !retryOn(ctx, err, retriable) {
			return err
		}
		c.log.Debug("metadata not available; retrying", "err", err)
		if err := r.again(ctx, err); err != nil {
			return err
		}
	}
}

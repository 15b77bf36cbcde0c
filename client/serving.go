package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gostream/transport"
)

// maxServingChecks bounds the partitions waitServing asks about at once.
const maxServingChecks = 16

// waitServing waits until every partition of t, a topic just created, has
// a leader that answers ListOffsets, retrying each (a broker that has not
// taken the new metadata yet does not know the topic) until ctx's deadline,
// or RetryTimeout when ctx has none. It returns a *notServingError naming
// the partitions whose leader did not answer in time.
func (c *Client) waitServing(ctx context.Context, t TopicMetadata) error {
	start := time.Now()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.RetryTimeout)
		defer cancel()
	}
	errs := make([]error, len(t.Partitions))
	sem := make(chan struct{}, maxServingChecks)
	var wg sync.WaitGroup
	for i, p := range t.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = c.partitionCall(ctx, t.Name, p.Partition, true, func(ctx context.Context, r route) error {
				req := &transport.ListOffsetsRequest{Topic: t.Name, TopicID: r.topicID, Partition: p.Partition}
				return c.call(ctx, r.addr, 0, transport.APIListOffsets, req, &transport.ListOffsetsResponse{})
			})
		}()
	}
	wg.Wait()
	e := &notServingError{topic: t.Name, partitions: len(t.Partitions), waited: time.Since(start)}
	for i, err := range errs {
		// A principal that may create a topic (create on the cluster) but
		// not describe it cannot see whether it serves; it was created.
		if err != nil && !errors.Is(err, transport.ErrUnauthorized) {
			e.failed = append(e.failed, t.Partitions[i].Partition)
			e.errs = append(e.errs, err)
		}
	}
	if len(e.failed) == 0 {
		return nil
	}
	return e
}

// notServingError is CreateTopic's error when the topic was created but
// some of its partitions' leaders did not answer in time. It matches
// ErrNotServing (so transport.ErrNotReady) and each partition's last error.
type notServingError struct {
	topic      string
	partitions int
	waited     time.Duration
	failed     []int32
	errs       []error // one per failed partition
	// grown: the partitions are those a topic grew by (CreatePartitions),
	// not a new topic's.
	grown bool
}

// notServingShown is how many partitions' errors the message spells out.
const notServingShown = 3

func (e *notServingError) Error() string {
	var b strings.Builder
	names := make([]string, len(e.failed))
	for i, p := range e.failed {
		names[i] = fmt.Sprintf("%s/%d", e.topic, p)
	}
	if e.grown {
		fmt.Fprintf(&b, "%s: topic %q grew by %s, but %d of them cannot serve yet after %s (%s)",
			transport.CodeNotReady, e.topic, plural(e.partitions, "partition"), len(e.failed),
			e.waited.Round(time.Millisecond), strings.Join(names, ", "))
	} else {
		fmt.Fprintf(&b, "%s: topic %q was created, but %d of its %s cannot serve yet after %s (%s)",
			transport.CodeNotReady, e.topic, len(e.failed), plural(e.partitions, "partition"),
			e.waited.Round(time.Millisecond), strings.Join(names, ", "))
	}
	for i, err := range e.errs[:min(len(e.errs), notServingShown)] {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%s%s: %v", sep, names[i], err)
	}
	if n := len(e.errs) - notServingShown; n > 0 {
		fmt.Fprintf(&b, "; and %d more", n)
	}
	return b.String()
}

func (e *notServingError) Unwrap() []error { return append([]error{ErrNotServing}, e.errs...) }

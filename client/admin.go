package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// PartitionOffsets are a partition's offsets as its leader reports them.
type PartitionOffsets struct {
	LogStartOffset int64 // the earliest offset still held
	HighWatermark  int64 // consumers read below it
	LogEndOffset   int64 // the offset the next record will get
}

// Metadata asks the cluster for its brokers and every topic, updates the
// cache and returns what it learned. While no broker answers, it retries
// until ctx's deadline (or RetryTimeout).
func (c *Client) Metadata(ctx context.Context) (Metadata, error) {
	if err := c.refreshRetrying(ctx); err != nil {
		return Metadata{}, err
	}
	return c.state().snapshot(), nil
}

// ListTopics returns every topic, by name, as the cluster reports it now.
func (c *Client) ListTopics(ctx context.Context) ([]TopicMetadata, error) {
	m, err := c.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	return m.Topics, nil
}

// DescribeTopic returns a topic's metadata as the cluster reports it now,
// retrying as Metadata does. It returns an error matching
// transport.ErrUnknownTopic for a topic the cluster does not know.
func (c *Client) DescribeTopic(ctx context.Context, name string) (TopicMetadata, error) {
	if err := c.refreshRetrying(ctx, name); err != nil {
		return TopicMetadata{}, err
	}
	t, ok := c.state().topics[name]
	if !ok {
		return TopicMetadata{}, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, name)
	}
	return t, nil
}

// CreateTopic creates a topic with partitions partitions of
// replicationFactor replicas each, waits until every partition's leader
// serves it (answers ListOffsets), and returns its metadata. The cluster's
// errors come back as transport sentinels: ErrTopicExists,
// ErrInvalidTopicName, ErrInvalidPartitions, ErrInvalidReplication. If the
// answer is lost (an error matching ErrUnknownOutcome), the topic may
// exist. When the topic was created but some partition's leader did not
// answer before ctx's deadline (or RetryTimeout), CreateTopic returns the
// topic's metadata and an error matching ErrNotServing (and
// transport.ErrNotReady) that names those partitions and their last
// errors.
func (c *Client) CreateTopic(ctx context.Context, name string, partitions, replicationFactor int) (TopicMetadata, error) {
	return c.CreateTopicWithConfig(ctx, name, partitions, replicationFactor, nil)
}

// CreateTopicWithConfig is CreateTopic for a topic that sets configuration
// keys of its own (metadata.ConfigKeys: retention.bytes, retention.ms,
// segment.bytes, segment.ms); the keys it does not set take each node's
// default. A key or value the cluster would refuse is refused here, before
// anything is sent, with an error matching transport.ErrInvalidConfig (and
// metadata.ErrInvalidConfig) that names the key.
func (c *Client) CreateTopicWithConfig(ctx context.Context, name string, partitions, replicationFactor int, config metadata.TopicConfig) (TopicMetadata, error) {
	if err := metadata.ValidateTopicName(name); err != nil {
		// Checked here too, so that a bad name is the caller's error,
		// found before anything is sent.
		return TopicMetadata{}, fmt.Errorf("%w: %w", transport.ErrInvalidTopicName, err)
	}
	if partitions < 1 || partitions > math.MaxInt32 {
		return TopicMetadata{}, fmt.Errorf("%w: %d partitions", transport.ErrInvalidPartitions, partitions)
	}
	if replicationFactor < 1 || replicationFactor > math.MaxInt16 {
		return TopicMetadata{}, fmt.Errorf("%w: replication factor %d", transport.ErrInvalidReplication, replicationFactor)
	}
	if err := config.Validate(); err != nil {
		return TopicMetadata{}, fmt.Errorf("%w: %w", transport.ErrInvalidConfig, err)
	}
	req := &transport.CreateTopicRequest{Name: name, Partitions: int32(partitions), ReplicationFactor: int16(replicationFactor), Config: configToWire(config)}
	var resp transport.TopicInfo
	// Bounded by ctx alone: the controller answers once the partitions
	// are placed, persisted and opened by the brokers, which for
	// thousands of partitions takes longer than one request's timeout.
	if err := c.callController(ctx, transport.APICreateTopic, req, &resp, 0); err != nil {
		return TopicMetadata{}, fmt.Errorf("create topic %q: %w", name, err)
	}
	t := topicFromWire(&resp)
	c.updateTopic(name, &t)
	return t, c.waitServing(ctx, t)
}

// DeleteTopic deletes a topic and its records. It returns an error
// matching transport.ErrUnknownTopic for a topic the cluster does not know.
func (c *Client) DeleteTopic(ctx context.Context, name string) error {
	if err := c.callController(ctx, transport.APIDeleteTopic, &transport.TopicRequest{Name: name}, nil, c.cfg.RequestTimeout); err != nil {
		return fmt.Errorf("delete topic %q: %w", name, err)
	}
	c.updateTopic(name, nil)
	return nil
}

// SealTopic makes a topic refuse further appends (transport.ErrTopicSealed)
// for good; reads go on.
func (c *Client) SealTopic(ctx context.Context, name string) error {
	if err := c.callController(ctx, transport.APISealTopic, &transport.TopicRequest{Name: name}, nil, c.cfg.RequestTimeout); err != nil {
		return fmt.Errorf("seal topic %q: %w", name, err)
	}
	if st := c.state(); st != nil {
		if t, ok := st.topics[name]; ok {
			t.Sealed = true
			c.updateTopic(name, &t)
		}
	}
	return nil
}

// TopicConfigValue is one configuration key of a topic, with the value the
// broker that answered applies.
type TopicConfigValue struct {
	Key   string
	Value int64
	// Default is true when the topic does not set the key: the value is
	// that broker's default (gostream-node --retention-bytes, ...).
	Default bool
}

// AlterTopicConfig changes a topic's configuration as one change: it sets
// the keys of set and removes the keys of remove (which then take each
// node's default again), and returns the topic's metadata after it. Every
// broker applies the change to its replicas when the new metadata reaches
// it. A key or value the cluster would refuse, an empty change, or a key
// both set and removed is refused here, before anything is sent, with an
// error matching transport.ErrInvalidConfig that names the key; the
// cluster's own refusals match it too. A topic the cluster does not know
// gives an error matching transport.ErrUnknownTopic.
func (c *Client) AlterTopicConfig(ctx context.Context, name string, set metadata.TopicConfig, remove []string) (TopicMetadata, error) {
	if err := set.Validate(); err != nil {
		return TopicMetadata{}, fmt.Errorf("%w: %w", transport.ErrInvalidConfig, err)
	}
	if len(set) == 0 && len(remove) == 0 {
		return TopicMetadata{}, fmt.Errorf("%w: nothing to change for topic %q", transport.ErrInvalidConfig, name)
	}
	for _, k := range remove {
		if err := metadata.CheckConfigKey(k); err != nil {
			return TopicMetadata{}, fmt.Errorf("%w: %w", transport.ErrInvalidConfig, err)
		}
		if _, both := set[k]; both {
			return TopicMetadata{}, fmt.Errorf("%w: %s is both set and removed", transport.ErrInvalidConfig, k)
		}
	}
	req := &transport.AlterTopicConfigRequest{Name: name, Set: configToWire(set), Delete: remove}
	var resp transport.TopicInfo
	if err := c.callController(ctx, transport.APIAlterTopicConfig, req, &resp, c.cfg.RequestTimeout); err != nil {
		return TopicMetadata{}, fmt.Errorf("alter config of topic %q: %w", name, err)
	}
	t := topicFromWire(&resp)
	c.updateTopic(name, &t)
	return t, nil
}

// configToWire lists a configuration's entries, sorted by key.
func configToWire(config metadata.TopicConfig) []transport.ConfigEntry {
	var out []transport.ConfigEntry
	for _, k := range slices.Sorted(maps.Keys(config)) {
		out = append(out, transport.ConfigEntry{Key: k, Value: config[k]})
	}
	return out
}

func configFromWire(values []transport.TopicConfigValue) []TopicConfigValue {
	if len(values) == 0 {
		return nil
	}
	out := make([]TopicConfigValue, len(values))
	for i, v := range values {
		out[i] = TopicConfigValue{Key: v.Key, Value: v.Value, Default: v.Default}
	}
	return out
}

// ListOffsets asks a partition's leader for its log start offset, high
// watermark and log end offset.
func (c *Client) ListOffsets(ctx context.Context, topic string, partition int32) (PartitionOffsets, error) {
	var resp transport.ListOffsetsResponse
	err := c.withLeader(ctx, topic, partition, func(ctx context.Context, r route) error {
		return c.call(ctx, r.addr, 0, transport.APIListOffsets, &transport.ListOffsetsRequest{Topic: topic, TopicID: r.topicID, Partition: partition}, &resp)
	})
	if err != nil {
		return PartitionOffsets{}, fmt.Errorf("list offsets of %s/%d: %w", topic, partition, err)
	}
	return PartitionOffsets{LogStartOffset: resp.LogStartOffset, HighWatermark: resp.HighWatermark, LogEndOffset: resp.LogEndOffset}, nil
}

// callController sends an admin request to the controller. An admin
// request that only reads (transport.Idempotent) is retried like a read.
// One that changes the cluster is sent again only when the first attempt
// provably did nothing: the connection could not be opened or the request
// was never written (transport.ErrNotSent), or the broker answered
// NotController (then the metadata is refreshed and the next candidate
// tried), Busy, ControllerUnavailable or NotReady, which it answers before
// it acts. A change sent and not answered fails at once with
// ErrUnknownOutcome. Retries are paced as every call's, until ctx's
// deadline (or RetryTimeout). Each attempt is bounded by timeout, or by
// ctx alone when timeout is 0.
func (c *Client) callController(ctx context.Context, api transport.API, req, resp transport.Message, timeout time.Duration) error {
	return c.controllerCall(ctx, api, transport.Idempotent(api), req, resp, timeout)
}

// controllerCall is callController for a request that only reads when
// reads is set, whatever its api (an acl list shares APIACL with the
// changes of the ACLs).
func (c *Client) controllerCall(ctx context.Context, api transport.API, reads bool, req, resp transport.Message, timeout time.Duration) error {
	retry := newRetrier(ctx, c.retryPolicy())
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if rerr := c.RefreshMetadata(ctx); rerr != nil {
				if errors.Is(rerr, ErrClosed) {
					return rerr
				}
				c.log.Debug("metadata refresh failed", "err", rerr)
			}
		}
		err := c.controllerAttempt(ctx, api, reads, req, resp, timeout)
		if err == nil || errors.Is(err, ErrUnknownOutcome) || !retryOn(ctx, err, func(err error) bool { return retriableAdmin(reads, err) }) {
			return err
		}
		c.log.Debug("admin request not taken; retrying", "api", api.String(), "err", err)
		if gaveUp := retry.again(ctx, err); gaveUp != nil {
			return gaveUp
		}
	}
}

// retriableAdmin reports whether an admin request that failed with err may
// be sent again: any retriable error when it only reads; otherwise only
// an error that proves nothing was done.
func retriableAdmin(reads bool, err error) bool {
	if reads {
		return retriable(err)
	}
	return errors.Is(err, transport.ErrNotSent) ||
		errors.Is(err, transport.ErrNotController) ||
		errors.Is(err, transport.ErrBusy) ||
		errors.Is(err, transport.ErrControllerUnavailable) ||
		errors.Is(err, transport.ErrNotReady)
}

// controllerAttempt sends the request to the controller candidates in
// turn, passing over those that answer NotController or cannot be
// reached.
func (c *Client) controllerAttempt(ctx context.Context, api transport.API, reads bool, req, resp transport.Message, timeout time.Duration) error {
	var err, unreachable error
	for _, addr := range c.controllerCandidates() {
		var conn *transport.Conn
		conn, err = c.pool.Get(ctx, addr)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			err = dialError{err}
			if unreachable == nil {
				unreachable = err
			}
			continue
		}
		cctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			cctx, cancel = context.WithTimeout(ctx, timeout)
		}
		start := time.Now()
		err = conn.Call(cctx, api, req, resp)
		cancel()
		if err != nil && !reads && unanswered(err) {
			// Sent, and no answer: the change may have been made.
			return fmt.Errorf("%w: the controller (%s) did not answer within %s; the change may have been made: %w",
				ErrUnknownOutcome, addr, time.Since(start).Round(time.Millisecond), err)
		}
		if err == nil || !errors.Is(err, transport.ErrNotController) {
			return err
		}
		c.log.Debug("not the controller", "peer", addr, "api", api.String())
	}
	if unreachable != nil && errors.Is(err, transport.ErrNotController) {
		// The controller could not be reached and no other broker is
		// active in its place: that is the news.
		return unreachable
	}
	if err == nil {
		err = fmt.Errorf("%w: no broker known", transport.ErrControllerUnavailable)
	}
	return err
}

// dialError is a connection that could not be opened: the request was
// never sent, and the error matches transport.ErrNotSent besides its own.
type dialError struct{ err error }

func (e dialError) Error() string   { return e.err.Error() }
func (e dialError) Unwrap() []error { return []error{e.err, transport.ErrNotSent} }

// unanswered reports whether a call's error leaves its outcome unknown:
// it was sent (not ErrNotSent) and no answer came back (not an error the
// server sent).
func unanswered(err error) bool {
	var te *transport.Error
	if errors.Is(err, transport.ErrNotSent) || errors.As(err, &te) && !errors.Is(err, transport.ErrBrokerNotAvailable) && !errors.Is(err, transport.ErrTimeout) {
		return false
	}
	return true
}

// PingController asks the controller's node for its view of the cluster,
// once, to tell a controller that is busy from one that does not answer
// at all. It returns the address asked.
func (c *Client) PingController(ctx context.Context) (string, error) {
	addrs := c.controllerCandidates()
	if len(addrs) == 0 {
		return "", fmt.Errorf("%w: no broker known", transport.ErrControllerUnavailable)
	}
	_, err := c.DescribeCluster(ctx, addrs[0])
	return addrs[0], err
}

// controllerCandidates returns the addresses to send a controller request
// to, in order: the controller the metadata names, when it names one, then
// every other known address. With a replicated controller the named one
// may be dead and another active already; a broker that is not the active
// controller answers NotController, and is passed over.
func (c *Client) controllerCandidates() []string {
	addrs := c.candidates()
	slices.Sort(addrs)
	addrs = slices.Compact(addrs)
	st := c.state()
	if st == nil {
		return addrs
	}
	b, ok := st.brokers[st.controllerID]
	if !ok || b.Addr == "" {
		return addrs
	}
	out := append(make([]string, 0, len(addrs)+1), b.Addr)
	for _, a := range addrs {
		if a != b.Addr {
			out = append(out, a)
		}
	}
	return out
}

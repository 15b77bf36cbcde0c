package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/metadata"
	"gostream/security"
	"gostream/transport"
)

// Config configures a Client. Zero values take the defaults named.
type Config struct {
	// Bootstrap lists broker RPC addresses (HOST:PORT) to ask for the
	// cluster's metadata. Any one that answers is enough. Required.
	Bootstrap []string
	// Logger receives the client's logs; default none.
	Logger hclog.Logger
	// RequestTimeout bounds one request and its answer (a long poll gets
	// its wait on top); default 30s.
	RequestTimeout time.Duration
	// DialTimeout bounds opening a connection; default 5s.
	DialTimeout time.Duration
	// RetryTimeout bounds how long a call whose context has no deadline
	// goes on retrying errors that may pass (see the package
	// documentation); a context's deadline, when there is one, bounds it
	// instead. Default DefaultRetryTimeout (15s).
	RetryTimeout time.Duration
	// RetryBackoff is the wait before the first retry of a call; each
	// further wait doubles, up to RetryBackoffMax, and is drawn at random
	// from its upper half. Default DefaultRetryBackoff (25ms).
	RetryBackoff time.Duration
	// RetryBackoffMax caps the wait between two attempts; default
	// DefaultRetryBackoffMax (1s).
	RetryBackoffMax time.Duration
	// Retries, if positive, caps how many times one call is retried,
	// besides its deadline; negative for no retries; default 0: the
	// deadline alone bounds them.
	Retries int
	// MaxFrameBytes bounds a response frame; default transport's client
	// default (the frame limit of the largest batch limit a cluster may
	// have).
	MaxFrameBytes int
	// TLS, if set, makes every connection TLS (RPC and HTTP): RootCAs
	// the cluster's CA, Certificates a client certificate when the nodes
	// ask for one. LoadTLS builds it from files. Nil: plaintext.
	TLS *tls.Config
	// Token, if set, is the bearer token the client authenticates with:
	// sent first on every RPC connection, and as Authorization: Bearer on
	// HTTP. It is never sent without TLS (ErrInvalidConfig).
	Token string
	// MetadataMaxAge is how long a Producer routes a topic's records by
	// the metadata it holds before it asks for the topic's again, as
	// Kafka's metadata.max.age.ms: a topic that grew gets its keyed
	// records by the new partition count from then on. Default
	// DefaultMetadataMaxAge (30s).
	MetadataMaxAge time.Duration
}

// DefaultMetadataMaxAge is Config.MetadataMaxAge's default.
const DefaultMetadataMaxAge = 30 * time.Second

// LoadTLS builds Config.TLS from PEM files: the cluster's CA (required),
// and a client certificate and its key (both or neither).
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	c, err := security.ClientTLS(caFile, certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	return c, nil
}

func (c *Config) setDefaults() error {
	if len(c.Bootstrap) == 0 {
		return fmt.Errorf("%w: no bootstrap address", ErrInvalidConfig)
	}
	for _, a := range c.Bootstrap {
		if a == "" {
			return fmt.Errorf("%w: empty bootstrap address", ErrInvalidConfig)
		}
	}
	if c.Token != "" && c.TLS == nil {
		return fmt.Errorf("%w: a token is never sent in the clear: give the cluster's CA too (Config.TLS, gostream-ctl --tls-ca)", ErrInvalidConfig)
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = 30 * time.Second
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = 5 * time.Second
	}
	if c.RetryTimeout <= 0 {
		c.RetryTimeout = DefaultRetryTimeout
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.RetryBackoffMax <= 0 {
		c.RetryBackoffMax = DefaultRetryBackoffMax
	}
	c.RetryBackoffMax = max(c.RetryBackoffMax, c.RetryBackoff)
	if c.MetadataMaxAge <= 0 {
		c.MetadataMaxAge = DefaultMetadataMaxAge
	}
	return nil
}

// Broker is one broker as registered with the controller.
type Broker struct {
	ID     int32
	Addr   string // RPC address
	HTTP   string
	Gossip string
}

// PartitionMetadata is one partition's replicas and leadership.
type PartitionMetadata struct {
	Partition   int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32 // assigned, leader first at creation
	Active      []int32 // the replicas a write must reach
}

// TopicMetadata is one topic's metadata.
type TopicMetadata struct {
	Name string
	// ID tells this topic from an earlier or later one of the same name
	// (a topic deleted and created again gets a new ID).
	ID                string
	ReplicationFactor int
	Sealed            bool
	Partitions        []PartitionMetadata
	// Config is every configuration key, sorted, with the value the
	// broker that answered applies (see AlterTopicConfig).
	Config []TopicConfigValue
	// Stream is set on the topic that holds a Durable Streams stream
	// (served over HTTP under /v1/stream/).
	Stream *StreamMetadata
}

// StreamMetadata is the Durable Streams stream a topic holds.
type StreamMetadata struct {
	Path        string
	ContentType string
	ForkedFrom  string // the path of the stream it was forked from, if any
	Deleted     bool   // deleted while forks of it remain: answers 410
}

// Metadata is the cluster as one broker described it.
type Metadata struct {
	ClusterID    string
	ControllerID int32
	Epoch        int64 // metadata epoch; every change bumps it
	Brokers      []Broker
	Topics       []TopicMetadata // by name
	// MaxBatchBytes is the cluster's batch limit (--max-batch-bytes): the
	// largest batch a produce may carry.
	MaxBatchBytes int
}

// clusterState is an immutable snapshot of the cached metadata.
type clusterState struct {
	clusterID    string
	controllerID int32
	epoch        int64
	brokers      map[int32]Broker
	topics       map[string]TopicMetadata
	maxBatch     int // the batch limit the answering broker named
}

// route is where a partition's requests go.
type route struct {
	leader  int32
	epoch   int32
	addr    string
	topicID string
}

// Client holds the cluster's metadata and the connections to its brokers.
// It is safe for concurrent use.
type Client struct {
	cfg   Config
	log   hclog.Logger
	pool  *transport.Pool
	pipes *transport.Pool // the producer's connections, kept apart from pool
	next  atomic.Uint32   // rotates the first broker asked for metadata
	// coordinators caches each group's coordinator address.
	coordinators sync.Map // group name -> string
	// http is the client of the nodes' HTTP surface, made at first use.
	http     *http.Client
	httpOnce sync.Once

	mu struct {
		sync.Mutex
		state   *clusterState
		flights map[string]*flight
		closed  bool
		// asked is when each topic's metadata was last asked for (or
		// taken from an answer): routedTopic asks again once it is
		// older than MetadataMaxAge.
		asked map[string]time.Time
	}
}

// flight is a metadata refresh that concurrent callers share.
type flight struct {
	done chan struct{}
	err  error
}

// New returns a Client that has read the cluster's metadata from one of
// cfg.Bootstrap, tried in order. While none answers (a cluster that is
// starting), it tries them again, as any call retries, until ctx's
// deadline or cfg.RetryTimeout. It returns ErrInvalidConfig for a bad
// config, and an error matching transport.ErrBrokerNotAvailable (with
// every address's error) when no bootstrap address answered in time.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	connCfg := transport.ConnConfig{DialTimeout: cfg.DialTimeout, MaxFrameBytes: cfg.MaxFrameBytes, Token: cfg.Token}
	if tc := cfg.TLS; tc != nil {
		connCfg.TLS = func() *tls.Config { return tc }
	}
	c := &Client{
		cfg:   cfg,
		log:   cfg.Logger.Named("client"),
		pool:  transport.NewPool(connCfg),
		pipes: transport.NewPool(connCfg),
	}
	c.mu.flights = make(map[string]*flight)
	c.mu.asked = make(map[string]time.Time)
	if err := c.refreshRetrying(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("bootstrap: %w", err)
	}
	st := c.state()
	c.log.Debug("bootstrapped", "cluster", st.clusterID, "brokers", len(st.brokers), "topics", len(st.topics))
	return c, nil
}

// Close closes every connection. Calls in flight fail. It is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	c.mu.Unlock()
	c.pipes.Close()
	c.httpClient().CloseIdleConnections()
	return c.pool.Close()
}

func (c *Client) closed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.closed
}

func (c *Client) state() *clusterState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.state
}

// RefreshMetadata asks a broker for the metadata of topics (of every topic
// when none is named) and updates the cache. It asks every known broker
// and bootstrap address at most once, until one answers, and does not
// retry. Concurrent refreshes of the same topics share one request. It returns an error matching
// transport.ErrUnknownTopic when the brokers that answered do not know a
// named topic, ErrClosed after Close, and otherwise an error matching
// transport.ErrBrokerNotAvailable when no broker answered.
func (c *Client) RefreshMetadata(ctx context.Context, topics ...string) error {
	key := strings.Join(slices.Sorted(slices.Values(topics)), "\x00")
	for {
		c.mu.Lock()
		if c.mu.closed {
			c.mu.Unlock()
			return ErrClosed
		}
		f, ok := c.mu.flights[key]
		if !ok {
			f = &flight{done: make(chan struct{})}
			c.mu.flights[key] = f
			c.mu.Unlock()
			f.err = c.refresh(ctx, topics)
			c.mu.Lock()
			delete(c.mu.flights, key)
			c.mu.Unlock()
			close(f.done)
			return f.err
		}
		c.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		// A refresh that ended with its own caller's context says nothing
		// about ours: make our own.
		if f.err == nil || !isContextErr(f.err) {
			return f.err
		}
	}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// candidates returns the addresses to ask for metadata: the known brokers,
// then the bootstrap addresses, starting at a rotating index.
func (c *Client) candidates() []string {
	var addrs []string
	if st := c.state(); st != nil {
		ids := make([]int32, 0, len(st.brokers))
		for id := range st.brokers {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			if a := st.brokers[id].Addr; a != "" {
				addrs = append(addrs, a)
			}
		}
	}
	for _, a := range c.cfg.Bootstrap {
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	if n := len(addrs); n > 1 {
		k := int(c.next.Add(1) % uint32(n))
		addrs = append(addrs[k:], addrs[:k]...)
	}
	return addrs
}

// metadataAttemptTimeout bounds one metadata request of a refresh.
const metadataAttemptTimeout = 2 * time.Second

func (c *Client) refresh(ctx context.Context, topics []string) error {
	var errs []error
	answered := false
	for _, addr := range c.candidates() {
		var resp transport.MetadataResponse
		// A live broker answers metadata at once; a paused one never does,
		// so one attempt gets only a short part of the budget and the next
		// address its chance.
		cctx, cancel := context.WithTimeout(ctx, min(c.cfg.RequestTimeout, metadataAttemptTimeout))
		err := c.pool.Call(cctx, addr, transport.APIMetadata, &transport.MetadataRequest{Topics: topics}, &resp)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, transport.ErrUnauthorized) {
				// Every broker answers the same from the same ACLs.
				return fmt.Errorf("metadata: %w", err)
			}
			c.log.Debug("metadata request failed", "peer", addr, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", addr, err))
			continue
		}
		if c.apply(&resp, topics) {
			return nil
		}
		c.log.Debug("ignored older metadata", "peer", addr, "epoch", resp.MetadataEpoch)
		answered = true
	}
	if answered {
		return nil // every answer was older than what we hold
	}
	if len(errs) == 0 {
		return fmt.Errorf("metadata: no broker to ask: %w", transport.ErrBrokerNotAvailable)
	}
	for _, err := range errs {
		if errors.Is(err, transport.ErrUnknownTopic) {
			c.forget(topics)
			return fmt.Errorf("metadata of %q: %w", topics, err)
		}
	}
	if sameRefusal(errs) {
		// Every broker refused alike (a token not recognized, no TLS):
		// the first says why; no broker is unavailable.
		return fmt.Errorf("metadata: every broker asked refused it alike; %w", errs[0])
	}
	if !errors.Is(errs[0], transport.ErrBrokerNotAvailable) {
		errs = append(errs, transport.ErrBrokerNotAvailable)
	}
	return fmt.Errorf("metadata: no broker answered: %w", errors.Join(errs...))
}

// sameRefusal reports whether every error has the same error code, one
// that retrying does not mend.
func sameRefusal(errs []error) bool {
	var code transport.Code
	for i, err := range errs {
		var te *transport.Error
		if !errors.As(err, &te) || te.Retriable || i > 0 && te.Code != code {
			return false
		}
		code = te.Code
	}
	return len(errs) > 0
}

// apply merges resp into the cache unless it is older than the cache. A
// response for named topics replaces those topics only.
func (c *Client) apply(resp *transport.MetadataResponse, topics []string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.mu.state
	if old != nil && resp.MetadataEpoch < old.epoch {
		return false
	}
	st := &clusterState{
		clusterID:    resp.ClusterID,
		controllerID: resp.ControllerID,
		epoch:        resp.MetadataEpoch,
		brokers:      make(map[int32]Broker, len(resp.Brokers)),
		topics:       make(map[string]TopicMetadata),
		maxBatch:     int(resp.MaxBatchBytes),
	}
	if st.maxBatch <= 0 {
		st.maxBatch = transport.DefaultMaxBatchBytes
	}
	for _, b := range resp.Brokers {
		st.brokers[b.ID] = Broker{ID: b.ID, Addr: b.Addr, HTTP: b.HTTP, Gossip: b.Gossip}
	}
	if len(topics) > 0 && old != nil {
		for name, t := range old.topics {
			st.topics[name] = t
		}
	}
	now := time.Now()
	for i := range resp.Topics {
		t := topicFromWire(&resp.Topics[i])
		st.topics[t.Name] = t
		c.mu.asked[t.Name] = now
	}
	c.mu.state = st
	return true
}

// forget drops topics from the cache.
func (c *Client) forget(topics []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.mu.state
	if old == nil {
		return
	}
	st := *old
	st.topics = make(map[string]TopicMetadata, len(old.topics))
	for name, t := range old.topics {
		if !slices.Contains(topics, name) {
			st.topics[name] = t
		}
	}
	c.mu.state = &st
}

// updateTopic replaces or removes (t == nil) one topic in the cache.
func (c *Client) updateTopic(name string, t *TopicMetadata) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.mu.state
	if old == nil {
		return
	}
	st := *old
	st.topics = make(map[string]TopicMetadata, len(old.topics)+1)
	for n, ot := range old.topics {
		if n != name {
			st.topics[n] = ot
		}
	}
	if t != nil {
		st.topics[name] = *t
	}
	c.mu.state = &st
}

func topicFromWire(t *transport.TopicInfo) TopicMetadata {
	tm := TopicMetadata{Name: t.Name, ID: t.ID, ReplicationFactor: int(t.ReplicationFactor), Sealed: t.Sealed, Config: configFromWire(t.Config)}
	if st := t.Stream; st != nil {
		tm.Stream = &StreamMetadata{Path: st.Path, ContentType: st.ContentType, ForkedFrom: st.ForkedFrom, Deleted: st.Deleted}
	}
	tm.Partitions = make([]PartitionMetadata, len(t.Partitions))
	for i, p := range t.Partitions {
		tm.Partitions[i] = PartitionMetadata{
			Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: slices.Clone(p.Replicas), Active: slices.Clone(p.Active),
		}
	}
	// Look partitions up by index even if a broker lists them out of order.
	slices.SortFunc(tm.Partitions, func(a, b PartitionMetadata) int { return int(a.Partition - b.Partition) })
	return tm
}

func (st *clusterState) snapshot() Metadata {
	m := Metadata{ClusterID: st.clusterID, ControllerID: st.controllerID, Epoch: st.epoch, MaxBatchBytes: st.maxBatch}
	for _, b := range st.brokers {
		m.Brokers = append(m.Brokers, b)
	}
	slices.SortFunc(m.Brokers, func(a, b Broker) int { return int(a.ID - b.ID) })
	for _, t := range st.topics {
		m.Topics = append(m.Topics, t)
	}
	slices.SortFunc(m.Topics, func(a, b TopicMetadata) int { return strings.Compare(a.Name, b.Name) })
	return m
}

// topic returns a topic's metadata from the cache, asking the cluster
// (retrying while no broker answers) when the cache does not hold it.
func (c *Client) topic(ctx context.Context, name string) (TopicMetadata, error) {
	return c.cachedTopic(ctx, name, c.refreshRetrying)
}

// routedTopic is topic for a producer, which routes records by the
// partition count: once the cached metadata of the topic is older than
// MetadataMaxAge, one caller asks for it again (a topic may have grown)
// while the others go on with the cached copy, which is also kept when
// the cluster does not answer in time. now is the time of the caller's
// record (a clock read per record is a cost a producer notices).
func (c *Client) routedTopic(ctx context.Context, name string, now time.Time) (TopicMetadata, error) {
	t, err := c.topic(ctx, name)
	if err != nil || !c.dueForRefresh(name, now) {
		return t, err
	}
	rctx, cancel := context.WithTimeout(ctx, metadataAttemptTimeout)
	defer cancel()
	if err := c.RefreshMetadata(rctx, name); err != nil {
		if errors.Is(err, ErrClosed) {
			return TopicMetadata{}, err
		}
		c.log.Debug("metadata refresh failed; routing by the cached metadata", "topic", name, "err", err)
	}
	if st := c.state(); st != nil {
		if nt, ok := st.topics[name]; ok {
			return nt, nil
		}
	}
	return t, nil
}

// grownTopic asks for a topic's metadata now, for a producer that names a
// partition its cached copy does not have (the topic may have grown), and
// returns it; the cached copy when the cluster does not answer in time.
func (c *Client) grownTopic(ctx context.Context, name string) (TopicMetadata, error) {
	rctx, cancel := context.WithTimeout(ctx, metadataAttemptTimeout)
	defer cancel()
	if err := c.RefreshMetadata(rctx, name); errors.Is(err, ErrClosed) {
		return TopicMetadata{}, err
	}
	return c.topic(ctx, name)
}

// dueForRefresh reports whether the topic's metadata is older than
// MetadataMaxAge, and if so counts it as asked for now, so that one
// caller of many asks.
func (c *Client) dueForRefresh(name string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.mu.asked[name]; ok && now.Sub(last) < c.cfg.MetadataMaxAge {
		return false
	}
	c.mu.asked[name] = now
	return true
}

// cached reports whether the cache holds a topic.
func (c *Client) cached(topic string) bool {
	st := c.state()
	if st == nil {
		return false
	}
	_, ok := st.topics[topic]
	return ok
}

// cachedTopic returns a topic's metadata from the cache, asking the
// cluster with refresh when the cache does not hold it.
func (c *Client) cachedTopic(ctx context.Context, name string, refresh func(context.Context, ...string) error) (TopicMetadata, error) {
	if st := c.state(); st != nil {
		if t, ok := st.topics[name]; ok {
			return t, nil
		}
	}
	if err := refresh(ctx, name); err != nil {
		return TopicMetadata{}, err
	}
	if t, ok := c.state().topics[name]; ok {
		return t, nil
	}
	return TopicMetadata{}, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, name)
}

// leader returns where a partition's requests go, from the cache (asking
// the cluster once when the topic is not cached: its callers retry). It
// returns transport.ErrUnknownPartition for a partition the topic does not
// have and ErrNoLeader when no leader with a known address is named.
func (c *Client) leader(ctx context.Context, topic string, partition int32) (route, error) {
	t, err := c.cachedTopic(ctx, topic, c.RefreshMetadata)
	if err != nil {
		return route{}, err
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return route{}, fmt.Errorf("%w: %s", transport.ErrUnknownPartition, metadata.NoSuchPartition(topic, len(t.Partitions), partition))
	}
	p := t.Partitions[partition]
	b, ok := c.state().brokers[p.Leader]
	if p.Leader < 0 || !ok || b.Addr == "" {
		return route{}, fmt.Errorf("%w: partition %s/%d (leader %d)", ErrNoLeader, topic, partition, p.Leader)
	}
	return route{leader: p.Leader, epoch: p.LeaderEpoch, addr: b.Addr, topicID: t.ID}, nil
}

// withLeader calls fn with the partition's leader until it succeeds, and
// after an error that may pass (see retriableRoute) calls it again, as the
// retry policy paces it, until ctx's deadline (or RetryTimeout): after an
// error that suggests a stale route it refreshes the topic's metadata
// first; after Busy it does not. fn must be safe to repeat: reads only,
// or requests whose repetition does no harm (catch-up).
func (c *Client) withLeader(ctx context.Context, topic string, partition int32, fn func(ctx context.Context, r route) error) error {
	return c.partitionCall(ctx, topic, partition, false, fn)
}

// partitionCall is withLeader. With created, the partition is known to
// exist (its topic was just created, or grew by it): a broker or a
// metadata answer that does not know it yet is retried too, not final.
func (c *Client) partitionCall(ctx context.Context, topic string, partition int32, created bool, fn func(ctx context.Context, r route) error) error {
	retry := newRetrier(ctx, c.retryPolicy())
	fresh := false // the cache holds what the cluster said during this call
	for {
		fresh = fresh || !c.cached(topic) // leader asks the cluster then
		r, err := c.leader(ctx, topic, partition)
		routed := err == nil
		if routed {
			if err = fn(ctx, r); err == nil {
				return nil
			}
		}
		switch {
		case errors.Is(err, ErrTopicRecreated) || errors.Is(err, ErrClosed):
			return err
		case !routed && fresh && !created && (errors.Is(err, transport.ErrUnknownTopic) || errors.Is(err, transport.ErrUnknownPartition)):
			// The cluster's metadata says there is no such topic or
			// partition (a topic grows, but the metadata just asked for
			// holds every partition it has).
			return err
		case !retryOn(ctx, err, retriableRoute):
			return err
		}
		c.log.Debug("retrying", "topic", topic, "partition", partition, "err", err)
		if gaveUp := retry.again(ctx, err); gaveUp != nil {
			return gaveUp
		}
		if errors.Is(err, transport.ErrBusy) || !routed && !c.cached(topic) {
			continue // the route is fine (the broker had no memory to spare), or leader asks anew
		}
		rerr := c.RefreshMetadata(ctx, topic)
		switch {
		case rerr == nil:
			fresh = true
		case errors.Is(rerr, transport.ErrUnknownTopic) && !created || errors.Is(rerr, ErrClosed):
			return rerr
		default:
			c.log.Debug("metadata refresh failed", "topic", topic, "err", rerr)
		}
	}
}

// pinTopic holds a long-lived reader or writer to the incarnation of a
// topic it first found: *pinned is set to r's topic id the first time, and
// a route to another id afterwards is ErrTopicRecreated.
func pinTopic(pinned *string, topic string, r route) error {
	switch {
	case *pinned == "":
		*pinned = r.topicID
	case r.topicID != "" && r.topicID != *pinned:
		return fmt.Errorf("%w: topic %q (id %s) was deleted, and the topic now of that name has id %s", ErrTopicRecreated, topic, *pinned, r.topicID)
	}
	return nil
}

// call makes one request to addr with the client's request timeout plus
// extra.
func (c *Client) call(ctx context.Context, addr string, extra time.Duration, api transport.API, req, resp transport.Message) error {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout+extra)
	defer cancel()
	return c.pool.Call(ctx, addr, api, req, resp)
}

// HTTPURL is the URL of path on the node whose HTTP surface is at addr:
// https when the client speaks TLS.
func (c *Client) HTTPURL(addr, path string) string {
	if c.cfg.TLS != nil {
		return "https://" + addr + path
	}
	return "http://" + addr + path
}

// HTTPDo sends an HTTP request to a node as the client's RPC connections
// go: with its TLS configuration, and its token as Authorization: Bearer.
func (c *Client) HTTPDo(req *http.Request) (*http.Response, error) {
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	return c.httpClient().Do(req)
}

// httpClient is the client's own HTTP client, whose connections Close
// closes (http.DefaultClient's would outlive it).
func (c *Client) httpClient() *http.Client {
	c.httpOnce.Do(func() {
		t := http.DefaultTransport.(*http.Transport).Clone()
		if c.cfg.TLS != nil {
			t.TLSClientConfig = c.cfg.TLS.Clone()
			t.ForceAttemptHTTP2 = false
		}
		c.http = &http.Client{Transport: t}
	})
	return c.http
}

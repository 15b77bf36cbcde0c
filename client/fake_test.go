package client

import (
	"context"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/transport"
)

// fakeCluster is an in-process stand-in for a gostream cluster: brokers
// that are transport.Servers serving Metadata, Produce, Fetch, ListOffsets
// and the admin APIs over in-memory logs, with hooks to inject faults and
// counters to observe what the client did. Every partition has one log,
// shared by whichever broker leads it; a broker that does not lead answers
// NotLeader.
type fakeCluster struct {
	t testing.TB

	mu         sync.Mutex
	epoch      int64
	controller int32
	brokers    map[int32]*fakeBroker
	topics     map[string]*fakeTopic

	// Faults. produceErr runs before an append and may refuse it; hold
	// returns a channel the answer to a produce request waits for (nil:
	// none); replyDelay delays every produce answer; onMetadata runs before
	// each metadata answer; corrupt names batches (by base offset) that
	// fetch answers garble.
	produceErr func(broker int32, values []string) error
	hold       func(broker int32, values []string) <-chan struct{}
	replyDelay func() time.Duration
	onMetadata func()
	corrupt    map[int64]bool
	// fetchErr runs before each fetch and may refuse it.
	fetchErr func() error
	// listOffsetsErr runs before each ListOffsets and may refuse it.
	listOffsetsErr func(broker int32, topic string, partition int32) error
	// adminErr runs when the controller gets a topic admin request, before
	// anything else, and may refuse it.
	adminErr func(api transport.API) error
	// maxBatchBytes is the batch limit metadata answers name (0: none,
	// as from an old broker).
	maxBatchBytes int32
	// catchUpErr runs when broker gets a CatchUp request, before anything
	// else, and may refuse it.
	catchUpErr func(broker int32) error
	// operator answers the controller's Failover, Recover and History
	// requests with a JSON body (nil: an empty report); it runs in the
	// reply, so it may wait on ctx.
	operator func(ctx context.Context, api transport.API, body []byte) ([]byte, error)
	// noProducerIDs makes every broker answer InitProducerID as an old
	// one does: an unknown API.
	noProducerIDs bool
	// nextProducerID is the id the next InitProducerID gets.
	nextProducerID int64

	// Observations.
	requests     map[int32]map[transport.API]int
	batchSizes   []int          // records per produce request, in arrival order
	appended     map[string]int // record value -> times appended
	inflight     int            // produce answers not yet sent
	maxInflight  int
	fetchWaiting int // fetches in a long poll
	// replicaReqs are the ReplicaState requests, in arrival order.
	replicaReqs []transport.ReplicaStateRequest
	// operatorBodies are the JSON bodies of operator requests the
	// controller took, in arrival order.
	operatorBodies []string
	// digestReqs are the ReplicaDigest requests, with the broker asked.
	digestReqs []digestReq
	// idempotent are the idempotent producers' batches appended, in
	// arrival order; duplicates counts those answered as a duplicate,
	// changed those of them whose bytes were not the original's.
	idempotent []idemBatch
	duplicates int
	changed    int
}

// idemBatch is an idempotent producer's batch as a fake leader keeps it.
type idemBatch struct {
	producer    int64
	first, last int32 // sequences
	values      []string
	resp        transport.ProduceResponse // the original's answer
	data        []byte                    // as the producer sent it
}

type digestReq struct {
	broker int32
	req    transport.ReplicaDigestRequest
}

type fakeBroker struct {
	id   int32
	addr string
	fc   *fakeCluster
	srv  *transport.Server
}

type fakeTopic struct {
	name   string
	rf     int
	sealed bool
	parts  []*fakePartition
	config map[string]int64 // the keys the topic sets
}

type fakePartition struct {
	leader  int32
	epoch   int32
	start   int64
	end     int64
	batches []record.Batch
	changed chan struct{} // closed and replaced on every append
	// producers are the last five batches of each idempotent producer,
	// oldest first, as package producers checks them (one epoch).
	producers map[int64][]idemBatch
	// replicas and active are nil for a partition of the leader alone.
	replicas, active []int32
}

func newFakeCluster(t testing.TB, brokers int) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{
		t:          t,
		epoch:      1,
		controller: 1,
		brokers:    make(map[int32]*fakeBroker),
		topics:     make(map[string]*fakeTopic),
		corrupt:    make(map[int64]bool),
		requests:   make(map[int32]map[transport.API]int),
		appended:   make(map[string]int),

		nextProducerID: 1000,
	}
	// Every broker is in the maps before any serves: a handler reads them.
	listeners := map[int32]net.Listener{}
	for id := int32(1); id <= int32(brokers); id++ {
		b := &fakeBroker{id: id, fc: fc}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		b.addr = ln.Addr().String()
		listeners[id] = ln
		fc.brokers[id] = b
		fc.requests[id] = make(map[transport.API]int)
	}
	for id, ln := range listeners {
		fc.brokers[id].serve(ln)
	}
	t.Cleanup(func() {
		for _, b := range fc.brokers {
			b.srv.Close()
		}
	})
	return fc
}

func (b *fakeBroker) serve(ln net.Listener) {
	b.srv = transport.NewServer(transport.ServerConfig{Logger: testLogger(b.fc.t).Named(fmt.Sprintf("fake%d", b.id))}, b)
	go b.srv.Serve(ln)
}

// stop closes broker id's server: its address refuses connections.
func (fc *fakeCluster) stop(id int32) {
	fc.brokers[id].srv.Close()
}

// restart closes broker id's server, which closes every connection to it,
// and serves again on the same address.
func (fc *fakeCluster) restart(id int32) {
	b := fc.brokers[id]
	b.srv.Close()
	ln, err := net.Listen("tcp", b.addr)
	require.NoError(fc.t, err)
	b.serve(ln)
}

func (fc *fakeCluster) addrs() []string {
	var out []string
	for id := int32(1); id <= int32(len(fc.brokers)); id++ {
		out = append(out, fc.brokers[id].addr)
	}
	return out
}

func (fc *fakeCluster) brokerIDsLocked() []int32 {
	ids := make([]int32, 0, len(fc.brokers))
	for id := range fc.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// addTopic creates a topic directly; partition p is led by the
// (p mod n)-th broker.
func (fc *fakeCluster) addTopic(name string, partitions int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.addTopicLocked(name, partitions, 1)
}

func (fc *fakeCluster) addTopicLocked(name string, partitions, rf int) *fakeTopic {
	ids := fc.brokerIDsLocked()
	t := &fakeTopic{name: name, rf: rf, config: map[string]int64{}}
	for p := 0; p < partitions; p++ {
		t.parts = append(t.parts, &fakePartition{leader: ids[p%len(ids)], epoch: 1, changed: make(chan struct{})})
	}
	fc.topics[name] = t
	fc.epoch++
	return t
}

func (fc *fakeCluster) moveLeader(topic string, partition int, leader int32) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	p := fc.topics[topic].parts[partition]
	p.leader = leader
	p.epoch++
	fc.epoch++
}

// setReplicas gives a partition its replicas and active set.
func (fc *fakeCluster) setReplicas(topic string, partition int, replicas, active []int32) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	p := fc.topics[topic].parts[partition]
	p.replicas, p.active = replicas, active
	fc.epoch++
}

func (fc *fakeCluster) seal(topic string) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.topics[topic].sealed = true
	fc.epoch++
}

// appendValues appends one batch holding values, as the leader would.
func (fc *fakeCluster) appendValues(topic string, partition int, values ...string) {
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	data, err := record.AppendBatch(nil, recs)
	require.NoError(fc.t, err)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.appendLocked(fc.topics[topic].parts[partition], record.Batch(data), values)
}

func (fc *fakeCluster) appendLocked(p *fakePartition, b record.Batch, values []string) (base int64, at int64) {
	base, at = p.end, time.Now().UnixMilli()
	b.Stamp(base, p.epoch, at)
	p.batches = append(p.batches, b)
	p.end += int64(len(values))
	close(p.changed)
	p.changed = make(chan struct{})
	for _, v := range values {
		fc.appended[v]++
	}
	return base, at
}

// dropBefore moves the log start to offset, a batch boundary, as
// retention would.
func (fc *fakeCluster) dropBefore(topic string, partition int, offset int64) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	p := fc.topics[topic].parts[partition]
	for len(p.batches) > 0 && p.batches[0].NextOffset() <= offset {
		p.batches = p.batches[1:]
	}
	p.start = offset
}

// values returns the values in a partition's log, in offset order.
func (fc *fakeCluster) values(topic string, partition int) []string {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var out []string
	for _, b := range fc.topics[topic].parts[partition].batches {
		require.NoError(fc.t, b.Records(func(r *record.Record) bool {
			out = append(out, string(r.Value))
			return true
		}))
	}
	return out
}

func (fc *fakeCluster) count(id int32, api transport.API) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.requests[id][api]
}

func (fc *fakeCluster) produceRequests() int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return len(fc.batchSizes)
}

func (fc *fakeCluster) appendedCount(value string) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.appended[value]
}

func (fc *fakeCluster) set(fn func(fc *fakeCluster)) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fn(fc)
}

// Handle implements transport.Handler.
func (b *fakeBroker) Handle(ctx context.Context, req *transport.Request) transport.Reply {
	fc := b.fc
	api := transport.API(req.API)
	fc.mu.Lock()
	fc.requests[b.id][api]++
	fc.mu.Unlock()
	switch api {
	case transport.APIMetadata:
		return b.metadata(req)
	case transport.APIProduce:
		return b.produce(req)
	case transport.APIFetch:
		return b.fetch(req)
	case transport.APIListOffsets:
		return b.listOffsets(req)
	case transport.APICreateTopic, transport.APIDeleteTopic, transport.APISealTopic, transport.APIAlterTopicConfig:
		return b.admin(api, req)
	case transport.APIDescribeCluster:
		return b.describeCluster(req)
	case transport.APIReplicaState:
		return b.replicaState(req)
	case transport.APICatchUp:
		return b.catchUp(req)
	case transport.APIFailover, transport.APIRecover, transport.APIHistory, transport.APICreatePartitions:
		return b.operatorChange(api, req)
	case transport.APIReplicaDigest:
		return b.replicaDigest(req)
	case transport.APIInitProducerID:
		return b.initProducerID(req)
	}
	return transport.Immediate(nil, fmt.Errorf("%w: API %d", transport.ErrUnsupportedVersion, req.API))
}

func decodeReq(req *transport.Request, m transport.Message) error {
	if err := transport.Unmarshal(req.Body, m); err != nil {
		return fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err)
	}
	return nil
}

func (fc *fakeCluster) partitionLocked(topic string, partition int32) (*fakeTopic, *fakePartition, error) {
	t, ok := fc.topics[topic]
	if !ok {
		return nil, nil, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, topic)
	}
	if partition < 0 || int(partition) >= len(t.parts) {
		return nil, nil, fmt.Errorf("%w: %s/%d", transport.ErrUnknownPartition, topic, partition)
	}
	return t, t.parts[partition], nil
}

func (b *fakeBroker) leads(p *fakePartition, topic string, partition int32) error {
	if p.leader != b.id {
		return fmt.Errorf("%w: partition %s/%d is led by broker %d", transport.ErrNotLeader, topic, partition, p.leader)
	}
	return nil
}

func (b *fakeBroker) metadata(req *transport.Request) transport.Reply {
	var r transport.MetadataRequest
	if err := decodeReq(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	fc := b.fc
	fc.mu.Lock()
	hook := fc.onMetadata
	fc.mu.Unlock()
	if hook != nil {
		hook()
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	resp := &transport.MetadataResponse{ClusterID: "fake", ControllerID: fc.controller, MetadataEpoch: fc.epoch, MaxBatchBytes: fc.maxBatchBytes}
	for _, id := range fc.brokerIDsLocked() {
		resp.Brokers = append(resp.Brokers, transport.BrokerInfo{ID: id, Addr: fc.brokers[id].addr})
	}
	names := r.Topics
	if len(names) == 0 {
		for name := range fc.topics {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	for _, name := range names {
		t, ok := fc.topics[name]
		if !ok {
			return transport.Immediate(nil, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, name))
		}
		resp.Topics = append(resp.Topics, fc.topicInfoLocked(t))
	}
	return transport.Immediate(resp, nil)
}

func (fc *fakeCluster) topicInfoLocked(t *fakeTopic) transport.TopicInfo {
	ti := transport.TopicInfo{Name: t.name, ReplicationFactor: int16(t.rf), Sealed: t.sealed}
	for _, k := range slices.Sorted(maps.Keys(t.config)) {
		ti.Config = append(ti.Config, transport.TopicConfigValue{Key: k, Value: t.config[k]})
	}
	for i, p := range t.parts {
		replicas, active := p.replicas, p.active
		if replicas == nil {
			replicas, active = []int32{p.leader}, []int32{p.leader}
		}
		ti.Partitions = append(ti.Partitions, transport.PartitionInfo{
			Partition: int32(i), Leader: p.leader, LeaderEpoch: p.epoch,
			Replicas: replicas, Active: active,
		})
	}
	return ti
}

func (b *fakeBroker) produce(req *transport.Request) transport.Reply {
	var r transport.ProduceRequest
	if err := decodeReq(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	batch := record.Batch(slices.Clone(r.Batch))
	if err := batch.Validate(); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: %v", transport.ErrInvalidBatch, err))
	}
	var values []string
	batch.Records(func(rec *record.Record) bool {
		values = append(values, string(rec.Value))
		return true
	})

	fc := b.fc
	fc.mu.Lock()
	fc.batchSizes = append(fc.batchSizes, len(values))
	var wait <-chan struct{}
	if fc.hold != nil {
		wait = fc.hold(b.id, values)
	}
	var delay time.Duration
	if fc.replyDelay != nil {
		delay = fc.replyDelay()
	}
	var err error
	if fc.produceErr != nil {
		err = fc.produceErr(b.id, values)
	}
	var t *fakeTopic
	var p *fakePartition
	if err == nil {
		t, p, err = fc.partitionLocked(r.Topic, r.Partition)
	}
	if err == nil && t.sealed {
		err = fmt.Errorf("%w: topic %q", transport.ErrTopicSealed, r.Topic)
	}
	if err == nil {
		err = b.leads(p, r.Topic, r.Partition)
	}
	resp := &transport.ProduceResponse{Partition: r.Partition, LeaderID: b.id, Replicas: []int32{b.id}}
	var dup *idemBatch
	if id, _, first := batch.Producer(); err == nil && id >= 0 {
		dup, err = fc.checkSequenceLocked(p, id, first, int32(len(values)), r.Batch)
	}
	switch {
	case dup != nil:
		original := dup.resp
		resp = &original
	case err == nil:
		resp.LeaderEpoch = p.epoch
		resp.BaseOffset, resp.AppendTime = fc.appendLocked(p, batch, values)
		resp.NextOffset = resp.BaseOffset + int64(len(values))
		if id, _, first := batch.Producer(); id >= 0 {
			fc.rememberLocked(p, idemBatch{producer: id, first: first, last: first + int32(len(values)) - 1,
				values: values, resp: *resp, data: slices.Clone(r.Batch)})
		}
	}
	fc.inflight++
	fc.maxInflight = max(fc.maxInflight, fc.inflight)
	fc.mu.Unlock()

	return func(ctx context.Context) (transport.Message, error) {
		defer func() {
			fc.mu.Lock()
			fc.inflight--
			fc.mu.Unlock()
		}()
		if wait != nil {
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// checkSequenceLocked checks an idempotent producer's batch as a leader
// does (package producers, one epoch, sequences that do not wrap): a
// duplicate of one of its last five batches is returned, a gap is
// OutOfOrderSequence, and an unknown producer starts at any sequence.
func (fc *fakeCluster) checkSequenceLocked(p *fakePartition, id int64, first, count int32, data []byte) (*idemBatch, error) {
	last := first + count - 1
	kept := p.producers[id]
	for i := range kept {
		if e := &kept[i]; e.first == first && e.last == last {
			fc.duplicates++
			if !slices.Equal(e.data, data) {
				fc.changed++
			}
			return e, nil
		}
	}
	if n := len(kept); n > 0 && first != kept[n-1].last+1 {
		return nil, fmt.Errorf("%w: producer %d sent sequence %d, expected %d", transport.ErrOutOfOrderSequence, id, first, kept[n-1].last+1)
	}
	return nil, nil
}

func (fc *fakeCluster) rememberLocked(p *fakePartition, e idemBatch) {
	if p.producers == nil {
		p.producers = map[int64][]idemBatch{}
	}
	kept := append(p.producers[e.producer], e)
	if len(kept) > 5 {
		kept = kept[1:]
	}
	p.producers[e.producer] = kept
	fc.idempotent = append(fc.idempotent, e)
}

// initProducerID hands out the next producer id, at epoch 0.
func (b *fakeBroker) initProducerID(req *transport.Request) transport.Reply {
	if err := decodeReq(req, &transport.InitProducerIDRequest{}); err != nil {
		return transport.Immediate(nil, err)
	}
	fc := b.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if fc.noProducerIDs {
		return transport.Immediate(nil, fmt.Errorf("%w: unknown API %d", transport.ErrUnsupportedVersion, req.API))
	}
	id := fc.nextProducerID
	fc.nextProducerID++
	return transport.Immediate(&transport.InitProducerIDResponse{ProducerID: id, Epoch: 0}, nil)
}

func (b *fakeBroker) fetch(req *transport.Request) transport.Reply {
	var r transport.FetchRequest
	if err := decodeReq(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	fc := b.fc
	return func(ctx context.Context) (transport.Message, error) {
		var timer <-chan time.Time
		if r.MaxWaitMs > 0 {
			t := time.NewTimer(time.Duration(r.MaxWaitMs) * time.Millisecond)
			defer t.Stop()
			timer = t.C
		}
		for {
			fc.mu.Lock()
			_, p, err := fc.partitionLocked(r.Topic, r.Partition)
			if err == nil && fc.fetchErr != nil {
				err = fc.fetchErr()
			}
			if err == nil {
				err = b.leads(p, r.Topic, r.Partition)
			}
			if err == nil && (r.Offset < p.start || r.Offset > p.end) {
				err = fmt.Errorf("%w: offset %d, partition holds [%d, %d)", transport.ErrOffsetOutOfRange, r.Offset, p.start, p.end)
			}
			if err != nil {
				fc.mu.Unlock()
				return nil, err
			}
			resp := &transport.FetchResponse{HighWatermark: p.end, LogStartOffset: p.start}
			if r.Offset < p.end {
				for _, bt := range p.batches {
					if bt.NextOffset() <= r.Offset {
						continue
					}
					if len(resp.Batches) > 0 && len(resp.Batches)+len(bt) > int(r.MaxBytes) {
						break
					}
					start := len(resp.Batches)
					resp.Batches = append(resp.Batches, bt...)
					if fc.corrupt[bt.BaseOffset()] {
						resp.Batches[start+len(bt)-1] ^= 0xff
					}
				}
				fc.mu.Unlock()
				return resp, nil
			}
			if timer == nil {
				fc.mu.Unlock()
				return resp, nil
			}
			changed := p.changed
			fc.fetchWaiting++
			fc.mu.Unlock()
			select {
			case <-changed:
			case <-timer:
				timer = nil
			case <-ctx.Done():
			}
			fc.mu.Lock()
			fc.fetchWaiting--
			fc.mu.Unlock()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
}

func (b *fakeBroker) listOffsets(req *transport.Request) transport.Reply {
	var r transport.ListOffsetsRequest
	if err := decodeReq(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	fc := b.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	var err error
	if fc.listOffsetsErr != nil {
		err = fc.listOffsetsErr(b.id, r.Topic, r.Partition)
	}
	var p *fakePartition
	if err == nil {
		_, p, err = fc.partitionLocked(r.Topic, r.Partition)
	}
	if err == nil {
		err = b.leads(p, r.Topic, r.Partition)
	}
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return transport.Immediate(&transport.ListOffsetsResponse{LogStartOffset: p.start, HighWatermark: p.end, LogEndOffset: p.end}, nil)
}

func (b *fakeBroker) admin(api transport.API, req *transport.Request) transport.Reply {
	fc := b.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if b.id != fc.controller {
		return transport.Immediate(nil, fmt.Errorf("%w: broker %d is not the controller", transport.ErrNotController, b.id))
	}
	if fc.adminErr != nil {
		if err := fc.adminErr(api); err != nil {
			return transport.Immediate(nil, err)
		}
	}
	if api == transport.APICreateTopic {
		var r transport.CreateTopicRequest
		if err := decodeReq(req, &r); err != nil {
			return transport.Immediate(nil, err)
		}
		if _, ok := fc.topics[r.Name]; ok {
			return transport.Immediate(nil, fmt.Errorf("%w: %q", transport.ErrTopicExists, r.Name))
		}
		if r.Partitions < 1 {
			return transport.Immediate(nil, fmt.Errorf("%w: %d", transport.ErrInvalidPartitions, r.Partitions))
		}
		t := fc.addTopicLocked(r.Name, int(r.Partitions), int(r.ReplicationFactor))
		for _, e := range r.Config {
			t.config[e.Key] = e.Value
		}
		ti := fc.topicInfoLocked(t)
		return transport.Immediate(&ti, nil)
	}
	if api == transport.APIAlterTopicConfig {
		var r transport.AlterTopicConfigRequest
		if err := decodeReq(req, &r); err != nil {
			return transport.Immediate(nil, err)
		}
		t, ok := fc.topics[r.Name]
		if !ok {
			return transport.Immediate(nil, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, r.Name))
		}
		for _, e := range r.Set {
			t.config[e.Key] = e.Value
		}
		for _, k := range r.Delete {
			delete(t.config, k)
		}
		fc.epoch++
		ti := fc.topicInfoLocked(t)
		return transport.Immediate(&ti, nil)
	}
	var r transport.TopicRequest
	if err := decodeReq(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	t, ok := fc.topics[r.Name]
	if !ok {
		return transport.Immediate(nil, fmt.Errorf("%w: %q", transport.ErrUnknownTopic, r.Name))
	}
	if api == transport.APIDeleteTopic {
		delete(fc.topics, r.Name)
	} else {
		t.sealed = true
	}
	fc.epoch++
	return transport.Immediate(nil, nil)
}

// describeCluster answers with the broker's id, a metadata blob naming
// it, and every broker as an alive gossip member.
func (b *fakeBroker) describeCluster(req *transport.Request) transport.Reply {
	if err := decodeReq(req, &transport.Empty{}); err != nil {
		return transport.Immediate(nil, err)
	}
	fc := b.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	resp := &transport.DescribeClusterResponse{NodeID: b.id, Metadata: []byte(fmt.Sprintf(`{"from":%d}`, b.id))}
	for _, id := range fc.brokerIDsLocked() {
		resp.Members = append(resp.Members, transport.Member{BrokerID: id, Gossip: fc.brokers[id].addr, State: "alive"})
	}
	return transport.Immediate(resp, nil)
}

// replicaState answers for any broker: every replica holds the partition's
// one log.
func (b *fakeBroker) replicaState(req *transport.Request) transport.Reply {
	var r transport.ReplicaStateRequest
	if err := decodeReq(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	fc := b.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.replicaReqs = append(fc.replicaReqs, r)
	_, p, err := fc.partitionLocked(r.Topic, r.Partition)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return transport.Immediate(&transport.ReplicaStateResponse{
		LogStartOffset: p.start, LogEndOffset: p.end, HighWatermark: p.end, LastEpoch: p.epoch, FencedEpoch: p.epoch,
	}, nil)
}

// catchUp answers as a leader whose follower was at offset 0.
func (b *fakeBroker) catchUp(req *transport.Request) transport.Reply {
	var r transport.CatchUpRequest
	if err := decodeReq(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	fc := b.fc
	fc.mu.Lock()
	hook := fc.catchUpErr
	fc.mu.Unlock()
	if hook != nil {
		if err := hook(b.id); err != nil {
			return transport.Immediate(nil, err)
		}
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	_, p, err := fc.partitionLocked(r.Topic, r.Partition)
	if err == nil {
		err = b.leads(p, r.Topic, r.Partition)
	}
	if err != nil {
		return transport.Immediate(nil, err)
	}
	return transport.Immediate(&transport.CatchUpResponse{FromOffset: 0, ToOffset: p.end}, nil)
}

// operatorChange answers Failover, Recover, History and CreatePartitions
// on the controller with fc.operator, and NotController elsewhere.
func (b *fakeBroker) operatorChange(api transport.API, req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if api != transport.APIHistory {
		if err := decodeReq(req, &m); err != nil {
			return transport.Immediate(nil, err)
		}
	}
	fc := b.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if b.id != fc.controller {
		return transport.Immediate(nil, fmt.Errorf("%w: broker %d is not the controller", transport.ErrNotController, b.id))
	}
	fc.operatorBodies = append(fc.operatorBodies, string(m.Data))
	hook := fc.operator
	return func(ctx context.Context) (transport.Message, error) {
		out := []byte(`{"results":[]}`)
		if hook != nil {
			var err error
			if out, err = hook(ctx, api, m.Data); err != nil {
				return nil, err
			}
		}
		return &transport.JSONMessage{Data: out}, nil
	}
}

// replicaDigest answers with a digest of the request and the broker's id,
// so that a test can tell what was asked of whom.
func (b *fakeBroker) replicaDigest(req *transport.Request) transport.Reply {
	var r transport.ReplicaDigestRequest
	if err := decodeReq(req, &r); err != nil {
		return transport.Immediate(nil, err)
	}
	fc := b.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.digestReqs = append(fc.digestReqs, digestReq{broker: b.id, req: r})
	_, p, err := fc.partitionLocked(r.Topic, r.Partition)
	if err != nil {
		return transport.Immediate(nil, err)
	}
	if r.From < p.start || r.To > p.end || r.From > r.To {
		return transport.Immediate(nil, fmt.Errorf("%w: digest of [%d, %d)", transport.ErrOffsetOutOfRange, r.From, r.To))
	}
	return transport.Immediate(&transport.ReplicaDigestResponse{
		Digest: []byte(fmt.Sprintf("%s/%d[%d,%d)", r.Topic, r.Partition, r.From, r.To)), Batches: int32(r.To - r.From),
	}, nil)
}

// testLogger routes logs to t.Log, so they show only when a test fails,
// and drops them once the test is over.
func testLogger(t testing.TB) hclog.Logger {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Debug})
}

type testLogWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// newTestClient returns a Client of fc, closed when the test ends.
func newTestClient(t testing.TB, fc *fakeCluster, mutate func(*Config)) *Client {
	t.Helper()
	cfg := Config{Bootstrap: fc.addrs(), Logger: testLogger(t), RequestTimeout: 5 * time.Second, RetryBackoff: 5 * time.Millisecond}
	if mutate != nil {
		mutate(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// newTestProducer returns a Producer, closed when the test ends.
func newTestProducer(t testing.TB, c *Client, cfg ProducerConfig) *Producer {
	t.Helper()
	p, err := NewProducer(c, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// testCtx is a context for one test step.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// deadAddr returns an address nobody listens on.
func deadAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

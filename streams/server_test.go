package streams

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/controller"
	"gostream/durable"
	"gostream/metadata"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

const testPath = "chat/room-1"

// testCluster is two brokers of one cluster: broker 1 leads the stream
// at testPath (a replica of its own, the only active one), broker 2
// holds no replica and forwards to broker 1 through its Call, which
// encodes each request and answer as the transport would and counts the
// calls.
type testCluster struct {
	mu    sync.Mutex
	meta  *metadata.Cluster
	part  *replication.Partition
	s1    *Server // the leader
	s2    *Server // forwards to s1
	calls atomic.Int64
	// onCall, when set, runs before each forwarded call.
	onCall func(api transport.API)
}

func testLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: testWriter{t}})
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func newTestCluster(t *testing.T, ct string) *testCluster {
	l, err := storage.Open(t.TempDir(), storage.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	name, err := metadata.StreamTopic(testPath)
	require.NoError(t, err)
	part := replication.NewPartition(name, 0, 1, l, nil, replication.Options{TopicID: "stream-id"})
	t.Cleanup(part.Close)
	require.NoError(t, part.SetState(replication.State{Leader: 1, LeaderEpoch: 1, Active: []int32{1}}))
	c := &testCluster{part: part, meta: &metadata.Cluster{
		Brokers: []metadata.Broker{{ID: 1, Addr: "n1:9400"}, {ID: 2, Addr: "n2:9400"}},
		Topics: []metadata.Topic{{Name: name, ID: "stream-id", ReplicationFactor: 1,
			Partitions: []metadata.Partition{{Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, Active: []int32{1}}},
			Stream:     &metadata.Stream{Path: testPath, ContentType: ct}}},
	}}
	cfg := func(broker int32) Config {
		return Config{
			Broker: broker,
			Metadata: func() *metadata.Cluster {
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.meta
			},
			RefreshMetadata: func(context.Context) error { return nil },
			Lookup: func(topic, id string) (*metadata.Topic, *replication.Partition, error) {
				c.mu.Lock()
				tp := c.meta.Topic(topic)
				c.mu.Unlock()
				if tp == nil {
					return nil, nil, metadata.ErrUnknownTopic
				}
				if id != "" && id != tp.ID {
					return nil, nil, transport.ErrUnknownTopicID
				}
				if broker != 1 {
					return tp, nil, nil
				}
				return tp, c.part, nil
			},
			Controller: func() *controller.Controller { return nil },
			CallController: func(context.Context, transport.API, transport.Message, transport.Message) (string, error) {
				return "1@n1:9400", errors.New("no controller in this test")
			},
			ForwardTimeout: 5 * time.Second,
			Logger:         testLogger(t),
		}
	}
	c.s1 = New(cfg(1))
	c2 := cfg(2)
	c2.Call = func(ctx context.Context, addr string, api transport.API, req, resp transport.Message) error {
		c.calls.Add(1)
		if c.onCall != nil {
			c.onCall(api)
		}
		require.Equal(t, "n1:9400", addr, "forwarded to the leader")
		r := &transport.Request{Frame: transport.Frame{API: uint16(api), Version: transport.Version1, Body: transport.Marshal(nil, req)}}
		m, err := c.s1.Handle(r)(ctx)
		if err != nil {
			return err
		}
		return transport.Unmarshal(transport.Marshal(nil, m), resp)
	}
	c.s2 = New(c2)
	c1 := c.s1.cfg
	c1.Call = func(context.Context, string, transport.API, transport.Message, transport.Message) error {
		t.Error("the leader called the transport for its own stream")
		return errors.New("no transport here")
	}
	c.s1.cfg = c1
	for _, s := range []*Server{c.s1, c.s2} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Run(ctx)
		}()
		t.Cleanup(func() {
			cancel()
			<-done
		})
	}
	return c
}

func (c *testCluster) topic() *metadata.Topic {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.meta.Topic(c.meta.Topics[0].Name)
}

// create makes the stream ready, as a creation's last step does.
func (c *testCluster) create(t *testing.T) {
	h, err := c.s1.initStep(context.Background(), c.topic(), &initRequest{ExpectEnd: 0, Records: []logRecord{{Kind: kindInit}}})
	require.NoError(t, err)
	require.True(t, h.Ready)
}

func i64(v int64) *int64 { return &v }

// Every operation forwarded to the stream's leader (typed transport
// messages, encoded and decoded as on the wire) answers as the leader
// answers it for itself, refusals and their headers included; the
// leader's own operations never call the transport.
func TestForwardedOperationsAnswerAsTheLeader(t *testing.T) {
	c := newTestCluster(t, "text/plain")
	ctx := context.Background()
	c.create(t)
	via := map[string]*Server{"leader": c.s1, "forwarded": c.s2}
	p := &durable.Producer{ID: "p", Epoch: 1, Seq: 0}
	for _, name := range []string{"leader", "forwarded"} {
		s := via[name]
		t.Run(name, func(t *testing.T) {
			calls := c.calls.Load()
			res, err := s.Append(ctx, &durable.AppendRequest{Path: testPath, ContentType: "text/plain", Body: []byte("hello "), HasSeq: true, Seq: "000" + fmt.Sprint(p.Seq+1), Producer: p})
			require.NoError(t, err)
			assert.Equal(t, p.Seq, res.ProducerSeq)
			assert.False(t, res.Duplicate)
			dup, err := s.Append(ctx, &durable.AppendRequest{Path: testPath, ContentType: "text/plain", Body: []byte("hello "), Producer: p})
			require.NoError(t, err)
			assert.True(t, dup.Duplicate, "the same producer sequence again is a duplicate")
			assert.Equal(t, res.Tail, dup.Tail)

			_, err = s.Append(ctx, &durable.AppendRequest{Path: testPath, ContentType: "text/plain", Body: []byte("x"), Producer: &durable.Producer{ID: "p", Epoch: 1, Seq: p.Seq + 5}})
			var ref *durable.Refusal
			require.ErrorAs(t, err, &ref)
			assert.Equal(t, &durable.Refusal{Status: http.StatusConflict, Message: "producer sequence gap", ExpectedSeq: i64(p.Seq + 1), ReceivedSeq: i64(p.Seq + 5)}, ref)
			_, err = s.Append(ctx, &durable.AppendRequest{Path: testPath, ContentType: "application/json", Body: []byte("[1]")})
			require.ErrorAs(t, err, &ref)
			assert.Equal(t, http.StatusConflict, ref.Status)
			assert.Contains(t, ref.Message, "content type")

			info, err := s.Head(ctx, testPath)
			require.NoError(t, err)
			assert.Equal(t, &durable.Info{ContentType: "text/plain", Tail: res.Tail}, info)
			read, err := s.Read(ctx, &durable.ReadRequest{Path: testPath, Offset: "-1", MaxBytes: 1 << 20})
			require.NoError(t, err)
			assert.Equal(t, res.Tail, read.Next)
			assert.True(t, read.UpToDate)
			require.NotEmpty(t, read.Messages)
			assert.Equal(t, "hello ", string(read.Messages[len(read.Messages)-1].Data))
			_, err = s.Read(ctx, &durable.ReadRequest{Path: testPath, Offset: "0000000000000099_0000000000000000", MaxBytes: 1})
			require.ErrorAs(t, err, &ref)
			assert.Equal(t, http.StatusBadRequest, ref.Status)

			lr, err := s.readLog(ctx, c.topic(), &logRequest{From: 0, To: 100, MaxBytes: 1 << 20})
			require.NoError(t, err)
			require.NotEmpty(t, lr.Records)
			assert.Equal(t, byte(kindInit), lr.Records[0].Kind)
			assert.Equal(t, "hello ", string(lr.Records[len(lr.Records)-1].Data))

			if name == "leader" {
				assert.Equal(t, calls, c.calls.Load(), "the leader's own operations call no transport")
			} else {
				assert.Greater(t, c.calls.Load(), calls)
			}
			p = &durable.Producer{ID: "p", Epoch: 1, Seq: p.Seq + 1}
		})
	}

	// Both saw the same stream: a closed stream refuses through either,
	// with Stream-Closed and the tail.
	res, err := c.s2.Append(ctx, &durable.AppendRequest{Path: testPath, Close: true})
	require.NoError(t, err)
	assert.True(t, res.Closed)
	for name, s := range via {
		_, err := s.Append(ctx, &durable.AppendRequest{Path: testPath, ContentType: "text/plain", Body: []byte("late")})
		var ref *durable.Refusal
		require.ErrorAs(t, err, &ref, name)
		assert.Equal(t, &durable.Refusal{Status: http.StatusConflict, Message: "the stream is closed: it takes no more appends", Closed: true, Tail: res.Tail}, ref, name)
	}
}

// An init step forwarded to the leader lands once: run again where the
// log no longer ends as expected, it appends nothing and says where the
// log is.
func TestForwardedInitIsAppendedOnce(t *testing.T) {
	c := newTestCluster(t, "text/plain")
	ctx := context.Background()
	step := &initRequest{ExpectEnd: 0, Records: []logRecord{{Kind: kindData, Data: []byte("abc")}, {Kind: kindFiller}}}
	h, err := c.s2.initStep(ctx, c.topic(), step)
	require.NoError(t, err)
	assert.Equal(t, int64(2), h.LogEnd)
	assert.Equal(t, int64(3), h.Pos)
	assert.False(t, h.Ready)
	again, err := c.s2.initStep(ctx, c.topic(), step)
	require.NoError(t, err)
	assert.Equal(t, h, again, "the step again appends nothing")
	h, err = c.s2.initStep(ctx, c.topic(), &initRequest{ExpectEnd: 2, Records: []logRecord{{Kind: kindInit}}})
	require.NoError(t, err)
	assert.True(t, h.Ready)
	assert.Equal(t, "0000000000000001_0000000000000003", h.Info.Tail)
	_, err = c.s2.initStep(ctx, c.topic(), &initRequest{ExpectEnd: 3, Records: []logRecord{{Kind: 'z'}}})
	assert.NoError(t, err, "a ready stream takes no step")
}

package node_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"gostream/client"
	"gostream/console"
	"gostream/durable"
	"gostream/httpapi"
	"gostream/internal/testaddr"
	"gostream/metadata"
	"gostream/node"
	"gostream/security"
	"gostream/transport"
)

// The helpers of the console's tests (console_test.go and
// console_records_test.go): one browser type for every call of the API,
// and one way to start a node and feed it records.

// consoleUser is a browser of one node's console: it calls the API over
// the node's real HTTP listener as the page does, with its token when it
// has one, and the console's header and JSON on changes.
type consoleUser struct {
	base  string // http://HOST:PORT or https://...
	token string
	hc    *http.Client
}

// browserOf is a browser without a token of the node at httpAddr, over
// plain HTTP.
func browserOf(httpAddr string) consoleUser {
	return consoleUser{base: "http://" + httpAddr, hc: &http.Client{Timeout: 30 * time.Second}}
}

// request is a request as the page makes it. body is nil for none, a
// string to send as it is (what the page would not send, too), or a
// value to send as JSON.
func (u consoleUser) request(t *testing.T, method, path string, body any) *http.Request {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		js, err := json.Marshal(b)
		require.NoError(t, err)
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, u.base+path, rd)
	require.NoError(t, err)
	if u.token != "" {
		req.Header.Set("Authorization", "Bearer "+u.token)
	}
	if method != http.MethodGet {
		req.Header.Set(console.ConsoleHeader, "1")
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// send sends req and returns the answer's status and body.
func (u consoleUser) send(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := u.hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, out
}

// do sends a request as the page makes it (see request), with headers
// changed: name and value pairs, an empty value removing the header.
func (u consoleUser) do(t *testing.T, method, path string, body any, headers ...string) (int, []byte) {
	t.Helper()
	req := u.request(t, method, path, body)
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	return u.send(t, req)
}

// consoleGet decodes a 200 answer of GET path.
func consoleGet[T any](t *testing.T, u consoleUser, path string) T {
	t.Helper()
	code, body := u.do(t, http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, code, "GET %s: %s", path, body)
	var v T
	require.NoError(t, json.Unmarshal(body, &v), "GET %s: %s", path, body)
	return v
}

// messages asks for a topic's records (query: the parameters of
// GET .../messages) and requires a 200.
func (u consoleUser) messages(t *testing.T, topic, query string) console.Messages {
	t.Helper()
	return consoleGet[console.Messages](t, u, "/ui/api/topics/"+topic+"/messages?"+query)
}

// tail opens a live tail and returns its events as they come; the tail
// ends with the test.
func (u consoleUser) tail(t *testing.T, topic, query string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := u.request(t, http.MethodGet, "/ui/api/topics/"+topic+"/tail?"+query, nil).WithContext(ctx)
	resp, err := (&http.Client{Transport: u.hc.Transport}).Do(req) // no timeout: the stream lasts
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	}
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	events := make(chan sseEvent, 1024)
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(events)
		readEvents(resp.Body, events)
	})
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
		wg.Wait()
	})
	return events
}

// metric reads one unlabeled metric of the node's /metrics.
func (u consoleUser) metric(t *testing.T, name string) float64 {
	t.Helper()
	code, body := u.do(t, http.MethodGet, "/metrics", nil)
	require.Equal(t, http.StatusOK, code, "%s", body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err)
			return f
		}
	}
	require.FailNow(t, "no metric "+name)
	return 0
}

type sseEvent struct{ name, data string }

// readEvents reads server-sent events until r ends.
func readEvents(r io.Reader, out chan<- sseEvent) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			out <- ev
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// consoleNode starts one node, security off, changed by mod when not
// nil, and returns its config and a client of it.
func consoleNode(t *testing.T, mod func(*node.Config)) (node.Config, *client.Client) {
	cfg := testConfig(t, 1, t.TempDir())
	if mod != nil {
		mod(&cfg)
	}
	startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)
	return cfg, newClient(t, client.Config{Bootstrap: []string{cfg.Listen}})
}

// newClient is a client of the cluster, closed with the test.
func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func createTopic(t *testing.T, c *client.Client, name string, partitions int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.CreateTopic(ctx, name, partitions, 1)
	require.NoError(t, err)
}

// sendEach produces recs one at a time, each in a batch of its own.
func sendEach(t *testing.T, c *client.Client, recs ...client.ProducerRecord) []client.Ack {
	t.Helper()
	p, err := client.NewProducer(c, client.ProducerConfig{Linger: -1})
	require.NoError(t, err)
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	acks := make([]client.Ack, len(recs))
	for i, r := range recs {
		acks[i], err = p.Send(ctx, r)
		require.NoError(t, err)
	}
	return acks
}

// sendAll produces recs in batches, as fast as the producer goes.
func sendAll(t *testing.T, c *client.Client, recs []client.ProducerRecord) {
	t.Helper()
	p, err := client.NewProducer(c, client.ProducerConfig{})
	require.NoError(t, err)
	defer p.Close()
	var mu sync.Mutex
	var first error
	for _, r := range recs {
		p.SendAsync(r, func(_ client.Ack, err error) {
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first = err
			}
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	require.NoError(t, p.Flush(ctx))
	require.NoError(t, first)
}

// produceN produces n records to one partition, valued "0" to n-1.
func produceN(t *testing.T, c *client.Client, topic string, partition int32, n int) {
	t.Helper()
	recs := make([]client.ProducerRecord, n)
	for i := range recs {
		recs[i] = client.ProducerRecord{Topic: topic, Partition: partition, ManualPartition: true, Value: []byte(strconv.Itoa(i))}
	}
	sendAll(t, c, recs)
}

// createStream creates a Durable Streams stream of text/plain at path
// through the node at httpAddr.
func createStream(t *testing.T, httpAddr, path string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, "http://"+httpAddr+durable.Prefix+path, nil)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}

// The console's API on a node seeded with topics, records, a group with
// commits and a Durable Streams stream, security off: each screen's
// answer, reset-offsets' dry run and execution, delete, and what a group
// with members refuses.
func TestConsoleAPIOnASeededNode(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	createTopic(t, c, "orders", 2)
	produceN(t, c, "orders", 0, 10)
	produceN(t, c, "orders", 1, 4)
	require.NoError(t, c.CommitOffsets(ctx, "billing", client.CommitOffset{Topic: "orders", Partition: 0, Offset: 6}))
	u := browserOf(cfg.HTTP)
	createStream(t, cfg.HTTP, "shop/log")

	ov := consoleGet[console.Overview](t, u, "/ui/api/overview")
	assert.Equal(t, int32(1), ov.Controller)
	assert.True(t, ov.ControllerAnswers)
	require.Len(t, ov.Brokers, 1)
	b := ov.Brokers[0]
	assert.Equal(t, int32(1), b.ID)
	assert.True(t, b.Registered)
	assert.True(t, b.Answers)
	assert.Equal(t, cfg.HTTP, b.HTTP)
	require.NotNil(t, b.DataBytes)
	assert.Positive(t, *b.DataBytes)
	require.NotNil(t, b.Replicas)
	assert.GreaterOrEqual(t, *b.Replicas, 3, "orders' two partitions and the stream's, at least")
	assert.GreaterOrEqual(t, ov.Partitions.Total, 3)
	assert.NotNil(t, ov.Warnings)
	assert.Empty(t, ov.Autopilot.Holder)

	topics := consoleGet[console.Topics](t, u, "/ui/api/topics")
	assert.NotZero(t, topics.At)
	byName := map[string]console.TopicSummary{}
	for _, tp := range topics.Topics {
		byName[tp.Name] = tp
	}
	orders, ok := byName["orders"]
	require.True(t, ok, "%+v", topics.Topics)
	assert.Equal(t, 2, orders.Partitions)
	assert.Equal(t, int64(14), orders.Records)
	assert.Positive(t, orders.Bytes)
	assert.False(t, orders.Internal)
	// billing committed 6 of orders/0's 10 (lag 4) and never committed
	// orders/1 (lag 4, from its log start), as group describe counts.
	assert.Equal(t, []console.GroupLag{{Group: "billing", Lag: 8}}, orders.Groups)
	streamTopic, ok := byName[mustStreamTopic(t, "shop/log")]
	require.True(t, ok)
	assert.True(t, streamTopic.Internal)
	assert.Equal(t, "shop/log", streamTopic.Stream)

	detail := consoleGet[console.TopicDetail](t, u, "/ui/api/topics/orders")
	require.Len(t, detail.Partitions, 2)
	p0 := detail.Partitions[0]
	assert.Equal(t, int32(1), p0.Leader)
	require.NotNil(t, p0.HighWatermark)
	assert.Equal(t, int64(10), *p0.HighWatermark)
	require.NotNil(t, p0.LogStart)
	assert.Zero(t, *p0.LogStart)
	require.Len(t, p0.ReplicaStates, 1)
	require.NotNil(t, p0.ReplicaStates[0].Lag)
	assert.Zero(t, *p0.ReplicaStates[0].Lag)
	assert.NotEmpty(t, detail.Config)
	assert.Equal(t, []console.GroupLag{{Group: "billing", Lag: 8}}, detail.Groups)
	code, body := u.do(t, http.MethodGet, "/ui/api/topics/nope", nil)
	assert.Equal(t, http.StatusNotFound, code, "%s", body)

	groups := consoleGet[console.Groups](t, u, "/ui/api/groups")
	require.Len(t, groups.Groups, 1)
	assert.Equal(t, "billing", groups.Groups[0].Name)
	assert.Equal(t, "native", groups.Groups[0].Protocol)
	require.NotNil(t, groups.Groups[0].Lag)
	assert.Equal(t, int64(8), *groups.Groups[0].Lag)

	group := consoleGet[console.GroupDetail](t, u, "/ui/api/groups/billing")
	require.Len(t, group.Partitions, 2, "every partition of a topic it committed on")
	assert.Equal(t, int64(6), *group.Partitions[0].Committed)
	assert.Equal(t, int64(10), *group.Partitions[0].LogEnd)
	assert.Equal(t, int64(4), *group.Partitions[0].Lag)
	assert.Nil(t, group.Partitions[1].Committed, "never committed")
	assert.Equal(t, int64(4), *group.Partitions[1].Lag, "from its log start")
	assert.Equal(t, int64(8), group.Lag)

	streams := consoleGet[console.Streams](t, u, "/ui/api/streams")
	require.Len(t, streams.Streams, 1)
	assert.Equal(t, "shop/log", streams.Streams[0].Path)
	assert.Equal(t, "text/plain", streams.Streams[0].ContentType)

	lag := consoleGet[console.LagHistory](t, u, "/ui/api/lag")
	require.NotEmpty(t, lag.Times)
	require.Len(t, lag.Groups, 1)
	assert.Equal(t, "billing", lag.Groups[0].Group)

	// reset-offsets: the dry run changes nothing.
	committed := func() int64 {
		o, ok, err := c.Committed(ctx, "billing", "orders", 0)
		require.NoError(t, err)
		require.True(t, ok)
		return o.Offset
	}
	code, body = u.do(t, http.MethodPost, "/ui/api/groups/billing/reset-offsets", console.ResetRequest{Topic: "orders", Partitions: []int32{0}, To: "earliest"})
	require.Equal(t, http.StatusOK, code, "%s", body)
	var reset console.ResetAnswer
	require.NoError(t, json.Unmarshal(body, &reset))
	assert.False(t, reset.Executed)
	require.Len(t, reset.Offsets, 1)
	assert.Equal(t, int64(6), *reset.Offsets[0].Committed)
	assert.Equal(t, int64(0), *reset.Offsets[0].New)
	assert.Equal(t, int64(6), committed(), "a dry run writes nothing")
	// Executed, it moves the committed offset.
	two := int64(2)
	code, body = u.do(t, http.MethodPost, "/ui/api/groups/billing/reset-offsets", console.ResetRequest{Topic: "orders", Partitions: []int32{0}, To: "offset", Value: &two, Execute: true})
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.NoError(t, json.Unmarshal(body, &reset))
	assert.True(t, reset.Executed)
	assert.Equal(t, int64(2), committed())
	code, body = u.do(t, http.MethodPost, "/ui/api/groups/billing/reset-offsets", console.ResetRequest{Topic: "orders", Partitions: []int32{7}, To: "latest"})
	assert.Equal(t, http.StatusNotFound, code, "%s", body)

	hist := consoleGet[console.History](t, u, "/ui/api/history?limit=1")
	assert.Equal(t, 1, hist.Limit)
	assert.LessOrEqual(t, len(hist.Events), 1)

	// A group with members: reset and delete are 409 until it stops.
	gc, err := client.NewGroupConsumer(c, client.GroupConfig{Group: "live", Topics: []string{"orders"}, Host: "test-host"})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		if _, err := gc.Poll(ctx, 100*time.Millisecond); err != nil {
			return false
		}
		return len(gc.Assignment()) == 2
	}, 30*time.Second, 10*time.Millisecond, "the member never got its partitions")
	live := consoleGet[console.GroupDetail](t, u, "/ui/api/groups/live")
	require.Len(t, live.Members, 1)
	assert.Equal(t, "test-host", live.Members[0].Host)
	assert.Equal(t, []console.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}, live.Members[0].Owned)
	code, body = u.do(t, http.MethodPost, "/ui/api/groups/live/reset-offsets", console.ResetRequest{Topic: "orders", To: "earliest", Execute: true})
	assert.Equal(t, http.StatusConflict, code, "%s", body)
	code, body = u.do(t, http.MethodDelete, "/ui/api/groups/live", nil)
	assert.Equal(t, http.StatusConflict, code, "%s", body)
	require.NoError(t, gc.Close(ctx))

	code, body = u.do(t, http.MethodDelete, "/ui/api/groups/billing", nil)
	assert.Equal(t, http.StatusNoContent, code, "%s", body)
	_, err = c.DescribeGroup(ctx, "billing")
	assert.ErrorIs(t, err, transport.ErrUnknownGroup)
}

// A stream's readers are the cluster's: a live reader connected to
// another node than the console's shows in the streams list after a
// round of the survey, a second one on the console's node adds to it,
// and the count goes back to 0 once they end.
func TestConsoleStreamReaders(t *testing.T) {
	cfg1 := testConfig(t, 1, t.TempDir())
	cfg1.UISurveyInterval = 50 * time.Millisecond
	startNode(t, cfg1)
	waitHealthy(t, cfg1.HTTP)
	cfg2 := testConfig(t, 2, t.TempDir())
	cfg2.Controllers = []node.ControllerAddr{{ID: 1, Addr: cfg1.Listen}}
	startNode(t, cfg2)
	waitHealthy(t, cfg2.HTTP)
	createStream(t, cfg1.HTTP, "live/feed")
	u := browserOf(cfg1.HTTP)
	readers := func() int {
		streams := consoleGet[console.Streams](t, u, "/ui/api/streams")
		require.Len(t, streams.Streams, 1)
		if streams.Streams[0].Readers == nil {
			return -1 // a broker did not tell (node 2 not yet registered)
		}
		return *streams.Streams[0].Readers
	}
	c := newClient(t, client.Config{Bootstrap: []string{cfg1.Listen}})
	require.Eventually(t, func() bool {
		md, err := c.Metadata(context.Background())
		return err == nil && len(md.Brokers) == 2
	}, 15*time.Second, 50*time.Millisecond, "node 2 registers")
	require.Eventually(t, func() bool { return readers() == 0 }, 10*time.Second, 20*time.Millisecond)

	// liveRead opens a live read on the stream at httpAddr; the returned
	// func ends it and waits until the request has returned.
	liveRead := func(httpAddr, live string) func() {
		ctx, cancel := context.WithCancel(context.Background())
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+durable.Prefix+"live/feed?offset=now&live="+live, nil)
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return // ended before its answer's header
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
		end := func() {
			cancel()
			<-done
		}
		t.Cleanup(end)
		return end
	}
	endSSE := liveRead(cfg2.HTTP, "sse")
	require.Eventually(t, func() bool { return readers() == 1 }, 10*time.Second, 20*time.Millisecond, "the SSE reader on node 2")
	endPoll := liveRead(cfg1.HTTP, "long-poll")
	require.Eventually(t, func() bool { return readers() == 2 }, 10*time.Second, 20*time.Millisecond, "and a long-poll on node 1")
	endSSE()
	endPoll()
	require.Eventually(t, func() bool { return readers() == 0 }, 10*time.Second, 20*time.Millisecond, "both ended")
}

// A Kafka consumer group whose member left (kcat -G, then Ctrl-C) shows
// its protocol type, "consumer", in the list and on its page, not
// "native": the coordinator keeps it in the group's log, and a node
// restarted (which holds no live state of an empty group) reads it there.
func TestConsoleShowsAnEmptyKafkaGroupsProtocol(t *testing.T) {
	kafkaAddr := testaddr.For(t)
	cfg := testConfig(t, 1, t.TempDir())
	cfg.KafkaListen = kafkaAddr
	cfg.GroupInitialDelay = -1 // one member: no need to wait for more
	n := startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)
	c := newClient(t, client.Config{Bootstrap: []string{cfg.Listen}})
	createTopic(t, c, "k", 1)
	produceN(t, c, "k", 0, 3)
	c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	member, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumerGroup("kcat"), kgo.ConsumeTopics("k"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	require.NoError(t, err)
	got := 0
	for got < 3 {
		fs := member.PollFetches(ctx)
		require.NoError(t, fs.Err())
		got += fs.NumRecords()
	}
	require.NoError(t, member.CommitUncommittedOffsets(ctx))
	member.Close() // leaves the group

	require.NoError(t, n.stop(t))
	startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)
	u := browserOf(cfg.HTTP)
	groups := consoleGet[console.Groups](t, u, "/ui/api/groups")
	require.Len(t, groups.Groups, 1)
	assert.Equal(t, "kcat", groups.Groups[0].Name)
	assert.Equal(t, "empty", groups.Groups[0].State)
	assert.Equal(t, "consumer", groups.Groups[0].Protocol)
	group := consoleGet[console.GroupDetail](t, u, "/ui/api/groups/kcat")
	assert.Equal(t, "consumer", group.Protocol)
	assert.Empty(t, group.Members)
	require.Len(t, group.Partitions, 1)
	assert.Equal(t, int64(3), *group.Partitions[0].Committed)
}

// mustStreamTopic is the internal topic of the stream at path.
func mustStreamTopic(t *testing.T, path string) string {
	t.Helper()
	name, err := metadata.StreamTopic(path)
	require.NoError(t, err)
	return name
}

// secureNode starts a node with TLS and tokens: node1 (its certificate)
// and admin are superusers; alice and bob have tokens and the ACLs an
// admin gives them.
type secureNode struct {
	cfg   node.Config
	tls   *tls.Config // the CA, no certificate
	admin consoleUser
	alice consoleUser
	bob   consoleUser
	anon  consoleUser
}

func startSecureNode(t *testing.T) secureNode {
	dir := t.TempDir()
	ca, err := security.NewCA("console test CA", time.Hour)
	require.NoError(t, err)
	caFile := filepath.Join(dir, "ca.crt")
	require.NoError(t, os.WriteFile(caFile, ca.PEM, 0o644))
	is, err := ca.Issue(security.IssueOptions{Name: "node1", Hosts: []string{"127.0.0.1", "localhost"}, NotAfter: time.Now().Add(time.Hour)})
	require.NoError(t, err)
	require.NoError(t, is.WriteFiles(dir, "node1"))
	tokens := map[string]string{}
	var lines []string
	for _, p := range []string{"admin", "alice", "bob"} {
		token, line, err := security.NewToken(p)
		require.NoError(t, err)
		tokens[p] = token
		lines = append(lines, line)
	}
	tokensFile := filepath.Join(dir, "tokens")
	require.NoError(t, os.WriteFile(tokensFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600))

	cfg := testConfig(t, 1, filepath.Join(dir, "data"))
	cfg.Security = node.SecurityConfig{
		TLSCert: filepath.Join(dir, "node1.crt"), TLSKey: filepath.Join(dir, "node1.key"), TLSCA: caFile,
		AuthTokensFile: tokensFile, Superusers: []string{"node1", "admin"},
	}
	startNode(t, cfg)
	tc, err := security.ClientTLS(caFile, "", "")
	require.NoError(t, err)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	user := func(p string) consoleUser {
		return consoleUser{base: "https://" + cfg.HTTP, token: tokens[p], hc: hc}
	}
	sn := secureNode{cfg: cfg, tls: tc, admin: user("admin"), alice: user("alice"), bob: user("bob"), anon: user("")}
	require.Eventually(t, func() bool {
		resp, err := hc.Get("https://" + cfg.HTTP + httpapi.HealthPath)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
	return sn
}

// client is a Go client of the node as u.
func (sn secureNode) client(t *testing.T, u consoleUser) *client.Client {
	return newClient(t, client.Config{Bootstrap: []string{sn.cfg.Listen}, TLS: sn.tls.Clone(), Token: u.token})
}

// With security on: the page loads without a principal, the API does
// not; a principal sees only what it may describe and is refused the
// rest, changes from elsewhere are refused, and an ACL added through the
// console carries its principal in the audit trail.
func TestConsoleWithSecurity(t *testing.T) {
	sn := startSecureNode(t)

	code, body := sn.anon.do(t, http.MethodGet, "/ui/", nil)
	assert.Equal(t, http.StatusOK, code, "the page itself needs no principal")
	assert.Contains(t, string(body), "<html")
	code, _ = sn.anon.do(t, http.MethodGet, "/ui/api/whoami", nil)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = sn.anon.do(t, http.MethodGet, "/ui/api/topics", nil)
	assert.Equal(t, http.StatusUnauthorized, code)

	admin := sn.client(t, sn.admin)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, name := range []string{"a", "b"} {
		_, err := admin.CreateTopic(ctx, name, 1, 1)
		require.NoError(t, err)
	}

	// A change without the console's header, or from another origin,
	// is refused and adds nothing.
	entry := console.ACL{Principal: "alice", Resource: "topic", Name: "a", Operation: "describe"}
	code, body = sn.admin.do(t, http.MethodPost, "/ui/api/acls", entry, console.ConsoleHeader, "")
	assert.Equal(t, http.StatusForbidden, code, "%s", body)
	code, body = sn.admin.do(t, http.MethodPost, "/ui/api/acls", entry, "Origin", "https://evil.example")
	assert.Equal(t, http.StatusForbidden, code, "%s", body)
	assert.Empty(t, consoleGet[console.ACLs](t, sn.admin, "/ui/api/acls").ACLs, "nothing was added")

	// alice may not add ACLs.
	code, body = sn.alice.do(t, http.MethodPost, "/ui/api/acls", entry)
	assert.Equal(t, http.StatusForbidden, code, "%s", body)

	code, body = sn.admin.do(t, http.MethodPost, "/ui/api/acls", entry)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var changed console.ACLChange
	require.NoError(t, json.Unmarshal(body, &changed))
	assert.True(t, changed.Changed)
	assert.Equal(t, "literal", changed.Entry.Pattern)
	acls := consoleGet[console.ACLs](t, sn.admin, "/ui/api/acls").ACLs
	assert.Equal(t, []console.ACL{{Principal: "alice", Resource: "topic", Name: "a", Pattern: "literal", Operation: "describe"}}, acls)
	hist := consoleGet[console.History](t, sn.admin, "/ui/api/history")
	require.NotEmpty(t, hist.Events)
	assert.Equal(t, "acl-add", hist.Events[0].Action, "newest first")
	assert.Equal(t, "admin", hist.Events[0].Requester, "the console's principal asked")

	// alice sees topic a only; b's page and an unknown topic's are the
	// same 403.
	topics := consoleGet[console.Topics](t, sn.alice, "/ui/api/topics")
	require.Len(t, topics.Topics, 1)
	assert.Equal(t, "a", topics.Topics[0].Name)
	assert.Empty(t, topics.Unavailable)
	consoleGet[console.TopicDetail](t, sn.alice, "/ui/api/topics/a")
	codeB, bodyB := sn.alice.do(t, http.MethodGet, "/ui/api/topics/b", nil)
	codeNone, _ := sn.alice.do(t, http.MethodGet, "/ui/api/topics/none", nil)
	assert.Equal(t, http.StatusForbidden, codeB, "%s", bodyB)
	assert.Equal(t, http.StatusForbidden, codeNone)
	for _, path := range []string{"/ui/api/overview", "/ui/api/acls", "/ui/api/history"} {
		code, _ := sn.alice.do(t, http.MethodGet, path, nil)
		assert.Equal(t, http.StatusForbidden, code, path)
	}
	who := consoleGet[console.Whoami](t, sn.alice, "/ui/api/whoami")
	assert.Equal(t, "alice", who.Principal)
	assert.False(t, who.Cluster.Describe)

	// bob may describe nothing: empty lists.
	assert.Empty(t, consoleGet[console.Topics](t, sn.bob, "/ui/api/topics").Topics)
	assert.Empty(t, consoleGet[console.Groups](t, sn.bob, "/ui/api/groups").Groups)
	assert.Empty(t, consoleGet[console.Streams](t, sn.bob, "/ui/api/streams").Streams)
}

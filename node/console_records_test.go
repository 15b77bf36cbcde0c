package node_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
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
	"gostream/internal/testaddr"
	"gostream/node"
	"gostream/record"
)

// The record APIs of the web console (docs/console.md: "Messages", "Live
// tail", "Charts"), over a node's real HTTP listener.

// nextRecord waits for the next record event.
func nextRecord(t *testing.T, events <-chan sseEvent, within time.Duration) console.Message {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev, ok := <-events:
			require.True(t, ok, "the tail ended")
			if ev.name != console.EventRecord {
				require.NotEqual(t, console.EventError, ev.name, ev.data)
				continue
			}
			var m console.Message
			require.NoError(t, json.Unmarshal([]byte(ev.data), &m), ev.data)
			return m
		case <-deadline:
			require.FailNow(t, "no record event", "within %s", within)
		}
	}
}

func offsetsOf(ms []console.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.Offset
	}
	return out
}

func text(b *console.Bytes) string {
	if b == nil || b.Text == nil {
		return "<none>"
	}
	return *b.Text
}

func TestConsoleMessagesBrowse(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "orders", 2)
	var recs []client.ProducerRecord
	for i := range 30 {
		recs = append(recs, client.ProducerRecord{Topic: "orders", Partition: 0, ManualPartition: true,
			Key: fmt.Appendf(nil, "k-%d", i), Value: fmt.Appendf(nil, "v0-%d", i)})
	}
	for i := range 20 {
		recs = append(recs, client.ProducerRecord{Topic: "orders", Partition: 1, ManualPartition: true,
			Key: fmt.Appendf(nil, "k-%d", i), Value: fmt.Appendf(nil, "v1-%d", i)})
	}
	acks := sendEach(t, c, recs...)
	u := browserOf(cfg.HTTP)

	m := u.messages(t, "orders", "partition=0&start=earliest&limit=10")
	assert.Equal(t, []int64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, offsetsOf(m.Records))
	assert.Equal(t, map[int32]int64{0: 10}, m.Next)
	assert.False(t, m.Done)
	assert.Equal(t, 10, m.Scanned)
	r3 := m.Records[3]
	assert.Equal(t, "k-3", text(r3.Key))
	assert.Equal(t, "v0-3", text(r3.Value))
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte("v0-3")), r3.Value.B64)
	assert.Equal(t, acks[3].Timestamp, r3.Timestamp)
	assert.Equal(t, []console.Header{}, r3.Headers)

	m = u.messages(t, "orders", "partition=0&start=latest&limit=5")
	assert.Equal(t, []int64{25, 26, 27, 28, 29}, offsetsOf(m.Records))
	assert.True(t, m.Done)
	assert.Empty(t, m.Next)

	m = u.messages(t, "orders", "partition=0&start=offset:12&limit=3")
	assert.Equal(t, []int64{12, 13, 14}, offsetsOf(m.Records))
	assert.Equal(t, map[int32]int64{0: 15}, m.Next)

	// By time: the first record appended at or after the time of record
	// 17 (records before it may share its millisecond).
	when := acks[17].Timestamp
	want := slices.IndexFunc(acks[:30], func(a client.Ack) bool { return a.Timestamp >= when })
	m = u.messages(t, "orders", "partition=0&start=time:"+strconv.FormatInt(when, 10)+"&limit=1")
	require.Len(t, m.Records, 1)
	assert.Equal(t, int64(want), m.Records[0].Offset)

	// Every partition: all 50, oldest first.
	m = u.messages(t, "orders", "start=earliest&limit=500")
	require.Len(t, m.Records, 50)
	assert.True(t, m.Done)
	assert.Equal(t, 50, m.Scanned)
	assert.True(t, slices.IsSortedFunc(m.Records, func(a, b console.Message) int { return int(a.Timestamp - b.Timestamp) }))
	assert.Len(t, u.messages(t, "orders", "").Records, 50, "the default limit is 50")

	// The newest 4 across both partitions.
	all := make([]client.Ack, len(acks))
	copy(all, acks)
	slices.SortFunc(all, func(a, b client.Ack) int {
		if a.Timestamp != b.Timestamp {
			return int(a.Timestamp - b.Timestamp)
		}
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	m = u.messages(t, "orders", "start=latest&limit=4")
	require.Len(t, m.Records, 4)
	for i, r := range m.Records {
		assert.Equal(t, all[46+i].Partition, r.Partition)
		assert.Equal(t, all[46+i].Offset, r.Offset)
	}
}

func TestConsoleMessagesSearch(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "search", 1)
	rec := func(key, value string, headers ...record.Header) client.ProducerRecord {
		return client.ProducerRecord{Topic: "search", Key: []byte(key), Value: []byte(value), Headers: headers}
	}
	sendEach(t, c,
		rec("alpha", "plain"),              // 0
		rec("beta", "has a needle inside"), // 1
		rec("needle-key", "x"),             // 2
		rec("gamma", "y", record.Header{Key: "trace", Value: []byte("needle-h")}), // 3
		rec("delta", "z", record.Header{Key: "needle-name", Value: []byte("v")}),  // 4
		rec("eps", "\xff\xfe needle"),                                             // 5: not UTF-8
	)
	u := browserOf(cfg.HTTP)
	for _, tc := range []struct {
		query string
		want  []int64
	}{
		{"q=needle", []int64{1, 2, 3, 4, 5}},
		{"q=needle&in=key", []int64{2}},
		{"q=needle&in=value", []int64{1, 5}},
		{"q=needle&in=headers", []int64{3, 4}},
		{"q=needle&in=key,headers", []int64{2, 3, 4}},
		{"q=Needle", []int64{}},
		{"q=" + url.QueryEscape("\xff\xfe"), []int64{5}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			m := u.messages(t, "search", tc.query)
			assert.Equal(t, tc.want, offsetsOf(m.Records))
			assert.Equal(t, 6, m.Scanned)
			assert.True(t, m.Done)
		})
	}
	m := u.messages(t, "search", "q=needle-h")
	require.Len(t, m.Records, 1)
	assert.Equal(t, []console.Header{{Key: "trace", Value: &console.Bytes{Text: ptr("needle-h"),
		B64: base64.StdEncoding.EncodeToString([]byte("needle-h")), Size: 8}}}, m.Records[0].Headers)
	m = u.messages(t, "search", "partition=0&start=offset:5")
	require.Len(t, m.Records, 1)
	assert.Nil(t, m.Records[0].Value.Text, "bytes that are not UTF-8 have no text")
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte("\xff\xfe needle")), m.Records[0].Value.B64)
}

func ptr[T any](v T) *T { return &v }

// A search reads at most 10,000 records and says where it stopped; going
// on from there finds what lies beyond.
func TestConsoleMessagesScanIsBounded(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "big", 1)
	recs := make([]client.ProducerRecord, 12_000)
	for i := range recs {
		recs[i] = client.ProducerRecord{Topic: "big", Value: fmt.Appendf(nil, "r-%d", i)}
	}
	recs[11_000].Value = []byte("match-me")
	sendAll(t, c, recs)
	u := browserOf(cfg.HTTP)

	m := u.messages(t, "big", "q=match-me")
	assert.Empty(t, m.Records)
	assert.Equal(t, 10_000, m.Scanned)
	assert.Equal(t, map[int32]int64{0: 10_000}, m.Next)
	assert.False(t, m.Done)

	m = u.messages(t, "big", "q=match-me&start=offsets:0=10000")
	assert.Equal(t, []int64{11_000}, offsetsOf(m.Records))
	assert.Equal(t, 2_000, m.Scanned)
	assert.True(t, m.Done)

	// A page holds limit records and goes on after the last.
	m = u.messages(t, "big", "start=offsets:0=500&limit=500")
	assert.Equal(t, int64(500), m.Records[0].Offset)
	assert.Equal(t, int64(999), m.Records[499].Offset)
	assert.Equal(t, map[int32]int64{0: 1000}, m.Next)
}

// Values beyond 64 KiB are cut, and an answer carries at most about
// 4 MiB of them: the rest is for the next request.
func TestConsoleMessagesCutLargeValues(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "large", 1)
	value := strings.Repeat("é", 50<<10) // 100 KiB of two-byte characters
	recs := make([]client.ProducerRecord, 100)
	for i := range recs {
		recs[i] = client.ProducerRecord{Topic: "large", Value: []byte(value)}
	}
	sendAll(t, c, recs)
	u := browserOf(cfg.HTTP)
	m := u.messages(t, "large", "limit=500")
	require.Len(t, m.Records, 64, "4 MiB of 64 KiB values")
	v := m.Records[0].Value
	assert.True(t, v.Cut)
	assert.Equal(t, 100<<10, v.Size)
	require.NotNil(t, v.Text)
	assert.Equal(t, value[:64<<10], *v.Text)
	assert.Equal(t, map[int32]int64{0: 64}, m.Next)
}

func TestConsoleMessagesRefuseBadQueries(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "t", 2)
	u := browserOf(cfg.HTTP)
	for _, tc := range []struct{ query, says string }{
		{"partition=-1", "partition"},
		{"partition=x", "partition"},
		{"partition=%2B1", "partition"},
		{"limit=0", "limit"},
		{"limit=501", "limit"},
		{"start=first", "start"},
		{"start=offset:-1", "offset"},
		{"start=offset:", "offset"},
		{"start=time:yesterday", "time"},
		{"start=offsets:", "offsets"},
		{"start=offsets:0=1,0=2", "twice"},
		{"start=offsets:0=1&partition=0", "without partition"},
		{"in=key", "give q"},
		{"q=a&in=body", "in"},
		{"q=a&in=key,key", "twice"},
		{"q=" + strings.Repeat("a", 1025), "q of 1025 bytes"},
		{"limit=1&limit=2", "given 2 times"},
		{"offset=3", "unknown parameter"},
		{"q=%zz", "not well formed"},
	} {
		t.Run(tc.query, func(t *testing.T) {
			code, body := u.do(t, http.MethodGet, "/ui/api/topics/t/messages?"+tc.query, nil)
			assert.Equal(t, http.StatusBadRequest, code, "%s", body)
			assert.Contains(t, string(body), tc.says)
		})
	}
	code, body := u.do(t, http.MethodGet, "/ui/api/topics/nope/messages", nil)
	assert.Equal(t, http.StatusNotFound, code, "%s", body)
	code, body = u.do(t, http.MethodGet, "/ui/api/topics/t/messages?partition=2", nil)
	assert.Equal(t, http.StatusNotFound, code, "%s", body)
	code, body = u.do(t, http.MethodGet, "/ui/api/topics/t/tail?partition=x", nil)
	assert.Equal(t, http.StatusBadRequest, code, "%s", body)
	code, body = u.do(t, http.MethodGet, "/ui/api/series?node=-2", nil)
	assert.Equal(t, http.StatusBadRequest, code, "%s", body)
}

func TestConsoleProduceThenRead(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "notes", 2)
	u := browserOf(cfg.HTTP)

	code, body := u.do(t, http.MethodPost, "/ui/api/topics/notes/produce", `{"key":"k1","value":"hello <b>","headers":[{"key":"h","value":"v"}]}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	var p console.Produced
	require.NoError(t, json.Unmarshal(body, &p))
	assert.Equal(t, int32(client.Partition([]byte("k1"), 2)), p.Partition, "the key chooses the partition")
	m := u.messages(t, "notes", fmt.Sprintf("partition=%d&start=offset:%d&limit=1", p.Partition, p.Offset))
	require.Len(t, m.Records, 1)
	r := m.Records[0]
	assert.Equal(t, "k1", text(r.Key))
	assert.Equal(t, "hello <b>", text(r.Value))
	assert.Equal(t, p.Timestamp, r.Timestamp)
	require.Len(t, r.Headers, 1)
	assert.Equal(t, "h", r.Headers[0].Key)
	assert.Equal(t, "v", text(r.Headers[0].Value))

	code, body = u.do(t, http.MethodPost, "/ui/api/topics/notes/produce", `{"partition":1,"value":""}`)
	require.Equal(t, http.StatusOK, code, "%s", body)
	require.NoError(t, json.Unmarshal(body, &p))
	assert.Equal(t, int32(1), p.Partition)
	m = u.messages(t, "notes", fmt.Sprintf("partition=1&start=offset:%d", p.Offset))
	require.Len(t, m.Records, 1)
	assert.Nil(t, m.Records[0].Key, "no key is a null key")
	assert.Equal(t, "", text(m.Records[0].Value))

	// Bad bodies: refused, and nothing written.
	hw := func() (n int64) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for p := range int32(2) {
			o, err := c.ListOffsets(ctx, "notes", p)
			require.NoError(t, err)
			n += o.HighWatermark
		}
		return n
	}
	before := hw()
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"key":"k"}`, http.StatusBadRequest},
		{`{"value":"v","extra":1}`, http.StatusBadRequest},
		{`{"value":"v","partition":-1}`, http.StatusBadRequest},
		{`{"value":"v","partition":2147483648}`, http.StatusBadRequest},
		{`{"value":"v"} {"value":"w"}`, http.StatusBadRequest},
		{`value=v`, http.StatusBadRequest},
		{`{"value":"v","partition":7}`, http.StatusNotFound},
		{`{"value":"` + strings.Repeat("a", 1<<20) + `"}`, http.StatusBadRequest},
	} {
		code, body := u.do(t, http.MethodPost, "/ui/api/topics/notes/produce", tc.body)
		assert.Equal(t, tc.code, code, "%.80s: %s", tc.body, body)
	}
	code, body = u.do(t, http.MethodPost, "/ui/api/topics/nope/produce", `{"value":"v"}`)
	assert.Equal(t, http.StatusNotFound, code, "%s", body)
	req := u.request(t, http.MethodPost, "/ui/api/topics/notes/produce", `{"value":"v"}`)
	req.Header.Del(console.ConsoleHeader)
	code, body = u.send(t, req)
	assert.Equal(t, http.StatusForbidden, code, "%s", body)
	assert.Equal(t, before, hw())
}

// Records a Kafka client produced (Kafka's own batches, compressed) read
// as any others.
func TestConsoleReadsKafkaClientsRecords(t *testing.T) {
	kafkaAddr := testaddr.For(t)
	cfg, c := consoleNode(t, func(cfg *node.Config) { cfg.KafkaListen = kafkaAddr })
	createTopic(t, c, "k", 1)
	kc, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ProducerBatchCompression(kgo.ZstdCompression()))
	require.NoError(t, err)
	defer kc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := time.UnixMilli(1_700_000_000_000)
	var recs []*kgo.Record
	for i := range 3 {
		recs = append(recs, &kgo.Record{Topic: "k", Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "value-%d", i),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}, Timestamp: base.Add(time.Duration(i) * time.Second)})
	}
	recs = append(recs, &kgo.Record{Topic: "k", Key: []byte("gone"), Timestamp: base.Add(3 * time.Second)}) // a tombstone
	require.NoError(t, kc.ProduceSync(ctx, recs...).FirstErr())

	m := browserOf(cfg.HTTP).messages(t, "k", "")
	require.Len(t, m.Records, 4)
	for i, r := range m.Records[:3] {
		assert.Equal(t, fmt.Sprint("key-", i), text(r.Key))
		assert.Equal(t, fmt.Sprint("value-", i), text(r.Value))
		assert.Equal(t, base.Add(time.Duration(i)*time.Second).UnixMilli(), r.Timestamp, "the producer's own time")
		require.Len(t, r.Headers, 1)
		assert.Equal(t, strconv.Itoa(i), text(r.Headers[0].Value))
	}
	assert.Nil(t, m.Records[3].Value, "a null value is null")
}

func TestConsoleTailFollowsNewRecords(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "live", 2)
	sendEach(t, c, client.ProducerRecord{Topic: "live", Value: []byte("before")})
	u := browserOf(cfg.HTTP)
	all := u.tail(t, "live", "")
	one := u.tail(t, "live", "partition=1")

	for _, p := range []int32{0, 1} {
		acks := sendEach(t, c, client.ProducerRecord{Topic: "live", Partition: p, ManualPartition: true, Value: fmt.Appendf(nil, "fresh-%d", p)})
		acked := time.Now()
		m := nextRecord(t, all, 5*time.Second)
		assert.Less(t, time.Since(acked), time.Second, "a record reaches the tail within a second")
		assert.Equal(t, fmt.Sprint("fresh-", p), text(m.Value), "the tail starts at the end, not at what came before")
		assert.Equal(t, p, m.Partition)
		assert.Equal(t, acks[0].Offset, m.Offset)
	}
	m := nextRecord(t, one, 5*time.Second)
	assert.Equal(t, "fresh-1", text(m.Value), "a tail of partition 1 sees only partition 1")

	code, body := u.do(t, http.MethodGet, "/ui/api/topics/nope/tail", nil)
	assert.Equal(t, http.StatusNotFound, code, "%s", body)
}

// A node that stops ends its tails with an error event at once, rather
// than after its shutdown's timeout.
func TestConsoleTailEndsWhenTheNodeStops(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	n := startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)
	createTopic(t, newClient(t, client.Config{Bootstrap: []string{cfg.Listen}}), "live", 1)
	events := browserOf(cfg.HTTP).tail(t, "live", "")
	start := time.Now()
	require.NoError(t, n.stop(t))
	assert.Less(t, time.Since(start), node.ShutdownTimeout/2, "the tail did not hold the shutdown")
	var last sseEvent
	for ev := range events {
		last = ev
	}
	assert.Equal(t, console.EventError, last.name)
	assert.Contains(t, last.data, "the node is stopping")
}

// A node whose console asked the cluster (the overview reads every
// node's status over HTTP, this node's too) stops at once: the console's
// client closes its connections to this node's HTTP server before the
// server waits for its connections. Before, a connection the client had
// dialed and never used held the stop for five seconds.
func TestConsoleDoesNotHoldTheNodesStop(t *testing.T) {
	cfg := testConfig(t, 1, t.TempDir())
	n := startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)
	u := browserOf(cfg.HTTP)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { consoleGet[console.Overview](t, u, "/ui/api/overview") })
	}
	wg.Wait()
	start := time.Now()
	require.NoError(t, n.stop(t))
	assert.Less(t, time.Since(start), 3*time.Second, "the node's stop")
}

func TestConsoleTailsAreBounded(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "live", 1)
	u := browserOf(cfg.HTTP)
	type open struct {
		cancel context.CancelFunc
		body   io.Closer
	}
	var tails []open
	for range 32 {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := http.DefaultClient.Do(u.request(t, http.MethodGet, "/ui/api/topics/live/tail", nil).WithContext(ctx))
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		tails = append(tails, open{cancel, resp.Body})
	}
	assert.Equal(t, 32.0, u.metric(t, "gostream_console_tails"))
	code, body := u.do(t, http.MethodGet, "/ui/api/topics/live/tail", nil)
	assert.Equal(t, http.StatusTooManyRequests, code)
	assert.Contains(t, string(body), "too many live tails on this node (32)")

	for _, o := range tails {
		o.cancel()
		o.body.Close()
	}
	require.Eventually(t, func() bool { return u.metric(t, "gostream_console_tails") == 0 }, 5*time.Second, 20*time.Millisecond,
		"a tail whose browser went ends")
	u.tail(t, "live", "")
}

// A browser that stops reading is dropped within the write deadline, its
// consumers stop, and the node does not keep what it would have sent.
func TestConsoleTailDropsABrowserThatDoesNotRead(t *testing.T) {
	cfg, c := consoleNode(t, nil)
	createTopic(t, c, "fast", 1)
	u := browserOf(cfg.HTTP)

	// A raw connection with a small receive buffer that reads the
	// answer's header and then nothing.
	conn, err := net.Dial("tcp", cfg.HTTP)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	_, err = fmt.Fprintf(conn, "GET /ui/api/topics/fast/tail HTTP/1.1\r\nHost: %s\r\n\r\n", cfg.HTTP)
	require.NoError(t, err)
	header := readHeader(t, conn)
	require.True(t, strings.HasPrefix(header, "HTTP/1.1 200"), header)
	require.Equal(t, 1.0, u.metric(t, "gostream_console_tails"))

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	// Produce fast, far more than the socket buffers hold, until the
	// node drops the tail.
	value := make([]byte, 64<<10)
	for i := range value {
		value[i] = byte('a' + i%26)
	}
	p, err := client.NewProducer(c, client.ProducerConfig{})
	require.NoError(t, err)
	defer p.Close()
	start := time.Now()
	produced := 0
	send := func() {
		for range 64 {
			p.SendAsync(client.ProducerRecord{Topic: "fast", Value: value}, nil)
		}
		produced += 64
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, p.Flush(ctx))
	}
	// Until the node drops the tail, with the heap measured after each
	// 4 MiB while the tail is still there: had the node kept what it
	// could not send, 20 MiB of records and their JSON (2.3 times as
	// much) would show.
	var growth int64
	producedAlive := 0
	for u.metric(t, "gostream_console_tail_drops_total") == 0 {
		require.Less(t, time.Since(start), 15*time.Second, "the tail was not dropped within its write deadline")
		send()
		if u.metric(t, "gostream_console_tails") == 1 {
			runtime.GC()
			var now runtime.MemStats
			runtime.ReadMemStats(&now)
			growth = max(growth, int64(now.HeapAlloc)-int64(before.HeapAlloc))
			producedAlive = produced
		}
	}
	t.Logf("heap growth at most %d KiB while the tail was stuck, with %d MiB produced", growth>>10, producedAlive*len(value)>>20)
	require.GreaterOrEqual(t, producedAlive*len(value), 20<<20, "too little was produced before the drop to tell")
	assert.Less(t, growth, int64(64<<20))
	t.Logf("dropped after %s, %d MiB produced", time.Since(start), produced*len(value)>>20)
	require.Eventually(t, func() bool { return u.metric(t, "gostream_console_tails") == 0 }, 5*time.Second, 20*time.Millisecond,
		"the dropped tail's consumers stop")
}

// readHeader reads an HTTP answer's header from conn, byte by byte, so
// that nothing after it is read.
func readHeader(t *testing.T, conn net.Conn) string {
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetReadDeadline(time.Time{})
	var b strings.Builder
	one := make([]byte, 1)
	for !strings.HasSuffix(b.String(), "\r\n\r\n") {
		_, err := conn.Read(one)
		require.NoError(t, err, "after %q", b.String())
		b.Write(one)
	}
	return b.String()
}

func TestConsoleSeries(t *testing.T) {
	cfg, c := consoleNode(t, func(cfg *node.Config) { cfg.UISeriesInterval = 50 * time.Millisecond })
	createTopic(t, c, "s", 1)
	u := browserOf(cfg.HTTP)
	recs := make([]client.ProducerRecord, 200)
	for i := range recs {
		recs[i] = client.ProducerRecord{Topic: "s", Value: []byte("x")}
	}
	sendAll(t, c, recs)
	u.messages(t, "s", "limit=500")

	var s console.Series
	require.Eventually(t, func() bool {
		code, body := u.do(t, http.MethodGet, "/ui/api/series", nil)
		require.Equal(t, http.StatusOK, code, "%s", body)
		s = console.Series{}
		require.NoError(t, json.Unmarshal(body, &s))
		var produced, fetched float64
		var fsyncs uint64
		for _, smp := range s.Samples {
			produced += smp.ProducedPerSec
			fetched += smp.FetchedPerSec
			fsyncs += smp.Fsyncs
		}
		return produced > 0 && fetched > 0 && fsyncs > 0
	}, 10*time.Second, 50*time.Millisecond, "samples of the records produced, fetched and the fsyncs")
	assert.Equal(t, int32(1), s.Node)
	assert.Equal(t, int64(50), s.IntervalMs)
	for _, smp := range s.Samples {
		if smp.Fsyncs > 0 {
			assert.Positive(t, smp.FsyncMeanMs)
			assert.GreaterOrEqual(t, smp.FsyncMaxMs, smp.FsyncMeanMs)
		}
	}
	code, body := u.do(t, http.MethodGet, "/ui/api/series?node=1", nil)
	assert.Equal(t, http.StatusOK, code, "%s", body)
	code, body = u.do(t, http.MethodGet, "/ui/api/series?node=9", nil)
	assert.Equal(t, http.StatusNotFound, code, "%s", body)
}

// A node answers another's samples by asking it, as itself.
func TestConsoleSeriesOfAnotherNode(t *testing.T) {
	cfg1 := testConfig(t, 1, t.TempDir())
	startNode(t, cfg1)
	waitHealthy(t, cfg1.HTTP)
	cfg2 := testConfig(t, 2, t.TempDir())
	cfg2.Controllers = []node.ControllerAddr{{ID: 1, Addr: cfg1.Listen}}
	cfg2.UISeriesInterval = 50 * time.Millisecond
	startNode(t, cfg2)
	waitHealthy(t, cfg2.HTTP)
	u := browserOf(cfg1.HTTP)
	var s console.Series
	require.Eventually(t, func() bool {
		code, body := u.do(t, http.MethodGet, "/ui/api/series?node=2", nil)
		if code != http.StatusOK {
			t.Logf("%d %s", code, body)
			return false
		}
		require.NoError(t, json.Unmarshal(body, &s))
		return len(s.Samples) > 0
	}, 15*time.Second, 100*time.Millisecond)
	assert.Equal(t, int32(2), s.Node)
	assert.Equal(t, int64(50), s.IntervalMs, "node 2's own samples")
}

// With security on, the record APIs need their rights: read on the topic
// to browse and tail, write to produce, describe on the cluster for the
// charts.
func TestConsoleRecordAPIsNeedTheirRights(t *testing.T) {
	sn := startSecureNode(t)
	admin := sn.client(t, sn.admin)
	createTopic(t, admin, "secret", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := admin.AddACLs(ctx, []client.ACL{{Principal: "alice", Resource: "topic", Name: "secret", Pattern: "literal", Operation: "read"}}, "admin")
	require.NoError(t, err)
	sendEach(t, admin, client.ProducerRecord{Topic: "secret", Value: []byte("s")})

	require.Eventually(t, func() bool {
		code, _ := sn.alice.do(t, http.MethodGet, "/ui/api/topics/secret/messages", nil)
		return code == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "alice reads once her ACL reached the node")
	assert.Len(t, sn.alice.messages(t, "secret", "").Records, 1)
	sn.alice.tail(t, "secret", "")
	for _, tc := range []struct {
		who    consoleUser
		method string
		path   string
		body   any
		code   int
	}{
		{sn.alice, http.MethodPost, "/ui/api/topics/secret/produce", `{"value":"v"}`, http.StatusForbidden},
		{sn.alice, http.MethodGet, "/ui/api/series", nil, http.StatusForbidden},
		{sn.bob, http.MethodGet, "/ui/api/topics/secret/messages", nil, http.StatusForbidden},
		{sn.bob, http.MethodGet, "/ui/api/topics/secret/tail", nil, http.StatusForbidden},
		{sn.bob, http.MethodPost, "/ui/api/topics/secret/produce", `{"value":"v"}`, http.StatusForbidden},
		{sn.bob, http.MethodGet, "/ui/api/topics/nope/messages", nil, http.StatusForbidden},
		{sn.anon, http.MethodGet, "/ui/api/topics/secret/messages", nil, http.StatusUnauthorized},
		{sn.admin, http.MethodPost, "/ui/api/topics/secret/produce", `{"value":"v"}`, http.StatusOK},
		{sn.admin, http.MethodGet, "/ui/api/series", nil, http.StatusOK},
	} {
		code, body := tc.who.do(t, tc.method, tc.path, tc.body)
		assert.Equal(t, tc.code, code, "%s %s: %s", tc.method, tc.path, body)
	}
	assert.Len(t, sn.alice.messages(t, "secret", "").Records, 2, "only the admin's produce wrote")
}

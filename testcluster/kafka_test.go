package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ctlRecord is a record as gostream-ctl consume -o json prints it.
type ctlRecord struct {
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp string `json:"timestamp"`
	Key       string `json:"key"`
	Value     string `json:"value"`
	Headers   []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"headers"`
}

// One log, two protocols: franz-go (idempotent, as it is by default)
// produces keyed records with headers and their own timestamps, in gzip,
// to an RF=3 topic through one node;
// franz-go reads them back through each node, and gostream-ctl consume
// reads the same records at the same offsets, keys, values, headers and
// timestamps intact.
func TestKafkaClientsAndNativeConsumersShareTheLog(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	ctlOK(t, c, "topic", "create", "k", "--partitions", "3", "--replication-factor", "3")

	const n = 3000
	pr, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).Kafka), kgo.ProducerBatchCompression(kgo.GzipCompression()),
		kgo.ProducerLinger(5*time.Millisecond))
	require.NoError(t, err)
	defer pr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	base := time.UnixMilli(1_700_000_000_000)
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: "k", Key: []byte(fmt.Sprint("key-", i%97)), Value: []byte(fmt.Sprint("value-", i)),
			Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(strconv.Itoa(i))}}, Timestamp: base.Add(time.Duration(i) * time.Millisecond)})
	}
	results := pr.ProduceSync(ctx, recs...)
	require.NoError(t, results.FirstErr())

	// What gostream-ctl reads.
	out := ctlOK(t, c, "consume", "k", "-o", "json").Stdout
	native := map[string]ctlRecord{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r ctlRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		native[r.Value] = r
	}
	require.Len(t, native, n)
	for _, res := range results {
		r := res.Record
		got, ok := native[string(r.Value)]
		require.True(t, ok, "%s not read by gostream-ctl", r.Value)
		assert.Equal(t, r.Partition, got.Partition)
		assert.Equal(t, r.Offset, got.Offset, "%s", r.Value)
		assert.Equal(t, string(r.Key), got.Key)
		require.Len(t, got.Headers, 1)
		assert.Equal(t, string(r.Headers[0].Value), got.Headers[0].Value)
		ts, err := time.Parse(time.RFC3339Nano, got.Timestamp)
		require.NoError(t, err)
		assert.Equal(t, r.Timestamp.UnixMilli(), ts.UnixMilli(), "%s: the producer's timestamp", r.Value)
	}

	// What franz-go reads, through each node.
	for _, node := range c.Nodes {
		cl, err := kgo.NewClient(kgo.SeedBrokers(node.Kafka), kgo.ConsumeTopics("k"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		read := 0
		for read < n {
			fs := cl.PollFetches(ctx)
			require.NoError(t, ctx.Err(), "through node %d: read %d of %d", node.ID, read, n)
			fs.EachError(func(topic string, p int32, err error) { t.Fatalf("through node %d: %s/%d: %v", node.ID, topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				read++
				want := native[string(r.Value)]
				assert.Equal(t, want.Offset, r.Offset)
				assert.Equal(t, want.Key, string(r.Key))
			})
		}
		cl.Close()
		assert.Equal(t, n, read, "through node %d", node.ID)
	}
}

// kcatPath is Debian's kcat (librdkafka, the strictest client about the
// versions a broker advertises). .ci/run installs it and sets
// GOSTREAM_REQUIRE_KAFKA_TOOLS=1, so that CI never skips what needs it.
func kcatPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("GOSTREAM_REQUIRE_KAFKA_TOOLS") == "1" {
			t.Fatalf("GOSTREAM_REQUIRE_KAFKA_TOOLS=1 but kcat is not installed: %v", err)
		}
		t.Skip("kcat is not installed (apt-get install kcat)")
	}
	return p
}

// kcat (librdkafka 2.0) produces keyed records with a header in each of
// its codecs through one node and consumes them through another, with
// what gostream-ctl produced beside them, and kcat -L lists the brokers
// with their Kafka endpoints.
func TestKcatProducesAndConsumes(t *testing.T) {
	kcat := kcatPath(t)
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	ctlOK(t, c, "topic", "create", "kc", "--partitions", "2", "--replication-factor", "3")
	run := func(stdin string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, kcat, args...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kcat %v: %s", args, out)
		return string(out)
	}
	meta := run("", "-b", c.Node(3).Kafka, "-L")
	for _, n := range c.Nodes {
		assert.Contains(t, meta, fmt.Sprintf("broker %d at %s", n.ID, n.Kafka))
	}
	var want []string
	for _, z := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		var lines []string
		for i := range 20 {
			lines = append(lines, fmt.Sprintf("%s-%d:value-%s-%d", z, i, z, i))
			want = append(want, fmt.Sprintf("%s-%d=value-%s-%d h=%s", z, i, z, i, z))
		}
		run(strings.Join(lines, "\n")+"\n", "-b", c.Node(1).Kafka, "-t", "kc", "-P", "-K:", "-z", z, "-H", "h="+z)
	}
	ctlOK(t, c, "produce", "kc", "--key", "native", "from gostream")
	want = append(want, "native=from gostream ")
	out := run("", "-b", c.Node(2).Kafka, "-t", "kc", "-C", "-e", "-o", "beginning", "-q", "-f", "%k=%s %h\n")
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if line != "" {
			got = append(got, line)
		}
	}
	assert.ElementsMatch(t, want, got)
	native := ctlOK(t, c, "consume", "kc", "-o", "json").Stdout
	assert.Equal(t, len(want), strings.Count(native, "\n"), "gostream-ctl reads every record kcat wrote")
}

// A Kafka admin client creates a topic (sent to the controller Metadata
// names) with a config gostream has, is refused one that exists and a
// config it does not have, produces to and reads the topic, and deletes
// it; gostream-ctl sees each change.
func TestKafkaAdminCreatesAndDeletesTopics(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).Kafka), kgo.DisableIdempotentWrite())
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	create := func(name, key, value string) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, 4, 3
		if key != "" {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = key, kmsg.StringPtr(value)
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Len(t, resp.Topics, 1)
		return resp.Topics[0]
	}
	assert.Equal(t, int16(0), create("made-by-kafka", "retention.ms", "3600000").ErrorCode)
	assert.Equal(t, kerr.TopicAlreadyExists.Code, create("made-by-kafka", "", "").ErrorCode)
	assert.NotEqual(t, int16(0), create("bad-config", "cleanup.policy", "compact").ErrorCode, "a config gostream does not have")
	desc := ctlOK(t, c, "topic", "describe", "made-by-kafka").Stdout
	assert.Contains(t, desc, "3600000")

	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "made-by-kafka", Value: []byte("x")}).FirstErr())
	assert.Contains(t, ctlOK(t, c, "consume", "made-by-kafka", "-o", "json").Stdout, `"value":"x"`)

	del := kmsg.NewPtrDeleteTopicsRequest()
	dt := kmsg.NewDeleteTopicsRequestTopic()
	dt.Topic = kmsg.StringPtr("made-by-kafka")
	del.Topics = append(del.Topics, dt)
	del.TopicNames = []string{"made-by-kafka"}
	dresp, err := del.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NotEmpty(t, dresp.Topics)
	assert.Equal(t, int16(0), dresp.Topics[0].ErrorCode)
	assert.NotContains(t, ctlOK(t, c, "topic", "list").Stdout, "made-by-kafka")
}

// A Kafka admin client reads a topic's configs (those gostream has, and
// cleanup.policy=delete, read-only), changes one (gostream-ctl sees it),
// is refused what gostream cannot do, and describes the cluster with
// every broker at its Kafka endpoint.
func TestKafkaConfigsAndDescribeCluster(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	ctlOK(t, c, "topic", "create", "cfg", "--partitions", "1", "--replication-factor", "3")
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(3).Kafka))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	describe := func() map[string]kmsg.DescribeConfigsResponseResourceConfig {
		t.Helper()
		req := kmsg.NewPtrDescribeConfigsRequest()
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType, r.ResourceName = 2, "cfg"
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Len(t, resp.Resources, 1)
		require.Equal(t, int16(0), resp.Resources[0].ErrorCode)
		out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
		for _, c := range resp.Resources[0].Configs {
			out[c.Name] = c
		}
		return out
	}
	cfgs := describe()
	require.Contains(t, cfgs, "retention.ms")
	assert.Equal(t, "delete", *cfgs["cleanup.policy"].Value)
	assert.True(t, cfgs["cleanup.policy"].ReadOnly)

	alter := func(name, value string, op kmsg.IncrementalAlterConfigOp) int16 {
		t.Helper()
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType, r.ResourceName = 2, "cfg"
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Name, rc.Value, rc.Op = name, kmsg.StringPtr(value), op
		r.Configs = append(r.Configs, rc)
		req.Resources = append(req.Resources, r)
		resp, err := req.RequestWith(ctx, cl)
		require.NoError(t, err)
		require.Len(t, resp.Resources, 1)
		return resp.Resources[0].ErrorCode
	}
	require.Equal(t, int16(0), alter("retention.ms", "7200000", 0))
	assert.Equal(t, "7200000", *describe()["retention.ms"].Value)
	assert.Contains(t, ctlOK(t, c, "topic", "describe", "cfg").Stdout, "7200000")
	assert.Equal(t, kerr.InvalidConfig.Code, alter("retention.ms", "two hours", 0))
	assert.NotEqual(t, int16(0), alter("cleanup.policy", "compact", 0), "gostream does not compact")

	dc := kmsg.NewPtrDescribeClusterRequest()
	dresp, err := dc.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), dresp.ErrorCode)
	require.Len(t, dresp.Brokers, 3)
	for _, b := range dresp.Brokers {
		assert.Equal(t, c.Node(b.NodeID).Kafka, fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
}

// With --auto-create-topics, producing to a topic that does not exist
// creates it, through any node (the creation is forwarded to the active
// controller), with --auto-create-partitions partitions and min(3,
// brokers) replicas: kcat and franz-go (with AllowAutoTopicCreation)
// produce to new topics, and
// gostream-ctl sees them. A consumer's metadata request does not create.
func TestKafkaAutoCreatesTopics(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--auto-create-topics", "--auto-create-partitions", "2"}})
	kcat := kcatPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", c.Node(3).Kafka, "-t", "made-by-kcat", "-P", "-K:")
	cmd.Stdin = strings.NewReader("k1:v1\nk2:v2\n")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	// franz-go asks for auto-creation only when told to.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(2).Kafka), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "made-by-franz", Value: []byte("v")}).FirstErr())

	for _, topic := range []string{"made-by-kcat", "made-by-franz"} {
		var desc struct {
			Partitions        []json.RawMessage `json:"partitions"`
			ReplicationFactor int               `json:"replication_factor"`
		}
		require.NoError(t, json.Unmarshal([]byte(ctlOK(t, c, "-o", "json", "topic", "describe", topic).Stdout), &desc))
		assert.Len(t, desc.Partitions, 2, topic)
		assert.Equal(t, 3, desc.ReplicationFactor, topic)
	}
	assert.Len(t, strings.Split(strings.TrimSpace(ctlOK(t, c, "consume", "made-by-kcat").Stdout), "\n"), 3, "a header line and two records")

	// A consumer asks without auto-creation: nothing is created.
	cons, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka), kgo.ConsumeTopics("never-made"))
	require.NoError(t, err)
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	cons.PollFetches(pctx)
	pcancel()
	cons.Close()
	res, err := c.Ctl(ctx, "", "topic", "describe", "never-made")
	require.NoError(t, err)
	assert.NotEqual(t, 0, res.Exit, "a consumer created a topic: %s", res.Stdout)
}

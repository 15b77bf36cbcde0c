package testcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// matrixRecords is how many records each client of the matrix writes.
const matrixRecords = 100_000

// matrixRecord is one record as a client wrote or read it: its value is
// "value-<i>", its key "key-<i mod 997>", its one header i=<i>.
type matrixRecord struct {
	Partition int32
	Offset    int64
	Key       string
	Header    string
}

func matrixValue(i int) (value, key, header string) {
	return "value-" + strconv.Itoa(i), "key-" + strconv.Itoa(i%997), strconv.Itoa(i)
}

// TestKafkaClientMatrix: each Kafka client of the issue (franz-go,
// IBM/sarama at its default protocol version and at 3.6, kafkajs, kcat)
// writes 100,000 keyed records with a header to a topic of its own (three
// partitions, three replicas) through one node; gostream-ctl consume -o
// json reads every one, key and header intact, at the partition and
// offset the client was told where it says; and the client reads them
// all back, record by record, bootstrapped once through the node that
// leads partition 0 and once through a node that follows it (kafkajs has
// no reader outside a group: its reads come with 15 of 18). It runs with
// make kafka-clients (GOSTREAM_KAFKA_MATRIX=1), which .ci/run runs.
func TestKafkaClientMatrix(t *testing.T) {
	if os.Getenv("GOSTREAM_KAFKA_MATRIX") != "1" {
		t.Skip("the Kafka client matrix runs with make kafka-clients (GOSTREAM_KAFKA_MATRIX=1)")
	}
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	for _, tc := range []struct {
		name    string
		produce func(t *testing.T, topic, bootstrap string) map[string]matrixRecord
		read    func(t *testing.T, topic, bootstrap string) map[string]matrixRecord
		headers bool // kcat -P gives every record the same headers: it writes none
	}{
		{"franz-go", franzProduce, franzRead, true},
		{"sarama-default", saramaProduce(sarama.NewConfig().Version), saramaRead(sarama.NewConfig().Version), true},
		{"sarama-3.6", saramaProduce(sarama.V3_6_0_0), saramaRead(sarama.V3_6_0_0), true},
		{"kafkajs", kafkajsProduce(t, c), nil, true},
		{"kcat", kcatProduce, kcatRead, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "matrix-" + tc.name
			ctlOK(t, c, "topic", "create", topic, "--partitions", "3", "--replication-factor", "3")
			md, err := describe(c, topic)
			require.NoError(t, err)
			leader := md.Partitions[0].Leader
			follower := md.Partitions[0].Replicas[0]
			if follower == leader {
				follower = md.Partitions[0].Replicas[1]
			}
			start := time.Now()
			produced := tc.produce(t, topic, c.Node(follower).Kafka)
			t.Logf("%s produced %d records in %s", tc.name, matrixRecords, time.Since(start).Round(time.Millisecond))
			native := ctlRecords(t, c, topic)
			compareMatrix(t, "gostream-ctl consume", produced, native, tc.headers)
			if tc.read == nil {
				return
			}
			for _, via := range []int32{leader, follower} {
				start := time.Now()
				got := tc.read(t, topic, c.Node(via).Kafka)
				t.Logf("%s read %d records through node %d in %s", tc.name, len(got), via, time.Since(start).Round(time.Millisecond))
				compareMatrix(t, fmt.Sprintf("%s through node %d", tc.name, via), native, got, tc.headers)
			}
		})
	}
}

// compareMatrix holds got to want, record by record: every value once,
// with its key and (with headers) its header; positions where want has
// them (Offset >= 0).
func compareMatrix(t *testing.T, what string, want, got map[string]matrixRecord, headers bool) {
	t.Helper()
	require.Len(t, got, matrixRecords, "%s: records", what)
	bad := 0
	for i := range matrixRecords {
		v, key, header := matrixValue(i)
		if !headers {
			header = ""
		}
		w, ok := want[v]
		g, ok2 := got[v]
		if !ok || !ok2 || g.Key != key || g.Header != header || w.Offset >= 0 && (g.Partition != w.Partition || g.Offset != w.Offset) {
			if bad < 5 {
				t.Errorf("%s: %s: want %+v (known %v), got %+v (known %v)", what, v, w, ok, g, ok2)
			}
			bad++
		}
	}
	require.Zero(t, bad, "%s: records that differ", what)
}

// ctlRecords is what gostream-ctl consume -o json reads of topic.
func ctlRecords(t *testing.T, c *Cluster, topic string) map[string]matrixRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := c.Ctl(ctx, "", "consume", topic, "-o", "json")
	require.NoError(t, err)
	require.Equal(t, 0, res.Exit, res.Stderr)
	out := map[string]matrixRecord{}
	sc := bufio.NewScanner(strings.NewReader(res.Stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r ctlRecord
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r))
		m := matrixRecord{Partition: r.Partition, Offset: r.Offset, Key: r.Key}
		if len(r.Headers) == 1 && r.Headers[0].Key == "i" {
			m.Header = r.Headers[0].Value
		}
		out[r.Value] = m
	}
	return out
}

func franzProduce(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	recs := make([]*kgo.Record, matrixRecords)
	for i := range recs {
		v, k, h := matrixValue(i)
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(v), Headers: []kgo.RecordHeader{{Key: "i", Value: []byte(h)}}}
	}
	res := cl.ProduceSync(ctx, recs...)
	require.NoError(t, res.FirstErr())
	out := map[string]matrixRecord{}
	for _, r := range res {
		out[string(r.Record.Value)] = matrixRecord{Partition: r.Record.Partition, Offset: r.Record.Offset, Key: string(r.Record.Key), Header: string(r.Record.Headers[0].Value)}
	}
	return out
}

func franzRead(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out := map[string]matrixRecord{}
	for len(out) < matrixRecords {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d", len(out))
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			m := matrixRecord{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key)}
			if len(r.Headers) == 1 {
				m.Header = string(r.Headers[0].Value)
			}
			out[string(r.Value)] = m
		})
	}
	return out
}

func saramaProduce(v sarama.KafkaVersion) func(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
	return func(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
		cfg := sarama.NewConfig()
		cfg.Version = v
		cfg.Producer.Return.Successes = true
		cfg.Producer.Compression = sarama.CompressionLZ4
		pr, err := sarama.NewSyncProducer([]string{bootstrap}, cfg)
		require.NoError(t, err)
		defer pr.Close()
		msgs := make([]*sarama.ProducerMessage, matrixRecords)
		for i := range msgs {
			v, k, h := matrixValue(i)
			msgs[i] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(v),
				Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(h)}}}
		}
		require.NoError(t, pr.SendMessages(msgs))
		out := map[string]matrixRecord{}
		for _, m := range msgs {
			out[string(m.Value.(sarama.StringEncoder))] = matrixRecord{Partition: m.Partition, Offset: m.Offset,
				Key: string(m.Key.(sarama.StringEncoder)), Header: string(m.Headers[0].Value)}
		}
		return out
	}
}

func saramaRead(v sarama.KafkaVersion) func(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
	return func(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
		cfg := sarama.NewConfig()
		cfg.Version = v
		cons, err := sarama.NewConsumer([]string{bootstrap}, cfg)
		require.NoError(t, err)
		defer cons.Close()
		client, err := sarama.NewClient([]string{bootstrap}, cfg)
		require.NoError(t, err)
		defer client.Close()
		out := map[string]matrixRecord{}
		for p := range int32(3) {
			hw, err := client.GetOffset(topic, p, sarama.OffsetNewest)
			require.NoError(t, err)
			if hw == 0 {
				continue
			}
			pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
			require.NoError(t, err)
			timeout := time.After(5 * time.Minute)
			for done := false; !done; {
				select {
				case m := <-pc.Messages():
					r := matrixRecord{Partition: m.Partition, Offset: m.Offset, Key: string(m.Key)}
					if len(m.Headers) == 1 {
						r.Header = string(m.Headers[0].Value)
					}
					out[string(m.Value)] = r
					done = m.Offset+1 >= hw
				case err := <-pc.Errors():
					t.Fatalf("partition %d: %v", p, err)
				case <-timeout:
					t.Fatalf("partition %d: not read to %d", p, hw)
				}
			}
			require.NoError(t, pc.Close())
		}
		return out
	}
}

// kafkajsProduce writes with testcluster/kafkajs/matrix.js, which prints
// nothing of where each record went: gostream-ctl's read is compared by
// value.
func kafkajsProduce(t *testing.T, c *Cluster) func(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
	return func(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
		dir := kafkajsDir(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "matrix.js"), bootstrap, topic, strconv.Itoa(matrixRecords))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "kafkajs: %s", out)
		return unplaced()
	}
}

// unplaced is every record of the matrix with no known position.
func unplaced() map[string]matrixRecord {
	out := make(map[string]matrixRecord, matrixRecords)
	for i := range matrixRecords {
		v, k, h := matrixValue(i)
		out[v] = matrixRecord{Partition: -1, Offset: -1, Key: k, Header: h}
	}
	return out
}

func kcatProduce(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
	kcat := kcatPath(t)
	var in strings.Builder
	for i := range matrixRecords {
		v, k, _ := matrixValue(i)
		fmt.Fprintf(&in, "%s:%s\n", k, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-b", bootstrap, "-t", topic, "-P", "-K:", "-z", "zstd", "-X", "linger.ms=5")
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	recs := unplaced()
	for v, r := range recs {
		r.Header = ""
		recs[v] = r
	}
	return recs
}

func kcatRead(t *testing.T, topic, bootstrap string) map[string]matrixRecord {
	kcat := kcatPath(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, kcat, "-b", bootstrap, "-t", topic, "-C", "-e", "-o", "beginning", "-f", "%p %o %k %s\n").Output()
	require.NoError(t, err)
	got := map[string]matrixRecord{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.Len(t, f, 4, sc.Text())
		p, _ := strconv.Atoi(f[0])
		o, _ := strconv.ParseInt(f[1], 10, 64)
		got[f[3]] = matrixRecord{Partition: int32(p), Offset: o, Key: f[2]}
	}
	return got
}

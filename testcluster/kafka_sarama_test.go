package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// IBM/sarama, at its default protocol version and at a 3.x one, produces
// keyed records with headers through one node (its default acks: the
// leader's, which gostream answers only once every active replica has
// the batch) and consumes every partition from the start through
// another; gostream-ctl consume reads the same records at the same
// offsets.
func TestSaramaProducesAndConsumes(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	for _, v := range []struct {
		name    string
		version sarama.KafkaVersion
	}{{"default", sarama.NewConfig().Version}, {"3.6", sarama.V3_6_0_0}} {
		t.Run(v.name, func(t *testing.T) {
			topic := "sarama-" + strings.ReplaceAll(v.name, ".", "-")
			ctlOK(t, c, "topic", "create", topic, "--partitions", "3", "--replication-factor", "3")
			cfg := sarama.NewConfig()
			cfg.Version = v.version
			cfg.ClientID = "gostream-test"
			cfg.Producer.Return.Successes = true
			cfg.Producer.Partitioner = sarama.NewHashPartitioner
			cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
			pr, err := sarama.NewSyncProducer([]string{c.Node(2).Kafka}, cfg)
			require.NoError(t, err)
			const n = 500
			var msgs []*sarama.ProducerMessage
			for i := range n {
				msgs = append(msgs, &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(fmt.Sprint("key-", i%13)),
					Value: sarama.StringEncoder(fmt.Sprint("value-", i)), Headers: []sarama.RecordHeader{{Key: []byte("i"), Value: []byte(strconv.Itoa(i))}}})
			}
			require.NoError(t, pr.SendMessages(msgs))
			require.NoError(t, pr.Close())
			produced := map[string]*sarama.ProducerMessage{}
			for _, m := range msgs {
				produced[string(m.Value.(sarama.StringEncoder))] = m
			}

			out := ctlOK(t, c, "consume", topic, "-o", "json").Stdout
			native := map[string]ctlRecord{}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var r ctlRecord
				require.NoError(t, json.Unmarshal([]byte(line), &r), line)
				native[r.Value] = r
			}
			require.Len(t, native, n)
			for v, m := range produced {
				r := native[v]
				assert.Equal(t, m.Partition, r.Partition, v)
				assert.Equal(t, m.Offset, r.Offset, v)
				assert.Equal(t, string(m.Key.(sarama.StringEncoder)), r.Key, v)
				require.Len(t, r.Headers, 1, v)
				assert.Equal(t, string(m.Headers[0].Value), r.Headers[0].Value, v)
			}

			cons, err := sarama.NewConsumer([]string{c.Node(3).Kafka}, cfg)
			require.NoError(t, err)
			defer cons.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			read := 0
			for p := range int32(3) {
				pc, err := cons.ConsumePartition(topic, p, sarama.OffsetOldest)
				require.NoError(t, err)
				want := 0
				for _, r := range native {
					if r.Partition == p {
						want++
					}
				}
				for got := 0; got < want; got++ {
					select {
					case m := <-pc.Messages():
						r := native[string(m.Value)]
						assert.Equal(t, r.Offset, m.Offset, "%s", m.Value)
						assert.Equal(t, r.Key, string(m.Key))
						require.Len(t, m.Headers, 1)
						assert.Equal(t, r.Headers[0].Value, string(m.Headers[0].Value))
						read++
					case err := <-pc.Errors():
						t.Fatalf("partition %d: %v", p, err)
					case <-ctx.Done():
						t.Fatalf("partition %d: read %d of %d", p, got, want)
					}
				}
				require.NoError(t, pc.Close())
			}
			assert.Equal(t, n, read)
		})
	}
}

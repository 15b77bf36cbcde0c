package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An idempotent franz-go producer, with its defaults, writes to a
// partition of an RF=3 topic while the node that leads it is killed (-9)
// and the operator fails it over: every record franz-go was told is
// written is read back once, and the partition holds no record twice, in
// the order they were produced. Whether a batch the dead leader had
// replicated is retried here depends on the moment of the kill;
// kafkaapi's TestIdempotentRetriesOfLostAnswersAreDuplicates makes such
// retries happen every time.
func TestKafkaIdempotentProducerAcrossFailover(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	ctlOK(t, c, "topic", "create", "idem", "--partitions", "3", "--replication-factor", "3")
	md, err := describe(c, "idem")
	require.NoError(t, err)
	// A partition the controller's node (1) does not lead: that node
	// must live to fail the other over.
	part, victim := int32(-1), int32(0)
	for _, p := range md.Partitions {
		if p.Leader != 1 {
			part, victim = p.Partition, p.Leader
			break
		}
	}
	require.NotEqual(t, int32(-1), part, "a partition led by node 2 or 3: %+v", md.Partitions)
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.Kafka)
	}
	pr, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond), kgo.RecordDeliveryTimeout(90*time.Second))
	require.NoError(t, err)
	defer pr.Close()

	var (
		mu     sync.Mutex
		acked  = map[int]bool{}
		failed []error
	)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			pr.Produce(ctx, &kgo.Record{Topic: "idem", Partition: part, Value: []byte(strconv.Itoa(i))}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed = append(failed, err)
					return
				}
				acked[i] = true
			})
			if i%50 == 49 {
				time.Sleep(5 * time.Millisecond) // a steady stream, not a flood
			}
		}
	}()
	waitFor := func(n int, what string) {
		t.Helper()
		require.Eventually(t, func() bool { return ackedCount() >= n }, 90*time.Second, 20*time.Millisecond, "%s: %d acknowledged", what, ackedCount())
	}
	waitFor(2000, "before the kill")
	require.NoError(t, c.Node(victim).Kill())
	ctlOK(t, c, "failover", "--broker", fmt.Sprint(victim))
	before := ackedCount()
	waitFor(before+2000, "after the failover")
	close(stop)
	<-done
	require.NoError(t, pr.Flush(ctx))

	out := ctlOK(t, c, "consume", "idem", "--partition", fmt.Sprint(part), "-o", "json").Stdout
	seen := map[int]int64{}
	last := -1
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r ctlRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), line)
		v, err := strconv.Atoi(r.Value)
		require.NoError(t, err)
		if off, dup := seen[v]; dup {
			t.Fatalf("record %d is in the partition twice, at offsets %d and %d", v, off, r.Offset)
		}
		seen[v] = r.Offset
		assert.Greater(t, v, last, "record %d after %d: out of the order produced", v, last)
		last = v
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range acked {
		_, ok := seen[i]
		assert.True(t, ok, "record %d was acknowledged and is not in the partition", i)
	}
	t.Logf("acknowledged %d records (%d across the failover), %d failed (%v); the partition holds %d", len(acked), len(acked)-before, len(failed), firstErrs(failed, 3), len(seen))
}

func firstErrs(errs []error, n int) []error {
	return errs[:min(n, len(errs))]
}

// InitProducerId on every node hands out producer ids no other node has,
// from blocks the controller allocates; after the controller's node
// restarts, the ids it allocates are new ones still.
func TestKafkaProducerIDsAreUniqueInTheCluster(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true})
	seen := map[int64]int32{}
	ask := func(node int32) {
		t.Helper()
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(node).Kafka))
		require.NoError(t, err)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for range 3 {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.TransactionTimeoutMillis = 60000
			resp, err := req.RequestWith(ctx, cl)
			require.NoError(t, err)
			require.Zero(t, resp.ErrorCode, "node %d", node)
			assert.Equal(t, int16(0), resp.ProducerEpoch)
			if other, dup := seen[resp.ProducerID]; dup {
				t.Fatalf("producer id %d from node %d and node %d", resp.ProducerID, other, node)
			}
			seen[resp.ProducerID] = node
		}
	}
	for _, n := range []int32{1, 2, 3} {
		ask(n)
	}
	require.NoError(t, c.Node(1).Stop(10*time.Second))
	require.NoError(t, c.StartNode(1))
	for _, n := range []int32{1, 2, 3} {
		ask(n)
	}
	assert.Len(t, seen, 18)
}

package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/metadata"
	"gostream/transport"
)

// These tests grow topics on three real nodes (topic alter --partitions,
// Kafka's CreatePartitions): the brokers open the new partitions, a
// keyed producer routes by the new count, a group takes the new
// partitions up, and what may not grow is refused with nothing changed.

// keyedRecord is one acknowledged record of the keyed producer: its key,
// its sequence number among that key's records, and where it went.
type keyedRecord struct {
	key       string
	seq       int
	partition int32
	offset    int64
}

// keyedProducer sends records of keys key-0 ... key-(keys-1), each key's
// values numbered in order ("key-3/17"), a round at a time (each key
// once, then a flush), until stopped; it keeps every acknowledgement.
type keyedProducer struct {
	keys int
	mu   struct {
		sync.Mutex
		acked []keyedRecord
		errs  []error
	}
	stop context.CancelFunc
	done chan struct{}
}

func startKeyedProducer(t *testing.T, cl *client.Client, topic string, keys int) *keyedProducer {
	t.Helper()
	p, err := client.NewProducer(cl, client.ProducerConfig{})
	require.NoError(t, err)
	kp := &keyedProducer{keys: keys, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	kp.stop = cancel
	go func() {
		defer close(kp.done)
		defer p.Close()
		for seq := 0; ctx.Err() == nil; seq++ {
			for k := range keys {
				key := fmt.Sprint("key-", k)
				p.SendAsync(client.ProducerRecord{Topic: topic, Key: []byte(key), Value: []byte(fmt.Sprintf("%s/%d", key, seq))}, func(a client.Ack, err error) {
					kp.mu.Lock()
					defer kp.mu.Unlock()
					if err != nil {
						kp.mu.errs = append(kp.mu.errs, err)
						return
					}
					kp.mu.acked = append(kp.mu.acked, keyedRecord{key: key, seq: seq, partition: a.Partition, offset: a.Offset})
				})
			}
			fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
			if err := p.Flush(fctx); err != nil {
				kp.mu.Lock()
				kp.mu.errs = append(kp.mu.errs, err)
				kp.mu.Unlock()
			}
			fcancel()
		}
	}()
	return kp
}

// acked returns the acknowledgements so far.
func (kp *keyedProducer) acked() []keyedRecord {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return slices.Clone(kp.mu.acked)
}

// close stops the producer once its last round is acknowledged, and
// returns every acknowledgement and error.
func (kp *keyedProducer) close() ([]keyedRecord, []error) {
	kp.stop()
	<-kp.done
	kp.mu.Lock()
	defer kp.mu.Unlock()
	return kp.mu.acked, kp.mu.errs
}

// groupReader is a member of a group that keeps every record it is given,
// per partition, in the order given.
type groupReader struct {
	gc   *client.GroupConsumer
	mu   sync.Mutex
	got  map[int32][]keyedRecord
	stop context.CancelFunc
	done chan struct{}
}

func startGroupReader(t *testing.T, cl *client.Client, group, topic, host string) *groupReader {
	t.Helper()
	gc, err := client.NewGroupConsumer(cl, client.GroupConfig{Group: group, Topics: []string{topic}, SessionTimeout: 3 * time.Second, Host: host})
	require.NoError(t, err)
	r := &groupReader{gc: gc, got: map[int32][]keyedRecord{}, done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			prs, err := gc.Poll(ctx, 500*time.Millisecond)
			if err != nil {
				if ctx.Err() == nil {
					t.Logf("%s: poll: %v", host, err)
				}
				continue
			}
			r.mu.Lock()
			for _, pr := range prs {
				for _, rec := range pr.Records {
					key, seq, ok := strings.Cut(string(rec.Value), "/")
					n, err := strconv.Atoi(seq)
					if !ok || err != nil || key != string(rec.Key) {
						t.Errorf("%s: a record not of the producer's: key %q value %q", host, rec.Key, rec.Value)
						continue
					}
					r.got[pr.Partition] = append(r.got[pr.Partition], keyedRecord{key: key, seq: n, partition: pr.Partition, offset: rec.Offset})
				}
			}
			r.mu.Unlock()
			if len(prs) > 0 {
				if err := gc.CommitSync(ctx); err != nil && ctx.Err() == nil {
					t.Logf("%s: commit: %v", host, err)
				}
			}
		}
	}()
	return r
}

func (r *groupReader) records() map[int32][]keyedRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int32][]keyedRecord{}
	for p, recs := range r.got {
		out[p] = slices.Clone(recs)
	}
	return out
}

func (r *groupReader) close(t *testing.T) {
	r.stop()
	<-r.done
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, r.gc.Close(ctx))
}

// ownedPartitions is how many partitions the group's members own, once
// each owns what its target gives it; -1 while they do not.
func ownedPartitions(t *testing.T, cl *client.Client, group string) int {
	d := describeGroup(t, cl, group)
	n := 0
	for _, m := range d.Members {
		if !slices.Equal(m.Owned, m.Target) {
			return -1
		}
		n += len(m.Owned)
	}
	return n
}

// ctlReplicas is the partitions' replicas of topic describe -o json.
type ctlReplicas struct {
	Partitions []struct {
		Replicas []int32 `json:"replicas"`
	} `json:"partitions"`
}

// grownJSON is what topic alter --partitions -o json prints.
type grownJSON struct {
	Topic            string `json:"topic"`
	DryRun           bool   `json:"dry_run"`
	PartitionsBefore int32  `json:"partitions_before"`
	Partitions       int32  `json:"partitions"`
	Added            []struct {
		Partition int32   `json:"partition"`
		Leader    int32   `json:"leader"`
		Replicas  []int32 `json:"replicas"`
	} `json:"added"`
	Note string `json:"note"`
}

// A topic of two partitions grows to five under a keyed producer and a
// group of two: the producer routes keys by the new count (some keys go
// to other partitions), the group takes the three new partitions up at
// its next heartbeats, every acknowledged record is read, and each key's
// records are in the order they were sent within every partition. The
// new partitions have every replica active and verify clean, and the
// growth is in the audit trail. Without the producer's metadata refresh
// it kept routing by two partitions and the new ones stayed empty.
func TestTopicGrowsUnderAKeyedProducerAndAGroup(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "grow", 2, 3)
	// The producer has a client of its own, as in a process of its own:
	// what the group's client learns does not reach it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pcl, err := client.New(ctx, c.Secured(client.Config{Bootstrap: strings.Split(c.Bootstrap(), ","), RequestTimeout: 3 * time.Second,
		MetadataMaxAge: 300 * time.Millisecond}))
	require.NoError(t, err)
	t.Cleanup(func() { pcl.Close() })

	const keys = 20
	a := startGroupReader(t, cl, "g", "grow", "a")
	b := startGroupReader(t, cl, "g", "grow", "b")
	require.Eventually(t, func() bool { return ownedPartitions(t, cl, "g") == 2 }, 30*time.Second, 50*time.Millisecond, "the group never shared out two partitions")
	kp := startKeyedProducer(t, pcl, "grow", keys)
	require.Eventually(t, func() bool { return len(kp.acked()) >= 10*keys }, 60*time.Second, 20*time.Millisecond)

	dry := ctlJSON[grownJSON](t, c, "topic", "alter", "grow", "--partitions", "5", "--dry-run")
	assert.True(t, dry.DryRun)
	assert.Len(t, dry.Added, 3)
	assert.Len(t, ctlJSON[ctlTopicConfig](t, c, "topic", "describe", "grow").Partitions, 2, "a dry run changes nothing")

	res := ctlOK(t, c, "topic", "alter", "grow", "--partitions", "5")
	assert.Contains(t, res.Stdout, "topic grow grew from 2 to 5 partitions")
	assert.Contains(t, res.Stdout, "Records of a key may go to another partition from now on")
	grownAt := len(kp.acked())

	// The producer routes by five partitions, the group owns five.
	require.Eventually(t, func() bool {
		for _, r := range kp.acked()[grownAt:] {
			if r.partition >= 2 {
				return true
			}
		}
		return false
	}, 30*time.Second, 20*time.Millisecond, "the producer never wrote to a new partition")
	require.Eventually(t, func() bool { return ownedPartitions(t, cl, "g") == 5 }, 30*time.Second, 50*time.Millisecond, "the group never took the new partitions up")
	require.Eventually(t, func() bool { return len(kp.acked()) >= grownAt+10*keys }, 60*time.Second, 20*time.Millisecond)
	acked, errs := kp.close()
	assert.Empty(t, errs, "the producer's errors")

	// Every acknowledged record is read, by one member or the other.
	want := map[[2]int64]keyedRecord{}
	for _, r := range acked {
		want[[2]int64{int64(r.partition), r.offset}] = r
	}
	require.Eventually(t, func() bool {
		seen := map[[2]int64]bool{}
		for _, r := range []*groupReader{a, b} {
			for _, recs := range r.records() {
				for _, rec := range recs {
					seen[[2]int64{int64(rec.partition), rec.offset}] = true
				}
			}
		}
		for at := range want {
			if !seen[at] {
				return false
			}
		}
		return true
	}, 60*time.Second, 50*time.Millisecond, "the group never read every acknowledged record")
	a.close(t)
	b.close(t)

	read := map[int32][]keyedRecord{}
	for _, r := range []*groupReader{a, b} {
		for p, recs := range r.records() {
			read[p] = append(read[p], recs...)
		}
	}
	for _, w := range want {
		found := false
		for _, rec := range read[w.partition] {
			if rec.offset == w.offset {
				assert.Equal(t, w.key, rec.key, "%d@%d", w.partition, w.offset)
				assert.Equal(t, w.seq, rec.seq, "%d@%d", w.partition, w.offset)
				found = true
				break
			}
		}
		assert.True(t, found, "acknowledged %+v never read", w)
	}
	// Within each partition, in offset order, each key's records are in
	// the order they were sent (a record read twice, by the member that
	// had it before a rebalance and by the next, counts once).
	moved := 0
	partitionsOf := map[string]map[int32]bool{}
	for p, recs := range read {
		slices.SortFunc(recs, func(x, y keyedRecord) int { return int(x.offset - y.offset) })
		recs = slices.CompactFunc(recs, func(x, y keyedRecord) bool { return x.offset == y.offset })
		last := map[string]int{}
		for _, rec := range recs {
			if prev, ok := last[rec.key]; ok {
				assert.Greater(t, rec.seq, prev, "key %s out of order in partition %d at offset %d", rec.key, p, rec.offset)
			}
			last[rec.key] = rec.seq
			if partitionsOf[rec.key] == nil {
				partitionsOf[rec.key] = map[int32]bool{}
			}
			partitionsOf[rec.key][p] = true
		}
	}
	for k := range keys {
		key := fmt.Sprint("key-", k)
		before, after := int32(metadata.KeyPartition([]byte(key), 2)), int32(metadata.KeyPartition([]byte(key), 5))
		assert.True(t, partitionsOf[key][after], "%s never written to its partition among five, %d", key, after)
		if before != after {
			moved++
			assert.True(t, partitionsOf[key][before], "%s never written to its partition among two, %d", key, before)
		}
	}
	assert.Positive(t, moved, "some key maps to another partition among five")
	for p := int32(2); p < 5; p++ {
		assert.NotEmpty(t, read[p], "the group read partition %d", p)
	}

	d := ctlJSON[ctlTopicConfig](t, c, "topic", "describe", "grow")
	require.Len(t, d.Partitions, 5)
	for p, part := range d.Partitions {
		assert.Len(t, part.Active, 3, "partition %d", p)
	}
	ctlOK(t, c, "verify", "--topic", "grow")
	hist := ctlOK(t, c, "cluster", "history").Stdout
	for p := 2; p < 5; p++ {
		assert.Contains(t, hist, fmt.Sprintf("grow/%d", p))
	}
	assert.Contains(t, hist, "create-partition")
}

// What may not grow is refused, by gostream-ctl and by a client that
// skips its checks, with the error's name first and exit 2 (bad usage:
// exit 1), and the metadata does not change on any node: a count below
// or equal to the topic's, an unknown topic, a Durable Streams stream,
// __consumer_offsets, a sealed topic, replica lists the topic cannot
// take. Lists it can take are used as given.
func TestTopicGrowRefusals(t *testing.T) {
	c := startCluster(t, 3)
	cl := newClient(t, c)
	createTopic(t, cl, "fixed", 3, 3)
	createTopic(t, cl, "closed", 1, 3)
	ctlOK(t, c, "topic", "seal", "closed")
	const path = "grow/stream"
	created := dsDo(t, c.Node(2), http.MethodPut, path, "", "Content-Type", "text/plain")
	require.Equal(t, http.StatusCreated, created.Status, created.Body)
	// A group's coordinator creates __consumer_offsets.
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _, err := cl.Committed(ctx, "g", "fixed", 0)
		return err == nil
	}, 30*time.Second, 100*time.Millisecond)
	epochs := func() []int64 {
		var out []int64
		for _, n := range c.Nodes {
			out = append(out, metadataEpoch(t, n.RPC))
		}
		return out
	}
	before := epochs()

	for _, tc := range []struct {
		args []string
		exit int
		name string
		says string
	}{
		{[]string{"fixed", "--partitions", "2"}, 2, "InvalidPartitions", `topic "fixed" has 3 partitions, and 2 would be fewer`},
		{[]string{"fixed", "--partitions", "3"}, 2, "InvalidPartitions", `topic "fixed" already has 3 partitions`},
		{[]string{"nope", "--partitions", "3"}, 2, "UnknownTopic", `"nope"`},
		{[]string{mustTopic(t, path), "--partitions", "2"}, 2, "InvalidRequest", "/v1/stream/" + path},
		{[]string{"__consumer_offsets", "--partitions", "100"}, 2, "InvalidRequest", "never grows"},
		{[]string{"closed", "--partitions", "2"}, 2, "TopicSealed", "sealed"},
		{[]string{"fixed", "--partitions", "0"}, 1, "InvalidFlag", "--partitions 0"},
		{[]string{"fixed", "--partitions", "4", "--config", "retention.ms=1000"}, 1, "InvalidFlag", "a change of its own"},
		{[]string{"fixed", "--config", "retention.ms=1000", "--dry-run"}, 1, "InvalidFlag", "--dry-run goes with --partitions"},
	} {
		res := runCtl(t, c, append([]string{"topic", "alter"}, tc.args...)...)
		assert.Equal(t, tc.exit, res.Exit, "%v: %s", tc.args, res.Stderr)
		assert.True(t, strings.HasPrefix(res.Stderr, tc.name+": "), "%v: %s", tc.args, res.Stderr)
		assert.Contains(t, res.Stderr, tc.says, "%v", tc.args)
		assert.Empty(t, res.Stdout, "%v", tc.args)
	}

	// A client that skips the checks: replica lists the topic cannot take.
	grow := func(req transport.CreatePartitionsRequest) error {
		data, err := json.Marshal(req)
		require.NoError(t, err)
		return call(t, c.Node(1).RPC, transport.APICreatePartitions, &transport.JSONMessage{Data: data}, &transport.JSONMessage{})
	}
	for _, lists := range [][][]int32{{{1, 2, 3}}, {{1, 2}, {2, 3}}, {{1, 1, 2}, {1, 2, 3}}, {{1, 2, 3}, {1, 2, 9}}} {
		err := grow(transport.CreatePartitionsRequest{Topic: "fixed", Count: 5, Assignments: lists})
		require.ErrorIs(t, err, transport.ErrInvalidRequest, "%v", lists)
		assert.Contains(t, err.Error(), "invalid replica assignment", "%v", lists)
	}
	assert.Equal(t, before, epochs(), "nothing changed on any node")

	// Lists it can take are used as given.
	require.NoError(t, grow(transport.CreatePartitionsRequest{Topic: "fixed", Count: 5, Assignments: [][]int32{{3, 1, 2}, {3, 2, 1}}}))
	require.Eventually(t, func() bool {
		d := ctlJSON[ctlReplicas](t, c, "topic", "describe", "fixed")
		return len(d.Partitions) == 5 && slices.Equal(d.Partitions[3].Replicas, []int32{3, 1, 2}) && slices.Equal(d.Partitions[4].Replicas, []int32{3, 2, 1})
	}, 30*time.Second, 100*time.Millisecond)
	ctlOK(t, c, "produce", "fixed", "--partition", "4", "on partition 4")
	assert.Contains(t, ctlOK(t, c, "consume", "fixed", "--partition", "4", "-o", "json").Stdout, `"value":"on partition 4"`)
}

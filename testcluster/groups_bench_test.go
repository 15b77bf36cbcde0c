package testcluster

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"gostream/client"
)

// TestBenchGroups measures consumer groups beside their baselines on one
// three-node cluster, RF 3, 1 KiB records, in three interleaved rounds,
// and logs the medians and ratios (docs/benchmarks.md):
//
//   - commits per second from 16 synchronous committers, each to its own
//     group, beside 16 synchronous producers of 1 KiB records (B3);
//   - a group of three members consuming six partitions, beside six plain
//     consumers of the same partitions.
//
// It runs only with GOSTREAM_BENCH_GROUPS=1 (make bench-groups): it takes a
// few minutes and its figures mean something only on a quiet machine.
func TestBenchGroups(t *testing.T) {
	if os.Getenv("GOSTREAM_BENCH_GROUPS") != "1" {
		t.Skip("a benchmark: GOSTREAM_BENCH_GROUPS=1 (make bench-groups) runs it")
	}
	c := startClusterWith(t, Config{Nodes: 3})
	cl := newClient(t, c)
	const workers, perRound = 16, 4000
	createTopic(t, cl, "b3", workers, 3)
	createTopic(t, cl, "commits", workers, 3)
	for p := range int32(workers) {
		produceTo(t, cl, "commits", p, "r", 1)
	}
	const parts, records = 6, 240_000
	createTopic(t, cl, "read", parts, 3)
	fill(t, cl, "read", parts, records)

	value := make([]byte, 1024)
	produce := func() float64 {
		return rate(t, workers, perRound, func(w int) func(ctx context.Context) error {
			p, err := client.NewProducer(cl, client.ProducerConfig{Linger: -1})
			require.NoError(t, err)
			t.Cleanup(func() { p.Close() })
			return func(ctx context.Context) error {
				_, err := p.Send(ctx, client.ProducerRecord{Topic: "b3", Partition: int32(w), ManualPartition: true, Value: value})
				return err
			}
		})
	}
	commit := func() float64 {
		return rate(t, workers, perRound, func(w int) func(ctx context.Context) error {
			group := fmt.Sprintf("committer-%d", w)
			return func(ctx context.Context) error {
				return cl.CommitOffsets(ctx, group, client.CommitOffset{Topic: "commits", Partition: int32(w), Offset: 1})
			}
		})
	}
	plain := func() float64 {
		start := time.Now()
		var once sync.Once
		var wg sync.WaitGroup
		for p := range int32(parts) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cons, err := client.NewConsumer(cl, "read", p, client.ConsumerConfig{})
				require.NoError(t, err)
				for cons.Position() < records/parts {
					recs, err := cons.Poll(context.Background(), time.Second)
					require.NoError(t, err)
					if len(recs) > 0 {
						once.Do(func() { start = time.Now() }) // from the first records on, as for the group
					}
				}
			}()
		}
		wg.Wait()
		return records / time.Since(start).Seconds()
	}
	round := 0
	var joins []time.Duration
	grouped := func() float64 {
		round++
		group := fmt.Sprintf("bench-%d", round)
		var read atomic.Int64
		joined := time.Now()
		var first atomic.Int64 // when the first records came, Unix nanoseconds
		var wg sync.WaitGroup
		for range 3 {
			mcl := newClient(t, c)
			gc, err := client.NewGroupConsumer(mcl, client.GroupConfig{Group: group, Topics: []string{"read"}})
			require.NoError(t, err)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for read.Load() < records {
					got, err := gc.Poll(context.Background(), 200*time.Millisecond)
					require.NoError(t, err)
					for _, pr := range got {
						first.CompareAndSwap(0, time.Now().UnixNano())
						read.Add(int64(len(pr.Records)))
					}
				}
			}()
			t.Cleanup(func() { gc.Close(context.Background()) })
		}
		wg.Wait()
		start := time.Unix(0, first.Load())
		joins = append(joins, start.Sub(joined))
		// From the first records on: the join is measured apart.
		return float64(read.Load()) / time.Since(start).Seconds()
	}

	var b3, commits, plains, groups []float64
	for range 3 {
		b3 = append(b3, produce())
		commits = append(commits, commit())
		plains = append(plains, plain())
		groups = append(groups, grouped())
	}
	t.Logf("B3, 16 sync producers of 1 KiB: %v records/s, median %.0f", round0(b3), median(b3))
	t.Logf("16 sync committers:            %v commits/s, median %.0f; ratio to B3 %.2f (target 0.5)", round0(commits), median(commits), median(commits)/median(b3))
	t.Logf("plain consume, 6 partitions:   %v records/s, median %.0f", round0(plains), median(plains))
	t.Logf("group of 3 consuming them:     %v records/s, median %.0f; ratio to plain %.2f (target 0.9)", round0(groups), median(groups), median(groups)/median(plains))
	t.Logf("group join to first records:   %v", joins)
}

// rate runs workers goroutines, each doing its op n/workers times one
// after another, and returns the ops per second of all.
func rate(t *testing.T, workers, n int, newOp func(w int) func(ctx context.Context) error) float64 {
	ops := make([]func(ctx context.Context) error, workers)
	for w := range workers {
		ops[w] = newOp(w)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n / workers {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				err := ops[w](ctx)
				cancel()
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	return float64(n/workers*workers) / time.Since(start).Seconds()
}

// fill writes records records of 1 KiB, spread over the partitions.
func fill(t *testing.T, cl *client.Client, topic string, partitions, records int) {
	p, err := client.NewProducer(cl, client.ProducerConfig{})
	require.NoError(t, err)
	defer p.Close()
	value := make([]byte, 1024)
	errs := make(chan error, records)
	for i := range records {
		p.SendAsync(client.ProducerRecord{Topic: topic, Partition: int32(i % partitions), ManualPartition: true, Value: value},
			func(_ client.Ack, err error) { errs <- err })
	}
	for range records {
		require.NoError(t, <-errs)
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func round0(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x)
	}
	return out
}

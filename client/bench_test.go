package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkProducePipelined measures producing to one partition of the
// fake broker, whose answers take 200µs as replication would. Compare the
// sub-benchmarks, run together: the pipelined one should beat one batch
// at a time by about the in-flight factor while batches are small.
func BenchmarkProducePipelined(b *testing.B) {
	for _, inflight := range []int{1, 5} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			fc := newFakeCluster(b, 1)
			fc.addTopic("t", 1)
			fc.set(func(fc *fakeCluster) { fc.replyDelay = func() time.Duration { return 200 * time.Microsecond } })
			c := newTestClient(b, fc, func(cfg *Config) { cfg.Logger = nil })
			p, err := NewProducer(c, ProducerConfig{BatchBytes: 4 << 10, MaxInFlightPerPartition: inflight})
			require.NoError(b, err)
			defer p.Close()
			value := make([]byte, 100)
			b.SetBytes(int64(len(value)))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				p.SendAsync(ProducerRecord{Topic: "t", Value: value}, nil)
			}
			require.NoError(b, p.Flush(context.Background()))
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "msgs/s")
		})
	}
}

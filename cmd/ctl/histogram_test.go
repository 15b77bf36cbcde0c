package main

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBucketBoundsCoverEveryValue(t *testing.T) {
	// Every value lies in its bucket, and buckets are ordered and adjacent.
	rng := rand.New(rand.NewPCG(1, 2))
	values := []uint64{0, 1, 127, 128, 129, 255, 256, 257, 1<<20 - 1, 1 << 20, 1<<63 - 1, 1 << 63, 1<<64 - 1}
	for range 10000 {
		values = append(values, rng.Uint64()>>rng.IntN(64))
	}
	for _, v := range values {
		i := bucketOf(v)
		require.Less(t, i, histBuckets, "value %d", v)
		assert.LessOrEqual(t, v, bucketHigh(i), "value %d, bucket %d", v, i)
		if i > 0 {
			assert.Greater(t, v, bucketHigh(i-1), "value %d, bucket %d", v, i)
		}
		// Precision: a bucket is narrower than 1/histSubCount of its values.
		if v >= histSubCount {
			low := bucketHigh(i-1) + 1
			assert.LessOrEqual(t, float64(bucketHigh(i)-low), float64(low)/histSubCount, "bucket %d", i)
		}
	}
}

func TestQuantileMatchesSortedSample(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h histogram
	sample := make([]time.Duration, 0, 100000)
	for range cap(sample) {
		// Log-normal-ish latencies from 10µs to about 1s.
		d := time.Duration(10_000 * (1 + rng.ExpFloat64()*rng.ExpFloat64()*50))
		sample = append(sample, d)
		h.record(d)
	}
	slices.Sort(sample)
	require.Equal(t, uint64(len(sample)), h.count())
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 0.999, 1} {
		rank := max(int(q*float64(len(sample))+0.999999), 1)
		want := sample[rank-1]
		got := h.quantile(q)
		assert.InEpsilon(t, float64(want), float64(got), 1.0/histSubCount, "q=%v", q)
		assert.GreaterOrEqual(t, got, want, "q=%v: a quantile is the top of its bucket", q)
	}
	assert.Equal(t, sample[len(sample)-1], h.quantile(1), "the maximum is exact")
}

func TestHistogramAddAndEmpty(t *testing.T) {
	var a, b, empty histogram
	assert.Zero(t, empty.quantile(0.5))
	for i := 1; i <= 100; i++ {
		a.record(time.Duration(i) * time.Millisecond)
		b.record(time.Duration(100+i) * time.Millisecond)
	}
	a.add(&b)
	a.add(&empty)
	assert.Equal(t, uint64(200), a.count())
	assert.InEpsilon(t, float64(100*time.Millisecond), float64(a.quantile(0.5)), 0.01)
	assert.Equal(t, 200*time.Millisecond, a.quantile(1))
	a.record(-time.Second) // counts as zero
	assert.Zero(t, a.quantile(0))
}

func TestHistogramRecordDoesNotAllocate(t *testing.T) {
	h := new(histogram)
	allocs := testing.AllocsPerRun(1000, func() { h.record(1234567 * time.Nanosecond) })
	assert.Zero(t, allocs)
}

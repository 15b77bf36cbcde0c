package main

import (
	"math/bits"
	"time"
)

// histSubBits sets the histogram's precision: every power of two is split
// into 2^histSubBits equal buckets, so a value is known to within
// 1/2^histSubBits (under 0.8%) of itself.
const (
	histSubBits  = 7
	histSubCount = 1 << histSubBits
	histBuckets  = (64 - histSubBits + 1) * histSubCount
)

// histogram counts durations in log-linear buckets, in the manner of
// HdrHistogram: values below 2^histSubBits nanoseconds have a bucket each,
// and each power of two above is split into histSubCount buckets. Record
// does not allocate. It is for one goroutine at a time; merge histograms
// of several goroutines with add.
type histogram struct {
	counts [histBuckets]uint64
	total  uint64
	max    uint64
}

// bucketOf returns the bucket of v: v itself below histSubCount, otherwise
// the power of two and the top histSubBits bits below its leading one.
func bucketOf(v uint64) int {
	if v < histSubCount {
		return int(v)
	}
	shift := bits.Len64(v) - histSubBits - 1
	return (shift+1)*histSubCount + int(v>>shift) - histSubCount
}

// bucketHigh returns the largest value of bucket i.
func bucketHigh(i int) uint64 {
	if i < histSubCount {
		return uint64(i)
	}
	shift := i/histSubCount - 1
	m := uint64(i%histSubCount + histSubCount)
	return (m+1)<<shift - 1
}

// record counts one duration; negative ones count as zero.
func (h *histogram) record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)]++
	h.total++
	h.max = max(h.max, v)
}

// add adds o's counts to h.
func (h *histogram) add(o *histogram) {
	for i, n := range o.counts {
		h.counts[i] += n
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// count is the number of durations recorded.
func (h *histogram) count() uint64 { return h.total }

// quantile returns the duration below or at which a fraction q of the
// recorded durations fall, as the largest value of its bucket (never above
// the largest recorded). It returns 0 when nothing was recorded.
func (h *histogram) quantile(q float64) time.Duration {
	if h.total == 0 {
		return 0
	}
	rank := uint64(q * float64(h.total))
	if float64(rank) < q*float64(h.total) {
		rank++ // the ceiling: the rank-th smallest, 1-based
	}
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, n := range h.counts {
		seen += n
		if seen >= rank {
			return time.Duration(min(bucketHigh(i), h.max))
		}
	}
	return time.Duration(h.max)
}

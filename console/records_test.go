package console

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBytesOf(t *testing.T) {
	assert.Nil(t, bytesOf(nil), "no bytes (a null key) is null")

	b := bytesOf([]byte{})
	require.NotNil(t, b.Text)
	assert.Equal(t, "", *b.Text)
	assert.Equal(t, "", b.B64)

	b = bytesOf([]byte("<script>"))
	assert.Equal(t, "<script>", *b.Text)
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte("<script>")), b.B64)
	assert.False(t, b.Cut)

	b = bytesOf([]byte{0xff, 'a'})
	assert.Nil(t, b.Text, "not UTF-8: base64 alone")
	assert.Equal(t, "/2E=", b.B64)

	// Cut at 64 KiB, between two characters when the whole is text.
	long := "a" + strings.Repeat("é", maxShown) // the 64 KiB mark falls inside an é
	b = bytesOf([]byte(long))
	assert.True(t, b.Cut)
	assert.Equal(t, len(long), b.Size)
	assert.Equal(t, long[:maxShown-1], *b.Text)
	raw, err := base64.StdEncoding.DecodeString(b.B64)
	require.NoError(t, err)
	assert.Equal(t, long[:maxShown-1], string(raw))

	bin := append([]byte{0xff}, make([]byte, maxShown)...)
	b = bytesOf(bin)
	assert.True(t, b.Cut)
	assert.Nil(t, b.Text)
	raw, err = base64.StdEncoding.DecodeString(b.B64)
	require.NoError(t, err)
	assert.Equal(t, bin[:maxShown], raw)
}

func TestSampleOf(t *testing.T) {
	end := time.UnixMilli(1_700_000_000_000)
	prev := Counters{RecordsProduced: 100, RecordsFetched: 50, Fsyncs: 10, FsyncTime: 10 * time.Millisecond}
	cur := Counters{RecordsProduced: 1100, RecordsFetched: 250, Fsyncs: 14, FsyncTime: 18 * time.Millisecond, FsyncMax: 5 * time.Millisecond}
	s := sampleOf(prev, cur, 10*time.Second, end)
	assert.Equal(t, Sample{Time: end.UnixMilli(), ProducedPerSec: 100, FetchedPerSec: 20, Fsyncs: 4, FsyncMeanMs: 2, FsyncMaxMs: 5}, s)
	idle := cur
	idle.FsyncMax = 0
	assert.Equal(t, Sample{Time: end.UnixMilli()}, sampleOf(cur, idle, 10*time.Second, end), "an idle interval")
}

// The charts keep the last 360 samples, oldest first.
func TestSamplerKeepsTheLastHour(t *testing.T) {
	sm := &sampler{}
	assert.Empty(t, sm.samples())
	for i := range seriesSamples + 40 {
		sm.add(Sample{Time: int64(i)})
	}
	got := sm.samples()
	require.Len(t, got, seriesSamples)
	assert.Equal(t, int64(40), got[0].Time)
	assert.Equal(t, int64(seriesSamples+39), got[len(got)-1].Time)
}

// The sampler runs from New to Close, and Close waits for it.
func TestSeriesSamplesFromNewToClose(t *testing.T) {
	s := New(Config{NodeID: 4, SeriesInterval: 10 * time.Millisecond, Counters: func() Counters { return Counters{} }})
	require.Eventually(t, func() bool { return len(s.localSeries().Samples) >= 2 }, 5*time.Second, 10*time.Millisecond)
	s.Close()
	s.Close()
	select {
	case <-s.sampler.done:
	default:
		t.Fatal("Close returned before the sampler stopped")
	}
	assert.Equal(t, int64(10), s.localSeries().IntervalMs)
	assert.Equal(t, int32(4), s.localSeries().Node)
}

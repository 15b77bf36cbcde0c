package storage

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
)

// TestBatchIdentities: LastBatches, BatchesBefore, BatchAt and Digest agree
// with what was appended, across segments, and Digest tells two logs apart
// by content.
func TestBatchIdentities(t *testing.T) {
	ctx := context.Background()
	open := func() *Log {
		l, err := Open(t.TempDir(), Options{SegmentBytes: 2048, IndexIntervalBytes: 256})
		require.NoError(t, err)
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(), open()
	var infos []BatchInfo
	for i := 0; i < 60; i++ {
		recs := make([]record.Record, 1+i%3)
		for j := range recs {
			recs[j] = record.Record{Value: append(make([]byte, 100), byte(i), byte(j))}
		}
		batch, err := record.AppendBatch(nil, recs)
		require.NoError(t, err)
		res, err := a.Append(ctx, batch, int32(1+i/20))
		require.NoError(t, err)
		_, err = b.AppendExact(ctx, append(record.Batch(nil), batch...))
		require.NoError(t, err)
		infos = append(infos, BatchInfo{BaseOffset: res.BaseOffset, NextOffset: res.NextOffset, LeaderEpoch: res.LeaderEpoch, CRC: record.Batch(batch).CRC()})
	}
	require.Greater(t, a.SegmentCount(), 3)

	last, err := a.LastBatches(8)
	require.NoError(t, err)
	assert.Equal(t, infos[len(infos)-8:], last)
	for _, cut := range []int{0, 1, 7, 30, 59, 60} {
		before := a.LogStartOffset()
		if cut > 0 {
			before = infos[cut-1].NextOffset
		}
		got, err := a.BatchesBefore(before, 25)
		require.NoError(t, err)
		want := infos[max(0, cut-25):cut]
		if len(want) == 0 {
			want = nil
		}
		assert.Equal(t, want, got, "before %d", before)
	}
	for _, in := range infos {
		got, ok, err := a.BatchAt(in.BaseOffset)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, in, got)
	}
	if infos[3].NextOffset-infos[3].BaseOffset > 1 {
		_, ok, err := a.BatchAt(infos[3].BaseOffset + 1)
		require.NoError(t, err)
		assert.False(t, ok, "no batch starts inside another")
	}

	end := a.LogEndOffset()
	da, n, err := a.Digest(ctx, 0, end)
	require.NoError(t, err)
	assert.Equal(t, len(infos), n)
	db, _, err := b.Digest(ctx, 0, end)
	require.NoError(t, err)
	assert.Equal(t, da, db, "identical logs digest alike")
	mid := infos[30].BaseOffset
	d1, _, err := a.Digest(ctx, mid, end)
	require.NoError(t, err)
	d2, _, err := a.Digest(ctx, 0, mid)
	require.NoError(t, err)
	assert.NotEqual(t, d1, d2)

	// Cut b back and write a different batch: digests over the shared
	// range still agree, over the whole range they differ.
	require.NoError(t, b.TruncateTo(ctx, infos[50].BaseOffset))
	other, err := record.AppendBatch(nil, []record.Record{{Value: []byte("other")}})
	require.NoError(t, err)
	_, err = b.Append(ctx, other, 9)
	require.NoError(t, err)
	shared := infos[50].BaseOffset
	da, _, err = a.Digest(ctx, 0, shared)
	require.NoError(t, err)
	db, _, err = b.Digest(ctx, 0, shared)
	require.NoError(t, err)
	assert.Equal(t, da, db)
	_, _, err = b.Digest(ctx, 0, end)
	assert.Error(t, err, "b is shorter now, or differs")

	if infos[10].NextOffset-infos[10].BaseOffset > 1 {
		_, _, err = a.Digest(ctx, 0, infos[10].BaseOffset+1)
		assert.ErrorIs(t, err, ErrNotBatchBoundary)
	}
}

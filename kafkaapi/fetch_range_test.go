package kafkaapi

import (
	"bytes"
	"context"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/record"
	"gostream/storage"
	"gostream/transport"
)

// pieceBytes is what a piece sends.
func pieceBytes(t *testing.T, p piece) []byte {
	if p.file == nil {
		return p.b
	}
	b := make([]byte, p.file.Length)
	_, err := p.file.File.ReadAt(b, p.file.Offset)
	require.NoError(t, err)
	return b
}

// TestKafkaRangeBatchesMatchRead: on a log of native batches (magic 1)
// and Kafka batches (magic 2), small and large, the Kafka batches of a
// read lent as a range of the file carry byte for byte what those of the
// same read into memory carry, and the large Kafka batches among them are
// sent from the file.
func TestKafkaRangeBatchesMatchRead(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	l, err := storage.Open(t.TempDir(), storage.Options{SegmentBytes: 4 << 20})
	require.NoError(t, err)
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 60 {
		recs := make([]record.Record, 1+rng.Intn(40))
		size := 10 + rng.Intn(100)
		if rng.Intn(3) == 0 {
			size = 2<<10 + rng.Intn(4<<10)
		}
		for i := range recs {
			recs[i].Value = make([]byte, size)
			rng.Read(recs[i].Value)
		}
		var b record.Batch
		if rng.Intn(2) == 0 {
			kb, err := record.AppendKafkaBatch(nil, recs, record.NoProducer)
			require.NoError(t, err)
			b, err = record.WrapKafka(kb)
			require.NoError(t, err)
		} else {
			b, err = record.AppendBatch(nil, recs)
			require.NoError(t, err)
		}
		_, err = l.Append(ctx, b, 0)
		require.NoError(t, err)
	}
	sentFromFile := 0
	for range 200 {
		offset := rng.Int63n(l.LogEndOffset())
		maxBytes := 1 + rng.Intn(1<<20)
		buf, err := l.Read(ctx, offset, maxBytes, 1<<62, nil)
		require.NoError(t, err)
		var mem lentMemory
		want, wantN, err := kafkaBatches(buf, &mem)
		require.NoError(t, err)
		r, err := l.ReadRange(offset, maxBytes, 1<<62, 0)
		require.NoError(t, err)
		require.NotNil(t, r)
		got, gotN, err := kafkaRangeBatches(r, &mem)
		require.NoError(t, err)
		assert.Equal(t, wantN, gotN)
		var wantBytes, gotBytes []byte
		for _, p := range want {
			wantBytes = append(wantBytes, pieceBytes(t, p)...)
		}
		files := 0
		for _, p := range got {
			gotBytes = append(gotBytes, pieceBytes(t, p)...)
			if p.file != nil {
				files++
			}
		}
		require.True(t, bytes.Equal(wantBytes, gotBytes), "offset %d, max %d", offset, maxBytes)
		// The next reads convert into this memory again.
		mem.giveBack()
		large := 0 // stored Kafka batches whose Kafka batch is large enough to send from the file
		for rest := buf; len(rest) > 0; {
			n, err := record.FrameSize(rest, len(rest))
			require.NoError(t, err)
			if rest[record.MagicOffset] == record.MagicKafka && n-record.HeaderSize >= transport.SendFileMin {
				large++
			}
			rest = rest[n:]
		}
		assert.Equal(t, large, files, "the large Kafka batches, and only they, are sent from the file")
		sentFromFile += files
		r.Release()
	}
	assert.Positive(t, sentFromFile)
}

package record

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sizes := range [][2]int{{0, 0}, {0, 1}, {1, 0}, {12, 30}, {34, 1000}, {3, 1 << 20}, {100, 65537}} {
		a, b := make([]byte, sizes[0]), make([]byte, sizes[1])
		for i := range a {
			a[i] = byte(rng.Uint32())
		}
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		want := crc32.Checksum(append(append([]byte(nil), a...), b...), castagnoli)
		got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b))
		assert.Equal(t, want, got, "sizes %v", sizes)
	}
}

func FuzzCRCCombine(f *testing.F) {
	f.Add([]byte("header"), []byte("records"))
	f.Add([]byte{}, []byte{0})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		want := crc32.Checksum(append(append([]byte(nil), a...), b...), castagnoli)
		if got := crcCombine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b)); got != want {
			t.Fatalf("combine of %d and %d bytes: %08x, want %08x", len(a), len(b), got, want)
		}
	})
}

// TestStampSumEqualsStamp: stamping with the Sum a validation returned
// gives the bytes a full recomputation gives, for batches of magic 1 and
// Kafka batches with create and append times, and the result validates.
func TestStampSumEqualsStamp(t *testing.T) {
	small := []Record{{Key: []byte("k"), Value: []byte("one")}, {Value: bytes.Repeat([]byte("v"), 3000)}}
	large := slices.Repeat([]Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("w"), 1024)}}, 40)
	batches := map[string]Batch{}
	for size, recs := range map[string][]Record{"small": small, "large": large} {
		native, err := AppendBatch(nil, recs)
		require.NoError(t, err)
		batches["native/"+size] = native
		for _, logAppend := range []bool{false, true} {
			opts := KafkaBatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, LogAppendTime: logAppend}
			kb, err := AppendKafkaBatch(nil, recs, opts)
			require.NoError(t, err)
			b, err := WrapKafka(kb)
			require.NoError(t, err)
			batches[fmt.Sprintf("kafka/%s/logAppendTime=%v", size, logAppend)] = b
		}
	}
	assert.True(t, batches["native/large"].combines())
	assert.False(t, batches["native/small"].combines())
	for name, b := range batches {
		sum, err := b.ValidateSum()
		require.NoError(t, err, name)
		assert.Equal(t, b.combines(), sum.ok, "%s: a Sum for a large batch only", name)
		byStamp := append(Batch(nil), b...)
		byStamp.Stamp(1234, 7, 1_700_000_000_000)
		bySum := append(Batch(nil), b...)
		bySum.StampSum(1234, 7, 1_700_000_000_000, sum)
		assert.Equal(t, byStamp, bySum, name)
		require.NoError(t, bySum.Validate(), name)
		assert.Equal(t, int64(1234), bySum.BaseOffset(), name)
		// The CRC is the one computed from every byte.
		assert.Equal(t, crc32.Update(crc32.Checksum(bySum[:offCRC], castagnoli), castagnoli, bySum[offLeaderEpoch:]), bySum.CRC(), name)
	}
	// A flipped bit in the records fails validation, for either magic.
	for name, b := range batches {
		bad := append(Batch(nil), b...)
		bad[len(bad)-1] ^= 1
		assert.ErrorIs(t, bad.Validate(), ErrChecksum, name)
	}
}

// TestWrapKafkaIntoADirtyBuffer: a reused buffer's old bytes do not show
// through: the batch is the one WrapKafka builds in new memory.
func TestWrapKafkaIntoADirtyBuffer(t *testing.T) {
	kb, err := AppendKafkaBatch(nil, []Record{{Value: []byte("v")}}, KafkaBatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1})
	require.NoError(t, err)
	want, err := WrapKafka(kb)
	require.NoError(t, err)
	dirty := bytes.Repeat([]byte{0xff}, len(kb)+HeaderSize+100)
	got, err := WrapKafkaInto(dirty, kb)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Same(t, &dirty[0], &got[0], "built in the buffer given")
	small, err := WrapKafkaInto(make([]byte, 10), kb)
	require.NoError(t, err)
	assert.Equal(t, want, small, "a buffer too small is not used")
}

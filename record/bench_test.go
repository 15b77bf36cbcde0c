package record_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"gostream/record"
)

// Benchmarks of the batch format's hot functions, for a native batch
// (magic 1) and a Kafka record batch carried as it was produced (magic 2),
// of 1, 16 and 256 records of 1 KiB. make bench-micro runs them with the
// other packages' (docs/benchmarks.md, "Hot functions on their own").

var benchRecordCounts = []int{1, 16, 256}

var benchMagics = []byte{record.Magic, record.MagicKafka}

// benchRecords returns n records with 3-byte keys, 1 KiB values and
// timestamps a millisecond apart.
func benchRecords(n int) []record.Record {
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Key: []byte("key"), Value: bytes.Repeat([]byte{byte('a' + i%26)}, 1<<10),
			Timestamp: 1_700_000_000_000 + int64(i)}
	}
	return recs
}

// benchStoredBatch returns a batch of n records as a leader stores it:
// stamped with an offset, an epoch and its append time. A batch of magic
// 2 carries the Kafka batch a producer without idempotence builds.
func benchStoredBatch(b *testing.B, magic byte, n int) record.Batch {
	var batch record.Batch
	var err error
	if magic == record.MagicKafka {
		var kb []byte
		kb, err = record.AppendKafkaBatch(nil, benchRecords(n), record.NoProducer)
		require.NoError(b, err)
		batch, err = record.WrapKafka(kb)
	} else {
		batch, err = record.AppendBatch(nil, benchRecords(n))
	}
	require.NoError(b, err)
	batch.Stamp(1<<20, 3, 1_700_000_000_000)
	require.NoError(b, batch.Validate())
	return batch
}

// benchEach runs bench for every magic and record count, as sub-benchmarks
// named magic=M/records=N.
func benchEach(b *testing.B, bench func(b *testing.B, magic byte, n int)) {
	for _, magic := range benchMagics {
		for _, n := range benchRecordCounts {
			b.Run(fmt.Sprintf("magic=%d/records=%d", magic, n), func(b *testing.B) { bench(b, magic, n) })
		}
	}
}

// BenchmarkValidateBatch is Batch.Validate of a stored batch: what the
// leader checks of a produced batch and every follower of a replicated
// one (framing, header, CRC-32C, and for magic 2 the Kafka batch's own
// CRC-32C, and every record).
func BenchmarkValidateBatch(b *testing.B) {
	benchEach(b, func(b *testing.B, magic byte, n int) {
		batch := benchStoredBatch(b, magic, n)
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for b.Loop() {
			if err := batch.Validate(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStampBatch is Batch.Stamp: the leader's offset, epoch and
// append time written into a batch, and its CRC-32C computed again.
func BenchmarkStampBatch(b *testing.B) {
	benchEach(b, func(b *testing.B, magic byte, n int) {
		batch := benchStoredBatch(b, magic, n)
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for i := int64(0); b.Loop(); i++ {
			batch.Stamp(i, 3, 1_700_000_000_000)
		}
	})
}

// BenchmarkEncodeBatch is the encoding of records into a batch, in a
// reused buffer: AppendBatch for magic 1 (the Go client's producer),
// AppendKafkaBatch for magic 2 (a Kafka producer's batch, uncompressed).
func BenchmarkEncodeBatch(b *testing.B) {
	benchEach(b, func(b *testing.B, magic byte, n int) {
		recs := benchRecords(n)
		var buf []byte
		encode := func() (err error) {
			if magic == record.MagicKafka {
				buf, err = record.AppendKafkaBatch(buf[:0], recs, record.NoProducer)
			} else {
				buf, err = record.AppendBatch(buf[:0], recs)
			}
			return err
		}
		require.NoError(b, encode())
		b.SetBytes(int64(len(buf)))
		b.ReportAllocs()
		for b.Loop() {
			if err := encode(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAppendKafka is Batch.AppendKafka into a reused buffer: a
// stored batch as a Kafka consumer is served it (magic 1 converted into
// a Kafka batch, magic 2's carried batch copied).
func BenchmarkAppendKafka(b *testing.B) {
	benchEach(b, func(b *testing.B, magic byte, n int) {
		batch := benchStoredBatch(b, magic, n)
		buf, err := batch.AppendKafka(nil)
		require.NoError(b, err)
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = batch.AppendKafka(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeBatch is Batch.Records over a stored batch, each record's
// slices aliasing the batch: what a consumer does with a fetched batch.
func BenchmarkDecodeBatch(b *testing.B) {
	benchEach(b, func(b *testing.B, magic byte, n int) {
		batch := benchStoredBatch(b, magic, n)
		b.SetBytes(int64(len(batch)))
		b.ReportAllocs()
		for b.Loop() {
			values := 0
			err := batch.Records(func(r *record.Record) bool {
				values += len(r.Value)
				return true
			})
			if err != nil || values != n<<10 {
				b.Fatalf("decoded %d bytes of values, want %d: %v", values, n<<10, err)
			}
		}
	})
}

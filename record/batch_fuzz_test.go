package record_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/record"
)

var genFuzzSeeds = flag.Bool("gen-fuzz-seeds", false, "rewrite the generated seed corpus under testdata/fuzz")

// batchFuzzSeed is one input of FuzzBatchDecode.
type batchFuzzSeed struct {
	name   string
	data   []byte
	fixCRC bool
}

// fuzzFixCRC rewrites the checksum of the batch that data's length field
// frames, if it fits, so that the fuzzer gets past the checksum and reaches
// the record decoder. It follows the documented layout, not record's code.
func fuzzFixCRC(data []byte) {
	if len(data) < 16 {
		return
	}
	n := uint64(binary.BigEndian.Uint32(data[8:])) + 12
	if n < 16 || n > uint64(len(data)) {
		return
	}
	c := crc32.Update(0, crc32.MakeTable(crc32.Castagnoli), data[:12])
	c = crc32.Update(c, crc32.MakeTable(crc32.Castagnoli), data[16:n])
	binary.BigEndian.PutUint32(data[12:], c)
}

func fuzzBatch(t testing.TB, base int64, epoch int32, ts int64, recs []record.Record) []byte {
	b, err := record.AppendBatch(nil, recs)
	require.NoError(t, err)
	record.Batch(b).Stamp(base, epoch, ts)
	return b
}

func batchFuzzSeeds(t testing.TB) []batchFuzzSeed {
	mixed := fuzzBatch(t, 42, 3, 1_700_000_000_000, []record.Record{
		{Key: nil, Value: nil},           // null key, empty value
		{Key: []byte{}, Value: []byte{}}, // empty key
		{Key: []byte("k"), Value: []byte("v"), Headers: []record.Header{
			{Key: "", Value: nil}, // empty header key and value
			{Key: "h", Value: []byte{}},
			{Key: "trace-id", Value: []byte("0af7651916cd43dd")},
		}},
		{Key: nil, Value: bytes.Repeat([]byte{0xff}, 40), Headers: []record.Header{{Key: "x"}}},
	})
	minimal := fuzzBatch(t, 0, 0, 0, []record.Record{{Key: []byte{}}})
	var many []record.Record
	for i := range 16 {
		many = append(many, record.Record{Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte(i)}, i*7)})
	}
	manyBatch := fuzzBatch(t, 1<<40, 1<<20, -5, many)

	with := func(b []byte, f func([]byte)) []byte {
		c := bytes.Clone(b)
		f(c)
		return c
	}
	kb, err := record.AppendKafkaBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte("v"), Headers: []record.Header{{Key: "h"}}}, {}},
		record.KafkaBatchOptions{Compression: record.CompressionGzip, ProducerID: 3, ProducerEpoch: 0, BaseSequence: 7})
	if err != nil {
		t.Fatal(err)
	}
	wrapped, err := record.WrapKafka(kb)
	if err != nil {
		t.Fatal(err)
	}
	wrapped.Stamp(9, 2, 1_700_000_000_000)
	return []batchFuzzSeed{
		{"valid-kafka-gzip", wrapped, false},
		// The Kafka batch's own CRC-32C damaged, gostream's fixed: Validate
		// refuses it, reads need not (CI's fuzzing found this case).
		{"kafka-inner-crc-wrong-fixcrc", with(wrapped, func(b []byte) { b[record.HeaderSize+17] ^= 0x01 }), true},
		{"valid-null-empty-keys-headers", mixed, false},
		{"valid-minimal", minimal, false},
		{"valid-many-records", manyBatch, false},
		{"two-batches", append(bytes.Clone(mixed), minimal...), false},
		{"empty", []byte{}, false},
		{"truncated-in-header", mixed[:20], false},
		{"truncated-in-records", mixed[:len(mixed)-3], false},
		{"bitflip-crc", with(mixed, func(b []byte) { b[13] ^= 0x10 }), false},
		{"bitflip-value", with(mixed, func(b []byte) { b[len(b)-5] ^= 0x01 }), false},
		{"bitflip-length", with(mixed, func(b []byte) { b[11] ^= 0x01 }), false},
		// Checksum fixed after the damage: only the record decoder can object.
		{"key-length-minus-two-fixcrc", with(mixed, func(b []byte) { binary.BigEndian.PutUint32(b[34:], 0xfffffffe) }), true},
		{"value-length-overrun-fixcrc", with(minimal, func(b []byte) { binary.BigEndian.PutUint32(b[38:], 1000) }), true},
		{"header-count-huge-fixcrc", with(minimal, func(b []byte) { binary.BigEndian.PutUint32(b[42:], 0xffffffff) }), true},
		{"record-count-huge-fixcrc", with(mixed, func(b []byte) { binary.BigEndian.PutUint32(b[30:], 0x7fffffff) }), true},
		{"record-count-negative-fixcrc", with(mixed, func(b []byte) { binary.BigEndian.PutUint32(b[30:], 0x80000000) }), true},
		{"record-count-zero-fixcrc", with(minimal, func(b []byte) { binary.BigEndian.PutUint32(b[30:], 0) }), true},
		{"trailing-byte-fixcrc", with(append(bytes.Clone(minimal), 0), func(b []byte) { binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12)) }), true},
		{"length-claims-2gib", with(minimal, func(b []byte) { binary.BigEndian.PutUint32(b[8:], 0x7ffffff0) }), false},
		{"count-claims-2g-short-buffer", with(minimal[:34], func(b []byte) { binary.BigEndian.PutUint32(b[30:], 0x7fffffff) }), false},
	}
}

// heapAllocBytes is the cumulative number of bytes allocated on the heap.
func heapAllocBytes() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzBatchDecode feeds arbitrary bytes to every decoder of package record.
// None may panic or allocate more than a small multiple of the input, and a
// batch that validates must re-encode to the same bytes.
func FuzzBatchDecode(f *testing.F) {
	for _, s := range batchFuzzSeeds(f) {
		f.Add(s.data, s.fixCRC)
	}
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		if fixCRC {
			data = bytes.Clone(data)
			fuzzFixCRC(data)
		}
		before := heapAllocBytes()
		checkBatchDecoders(t, data)
		// Decoding copies at most the input and keeps a fixed-size Record
		// (and Header) per 12 (8) input bytes; a claimed length or count
		// must never buy more than that.
		limit := 64*uint64(len(data)) + 1<<20
		if len(data) > 20 && data[20] == record.MagicKafka {
			// A Kafka batch's records may be compressed: what they
			// decompress to is bounded by MaxUncompressed instead.
			limit += 4 * record.MaxUncompressed
		}
		if got := heapAllocBytes() - before; got > limit {
			t.Fatalf("decoding %d bytes allocated %d bytes, limit %d", len(data), got, limit)
		}
	})
}

func checkBatchDecoders(t *testing.T, data []byte) {
	raw := record.Batch(data)
	// Records and Decode must refuse what Validate refuses, without panicking.
	rawErr := raw.Validate()
	recErr := raw.Records(func(*record.Record) bool { return true })
	_, decErr := raw.Decode()
	if rawErr == nil {
		require.NoError(t, recErr)
		require.NoError(t, decErr)
	}

	b, rest, err := record.Frame(data, record.MaxBatchSize)
	if err != nil {
		require.Nil(t, b)
		require.Equal(t, len(data), len(rest), "Frame consumed bytes it refused")
		require.Error(t, rawErr, "Validate accepted what Frame refused")
		return
	}
	require.Equal(t, data[:len(b)], []byte(b))
	require.Equal(t, data[len(b):], rest)
	require.Equal(t, rawErr == nil, len(rest) == 0 && b.Validate() == nil,
		"Validate of the whole input disagrees with Frame then Validate")

	verr := b.Validate()
	var n int
	kafka := b.Kafka() != nil
	rerr := b.Records(func(r *record.Record) bool {
		if r.Offset != b.BaseOffset()+int64(n) || !kafka && r.Timestamp != b.AppendTime() {
			t.Errorf("record %d: offset %d time %d, batch base %d time %d", n, r.Offset, r.Timestamp, b.BaseOffset(), b.AppendTime())
		}
		n++
		return true
	})
	recs, derr := b.Decode()
	if verr != nil {
		if kafka && errors.Is(verr, record.ErrChecksum) {
			// Frame checked gostream's checksum; the Kafka batch's own
			// CRC-32C (which the outer one covers) is the producer's,
			// checked on produce by Validate, not again by every read.
			return
		}
		require.Error(t, rerr, "Validate refused a framed batch whose records decode: %v", verr)
		require.Error(t, derr)
		return
	}
	require.NoError(t, rerr)
	require.NoError(t, derr)
	require.Len(t, recs, int(b.RecordCount()))
	require.Equal(t, int(b.RecordCount()), n)
	if kafka {
		// Its records are the Kafka batch's, which AppendKafka serves
		// as they are.
		kb, err := b.AppendKafka(nil)
		require.NoError(t, err)
		require.Equal(t, []byte(b[record.HeaderSize:]), kb)
		require.Equal(t, len(kb), b.KafkaSizeBound())
		return
	}

	enc, err := record.AppendBatch(nil, recs)
	require.NoError(t, err)
	record.Batch(enc).Stamp(b.BaseOffset(), b.LeaderEpoch(), b.AppendTime())
	require.Equal(t, []byte(b), enc, "re-encoding a valid batch changed its bytes")

	// As a Kafka consumer is served it: a Kafka batch of the same records,
	// appended after what dst holds.
	prefix := []byte("prefix")
	kb, err := b.AppendKafka(bytes.Clone(prefix))
	require.NoError(t, err)
	require.Equal(t, prefix, kb[:len(prefix)])
	requireKafkaOf(t, b, recs, kb[len(prefix):])
	require.LessOrEqual(t, len(kb)-len(prefix), b.KafkaSizeBound(), "the memory a fetch takes for it suffices")
}

// requireKafkaOf requires kb to be the Kafka batch AppendKafka makes of b,
// a batch of magic 1 whose records are recs: franz-go's codec reads each
// record back (null keys and values distinct from empty ones), at b's
// offsets, with b's append time, under a valid CRC-32C.
func requireKafkaOf(t *testing.T, b record.Batch, recs []record.Record, kb []byte) {
	t.Helper()
	var rb kmsg.RecordBatch
	require.NoError(t, rb.ReadFrom(kb))
	require.Equal(t, int32(len(kb)-12), rb.Length)
	require.Equal(t, b.BaseOffset(), rb.FirstOffset)
	require.Equal(t, b.LeaderEpoch(), rb.PartitionLeaderEpoch)
	require.Equal(t, int32(len(recs)), rb.NumRecords)
	require.Equal(t, int32(len(recs)-1), rb.LastOffsetDelta)
	require.Equal(t, b.AppendTime(), rb.FirstTimestamp)
	require.Equal(t, b.AppendTime(), rb.MaxTimestamp)
	require.Equal(t, int64(-1), rb.ProducerID)
	require.Equal(t, int16(0), rb.Attributes)
	require.Equal(t, crc32.Checksum(kb[21:], crc32.MakeTable(crc32.Castagnoli)), uint32(rb.CRC))
	data := rb.Records
	for i, want := range recs {
		n, w := binary.Varint(data)
		require.Positive(t, w, "record %d", i)
		require.LessOrEqual(t, w+int(n), len(data), "record %d", i)
		var r kmsg.Record
		require.NoError(t, r.ReadFrom(data[:w+int(n)]), "record %d", i)
		data = data[w+int(n):]
		require.Equal(t, int32(i), r.OffsetDelta)
		require.Equal(t, int64(0), r.TimestampDelta64)
		require.Equal(t, want.Key == nil, r.Key == nil, "record %d key null", i)
		require.Equal(t, want.Value == nil, r.Value == nil, "record %d value null", i)
		require.True(t, bytes.Equal(want.Key, r.Key), "record %d key", i)
		require.True(t, bytes.Equal(want.Value, r.Value), "record %d value", i)
		require.Len(t, r.Headers, len(want.Headers), "record %d headers", i)
		for j, h := range want.Headers {
			require.Equal(t, h.Key, r.Headers[j].Key)
			require.Equal(t, h.Value == nil, r.Headers[j].Value == nil, "record %d header %d value null", i, j)
			require.True(t, bytes.Equal(h.Value, r.Headers[j].Value), "record %d header %d value", i, j)
		}
	}
	require.Empty(t, data, "bytes after the last record")
}

// TestBatchFuzzSeedCorpus keeps testdata/fuzz/FuzzBatchDecode in step with
// batchFuzzSeeds; run with -gen-fuzz-seeds to rewrite it.
func TestBatchFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzBatchDecode")
	for _, s := range batchFuzzSeeds(t) {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nbool(%t)\n", s.data, s.fixCRC)
		path := filepath.Join(dir, s.name)
		if *genFuzzSeeds {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "seed %s missing; run go test -run TestBatchFuzzSeedCorpus -gen-fuzz-seeds", s.name)
		assert.Equal(t, want, string(got), "seed %s is stale; run go test -run TestBatchFuzzSeedCorpus -gen-fuzz-seeds", s.name)
	}
}

// FuzzKafkaBatch: any bytes given as a produced Kafka batch are refused
// with ErrInvalid or accepted; an accepted one wraps, stamps and decodes to
// exactly its record count, at contiguous offsets, and never panics or
// allocates past the limits.
func FuzzKafkaBatch(f *testing.F) {
	for _, codec := range []int{record.CompressionNone, record.CompressionGzip, record.CompressionSnappy, record.CompressionLZ4, record.CompressionZstd} {
		kb, err := record.AppendKafkaBatch(nil, []record.Record{{Key: []byte("k"), Value: []byte("v"), Headers: []record.Header{{Key: "h"}}},
			{Value: nil}}, record.KafkaBatchOptions{Compression: codec, ProducerID: 1, BaseSequence: 0})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(kb)
	}
	f.Fuzz(func(t *testing.T, kb []byte) {
		err := record.CheckKafkaBatch(kb)
		if err != nil {
			if !errors.Is(err, record.ErrInvalid) {
				t.Fatalf("refused with %v, not ErrInvalid", err)
			}
			return
		}
		b, err := record.WrapKafka(kb)
		if err != nil {
			t.Fatalf("checked but not wrapped: %v", err)
		}
		b.Stamp(10, 2, 1000)
		if err := b.Validate(); err != nil {
			t.Fatalf("stamped batch does not validate: %v", err)
		}
		recs, err := b.Decode()
		if err != nil || len(recs) != int(b.RecordCount()) {
			t.Fatalf("decoded %d of %d records: %v", len(recs), b.RecordCount(), err)
		}
		for i, r := range recs {
			if r.Offset != 10+int64(i) {
				t.Fatalf("record %d at offset %d", i, r.Offset)
			}
		}
	})
}

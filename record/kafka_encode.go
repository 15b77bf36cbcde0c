package record

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// KafkaBatchOptions are what a Kafka record batch carries besides its
// records.
type KafkaBatchOptions struct {
	// Compression is one of the Compression codecs.
	Compression int
	// ProducerID, ProducerEpoch and BaseSequence identify an idempotent
	// producer's batch; -1 for none.
	ProducerID    int64
	ProducerEpoch int16
	BaseSequence  int32
	// LogAppendTime marks the batch's timestamps as the leader's append
	// time (attribute bit 3): the leader writes its clock into the batch
	// when it stamps it, and every record reads as that time, whatever
	// its Timestamp here.
	LogAppendTime bool
}

// NoProducer is the options of a batch from a producer without
// idempotence, uncompressed.
var NoProducer = KafkaBatchOptions{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1}

// zstdEncoder is shared: EncodeAll is safe for concurrent use.
var zstdEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))

// AppendKafkaBatch appends to dst a Kafka record batch (magic 2) of the
// records, at base offset 0 and leader epoch 0, with each record's
// Timestamp as its create time, as a Kafka producer builds one.
func AppendKafkaBatch(dst []byte, records []Record, opts KafkaBatchOptions) ([]byte, error) {
	if len(records) == 0 {
		return dst, fmt.Errorf("%w: a batch needs at least one record", ErrInvalid)
	}
	first, maxTS := records[0].Timestamp, records[0].Timestamp
	for _, r := range records {
		first, maxTS = min(first, r.Timestamp), max(maxTS, r.Timestamp)
	}
	start := len(dst)
	if opts.Compression == CompressionNone {
		// The records go straight after the header.
		dst = append(dst, make([]byte, KafkaHeaderSize)...)
		for i := range records {
			dst = appendKafkaRecord(dst, &records[i], int64(i), first)
		}
	} else {
		var body []byte
		for i := range records {
			body = appendKafkaRecord(body, &records[i], int64(i), first)
		}
		var err error
		if body, err = compress(opts.Compression, body); err != nil {
			return dst, err
		}
		dst = append(dst, make([]byte, KafkaHeaderSize)...)
		dst = append(dst, body...)
	}
	if len(dst)-start > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: a batch of %d bytes", ErrInvalid, len(dst)-start)
	}
	sealKafkaBatch(kafkaBatch(dst[start:]), len(records), first, maxTS, opts)
	return dst, nil
}

// sealKafkaBatch fills in the header of k, whose records (count of them,
// encoded and compressed as opts says) follow its header, at base offset
// 0 and leader epoch 0, and computes its CRC-32C.
func sealKafkaBatch(k kafkaBatch, count int, first, maxTS int64, opts KafkaBatchOptions) {
	binary.BigEndian.PutUint32(k[kOffLength:], uint32(len(k)-12))
	k[kOffMagic] = 2
	attributes := uint16(opts.Compression)
	if opts.LogAppendTime {
		attributes |= kafkaLogAppendTime
	}
	binary.BigEndian.PutUint16(k[kOffAttributes:], attributes)
	binary.BigEndian.PutUint32(k[kOffLastOffsetDelta:], uint32(count-1))
	binary.BigEndian.PutUint64(k[kOffFirstTimestamp:], uint64(first))
	binary.BigEndian.PutUint64(k[kOffMaxTimestamp:], uint64(maxTS))
	binary.BigEndian.PutUint64(k[kOffProducerID:], uint64(opts.ProducerID))
	binary.BigEndian.PutUint16(k[kOffProducerEpoch:], uint16(opts.ProducerEpoch))
	binary.BigEndian.PutUint32(k[kOffBaseSequence:], uint32(opts.BaseSequence))
	binary.BigEndian.PutUint32(k[kOffRecordCount:], uint32(count))
	binary.BigEndian.PutUint32(k[kOffCRC:], k.computeCRC())
}

// AppendKafka appends the batch b to dst as a Kafka record batch: the one
// it carries, or for a batch of magic 1 its records in a new, uncompressed
// Kafka batch at b's base offset and epoch, each record's timestamp the
// append time. A batch of magic 1 is converted as it is read: its keys,
// values and headers are copied once, from b into dst.
func (b Batch) AppendKafka(dst []byte) ([]byte, error) {
	if k := b.Kafka(); k != nil {
		return append(dst, k...), nil
	}
	count, err := b.recordCount() // at least one, and bounded by b's size
	if err != nil {
		return dst, err
	}
	// Every record of magic 1 has the batch's append time.
	ts := b.AppendTime()
	start := len(dst)
	dst = slices.Grow(dst, kafkaSizeBound(len(b), count))
	dst = append(dst, make([]byte, KafkaHeaderSize)...)
	i := int64(0)
	err = b.Records(func(r *Record) bool {
		dst = appendKafkaRecord(dst, r, i, ts)
		i++
		return true
	})
	if err != nil {
		return dst[:start], err
	}
	k := kafkaBatch(dst[start:])
	sealKafkaBatch(k, count, ts, ts, NoProducer)
	binary.BigEndian.PutUint64(k[kOffBaseOffset:], uint64(b.BaseOffset()))
	binary.BigEndian.PutUint32(k[kOffLeaderEpoch:], uint32(b.LeaderEpoch()))
	return dst, nil
}

// KafkaSizeBound returns at least the bytes AppendKafka appends for b (a
// stored batch whose header checks out; for another, its length).
func (b Batch) KafkaSizeBound() int {
	if k := b.Kafka(); k != nil {
		return len(k)
	}
	count, err := b.recordCount()
	if err != nil {
		return len(b)
	}
	return kafkaSizeBound(len(b), count)
}

// kafkaSizeBound bounds the Kafka batch of a native batch of size bytes
// and count records. A Kafka record adds kafkaRecordExtra bytes to its
// native encoding, whose fixed 4-byte lengths become zigzag varints of no
// more than 4 bytes below 2^27 (5 from there: a byte more for each such
// field, of which size>>27 fit). Were it short, AppendKafka would only
// grow its destination.
func kafkaSizeBound(size, count int) int {
	return KafkaHeaderSize + size - HeaderSize + count*kafkaRecordExtra + size>>26
}

// kafkaRecordExtra bounds the bytes a Kafka record takes beyond its
// native encoding: its length and offset delta (varints), attributes and
// timestamp delta (zero for magic 1: one byte).
const kafkaRecordExtra = 2*binary.MaxVarintLen32 + 2

// KafkaEncodedSize returns the most bytes r takes among the records of a
// Kafka batch that AppendKafkaBatch builds uncompressed, wherever it is in
// the batch and whatever its timestamp.
func (r *Record) KafkaEncodedSize() int {
	body := 1 + binary.MaxVarintLen64 + varintLen(math.MaxInt32) + kafkaFieldsSize(r) // attributes, timestamp and offset deltas, fields
	return varintLen(int64(body)) + body
}

// kafkaFieldsSize is the size of r's key, value and headers in a Kafka
// record.
func kafkaFieldsSize(r *Record) int {
	n := bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return n
}

// varintLen is the size of v as a zigzag varint.
func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

// bytesLen is the size of a nullable byte field of a Kafka record.
func bytesLen(v []byte) int {
	if v == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(v))) + len(v)
}

func appendVarint(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

func appendKafkaBytes(b, v []byte) []byte {
	if v == nil {
		return appendVarint(b, -1)
	}
	return append(appendVarint(b, int64(len(v))), v...)
}

// appendKafkaRecord appends r as a Kafka record at offset delta i, its
// timestamp delta from first: its length, then its fields, written in
// place.
func appendKafkaRecord(b []byte, r *Record, i, first int64) []byte {
	n := 1 + varintLen(r.Timestamp-first) + varintLen(i) + kafkaFieldsSize(r)
	b = appendVarint(b, int64(n))
	b = append(b, 0) // attributes
	b = appendVarint(b, r.Timestamp-first)
	b = appendVarint(b, i)
	b = appendKafkaBytes(b, r.Key)
	b = appendKafkaBytes(b, r.Value)
	b = appendVarint(b, int64(len(r.Headers)))
	for _, h := range r.Headers {
		b = appendVarint(b, int64(len(h.Key)))
		b = append(b, h.Key...)
		b = appendKafkaBytes(b, h.Value)
	}
	return b
}

// compress compresses a Kafka batch's records with codec; snappy in the
// xerial framing the Java client writes.
func compress(codec int, data []byte) ([]byte, error) {
	switch codec {
	case CompressionNone:
		return data, nil
	case CompressionGzip:
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CompressionSnappy:
		out := append([]byte{}, xerialMagic...)
		out = binary.BigEndian.AppendUint32(out, 1) // version
		out = binary.BigEndian.AppendUint32(out, 1) // compatible version
		const block = 32 << 10
		for p := 0; p < len(data) || p == 0; p += block {
			enc := snappy.Encode(nil, data[p:min(p+block, len(data))])
			out = binary.BigEndian.AppendUint32(out, uint32(len(enc)))
			out = append(out, enc...)
			if len(data) == 0 {
				break
			}
		}
		return out, nil
	case CompressionLZ4:
		var buf bytes.Buffer
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(data); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case CompressionZstd:
		return zstdEncoder.EncodeAll(data, nil), nil
	}
	return nil, fmt.Errorf("%w: compression codec %d", ErrInvalid, codec)
}

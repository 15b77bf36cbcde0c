package record

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// A batch of magic 2 carries one Kafka record batch (Kafka's own magic 2)
// as its body, byte for byte as the producer sent it, after the 34-byte
// header every batch has (see the package documentation and
// docs/kafka.md). The outer header's base offset, leader epoch and record
// count equal the Kafka batch's; the outer CRC covers everything, the
// Kafka batch's own CRC-32C covers its bytes from its attributes on.

// MagicKafka is the format version of a batch that carries a Kafka record
// batch.
const MagicKafka = 2

// Layout of a Kafka record batch header (magic 2), offsets from its start.
const (
	kOffBaseOffset      = 0
	kOffLength          = 8
	kOffLeaderEpoch     = 12
	kOffMagic           = 16
	kOffCRC             = 17
	kOffAttributes      = 21
	kOffLastOffsetDelta = 23
	kOffFirstTimestamp  = 27
	kOffMaxTimestamp    = 35
	kOffProducerID      = 43
	kOffProducerEpoch   = 51
	kOffBaseSequence    = 53
	kOffRecordCount     = 57

	// KafkaHeaderSize is the size of a Kafka record batch header.
	KafkaHeaderSize = 61
	// kafkaMinRecord is the smallest encoded Kafka record: its length and
	// six one-byte fields (attributes, timestamp and offset deltas, key and
	// value lengths, header count).
	kafkaMinRecord = 7
)

// Kafka batch attributes.
const (
	kafkaCompressionMask = 0x07
	kafkaLogAppendTime   = 0x08
	kafkaTransactional   = 0x10
	kafkaControl         = 0x20
)

// Compression codecs of a Kafka batch (attributes bits 0-2).
const (
	CompressionNone   = 0
	CompressionGzip   = 1
	CompressionSnappy = 2
	CompressionLZ4    = 3
	CompressionZstd   = 4
)

// MaxUncompressed bounds what the records of one compressed Kafka batch
// may decompress to: a batch that would decompress past it is ErrInvalid
// (a decompression bomb costs at most this much memory).
const MaxUncompressed = 64 << 20

// kafkaBatch is a Kafka record batch (magic 2).
type kafkaBatch []byte

func (k kafkaBatch) baseOffset() int64  { return int64(binary.BigEndian.Uint64(k[kOffBaseOffset:])) }
func (k kafkaBatch) length() int64      { return int64(binary.BigEndian.Uint32(k[kOffLength:])) }
func (k kafkaBatch) leaderEpoch() int32 { return int32(binary.BigEndian.Uint32(k[kOffLeaderEpoch:])) }
func (k kafkaBatch) crc() uint32        { return binary.BigEndian.Uint32(k[kOffCRC:]) }
func (k kafkaBatch) attributes() uint16 { return binary.BigEndian.Uint16(k[kOffAttributes:]) }
func (k kafkaBatch) lastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(k[kOffLastOffsetDelta:]))
}
func (k kafkaBatch) firstTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(k[kOffFirstTimestamp:]))
}
func (k kafkaBatch) maxTimestamp() int64 { return int64(binary.BigEndian.Uint64(k[kOffMaxTimestamp:])) }
func (k kafkaBatch) producerID() int64   { return int64(binary.BigEndian.Uint64(k[kOffProducerID:])) }
func (k kafkaBatch) producerEpoch() int16 {
	return int16(binary.BigEndian.Uint16(k[kOffProducerEpoch:]))
}
func (k kafkaBatch) baseSequence() int32 { return int32(binary.BigEndian.Uint32(k[kOffBaseSequence:])) }
func (k kafkaBatch) recordCount() int32  { return int32(binary.BigEndian.Uint32(k[kOffRecordCount:])) }
func (k kafkaBatch) computeCRC() uint32  { return crc32.Checksum(k[kOffAttributes:], castagnoli) }

// checkFrame checks what framing and stamping rely on: the length, the
// magic, a record count that fits, and offset deltas that are the
// records' positions (so the batch's offsets are contiguous).
func (k kafkaBatch) checkFrame() error {
	if len(k) < KafkaHeaderSize {
		return fmt.Errorf("%w: a Kafka batch of %d bytes, shorter than its %d-byte header", ErrInvalid, len(k), KafkaHeaderSize)
	}
	if k.length()+12 != int64(len(k)) {
		return fmt.Errorf("%w: Kafka batch length %d, have %d bytes after it", ErrInvalid, k.length(), len(k)-12)
	}
	if k[kOffMagic] != 2 {
		return fmt.Errorf("%w: Kafka batch magic %d; only magic 2 is taken", ErrInvalid, k[kOffMagic])
	}
	c := k.recordCount()
	if c <= 0 {
		return fmt.Errorf("%w: Kafka batch record count %d", ErrInvalid, c)
	}
	if k.attributes()&kafkaCompressionMask == CompressionNone && int64(c)*kafkaMinRecord > int64(len(k)-KafkaHeaderSize) {
		return fmt.Errorf("%w: Kafka batch record count %d does not fit %d bytes", ErrInvalid, c, len(k))
	}
	if k.lastOffsetDelta() != c-1 {
		return fmt.Errorf("%w: Kafka batch last offset delta %d with %d records", ErrInvalid, k.lastOffsetDelta(), c)
	}
	return nil
}

// CheckKafkaBatch checks a Kafka record batch as a producer sent it, before
// anything is written: its framing, magic 2, CRC-32C, a base offset of 0,
// no control or transactional flag, a known codec, and exactly its record
// count of well-formed records with contiguous offset deltas, decompressed
// (within MaxUncompressed) when compressed. Anything else is ErrInvalid.
func CheckKafkaBatch(kb []byte) error {
	k := kafkaBatch(kb)
	if err := k.checkFrame(); err != nil {
		return err
	}
	if k.crc() != k.computeCRC() {
		return fmt.Errorf("%w: Kafka batch CRC-32C mismatch", ErrInvalid)
	}
	if k.baseOffset() != 0 {
		return fmt.Errorf("%w: a produced Kafka batch has base offset %d, not 0", ErrInvalid, k.baseOffset())
	}
	a := k.attributes()
	if a&kafkaControl != 0 {
		return fmt.Errorf("%w: a control batch; clients do not send them", ErrInvalid)
	}
	if a&kafkaTransactional != 0 {
		return fmt.Errorf("%w: a transactional batch; transactions are not supported", ErrInvalid)
	}
	return k.records(0, 0, func(*Record) bool { return true })
}

// WrapKafka returns a batch of magic 2 that carries the Kafka record batch
// kb (a copy), once CheckKafkaBatch accepts it. The leader stamps it as any
// other batch.
func WrapKafka(kb []byte) (Batch, error) {
	return WrapKafkaInto(nil, kb)
}

// WrapKafkaInto is WrapKafka building the batch in buf when it has room
// for it (HeaderSize more bytes than kb), else in a new buffer. buf's
// contents do not matter: every byte of the batch is written.
func WrapKafkaInto(buf []byte, kb []byte) (Batch, error) {
	if err := CheckKafkaBatch(kb); err != nil {
		return nil, err
	}
	if len(kb) > MaxBatchSize-HeaderSize {
		return nil, fmt.Errorf("%w: a Kafka batch of %d bytes", ErrInvalid, len(kb))
	}
	var b Batch
	if n := HeaderSize + len(kb); cap(buf) >= n {
		b = Batch(buf[:n])
		clear(b[:HeaderSize])
	} else {
		b = make(Batch, n)
	}
	copy(b[HeaderSize:], kb)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-LengthPrefix))
	b[offMagic] = MagicKafka
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(kafkaBatch(kb).recordCount()))
	b.Stamp(0, 0, 0)
	return b, nil
}

// kafka returns the Kafka batch that b carries (b is of magic 2).
func (b Batch) kafka() kafkaBatch { return kafkaBatch(b[HeaderSize:]) }

// checkKafkaHeader checks that the Kafka batch b carries frames and agrees
// with b's header.
func (b Batch) checkKafkaHeader() error {
	k := b.kafka()
	if err := k.checkFrame(); err != nil {
		return err
	}
	switch {
	case k.baseOffset() != b.BaseOffset():
		return fmt.Errorf("%w: Kafka batch base offset %d in a batch at %d", ErrInvalid, k.baseOffset(), b.BaseOffset())
	case k.leaderEpoch() != b.LeaderEpoch():
		return fmt.Errorf("%w: Kafka batch leader epoch %d in a batch of epoch %d", ErrInvalid, k.leaderEpoch(), b.LeaderEpoch())
	case k.recordCount() != b.RecordCount():
		return fmt.Errorf("%w: Kafka batch of %d records in a batch of %d", ErrInvalid, k.recordCount(), b.RecordCount())
	}
	return nil
}

// stampKafka sets the Kafka batch's base offset and leader epoch (outside
// its CRC), and with LogAppendTime its max timestamp (with its CRC).
func (b Batch) stampKafka(baseOffset int64, leaderEpoch int32, appendTime int64) {
	k := b.kafka()
	if len(k) < KafkaHeaderSize {
		return // not a Kafka batch: Validate refuses it
	}
	binary.BigEndian.PutUint64(k[kOffBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(k[kOffLeaderEpoch:], uint32(leaderEpoch))
	if k.attributes()&kafkaLogAppendTime != 0 && k.maxTimestamp() != appendTime {
		binary.BigEndian.PutUint64(k[kOffMaxTimestamp:], uint64(appendTime))
		binary.BigEndian.PutUint32(k[kOffCRC:], k.computeCRC())
	}
}

// Kafka returns the Kafka record batch b carries (it aliases b), or nil
// for a batch of magic 1 (see AppendKafka).
func (b Batch) Kafka() []byte {
	if b[offMagic] != MagicKafka {
		return nil
	}
	return b[HeaderSize:]
}

// Producer returns the producer id, epoch and first sequence of the Kafka
// batch b carries; -1, -1, -1 for a batch of magic 1 or one produced
// without idempotence.
func (b Batch) Producer() (id int64, epoch int16, baseSequence int32) {
	if b[offMagic] != MagicKafka {
		return -1, -1, -1
	}
	k := b.kafka()
	return k.producerID(), k.producerEpoch(), k.baseSequence()
}

// MaxTimestamp is the greatest record timestamp of b: the Kafka batch's
// max timestamp, or the append time of a batch of magic 1.
func (b Batch) MaxTimestamp() int64 {
	if b[offMagic] != MagicKafka {
		return b.AppendTime()
	}
	return b.kafka().maxTimestamp()
}

// records decodes the Kafka batch's records (decompressing them first),
// with offsets from base, and calls fn for each until it returns false.
// appendTime is the time of a LogAppendTime batch (0: its max timestamp).
func (k kafkaBatch) records(base int64, appendTime int64, fn func(*Record) bool) error {
	count := int(k.recordCount())
	data := []byte(k[KafkaHeaderSize:])
	if codec := k.attributes() & kafkaCompressionMask; codec != CompressionNone {
		var err error
		if data, err = decompress(int(codec), data, MaxUncompressed); err != nil {
			return err
		}
		if count*kafkaMinRecord > len(data) {
			return fmt.Errorf("%w: Kafka batch record count %d does not fit %d decompressed bytes", ErrInvalid, count, len(data))
		}
	}
	logAppend := k.attributes()&kafkaLogAppendTime != 0
	if appendTime == 0 {
		appendTime = k.maxTimestamp()
	}
	first := k.firstTimestamp()
	p := 0
	var r Record
	for i := 0; i < count; i++ {
		r = Record{}
		var delta, offDelta int64
		var err error
		if p, delta, offDelta, err = decodeKafkaRecord(data, p, &r); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if offDelta != int64(i) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrInvalid, i, offDelta)
		}
		r.Offset = base + offDelta
		if logAppend {
			r.Timestamp = appendTime
		} else {
			r.Timestamp = first + delta
		}
		if !fn(&r) {
			return nil
		}
	}
	if p != len(data) {
		return fmt.Errorf("%w: %d bytes after the last record of the Kafka batch", ErrInvalid, len(data)-p)
	}
	return nil
}

// varint reads a zigzag varint of at most 64 bits at p.
func varint(b []byte, p int) (int64, int, error) {
	v, n := binary.Varint(b[p:])
	if n <= 0 {
		return 0, p, fmt.Errorf("%w: bad varint at byte %d", ErrInvalid, p)
	}
	return v, p + n, nil
}

// varint32 reads a zigzag varint that must fit 32 bits.
func varint32(b []byte, p int) (int64, int, error) {
	v, q, err := varint(b, p)
	if err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		return 0, p, fmt.Errorf("%w: varint %d at byte %d out of range", ErrInvalid, v, p)
	}
	return v, q, err
}

// bytesField reads a varint length (-1: null) and that many bytes.
func bytesField(b []byte, p int) ([]byte, int, error) {
	n, p, err := varint32(b, p)
	if err != nil {
		return nil, p, err
	}
	if n == -1 {
		return nil, p, nil
	}
	if n < 0 || n > int64(len(b)-p) {
		return nil, p, fmt.Errorf("%w: length %d at byte %d overruns the record", ErrInvalid, n, p)
	}
	q := p + int(n)
	return b[p:q:q], q, nil
}

// decodeKafkaRecord decodes the Kafka record at p into r (key, value,
// headers) and returns where the next one begins, its timestamp delta and
// its offset delta.
func decodeKafkaRecord(b []byte, p int, r *Record) (next int, tsDelta, offDelta int64, err error) {
	length, p, err := varint32(b, p)
	if err != nil {
		return p, 0, 0, err
	}
	if length < kafkaMinRecord-1 || length > int64(len(b)-p) {
		return p, 0, 0, fmt.Errorf("%w: record length %d at byte %d", ErrInvalid, length, p)
	}
	end := p + int(length)
	rec := b[:end]
	if p >= end {
		return p, 0, 0, fmt.Errorf("%w: empty record", ErrInvalid)
	}
	p++ // attributes, unused
	if tsDelta, p, err = varint(rec, p); err != nil {
		return p, 0, 0, err
	}
	if offDelta, p, err = varint32(rec, p); err != nil {
		return p, 0, 0, err
	}
	if r.Key, p, err = bytesField(rec, p); err != nil {
		return p, 0, 0, err
	}
	if r.Value, p, err = bytesField(rec, p); err != nil {
		return p, 0, 0, err
	}
	hc, p, err := varint32(rec, p)
	if err != nil {
		return p, 0, 0, err
	}
	if hc < 0 || hc*2 > int64(end-p) {
		return p, 0, 0, fmt.Errorf("%w: header count %d at byte %d", ErrInvalid, hc, p)
	}
	for j := int64(0); j < hc; j++ {
		var key []byte
		var h Header
		if key, p, err = bytesField(rec, p); err != nil {
			return p, 0, 0, err
		}
		if key == nil {
			return p, 0, 0, fmt.Errorf("%w: a header with a null key", ErrInvalid)
		}
		h.Key = string(key)
		if h.Value, p, err = bytesField(rec, p); err != nil {
			return p, 0, 0, err
		}
		r.Headers = append(r.Headers, h)
	}
	if p != end {
		return p, 0, 0, fmt.Errorf("%w: record of %d bytes holds %d", ErrInvalid, length, p-(end-int(length)))
	}
	return end, tsDelta, offDelta, nil
}

// CheckProduced refuses what a producer may not send in a batch of magic
// 2 that Validate alone would take: a Kafka batch flagged as a control or
// transactional batch. The leader's core calls it for every protocol's
// produce (the Kafka front end's WrapKafka checks the same and more).
func (b Batch) CheckProduced() error {
	if len(b) < HeaderSize+KafkaHeaderSize || b[offMagic] != MagicKafka {
		return nil
	}
	a := b.kafka().attributes()
	if a&kafkaControl != 0 {
		return fmt.Errorf("%w: a control batch; clients do not send them", ErrInvalid)
	}
	if a&kafkaTransactional != 0 {
		return fmt.Errorf("%w: a transactional batch; transactions are not supported", ErrInvalid)
	}
	return nil
}

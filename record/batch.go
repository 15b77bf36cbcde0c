package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// Layout of the batch header; see the package documentation.
const (
	offBaseOffset  = 0
	offLength      = 8
	offCRC         = 12
	offLeaderEpoch = 16
	offMagic       = 20
	offAttributes  = 21
	offAppendTime  = 22
	offRecordCount = 30

	// HeaderSize is the size of a batch header, before the first record.
	HeaderSize = 34
	// LengthPrefix is the size of the fields before Length's count starts.
	LengthPrefix = 12
	// MagicOffset is where a batch's magic byte is, from its start.
	MagicOffset = offMagic
	// Magic is the format version of a batch of gostream records.
	Magic = 1
	// minRecordSize is the smallest encoded record: empty key, value and headers.
	minRecordSize = 12
	// MaxBatchSize bounds any batch this package will frame or decode.
	MaxBatchSize = math.MaxInt32
)

var (
	// ErrShort means the buffer ends before the batch it starts does: more
	// bytes are needed to frame it.
	ErrShort = errors.New("record: incomplete batch")
	// ErrInvalid means the bytes are not a well-formed batch: a bad length,
	// version, count, checksum, or record layout.
	ErrInvalid = errors.New("record: invalid batch")
	// ErrChecksum means the batch is framed correctly but its CRC does not
	// match its content. It also matches ErrInvalid.
	ErrChecksum = fmt.Errorf("%w: checksum mismatch", ErrInvalid)
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a record header: a name and an opaque value.
type Header struct {
	Key   string
	Value []byte
}

// Record is one record. A nil Key is a null key, distinct from an empty one.
// Offset and Timestamp are set by decoding and ignored by encoding: the
// leader assigns them.
type Record struct {
	Offset    int64
	Timestamp int64 // Unix milliseconds, the batch's AppendTime
	Key       []byte
	Value     []byte
	Headers   []Header
}

// EncodedSize returns the number of bytes r takes inside a batch.
func (r *Record) EncodedSize() int {
	n := minRecordSize + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 8 + len(h.Key) + len(h.Value)
	}
	return n
}

// Batch is the bytes of exactly one batch. Methods that read header fields
// assume the batch was framed by Frame or built by AppendBatch.
type Batch []byte

// AppendBatch appends to dst a batch holding records, with base offset 0,
// epoch 0 and append time 0, and a valid checksum. The leader restamps those
// fields with Stamp. It returns ErrInvalid for an empty batch or one larger
// than MaxBatchSize.
func AppendBatch(dst []byte, records []Record) ([]byte, error) {
	if len(records) == 0 {
		return dst, fmt.Errorf("%w: no records", ErrInvalid)
	}
	size := HeaderSize
	for i := range records {
		size += records[i].EncodedSize()
		if size > MaxBatchSize {
			return dst, fmt.Errorf("%w: batch larger than %d bytes", ErrInvalid, MaxBatchSize)
		}
	}
	start := len(dst)
	dst = growTo(dst, start+size)
	b := dst[start:]
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offLength:], uint32(size-LengthPrefix))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0)
	b[offMagic] = Magic
	b[offAttributes] = 0
	binary.BigEndian.PutUint64(b[offAppendTime:], 0)
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(len(records)))
	p := HeaderSize
	for i := range records {
		p = putRecord(b, p, &records[i])
	}
	Batch(b).setCRC()
	return dst, nil
}

func growTo(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

func putRecord(b []byte, p int, r *Record) int {
	if r.Key == nil {
		binary.BigEndian.PutUint32(b[p:], math.MaxUint32) // -1
		p += 4
	} else {
		binary.BigEndian.PutUint32(b[p:], uint32(len(r.Key)))
		p += 4
		p += copy(b[p:], r.Key)
	}
	binary.BigEndian.PutUint32(b[p:], uint32(len(r.Value)))
	p += 4
	p += copy(b[p:], r.Value)
	binary.BigEndian.PutUint32(b[p:], uint32(len(r.Headers)))
	p += 4
	for _, h := range r.Headers {
		binary.BigEndian.PutUint32(b[p:], uint32(len(h.Key)))
		p += 4
		p += copy(b[p:], h.Key)
		binary.BigEndian.PutUint32(b[p:], uint32(len(h.Value)))
		p += 4
		p += copy(b[p:], h.Value)
	}
	return p
}

// FrameSize reads the header at the start of buf and returns the size of the
// batch that starts there. It returns ErrShort when buf holds fewer than
// LengthPrefix bytes, and ErrInvalid when the length field cannot describe a
// batch no larger than maxSize.
func FrameSize(buf []byte, maxSize int) (int, error) {
	if len(buf) < LengthPrefix {
		return 0, ErrShort
	}
	n := int64(binary.BigEndian.Uint32(buf[offLength:])) + LengthPrefix
	if n < HeaderSize || n > int64(maxSize) {
		return 0, fmt.Errorf("%w: batch length %d outside [%d, %d]", ErrInvalid, n, HeaderSize, maxSize)
	}
	return int(n), nil
}

// Frame returns the batch at the start of buf and the bytes after it. It
// checks the framing and the checksum but not the records (see Validate). It
// returns ErrShort if buf ends inside the batch.
func Frame(buf []byte, maxSize int) (Batch, []byte, error) {
	n, err := FrameSize(buf, maxSize)
	if err != nil {
		return nil, buf, err
	}
	if len(buf) < n {
		return nil, buf, ErrShort
	}
	b := Batch(buf[:n:n])
	if err := b.checkHeader(); err != nil {
		return nil, buf, err
	}
	if !b.ChecksumOK() {
		return nil, buf, ErrChecksum
	}
	return b, buf[n:], nil
}

// recordCount returns the record count of b once it is known to fit the
// bytes after the header, so that no caller loops or allocates on a claimed
// count. Records and Decode may be handed bytes that were never framed.
func (b Batch) recordCount() (int, error) {
	if len(b) < HeaderSize {
		return 0, ErrShort
	}
	c := binary.BigEndian.Uint32(b[offRecordCount:])
	if b[offMagic] == MagicKafka {
		// The Kafka batch's own checks bound its count (checkKafkaHeader).
		if c == 0 || c > math.MaxInt32 {
			return 0, fmt.Errorf("%w: record count %d", ErrInvalid, c)
		}
		return int(c), nil
	}
	if c == 0 || uint64(c)*minRecordSize > uint64(len(b)-HeaderSize) {
		return 0, fmt.Errorf("%w: record count %d does not fit %d bytes", ErrInvalid, c, len(b))
	}
	return int(c), nil
}

func (b Batch) checkHeader() error {
	if b[offMagic] != Magic && b[offMagic] != MagicKafka {
		return fmt.Errorf("%w: magic %d", ErrInvalid, b[offMagic])
	}
	if b[offAttributes] != 0 {
		return fmt.Errorf("%w: attributes %#x", ErrInvalid, b[offAttributes])
	}
	if b.BaseOffset() < 0 {
		return fmt.Errorf("%w: negative base offset %d", ErrInvalid, b.BaseOffset())
	}
	if b.LeaderEpoch() < 0 {
		return fmt.Errorf("%w: negative leader epoch %d", ErrInvalid, b.LeaderEpoch())
	}
	c, err := b.recordCount()
	if err != nil {
		return err
	}
	if uint64(b.BaseOffset())+uint64(c) > math.MaxInt64 {
		return fmt.Errorf("%w: offsets overflow", ErrInvalid)
	}
	if b[offMagic] == MagicKafka {
		return b.checkKafkaHeader()
	}
	return nil
}

// Validate checks b completely: framing, header, checksum, and that exactly
// RecordCount well-formed records fill the rest.
func (b Batch) Validate() error {
	_, err := b.ValidateSum()
	return err
}

// Sum is what validating a batch learned of its checksum: with it StampSum
// computes the batch's CRC after stamping without reading its records
// again (see crcCombine). A batch under combineMin has none: reading it
// again costs less than combining.
type Sum struct {
	records uint32 // the CRC-32C of the batch from recordsStart on
	ok      bool   // set by ValidateSum
}

// ValidateSum is Validate, returning the batch's Sum for StampSum.
func (b Batch) ValidateSum() (Sum, error) {
	if len(b) < HeaderSize {
		return Sum{}, ErrShort
	}
	if n, err := FrameSize(b, MaxBatchSize); err != nil {
		return Sum{}, err
	} else if n != len(b) {
		return Sum{}, fmt.Errorf("%w: length field says %d bytes, have %d", ErrInvalid, n, len(b))
	}
	if err := b.checkHeader(); err != nil {
		return Sum{}, err
	}
	var sum Sum
	switch {
	case b[offMagic] == MagicKafka:
		k := b.kafka()
		records := k.computeCRC()
		if records != k.crc() {
			return Sum{}, fmt.Errorf("%w: the Kafka batch's CRC-32C does not match", ErrChecksum)
		}
		if b.combines() {
			sum = Sum{records: records, ok: true}
		}
	case b.combines():
		sum = Sum{records: crc32.Checksum(b[HeaderSize:], castagnoli), ok: true}
	}
	var crc uint32
	if sum.ok {
		crc = b.crcWith(sum.records)
	} else {
		crc = b.computeCRC()
	}
	if crc != b.CRC() {
		return Sum{}, ErrChecksum
	}
	return sum, b.Records(func(*Record) bool { return true })
}

// combineMin is the size from which a batch's CRC is combined from its
// parts' rather than computed over its bytes: crcCombine costs about as
// much as the CRC-32C of a few KiB, whatever the size.
const combineMin = 16 << 10

// combines reports whether b's CRC is combined from its parts'.
func (b Batch) combines() bool { return len(b) >= combineMin }

// recordsStart is where the part of b that stamping leaves alone begins:
// the records after the header, or, in a Kafka batch, the part its own CRC
// covers (stamping a Kafka batch changes its base offset and leader epoch,
// before that part; a LogAppendTime batch's max timestamp, inside it, is
// covered by the Kafka CRC, which stamping computes again then).
func (b Batch) recordsStart() int {
	if b[offMagic] == MagicKafka && len(b) >= HeaderSize+kOffAttributes {
		return HeaderSize + kOffAttributes
	}
	return min(HeaderSize, len(b))
}

// crcWith returns the CRC of b from records, the CRC-32C of b from
// recordsStart on.
func (b Batch) crcWith(records uint32) uint32 {
	start := b.recordsStart()
	c := crc32.Update(0, castagnoli, b[:offCRC])
	c = crc32.Update(c, castagnoli, b[offLeaderEpoch:start])
	return crcCombine(c, records, len(b)-start)
}

func (b Batch) computeCRC() uint32 {
	c := crc32.Update(0, castagnoli, b[:offCRC])
	return crc32.Update(c, castagnoli, b[offLeaderEpoch:])
}

func (b Batch) setCRC() { binary.BigEndian.PutUint32(b[offCRC:], b.computeCRC()) }

// ChecksumOK reports whether the stored CRC matches the batch's bytes.
func (b Batch) ChecksumOK() bool { return b.CRC() == b.computeCRC() }

// Stamp sets the base offset, leader epoch and append time of b in place and
// recomputes its checksum. Only the leader stamps a batch.
func (b Batch) Stamp(baseOffset int64, leaderEpoch int32, appendTime int64) {
	b.StampSum(baseOffset, leaderEpoch, appendTime, Sum{})
}

// StampSum is Stamp for a batch whose Sum ValidateSum returned, which it
// uses to compute the new checksum without reading the records; with a
// zero Sum, or under combineMin bytes, it reads them, as Stamp does. A
// Kafka batch needs no Sum: its own CRC, stored in it, is its records'
// checksum (a batch whose Kafka CRC is wrong keeps failing Validate after
// stamping, as before).
func (b Batch) StampSum(baseOffset int64, leaderEpoch int32, appendTime int64, sum Sum) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(leaderEpoch))
	binary.BigEndian.PutUint64(b[offAppendTime:], uint64(appendTime))
	if b[offMagic] == MagicKafka && len(b) >= HeaderSize+KafkaHeaderSize {
		b.stampKafka(baseOffset, leaderEpoch, appendTime)
		sum = Sum{records: b.kafka().crc(), ok: true}
	}
	if !sum.ok || !b.combines() {
		b.setCRC()
		return
	}
	binary.BigEndian.PutUint32(b[offCRC:], b.crcWith(sum.records))
}

// BaseOffset is the offset of the batch's first record.
func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[offBaseOffset:])) }

// Size is the number of bytes of the batch.
func (b Batch) Size() int { return len(b) }

// CRC is the stored checksum.
func (b Batch) CRC() uint32 { return binary.BigEndian.Uint32(b[offCRC:]) }

// LeaderEpoch is the epoch of the leader that appended the batch.
func (b Batch) LeaderEpoch() int32 { return int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])) }

// AppendTime is the leader's clock when it appended the batch, in Unix milliseconds.
func (b Batch) AppendTime() int64 { return int64(binary.BigEndian.Uint64(b[offAppendTime:])) }

// RecordCount is the number of records in the batch.
func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b[offRecordCount:])) }

// NextOffset is the offset after the batch's last record.
func (b Batch) NextOffset() int64 { return b.BaseOffset() + int64(b.RecordCount()) }

// Records decodes the records of b in order and calls fn for each until fn
// returns false. The record's slices alias b. It returns ErrShort if b is
// shorter than a batch header, and ErrInvalid if the record count does not fit
// b or the records do not exactly fill it.
func (b Batch) Records(fn func(*Record) bool) error {
	count, err := b.recordCount()
	if err != nil {
		return err
	}
	if b[offMagic] == MagicKafka {
		if err := b.checkKafkaHeader(); err != nil {
			return err
		}
		return b.kafka().records(b.BaseOffset(), 0, fn)
	}
	base, ts := b.BaseOffset(), b.AppendTime()
	p := HeaderSize
	var r Record
	for i := 0; i < count; i++ {
		var err error
		// A fresh Headers slice each time: a caller that keeps a copy of *r
		// (whose slices alias b) must not see the next record's headers.
		r = Record{Offset: base + int64(i), Timestamp: ts}
		if p, err = decodeRecord(b, p, &r); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		if !fn(&r) {
			return nil
		}
	}
	if p != len(b) {
		return fmt.Errorf("%w: %d bytes after the last record", ErrInvalid, len(b)-p)
	}
	return nil
}

// Decode returns copies of the records of b, safe to keep after b changes.
func (b Batch) Decode() ([]Record, error) {
	count, err := b.recordCount()
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, min(count, 1024))
	err = b.Records(func(r *Record) bool {
		c := Record{Offset: r.Offset, Timestamp: r.Timestamp}
		if r.Value != nil {
			c.Value = append([]byte{}, r.Value...)
		}
		if r.Key != nil {
			c.Key = append([]byte{}, r.Key...)
		}
		if len(r.Headers) > 0 {
			c.Headers = make([]Header, len(r.Headers))
			for i, h := range r.Headers {
				c.Headers[i] = Header{Key: h.Key}
				if h.Value != nil {
					c.Headers[i].Value = append([]byte{}, h.Value...)
				}
			}
		}
		out = append(out, c)
		return true
	})
	return out, err
}

func readLen(b []byte, p int) (int, int, error) {
	if len(b)-p < 4 {
		return 0, p, fmt.Errorf("%w: truncated length at byte %d", ErrInvalid, p)
	}
	n := binary.BigEndian.Uint32(b[p:])
	if uint64(n) > uint64(len(b)-p-4) {
		return 0, p, fmt.Errorf("%w: length %d at byte %d overruns the batch", ErrInvalid, n, p)
	}
	return int(n), p + 4, nil
}

func decodeRecord(b Batch, p int, r *Record) (int, error) {
	if len(b)-p < 4 {
		return p, fmt.Errorf("%w: truncated key length", ErrInvalid)
	}
	if binary.BigEndian.Uint32(b[p:]) == math.MaxUint32 {
		r.Key = nil
		p += 4
	} else {
		n, q, err := readLen(b, p)
		if err != nil {
			return p, err
		}
		r.Key, p = b[q:q+n:q+n], q+n
	}
	n, p, err := readLen(b, p)
	if err != nil {
		return p, err
	}
	r.Value, p = b[p:p+n:p+n], p+n
	if len(b)-p < 4 {
		return p, fmt.Errorf("%w: truncated header count", ErrInvalid)
	}
	hc := binary.BigEndian.Uint32(b[p:])
	p += 4
	if uint64(hc)*8 > uint64(len(b)-p) {
		return p, fmt.Errorf("%w: header count %d overruns the batch", ErrInvalid, hc)
	}
	for j := uint32(0); j < hc; j++ {
		var h Header
		if n, p, err = readLen(b, p); err != nil {
			return p, err
		}
		h.Key, p = string(b[p:p+n]), p+n
		if n, p, err = readLen(b, p); err != nil {
			return p, err
		}
		h.Value, p = b[p:p+n:p+n], p+n
		r.Headers = append(r.Headers, h)
	}
	return p, nil
}

// Batches calls fn for each batch in buf, which must hold whole, framed
// batches, until fn returns false. It returns ErrShort or ErrInvalid for a
// buffer that does not.
func Batches(buf []byte, fn func(Batch) bool) error {
	for len(buf) > 0 {
		b, rest, err := Frame(buf, MaxBatchSize)
		if err != nil {
			return err
		}
		if !fn(b) {
			return nil
		}
		buf = rest
	}
	return nil
}

// Split is Batches without the checksum: it frames each batch by its length
// and header, as Frame does, but does not compute its CRC. It is for bytes
// whose every batch is checked in full before use anyway, such as the
// batches a follower hands one by one to storage.Log.WriteExact (which
// validates each, checksum included): checking them twice was a tenth of a
// follower's CPU.
func Split(buf []byte, fn func(Batch) bool) error {
	for len(buf) > 0 {
		n, err := FrameSize(buf, MaxBatchSize)
		if err != nil {
			return err
		}
		if len(buf) < n {
			return ErrShort
		}
		b := Batch(buf[:n:n])
		if err := b.checkHeader(); err != nil {
			return err
		}
		if !fn(b) {
			return nil
		}
		buf = buf[n:]
	}
	return nil
}

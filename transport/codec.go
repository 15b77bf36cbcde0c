package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed means a message body that does not decode: a length or count
// that overruns the body, a value out of range, or bytes left over.
var ErrMalformed = errors.New("transport: malformed message")

// Encoder appends big-endian primitives to a buffer.
type Encoder struct{ buf []byte }

// NewEncoder returns an Encoder that appends to buf.
func NewEncoder(buf []byte) *Encoder { return &Encoder{buf: buf} }

// Bytes returns the encoded bytes.
func (e *Encoder) Bytes() []byte { return e.buf }

// Int8 appends v.
func (e *Encoder) Int8(v int8) { e.buf = append(e.buf, byte(v)) }

// Bool appends v as one byte.
func (e *Encoder) Bool(v bool) {
	if v {
		e.buf = append(e.buf, 1)
	} else {
		e.buf = append(e.buf, 0)
	}
}

// Uint16 appends v.
func (e *Encoder) Uint16(v uint16) { e.buf = binary.BigEndian.AppendUint16(e.buf, v) }

// Int16 appends v.
func (e *Encoder) Int16(v int16) { e.Uint16(uint16(v)) }

// Uint32 appends v.
func (e *Encoder) Uint32(v uint32) { e.buf = binary.BigEndian.AppendUint32(e.buf, v) }

// Int32 appends v.
func (e *Encoder) Int32(v int32) { e.Uint32(uint32(v)) }

// Int64 appends v.
func (e *Encoder) Int64(v int64) { e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(v)) }

// String appends a string of at most 65535 bytes with a uint16 length.
// Longer strings are cut; callers validate lengths first.
func (e *Encoder) String(s string) {
	if len(s) > math.MaxUint16 {
		s = s[:math.MaxUint16]
	}
	e.Uint16(uint16(len(s)))
	e.buf = append(e.buf, s...)
}

// Bytes32 appends b with a uint32 length.
func (e *Encoder) Bytes32(b []byte) {
	e.Uint32(uint32(len(b)))
	e.buf = append(e.buf, b...)
}

// Count appends an array length.
func (e *Encoder) Count(n int) { e.Uint32(uint32(n)) }

// Int32s appends an array of int32.
func (e *Encoder) Int32s(v []int32) {
	e.Count(len(v))
	for _, x := range v {
		e.Int32(x)
	}
}

// Strings appends an array of strings.
func (e *Encoder) Strings(v []string) {
	e.Count(len(v))
	for _, s := range v {
		e.String(s)
	}
}

// Decoder reads big-endian primitives from a body, checking every length
// and count against the bytes that remain before it allocates. The first
// error sticks: later reads return zero values, and Err reports it.
type Decoder struct {
	buf []byte
	off int
	err error
}

// NewDecoder returns a Decoder over b.
func NewDecoder(b []byte) *Decoder { return &Decoder{buf: b} }

func (d *Decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s at byte %d", ErrMalformed, fmt.Sprintf(format, args...), d.off)
	}
}

func (d *Decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.buf)-d.off < n {
		d.fail("%s needs %d bytes, %d left", what, n, len(d.buf)-d.off)
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

// Remaining is the number of unread bytes.
func (d *Decoder) Remaining() int { return len(d.buf) - d.off }

// Int8 reads an int8.
func (d *Decoder) Int8() int8 {
	b := d.take(1, "int8")
	if b == nil {
		return 0
	}
	return int8(b[0])
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	b := d.take(1, "bool")
	if b == nil {
		return false
	}
	if b[0] > 1 {
		d.fail("bool %d", b[0])
	}
	return b[0] == 1
}

// Uint16 reads a uint16.
func (d *Decoder) Uint16() uint16 {
	b := d.take(2, "uint16")
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint16(b)
}

// Int16 reads an int16.
func (d *Decoder) Int16() int16 { return int16(d.Uint16()) }

// Uint32 reads a uint32.
func (d *Decoder) Uint32() uint32 {
	b := d.take(4, "uint32")
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// Int32 reads an int32.
func (d *Decoder) Int32() int32 { return int32(d.Uint32()) }

// Int64 reads an int64.
func (d *Decoder) Int64() int64 {
	b := d.take(8, "int64")
	if b == nil {
		return 0
	}
	return int64(binary.BigEndian.Uint64(b))
}

// String reads a string with a uint16 length.
func (d *Decoder) String() string {
	n := int(d.Uint16())
	return string(d.take(n, "string"))
}

// Bytes32 reads bytes with a uint32 length. The result aliases the body;
// it is nil for length 0, as arrays of length 0 are, so that a decoded
// value equals the one that was encoded.
func (d *Decoder) Bytes32() []byte {
	n := d.Uint32()
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(d.Remaining()) {
		d.fail("bytes of length %d, %d left", n, d.Remaining())
		return nil
	}
	if n == 0 {
		return nil
	}
	return d.take(int(n), "bytes")
}

// Count reads an array length and checks that count elements of at least
// minSize bytes each fit in what remains.
func (d *Decoder) Count(minSize int) int {
	n := d.Uint32()
	if d.err != nil {
		return 0
	}
	if minSize < 1 {
		minSize = 1
	}
	if uint64(n)*uint64(minSize) > uint64(d.Remaining()) {
		d.fail("count %d of at least %d bytes, %d left", n, minSize, d.Remaining())
		return 0
	}
	return int(n)
}

// Int32s reads an array of int32.
func (d *Decoder) Int32s() []int32 {
	n := d.Count(4)
	if n == 0 {
		return nil
	}
	v := make([]int32, n)
	for i := range v {
		v[i] = d.Int32()
	}
	return v
}

// Strings reads an array of strings.
func (d *Decoder) Strings() []string {
	n := d.Count(2)
	if n == 0 {
		return nil
	}
	v := make([]string, n)
	for i := range v {
		v[i] = d.String()
	}
	return v
}

// Finish returns the first error, or ErrMalformed if bytes are left over:
// a body decodes exactly or not at all.
func (d *Decoder) Finish() error {
	if d.err == nil && d.off != len(d.buf) {
		d.fail("%d bytes left over", len(d.buf)-d.off)
	}
	return d.err
}

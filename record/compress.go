package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// The compression of a Kafka batch's records: the four codecs Kafka
// clients use. Decompression never produces more than its limit: a
// payload that would is ErrInvalid, found by reading at most limit+1
// bytes (gzip, lz4, zstd) or by the declared length before anything is
// allocated (snappy).

// xerialMagic begins snappy data in the xerial framing the Java client
// (and librdkafka, reading) use: the magic, a version and a compatible
// version, then blocks, each an int32 length and a snappy block.
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeader = 16

// zstdDecoder is shared: DecodeAll is safe for concurrent use.
var zstdDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxUncompressed+1))

// decompress returns the records of a Kafka batch compressed with codec.
func decompress(codec int, data []byte, limit int) ([]byte, error) {
	var out []byte
	var err error
	switch codec {
	case CompressionGzip:
		var r *gzip.Reader
		if r, err = gzip.NewReader(bytes.NewReader(data)); err == nil {
			out, err = readLimited(r, limit)
		}
	case CompressionSnappy:
		out, err = unsnappy(data, limit)
	case CompressionLZ4:
		out, err = readLimited(lz4.NewReader(bytes.NewReader(data)), limit)
	case CompressionZstd:
		out, err = zstdDecoder.DecodeAll(data, nil)
		if err == nil && len(out) > limit {
			err = errTooLarge(limit)
		}
	default:
		return nil, fmt.Errorf("%w: Kafka batch compression codec %d", ErrInvalid, codec)
	}
	if err != nil {
		if errors.Is(err, ErrInvalid) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: Kafka batch does not decompress (codec %d): %v", ErrInvalid, codec, err)
	}
	return out, nil
}

func errTooLarge(limit int) error {
	return fmt.Errorf("%w: a Kafka batch decompresses to more than %d bytes", ErrInvalid, limit)
}

// readLimited reads r to its end, refusing more than limit bytes.
func readLimited(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, errTooLarge(limit)
	}
	return out, nil
}

// unsnappy decodes a snappy block, or xerial-framed snappy blocks.
func unsnappy(data []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialMagic) {
		return unsnappyBlock(nil, data, limit)
	}
	if len(data) < xerialHeader {
		return nil, fmt.Errorf("%w: truncated xerial snappy header", ErrInvalid)
	}
	var out []byte
	for p := xerialHeader; p < len(data); {
		if len(data)-p < 4 {
			return nil, fmt.Errorf("%w: truncated xerial snappy block length", ErrInvalid)
		}
		n := binary.BigEndian.Uint32(data[p:])
		p += 4
		if uint64(n) > uint64(len(data)-p) {
			return nil, fmt.Errorf("%w: xerial snappy block of %d bytes overruns the batch", ErrInvalid, n)
		}
		var err error
		if out, err = unsnappyBlock(out, data[p:p+int(n)], limit); err != nil {
			return nil, err
		}
		p += int(n)
	}
	return out, nil
}

// unsnappyBlock appends the decoded snappy block to out, within limit.
func unsnappyBlock(out, block []byte, limit int) ([]byte, error) {
	n, err := snappy.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if n > limit-len(out) {
		return nil, errTooLarge(limit)
	}
	dec, err := snappy.Decode(nil, block)
	if err != nil {
		return nil, err
	}
	return append(out, dec...), nil
}

package record

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A payload that decompresses past the limit is refused, whatever the
// codec, and what decompresses within it is returned whole.
func TestDecompressIsBounded(t *testing.T) {
	data := bytes.Repeat([]byte("gostream "), 4096) // 36 KiB, compresses well
	for _, codec := range []int{CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd} {
		packed, err := compress(codec, data)
		require.NoError(t, err)
		out, err := decompress(codec, packed, len(data))
		require.NoError(t, err, "codec %d", codec)
		assert.Equal(t, data, out)
		_, err = decompress(codec, packed, len(data)-1)
		assert.ErrorIs(t, err, ErrInvalid, "codec %d: one byte over the limit", codec)
		_, err = decompress(codec, packed[:len(packed)/2], len(data))
		assert.ErrorIs(t, err, ErrInvalid, "codec %d: truncated", codec)
	}
	// Raw snappy (no xerial framing), as some clients send it.
	_, err := decompress(CompressionSnappy, []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, 1<<20)
	assert.ErrorIs(t, err, ErrInvalid, "a snappy block that claims 4 GiB")
}

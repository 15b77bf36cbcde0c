package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFrameRoundTrip(t *testing.T) {
	frames := []Frame{
		{API: uint16(APIProduce), Version: Version1, CorrelationID: 1, Body: []byte("hello")},
		{API: 0xffff, Version: 0xffff, CorrelationID: 0xffffffff, Body: bytes.Repeat([]byte{7}, 3*readChunk+5)},
		{API: 0, Version: 0, CorrelationID: 0, Body: nil},
	}
	var stream []byte
	for _, f := range frames {
		stream = AppendFrame(stream, f)
	}
	assert.Equal(t, []byte{0, 0, 0, 13, 0, 1, 0, 1, 0, 0, 0, 1, 'h', 'e', 'l', 'l', 'o'}, stream[:17], "the documented layout")

	r := bytes.NewReader(stream)
	for i, want := range frames {
		got, err := ReadFrame(r, DefaultMaxFrameBytes)
		require.NoErrorf(t, err, "frame %d", i)
		assert.Equal(t, want.API, got.API)
		assert.Equal(t, want.Version, got.Version)
		assert.Equal(t, want.CorrelationID, got.CorrelationID)
		assert.Equal(t, len(want.Body), len(got.Body))
		assert.True(t, bytes.Equal(want.Body, got.Body))
	}
	_, err := ReadFrame(r, DefaultMaxFrameBytes)
	assert.ErrorIs(t, err, io.EOF, "a clean end between frames")
	assert.NotErrorIs(t, err, ErrFrame)
}

func frameWithLength(n uint32, rest ...byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, n), rest...)
}

func TestReadFrameLimits(t *testing.T) {
	const max = 1 << 16
	header := make([]byte, FrameHeaderSize)
	cases := []struct {
		name    string
		input   []byte
		wantErr bool
	}{
		{"length 0", frameWithLength(0, header...), true},
		{"length 7", frameWithLength(7, header...), true},
		{"length 8: empty body", frameWithLength(8, header...), false},
		{"length at the limit", frameWithLength(max, make([]byte, max)...), false},
		{"length one above the limit", frameWithLength(max+1, make([]byte, max+1)...), true},
		{"length 4G", frameWithLength(0xffffffff, header...), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ReadFrame(bytes.NewReader(tc.input), max)
			if !tc.wantErr {
				require.NoError(t, err)
				assert.Len(t, f.Body, len(tc.input)-4-FrameHeaderSize)
				return
			}
			require.ErrorIs(t, err, ErrFrame)
			assert.Contains(t, err.Error(), "length")
		})
	}
}

func TestReadFrameNamesForeignProtocols(t *testing.T) {
	cases := []struct {
		name  string
		input string
		want  string
	}{
		{"HTTP GET", "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", "HTTP"},
		{"HTTP POST", "POST /v1/produce HTTP/1.1\r\n\r\n", "HTTP"},
		{"HTTP HEAD", "HEAD / HTTP/1.0\r\n\r\n", "HTTP"},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP"},
		{"TLS 1.0 ClientHello", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "TLS"},
		{"TLS 1.2 record", "\x16\x03\x03\x00\x7a\x02\x00\x00\x76", "TLS"},
		// A client that dialed a node's HTTP port reads an HTTP answer.
		{"HTTP answer", "HTTP/1.1 400 Bad Request\r\n\r\n", "that is a node's --http address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader([]byte(tc.input)), DefaultMaxFrameBytes)
			require.ErrorIs(t, err, ErrFrame)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	t.Run("garbage names nothing", func(t *testing.T) {
		_, err := ReadFrame(bytes.NewReader([]byte("\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8\xf7\xf6\xf5\xf4")), DefaultMaxFrameBytes)
		require.ErrorIs(t, err, ErrFrame)
		assert.NotContains(t, err.Error(), "HTTP")
		assert.NotContains(t, err.Error(), "TLS")
	})
}

func TestReadFrameTruncated(t *testing.T) {
	full := AppendFrame(nil, Frame{API: 1, Version: 1, CorrelationID: 9, Body: []byte("0123456789")})
	for cut := 1; cut < len(full); cut++ {
		_, err := ReadFrame(bytes.NewReader(full[:cut]), DefaultMaxFrameBytes)
		require.ErrorIsf(t, err, ErrFrame, "cut at %d of %d", cut, len(full))
		assert.Containsf(t, err.Error(), "closed inside a frame", "cut at %d", cut)
	}
}

// errReader returns data, then err.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadFramePassesReadErrors(t *testing.T) {
	// The server tells a read deadline from bad input by the error.
	errDeadline := errors.New("deadline")
	full := AppendFrame(nil, Frame{Body: []byte("0123456789")})
	for _, cut := range []int{0, 2, 4, 10, 15} {
		_, err := ReadFrame(&errReader{data: full[:cut], err: errDeadline}, DefaultMaxFrameBytes)
		assert.ErrorIsf(t, err, errDeadline, "cut at %d", cut)
	}
}

// trickleReader returns at most step bytes per Read, then EOF.
type trickleReader struct {
	data []byte
	step int
}

func (r *trickleReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestReadFrameDoesNotAllocateClaimedLength(t *testing.T) {
	const claimed = 8 << 20
	cases := []struct {
		name  string
		sent  int // body bytes sent before EOF
		step  int
		limit uint64
	}{
		{"10 bytes", 10, 1 << 20, 1 << 20},
		{"100 KiB in one go", 100 << 10, 1 << 20, 1 << 20},
		{"100 KiB a byte at a time", 100 << 10, 1, 1 << 20},
		{"1 MiB in 4 KiB reads", 1 << 20, 4 << 10, 4 << 20},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			input := frameWithLength(claimed+FrameHeaderSize, make([]byte, FrameHeaderSize+tc.sent)...)
			var err error
			n := allocBytes(5, func() {
				_, err = ReadFrame(&trickleReader{data: input, step: tc.step}, claimed+FrameHeaderSize)
			})
			require.ErrorIs(t, err, ErrFrame)
			assert.Less(t, n, tc.limit, "bytes allocated for a frame claiming %d bytes with %d sent", claimed, tc.sent)
		})
	}
}

func TestResponseErrorRoundTrip(t *testing.T) {
	t.Run("success", func(t *testing.T) {
		body := AppendResponseError(nil, nil)
		body = Marshal(body, &TopicRequest{Name: "t"})
		rest, werr, err := SplitResponse(body)
		require.NoError(t, err)
		require.Nil(t, werr)
		var got TopicRequest
		require.NoError(t, Unmarshal(rest, &got))
		assert.Equal(t, "t", got.Name)
	})
	t.Run("error", func(t *testing.T) {
		body := AppendResponseError(nil, &Error{Code: CodeNotLeader, Retriable: true, Message: "NotLeader: leader is 3"})
		rest, werr, err := SplitResponse(body)
		require.NoError(t, err)
		assert.Nil(t, rest)
		require.NotNil(t, werr)
		assert.Equal(t, &Error{Code: CodeNotLeader, Retriable: true, Message: "NotLeader: leader is 3"}, werr)
		assert.ErrorIs(t, werr, ErrNotLeader)
	})
	t.Run("unknown code from a newer peer", func(t *testing.T) {
		body := AppendResponseError(nil, &Error{Code: 999, Message: "Code999: new"})
		_, werr, err := SplitResponse(body)
		require.NoError(t, err)
		assert.Equal(t, Code(999), werr.Code)
	})

	bad := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"code only", []byte{0, 10}},
		{"bad retriable flag", []byte{0, 10, 2, 0, 0}},
		{"message overruns", []byte{0, 10, 1, 0, 5, 'a'}},
		{"error with a body after it", append(AppendResponseError(nil, ErrNotLeader), 0)},
		{"no error, but retriable", []byte{0, 0, 1, 0, 0}},
		{"no error, but a message", []byte{0, 0, 0, 0, 1, 'x'}},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := SplitResponse(tc.body)
			assert.ErrorIs(t, err, ErrMalformed)
		})
	}
}

package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// FrameHeaderSize is the size of the fields after the length prefix:
// API key, version and correlation id.
const FrameHeaderSize = 8

// The batch limit is the one size limit of the protocol: a frame may hold
// one batch at most as large as the limit, plus FrameAllowance for
// everything else. So a node has no frame limit of its own to configure:
// it is FrameLimit of its batch limit (the storage log's MaxBatchBytes,
// set by gostream-node --max-batch-bytes).
const (
	// DefaultMaxBatchBytes is the batch limit unless configured; it is
	// storage.DefaultMaxBatchBytes, which this package cannot import.
	DefaultMaxBatchBytes = 4 << 20
	// MaxBatchBytesCeiling bounds a configured batch limit.
	MaxBatchBytesCeiling = 256 << 20
	// FrameAllowance is the room a frame has besides its batch: the
	// frame's header and the other fields of a request or response (a
	// topic name is at most 249 bytes).
	FrameAllowance = 64 << 10
	// DefaultMaxFrameBytes is FrameLimit(DefaultMaxBatchBytes).
	DefaultMaxFrameBytes = DefaultMaxBatchBytes + FrameAllowance
)

// FrameLimit is the largest frame, after its length prefix, of a node whose
// batch limit is maxBatchBytes.
func FrameLimit(maxBatchBytes int) int { return maxBatchBytes + FrameAllowance }

// maxClaimedFrame bounds the length a frame may claim at all: a server
// reads and discards a frame over its limit but under this one, and
// answers it MessageTooLarge; a larger claim is garbage or another
// protocol, and closes the connection.
const maxClaimedFrame = 1 << 30

// BatchTooLarge is the error for a batch of n bytes over a cluster's batch
// limit, in the words of every place that enforces it (the Go producer
// before sending, the node on receipt).
func BatchTooLarge(n, limit int) error {
	return fmt.Errorf("%w: a batch of %d bytes exceeds the cluster's limit of %d bytes (--max-batch-bytes)", ErrMessageTooLarge, n, limit)
}

// ErrFrame means bytes on a connection that are not a frame of ours. The
// connection is closed.
var ErrFrame = errors.New("transport: bad frame")

// Frame is one request or response: [u32 length][u16 api][u16 version]
// [u32 correlation id][body], big-endian, where length counts every byte
// after itself. A response carries the API key, version and correlation id
// of its request, and its body starts with an error (see Response).
type Frame struct {
	API           uint16
	Version       uint16
	CorrelationID uint32
	Body          []byte
}

// AppendFrame appends the encoding of f to dst.
func AppendFrame(dst []byte, f Frame) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(FrameHeaderSize+len(f.Body)))
	dst = binary.BigEndian.AppendUint16(dst, f.API)
	dst = binary.BigEndian.AppendUint16(dst, f.Version)
	dst = binary.BigEndian.AppendUint32(dst, f.CorrelationID)
	return append(dst, f.Body...)
}

// readChunk bounds how much is allocated ahead of bytes actually received,
// so a peer that claims a large frame and then trickles bytes costs little.
const readChunk = 64 << 10

// ReadFrame reads one frame of at most maxSize bytes (after the length
// prefix) from r. It never allocates the claimed length up front: the body
// grows as bytes arrive. It returns io.EOF at a clean end between frames and
// an error wrapping ErrFrame for anything that is not a frame.
func ReadFrame(r io.Reader, maxSize int) (Frame, error) {
	return readFrame(r, maxSize, readChunk)
}

// readFrame is ReadFrame allocating at most ahead bytes before they arrive.
// A client reading its server's responses, bounded by its own frame limit,
// may take the whole body at once and spare the regrowing copies.
func readFrame(r io.Reader, maxSize, ahead int) (Frame, error) {
	f, bodyLen, err := readHeader(r, maxSize, maxSize)
	if err != nil {
		return Frame{}, err
	}
	f.Body, err = readBody(r, bodyLen, ahead, nil)
	if err != nil {
		return Frame{}, err
	}
	return f, nil
}

// readBody reads a frame's body of bodyLen bytes, into into's memory when
// it has the capacity (overwriting what it held), else into memory it
// allocates at most ahead bytes before they arrive.
func readBody(r io.Reader, bodyLen, ahead int, into []byte) ([]byte, error) {
	if into != nil && cap(into) >= bodyLen {
		body := into[:bodyLen]
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, truncated(err)
		}
		return body, nil
	}
	body := make([]byte, 0, min(bodyLen, ahead))
	for len(body) < bodyLen {
		step := min(bodyLen-len(body), ahead)
		if cap(body)-len(body) < step {
			nb := make([]byte, len(body), min(bodyLen, 2*cap(body)+step))
			copy(nb, body)
			body = nb
		}
		got, err := io.ReadFull(r, body[len(body):len(body)+step])
		body = body[:len(body)+got]
		if err != nil {
			return nil, truncated(err)
		}
	}
	return body, nil
}

// readHeader reads a frame's length prefix and header, and returns them
// with the length of the body that follows, which it has not read. The
// frame, header included, may claim at most maxSize bytes; a claim over
// limit that looks like another protocol (sniff) fails at once, before the
// rest of the header is awaited.
func readHeader(r io.Reader, limit, maxSize int) (Frame, int, error) {
	var hdr [4 + FrameHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, 0, truncated(err) // cut inside the length prefix
		}
		return Frame{}, 0, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < FrameHeaderSize || uint64(n) > uint64(maxSize) || uint64(n) > uint64(limit) && sniff(hdr[:4]) != "" {
		return Frame{}, 0, fmt.Errorf("%w: length %d outside [%d, %d]%s", ErrFrame, n, FrameHeaderSize, limit, sniff(hdr[:4]))
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return Frame{}, 0, truncated(err)
	}
	f := Frame{
		API:           binary.BigEndian.Uint16(hdr[4:]),
		Version:       binary.BigEndian.Uint16(hdr[6:]),
		CorrelationID: binary.BigEndian.Uint32(hdr[8:]),
	}
	return f, int(n) - FrameHeaderSize, nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: connection closed inside a frame", ErrFrame)
	}
	return err
}

// sniff names well-known protocols that are not ours, for the log line of a
// rejected connection, or the error of a client that dialed the wrong port.
func sniff(b []byte) string {
	switch {
	case len(b) >= 3 && b[0] == 0x16 && b[1] == 0x03:
		return " (looks like a TLS handshake; this port speaks the gostream protocol)"
	case string(b) == "GET " || string(b) == "POST" || string(b) == "PUT " || string(b) == "HEAD" ||
		string(b) == "DELE" || string(b) == "OPTI" || string(b) == "PATC" || string(b) == "PRI ":
		return " (looks like HTTP; use the --http address for HTTP)"
	case string(b) == "HTTP":
		// An answer: the address dialed is an HTTP listener.
		return " (the peer answered in HTTP: that is a node's --http address; use its RPC address, --listen)"
	}
	return ""
}

// Response bodies start with an error: [u16 code][u8 retriable][string
// message]. A body with code 0 continues with the response message.

// AppendResponseError appends the error part of a response body.
func AppendResponseError(dst []byte, e *Error) []byte {
	enc := NewEncoder(dst)
	if e == nil {
		enc.Uint16(uint16(CodeNone))
		enc.Bool(false)
		enc.String("")
		return enc.Bytes()
	}
	enc.Uint16(uint16(e.Code))
	enc.Bool(e.Retriable)
	enc.String(e.Message)
	return enc.Bytes()
}

// SplitResponse reads the error part of a response body and returns the
// rest. A non-nil *Error means the request failed.
func SplitResponse(body []byte) ([]byte, *Error, error) {
	d := NewDecoder(body)
	code := Code(d.Uint16())
	retriable := d.Bool()
	msg := d.String()
	if d.err != nil {
		return nil, nil, d.err
	}
	rest := body[d.off:]
	if code == CodeNone {
		if retriable || msg != "" {
			return nil, nil, fmt.Errorf("%w: success response with a retriable flag or message", ErrMalformed)
		}
		return rest, nil, nil
	}
	if len(rest) != 0 {
		return nil, nil, fmt.Errorf("%w: error response with %d extra bytes", ErrMalformed, len(rest))
	}
	return nil, &Error{Code: code, Retriable: retriable, Message: msg}, nil
}

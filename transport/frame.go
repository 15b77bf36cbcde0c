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

// DefaultMaxFrameBytes bounds a frame (header and body) unless configured.
const DefaultMaxFrameBytes = 8 << 20

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
	var hdr [4 + FrameHeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return Frame{}, truncated(err) // cut inside the length prefix
		}
		return Frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < FrameHeaderSize || uint64(n) > uint64(maxSize) {
		return Frame{}, fmt.Errorf("%w: length %d outside [%d, %d]%s", ErrFrame, n, FrameHeaderSize, maxSize, sniff(hdr[:4]))
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return Frame{}, truncated(err)
	}
	f := Frame{
		API:           binary.BigEndian.Uint16(hdr[4:]),
		Version:       binary.BigEndian.Uint16(hdr[6:]),
		CorrelationID: binary.BigEndian.Uint32(hdr[8:]),
	}
	bodyLen := int(n) - FrameHeaderSize
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
			return Frame{}, truncated(err)
		}
	}
	f.Body = body
	return f, nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: connection closed inside a frame", ErrFrame)
	}
	return err
}

// sniff names well-known protocols that are not ours, for the log line of a
// rejected connection.
func sniff(b []byte) string {
	switch {
	case len(b) >= 3 && b[0] == 0x16 && b[1] == 0x03:
		return " (looks like a TLS handshake; this port speaks the gostream protocol)"
	case string(b) == "GET " || string(b) == "POST" || string(b) == "PUT " || string(b) == "HEAD" ||
		string(b) == "DELE" || string(b) == "OPTI" || string(b) == "PATC" || string(b) == "PRI ":
		return " (looks like HTTP; use the --http address for HTTP)"
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

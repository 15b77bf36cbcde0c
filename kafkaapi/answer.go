package kafkaapi

import (
	"encoding/binary"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// response is an answer to write on a connection.
type response interface {
	// appendFrame appends the answer's frame for correlation id corr
	// (size, header, body) to dst. Bytes it does not copy come back as
	// refs, each written after dst[:at] in order.
	appendFrame(dst []byte, corr int32) ([]byte, []ref)
	// release gives back what the answer holds (read buffers) once it
	// is written or dropped.
	release()
}

// ref is bytes of a frame written where they are, after the frame's
// encoded bytes up to at: b, or file's range of its file.
type ref struct {
	at   int
	b    []byte
	file *transport.FileRange
}

// encoded is an answer kmsg encodes (every answer but Fetch's).
type encoded struct{ kmsg.Response }

// kresp wraps a kmsg answer; nil stays nil (no answer).
func kresp(r kmsg.Response) response {
	if r == nil {
		return nil
	}
	return encoded{r}
}

// kresp2 is kresp of an answer and its error.
func kresp2(r kmsg.Response, err error) (response, error) {
	if err != nil {
		return nil, err
	}
	return kresp(r), nil
}

func (e encoded) appendFrame(dst []byte, corr int32) ([]byte, []ref) {
	start := len(dst)
	dst = appendHeader(dst, corr, e.IsFlexible() && e.Key() != kmsg.ApiVersions.Int16())
	dst = e.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, nil
}

func (encoded) release() {}

// appendHeader appends a frame's size (0, to be set) and the response
// header: the correlation id, and for header v1 (flexible versions but
// ApiVersions') an empty tag section.
func appendHeader(dst []byte, corr int32, tags bool) []byte {
	dst = binary.BigEndian.AppendUint32(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if tags {
		dst = append(dst, 0)
	}
	return dst
}

// keptEncodeBuffer is the largest encoding buffer a connection keeps for
// its next answer.
const keptEncodeBuffer = 4 << 20

// writeResponse writes resp's frame for req to w, encoding into
// *scratch, which it grows as needed and leaves for the next answer (a
// connection's writer reuses one). Bytes resp does not copy are written
// where they are: one writev on a plain connection, but for ranges of
// files, each sent from its file (sendfile) after what comes before it.
func writeResponse(w io.Writer, req *request, resp response, scratch *[]byte) error {
	buf, refs := resp.appendFrame((*scratch)[:0], req.corr)
	if cap(buf) <= keptEncodeBuffer {
		*scratch = buf[:0]
	} else {
		*scratch = nil
	}
	if len(refs) == 0 {
		_, err := w.Write(buf)
		return err
	}
	bufs := make(net.Buffers, 0, 2*len(refs)+1)
	from := 0
	for _, r := range refs {
		if r.at > from {
			bufs = append(bufs, buf[from:r.at])
		}
		from = r.at
		if r.file == nil {
			bufs = append(bufs, r.b)
			continue
		}
		if err := writeBuffers(w, bufs); err != nil {
			return err
		}
		bufs = bufs[:0:0]
		if err := sendFile(w, *r.file); err != nil {
			return err
		}
	}
	if from < len(buf) {
		bufs = append(bufs, buf[from:])
	}
	return writeBuffers(w, bufs)
}

// writeBuffers writes bufs to w, as one writev on a plain connection.
func writeBuffers(w io.Writer, bufs net.Buffers) error {
	if len(bufs) == 0 {
		return nil
	}
	if c, ok := w.(net.Conn); ok {
		_, err := transport.WriteBuffers(c, bufs)
		return err
	}
	_, err := bufs.WriteTo(w)
	return err
}

// sendFile writes a file's range to w: from the file without reading it
// (transport.SendFile) on a plain TCP connection, else read from it. A range the file cannot fill is an
// error; the connection is closed then, its frame cut short.
func sendFile(w io.Writer, r transport.FileRange) error {
	if c, ok := w.(net.Conn); ok {
		_, err := transport.SendFile(c, r)
		return err
	}
	n, err := io.Copy(w, io.NewSectionReader(r.File, r.Offset, r.Length))
	if err == nil && n < r.Length {
		err = io.ErrUnexpectedEOF
	}
	return err
}

package transport

import (
	"fmt"
	"io"
	"net"
	"os"
)

// FileRange is bytes of an open file that a response carries in place of
// a buffer: a Server writes them from the file to a plain TCP connection
// (SendFile), so they never pass through the process (a fetch's
// batches, as they lie in a segment: storage.Log.ReadRange). The file must
// stay open, and those bytes unchanged, until the response gives the
// range back (FetchResponse.Done).
type FileRange struct {
	File   *os.File
	Offset int64
	Length int64
}

// read returns the range's bytes, for a connection that cannot send them
// from the file.
func (r *FileRange) read() ([]byte, error) {
	buf := make([]byte, r.Length)
	if _, err := r.File.ReadAt(buf, r.Offset); err != nil {
		return nil, fmt.Errorf("%w: read %d bytes at %d of %s: %v", ErrUnknown, r.Length, r.Offset, r.File.Name(), err)
	}
	return buf, nil
}

// CanSendFile reports whether SendFile writes to nc from the file without
// reading it: a plain TCP connection (also one a LimitListener accepted)
// on Linux. A
// front end asks for file ranges (storage.Log.ReadRange) only for such a
// connection; over TLS the bytes must be encrypted in the process anyway.
func CanSendFile(nc net.Conn) bool {
	_, ok := unwrapConn(nc).(*net.TCPConn)
	return ok && sendfileWorks
}

// SendFile writes r to nc: where CanSendFile says so, by moving the
// file's pages from the page cache to the socket without copying them
// into the process (splice(2) through a pipe, as sendfile(2) does), else
// by reading the file. It returns the bytes written, and an error if
// it wrote fewer than r.Length, io.ErrUnexpectedEOF when the file ended
// first. The write deadline of nc bounds it.
func SendFile(nc net.Conn, r FileRange) (int64, error) {
	if tc, ok := unwrapConn(nc).(*net.TCPConn); ok && sendfileWorks {
		return sendfile(tc, r)
	}
	n, err := io.Copy(nc, io.NewSectionReader(r.File, r.Offset, r.Length))
	if err == nil && n < r.Length {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// unwrapConn is the connection under the wrappers of this package that
// add nothing to writing.
func unwrapConn(nc net.Conn) net.Conn {
	if lc, ok := nc.(*limitedConn); ok {
		return lc.Conn
	}
	return nc
}

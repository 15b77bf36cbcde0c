package transport

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// sendfileWorks says SendFile uses sendfile(2) here.
const sendfileWorks = true

// maxSendfile is the most one sendfile(2) call is asked to send (Linux
// sends at most 0x7ffff000 bytes per call anyway).
const maxSendfile = 1 << 30

// sendfile writes r to tc with sendfile(2) at r's offsets: the file's own
// position is neither used nor moved, so one file serves many connections
// at once. It waits for the socket as a write does, within tc's write
// deadline.
func sendfile(tc *net.TCPConn, r FileRange) (int64, error) {
	src, err := r.File.SyscallConn()
	if err != nil {
		return 0, err
	}
	dst, err := tc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var written int64
	var serr error
	// The file's descriptor is held (not closed under us) while src.Read
	// runs; dst.Write waits for the socket to take more, as a write does.
	rerr := src.Read(func(sfd uintptr) bool {
		werr := dst.Write(func(dfd uintptr) bool {
			for written < r.Length {
				off := r.Offset + written
				n, err := syscall.Sendfile(int(dfd), int(sfd), &off, int(min(r.Length-written, maxSendfile)))
				if n > 0 {
					written += int64(n)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // the socket is full: wait until it can take more
				case errors.Is(err, syscall.EINTR):
				case err != nil:
					serr = &net.OpError{Op: "sendfile", Net: "tcp", Source: tc.LocalAddr(), Addr: tc.RemoteAddr(), Err: err}
					return true
				case n == 0:
					serr = io.ErrUnexpectedEOF // the file ends before the range
					return true
				}
			}
			return true
		})
		if serr == nil {
			serr = werr
		}
		return true
	})
	if serr == nil {
		serr = rerr
	}
	return written, serr
}

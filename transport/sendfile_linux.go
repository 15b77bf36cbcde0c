package transport

import (
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
)

// sendfileWorks says SendFile sends from the file without reading it here.
const sendfileWorks = true

// Flags of splice(2).
const (
	spliceMove     = 0x1 // move pages rather than copy them, where the kernel can
	spliceNonblock = 0x2 // the pipe's side does not block
)

// pipeSize is the capacity SendFile's pipes are given: the most one
// splice(2) hands the socket at once. It is the default limit of
// /proc/sys/fs/pipe-max-size; a pipe the kernel refuses it keeps its
// default size (64 KiB), which works, in more steps.
const pipeSize = 1 << 20

// splicePipe is a pipe that SendFile moves a file's pages through: from
// the file into the pipe, from the pipe into the socket, by reference.
// It holds nothing between uses.
type splicePipe struct {
	fds     splicePipeFDs
	size    int
	cleanup runtime.Cleanup
}

type splicePipeFDs struct{ r, w int }

func (f splicePipeFDs) close() {
	syscall.Close(f.r)
	syscall.Close(f.w)
}

// pipes keeps SendFile's pipes between uses; a pipe the pool drops is
// closed by its cleanup (as package net's splice pool does).
var pipes = sync.Pool{New: func() any {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC|syscall.O_NONBLOCK); err != nil {
		return nil
	}
	p := &splicePipe{fds: splicePipeFDs{r: fds[0], w: fds[1]}, size: 64 << 10}
	if n, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[1]), syscall.F_SETPIPE_SZ, pipeSize); errno == 0 {
		p.size = int(n)
	}
	p.cleanup = runtime.AddCleanup(p, splicePipeFDs.close, p.fds)
	return p
}}

// sendfile writes r to tc without reading it into the process: each
// step splices up to a pipe's capacity of the file's pages into a pipe
// (at r's offsets: the file's own position is neither used nor moved, so
// one file serves many connections at once), then from the pipe into the
// socket. sendfile(2) does the same inside the kernel through a pipe of
// 64 KiB, so that a megabyte reaches the socket, and wakes its reader,
// in sixteen pieces; through a pipe of 1 MiB it goes at once, which
// costs both ends less (docs/cluster.md, "Request memory"). It waits for
// the socket as a write does, within tc's write deadline.
func sendfile(tc *net.TCPConn, r FileRange) (int64, error) {
	v := pipes.Get()
	if v == nil {
		// No pipe (out of descriptors): write it the ordinary way.
		return io.Copy(tc, io.NewSectionReader(r.File, r.Offset, r.Length))
	}
	p := v.(*splicePipe)
	src, err := r.File.SyscallConn()
	if err != nil {
		pipes.Put(p)
		return 0, err
	}
	dst, err := tc.SyscallConn()
	if err != nil {
		pipes.Put(p)
		return 0, err
	}
	var written int64
	inPipe := 0
	var serr error
	opErr := func(op string, err error) error {
		return &net.OpError{Op: op, Net: "tcp", Source: tc.LocalAddr(), Addr: tc.RemoteAddr(), Err: err}
	}
	// The file's descriptor is held (not closed under us) while src.Read
	// runs; dst.Write waits for the socket to take more, as a write does.
	rerr := src.Read(func(sfd uintptr) bool {
		for written < r.Length && serr == nil {
			off := r.Offset + written
			n, err := syscall.Splice(int(sfd), &off, p.fds.w, nil, int(min(r.Length-written, int64(p.size))), spliceMove)
			switch {
			case errors.Is(err, syscall.EINTR):
				continue
			case err != nil:
				serr = opErr("splice", err)
				return true
			case n == 0:
				serr = io.ErrUnexpectedEOF // the file ends before the range
				return true
			}
			inPipe = int(n)
			werr := dst.Write(func(dfd uintptr) bool {
				for inPipe > 0 {
					m, err := syscall.Splice(p.fds.r, nil, int(dfd), nil, inPipe, spliceMove|spliceNonblock)
					if m > 0 {
						inPipe -= int(m)
						written += m
					}
					switch {
					case errors.Is(err, syscall.EAGAIN):
						return false // the socket is full: wait until it can take more
					case errors.Is(err, syscall.EINTR):
					case err != nil:
						serr = opErr("splice", err)
						return true
					}
				}
				return true
			})
			if serr == nil {
				serr = werr
			}
		}
		return true
	})
	if serr == nil {
		serr = rerr
	}
	if inPipe == 0 {
		pipes.Put(p)
	} else {
		// Bytes left in the pipe would go to the next socket it serves.
		p.cleanup.Stop()
		p.fds.close()
	}
	return written, serr
}

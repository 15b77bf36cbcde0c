package transport

import (
	"syscall"
	"time"
)

// tcpUserTimeout is TCP_USER_TIMEOUT from linux/tcp.h.
const tcpUserTimeout = 0x12

// setUserTimeout makes the kernel abort the connection when data it sent
// stays unacknowledged for d (TCP_USER_TIMEOUT).
func setUserTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout, int(d.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return serr
}

// userTimeout reads TCP_USER_TIMEOUT back, for tests.
func userTimeout(c syscall.RawConn) (time.Duration, error) {
	var v int
	var serr error
	err := c.Control(func(fd uintptr) {
		v, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeout)
	})
	if err != nil {
		return 0, err
	}
	return time.Duration(v) * time.Millisecond, serr
}

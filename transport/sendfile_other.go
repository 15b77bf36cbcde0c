//go:build !linux

package transport

import "net"

// sendfileWorks says SendFile sends from the file without reading it
// here: only on Linux.
const sendfileWorks = false

func sendfile(*net.TCPConn, FileRange) (int64, error) { panic("transport: sendfile only on Linux") }

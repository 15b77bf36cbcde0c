// Package testaddr hands tests loopback addresses to give a server they
// start, for TCP and UDP both (a node's gossip port takes both).
//
// A port the kernel gives out for ":0" is one of its ephemeral ports, the
// ones it also gives the local end of every outgoing connection: between
// the moment a test learns such a port and the moment its server binds
// it, a connection made by any test running at once (go test runs the
// packages in parallel, and testcluster's nodes open many) can take it,
// and the server fails with "address already in use". Free picks its
// ports below the kernel's ephemeral range instead, where no connection
// is given a port, and never returns one twice in a process.
package testaddr

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Free picks its ports from floor up to ceiling (or the kernel's first
// ephemeral port, if lower): above the well-known and common service
// ports, and below the ports testcluster's test of make run takes
// (20000 to 32767).
const (
	floor   = 10000
	ceiling = 20000
)

var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// Free returns 127.0.0.1:PORT where PORT was free for TCP and UDP a
// moment ago and has not been returned before in this process. Where the
// kernel's ephemeral range leaves no room below it, it takes a port from
// the kernel, as ":0" does.
func Free() (string, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	high := min(ephemeralLow(), ceiling)
	for range 200 {
		port := 0
		if high-floor > 1000 {
			port = floor + rand.IntN(high-floor)
		}
		addr, ok := tryPort(port)
		if ok && !handedOut.ports[portOf(addr)] {
			handedOut.ports[portOf(addr)] = true
			return addr, nil
		}
	}
	return "", errors.New("testaddr: no free loopback port found in 200 tries")
}

// For is Free for a test, which it fails when no port is found.
func For(t testing.TB) string {
	t.Helper()
	addr, err := Free()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// tryPort binds port (0: any) on loopback for TCP, then the same port for
// UDP, and lets both go.
func tryPort(port int) (string, bool) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return "", false
	}
	addr := ln.Addr().String()
	ln.Close()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return "", false
	}
	pc.Close()
	return addr, true
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range); 32768, the usual one, where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low, high int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &low, &high); err != nil || low <= 0 {
		return 32768
	}
	return low
}

package testaddr

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Free's addresses are distinct, below the kernel's ephemeral range, and
// a server can bind them for TCP and UDP.
func TestFreeGivesDistinctPortsBelowTheEphemeralRange(t *testing.T) {
	seen := map[string]bool{}
	for range 50 {
		addr, err := Free()
		require.NoError(t, err)
		require.False(t, seen[addr], "%s handed out twice", addr)
		seen[addr] = true
		port := portOf(addr)
		assert.GreaterOrEqual(t, port, floor)
		assert.Less(t, port, min(ephemeralLow(), ceiling))
		ln, err := net.Listen("tcp", addr)
		require.NoError(t, err)
		pc, err := net.ListenPacket("udp", addr)
		require.NoError(t, err)
		ln.Close()
		pc.Close()
	}
}

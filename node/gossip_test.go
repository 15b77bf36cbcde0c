package node

import (
	"bytes"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
)

// Once leave has begun, memberlist's errors about its own closed sockets
// are not errors of the node's: they go to debug, and every other line
// passes through.
func TestMemberlistLogQuietsShutdownNoise(t *testing.T) {
	var out bytes.Buffer
	g := &gossip{logger: hclog.NewNullLogger()}
	w := memberlistLog{g: g, w: &out}
	noise := "[ERR] memberlist: Failed to send gossip to 127.0.0.1:9411: write udp 127.0.0.1:9401->127.0.0.1:9411: use of closed network connection\n"
	other := "[WARN] memberlist: Was able to connect to broker-2 over TCP but UDP probes failed\n"
	w.Write([]byte(noise))
	require.Equal(t, noise, out.String(), "before leave, every line passes")
	out.Reset()
	g.closing.Store(true)
	w.Write([]byte(noise))
	w.Write([]byte(other))
	require.Equal(t, other, out.String(), "after leave begins, only the shutdown noise is dropped")
}

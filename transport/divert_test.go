package transport

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Connections that begin with the divert byte go to Divert, the byte
// consumed and whatever followed it at once intact; frames on other
// connections are served as before; a diverted connection counts
// against the connection limit until it is closed, and the server's
// Close closes it.
func TestServerDivertsMarkedConnections(t *testing.T) {
	diverted := make(chan net.Conn, 4)
	s, addr := startServer(t, ServerConfig{MaxConns: 2, DivertByte: 0xd7, Divert: func(c net.Conn, _ string) { diverted <- c }}, testHandler(nil))

	raw := dialRaw(t, addr)
	_, err := raw.Write([]byte("\xd7hello, raft\n"))
	require.NoError(t, err)
	var got net.Conn
	select {
	case got = <-diverted:
	case <-time.After(5 * time.Second):
		t.Fatal("the marked connection was not diverted")
	}
	line, err := bufio.NewReader(got).ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "hello, raft\n", line, "the marker consumed, the rest intact")
	_, err = got.Write([]byte("back"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(raw, buf)
	require.NoError(t, err)
	assert.Equal(t, "back", string(buf))

	c := dial(t, addr)
	echo(t, c, "frames still served beside it")
	require.Equal(t, 2, s.Conns(), "the diverted connection counts")
	expectClosed(t, dialRaw(t, addr), 2*time.Second)

	require.NoError(t, got.Close())
	require.Eventually(t, func() bool { return s.Conns() == 1 }, 5*time.Second, 5*time.Millisecond, "closing it frees its place")

	// One left open is closed by the server's Close.
	raw2 := dialRaw(t, addr)
	_, err = raw2.Write([]byte{0xd7})
	require.NoError(t, err)
	select {
	case got = <-diverted:
	case <-time.After(5 * time.Second):
		t.Fatal("the second marked connection was not diverted")
	}
	require.NoError(t, s.Close())
	got.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = got.Read(buf)
	assert.Error(t, err, "closed by the server's Close")
}

package transport

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A gostream frame sent to a node's HTTP address is answered at once with
// an HTTP 400 naming the RPC address, which the client's frame reader
// names for what it is; HTTP requests are served as before.
func TestRefuseRPCOnHTTP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		ReadHeaderTimeout: time.Minute, // the refusal must not wait for it
	}
	go srv.Serve(RefuseRPCOnHTTP(ln, "127.0.0.1:9400"))
	t.Cleanup(func() { srv.Close() })

	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, "ok", string(body))

	c, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(5*time.Second)))
	frame := AppendFrame(nil, Frame{API: uint16(APIMetadata), Version: Version1, CorrelationID: 1, Body: Marshal(nil, &MetadataRequest{})})
	_, err = c.Write(frame)
	require.NoError(t, err)
	_, err = ReadFrame(c, DefaultMaxFrameBytes)
	require.ErrorIs(t, err, ErrFrame)
	assert.Contains(t, err.Error(), "that is a node's --http address")

	c2, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer c2.Close()
	require.NoError(t, c2.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = c2.Write(frame)
	require.NoError(t, err)
	all, err := io.ReadAll(bufio.NewReader(c2))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(all), "HTTP/1.1 400 Bad Request"), "%q", all)
	assert.Contains(t, string(all), "RPC address, 127.0.0.1:9400")
}

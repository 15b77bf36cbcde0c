package transport

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hereHandler answers apiEcho here (AnswerHerer) and apiBlock on a
// goroutine of its own. An echo whose name is "hold" waits until release
// is closed, having first said it waits on others if handOver is set; the
// others answer at once. handled counts Handle calls.
type hereHandler struct {
	handOver bool
	started  chan struct{}
	release  chan struct{}
	handled  *atomic.Int64
}

func (h hereHandler) AnswersHere(api API) bool { return api == apiEcho }

func (h hereHandler) Handle(ctx context.Context, req *Request) Reply {
	h.handled.Add(1)
	var r TopicRequest
	if err := Unmarshal(req.Body, &r); err != nil {
		return Immediate(nil, err)
	}
	if r.Name != "hold" {
		return Immediate(&r, nil)
	}
	return func(ctx context.Context) (Message, error) {
		if h.handOver {
			WaitingOnOthers(ctx)
		}
		close(h.started)
		<-h.release
		return &r, nil
	}
}

func newHereHandler(handOver bool) hereHandler {
	return hereHandler{handOver: handOver, started: make(chan struct{}), release: make(chan struct{}), handled: &atomic.Int64{}}
}

// A lone request of an API the handler answers here is answered by the
// goroutine that read it: the connection's next request is read only once
// it is answered. (On a goroutine of its own, the next one would be
// handled and answered meanwhile.)
func TestALoneRequestIsAnsweredWhereItWasRead(t *testing.T) {
	h := newHereHandler(false)
	_, addr := startServer(t, ServerConfig{}, h)
	c := dial(t, addr)
	held := make(chan error, 1)
	go func() { held <- c.Call(testContext(t), apiEcho, &TopicRequest{Name: "hold"}, &TopicRequest{}) }()
	<-h.started
	next := make(chan error, 1)
	go func() { next <- c.Call(testContext(t), apiEcho, &TopicRequest{Name: "next"}, &TopicRequest{}) }()
	select {
	case err := <-next:
		t.Fatalf("the next request was answered while the lone one was (%v): it was not answered where it was read", err)
	case <-time.After(200 * time.Millisecond):
	}
	assert.Equal(t, int64(1), h.handled.Load(), "the next request is not read yet")
	close(h.release)
	require.NoError(t, <-held)
	require.NoError(t, <-next)
	assert.Equal(t, int64(2), h.handled.Load())
}

// An answer that says it waits on others (WaitingOnOthers) holds up no
// request after it: reading goes on on another goroutine, and the answer
// still arrives once its wait ends.
func TestWaitingOnOthersHandsReadingOver(t *testing.T) {
	h := newHereHandler(true)
	_, addr := startServer(t, ServerConfig{}, h)
	c := dial(t, addr)
	held := make(chan error, 1)
	go func() { held <- c.Call(testContext(t), apiEcho, &TopicRequest{Name: "hold"}, &TopicRequest{}) }()
	<-h.started
	for i := range 20 {
		var got TopicRequest
		require.NoError(t, c.Call(testContext(t), apiEcho, &TopicRequest{Name: "next"}, &got), "request %d after the waiting one", i)
		assert.Equal(t, "next", got.Name)
	}
	close(h.release)
	require.NoError(t, <-held)
	// The connection goes on serving, and closes cleanly with the server.
	require.NoError(t, c.Call(testContext(t), apiEcho, &TopicRequest{Name: "last"}, &TopicRequest{}))
}

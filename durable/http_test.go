package durable

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

// fakeBackend is an in-memory Backend that records every call, so that a
// test can check that a refused request reached nothing. Its tokens count
// messages in both fields. Like the node's backend, it refuses an append
// whose content type differs from the stream's (409) and, in JSON mode,
// splits a body into its values and refuses an empty array (400).
type fakeBackend struct {
	mu      sync.Mutex
	streams map[string]*fakeStream
	calls   []string // "Create a", "Append a", "Read a", "Head a", "Delete a"
	appends []*AppendRequest
	reads   []*ReadRequest
	// err, when set, is what every call returns.
	err error
	// hold, when set, keeps a read that waits for data until it is
	// closed; held is told (without blocking) when one starts waiting.
	hold chan struct{}
	held chan struct{}
	// deny, when set, answers Authorize; asked records what was asked
	// ("principal op path").
	deny  func(principal, op, path string) error
	asked []string
}

type fakeStream struct {
	ct     string
	closed bool
	msgs   []Message
}

func token(n int) string { return Offset{Record: int64(n), Byte: int64(n)}.Token() }

func (s *fakeStream) info() Info {
	return Info{ContentType: s.ct, Tail: token(len(s.msgs)), Closed: s.closed}
}

// add appends body: in JSON mode one message per value.
func (s *fakeStream) add(body []byte) error {
	vals := [][]byte{body}
	if IsJSON(s.ct) {
		var err error
		if vals, err = SplitJSON(body); err != nil {
			return Refuse(http.StatusBadRequest, "%v", err)
		}
	}
	for _, v := range vals {
		s.msgs = append(s.msgs, Message{Data: v, Next: token(len(s.msgs) + 1)})
	}
	return nil
}

func newFake() *fakeBackend { return &fakeBackend{streams: map[string]*fakeStream{}} }

// put makes a stream without a call being recorded.
func (b *fakeBackend) put(path, ct string, msgs ...string) *fakeStream {
	s := &fakeStream{ct: ct}
	for _, m := range msgs {
		s.msgs = append(s.msgs, Message{Data: []byte(m), Next: token(len(s.msgs) + 1)})
	}
	b.streams[path] = s
	return s
}

// beginLocked records a call and finds its stream; b.mu is held.
func (b *fakeBackend) beginLocked(op, path string) (*fakeStream, error) {
	b.calls = append(b.calls, op+" "+path)
	if b.err != nil {
		return nil, b.err
	}
	s := b.streams[path]
	if s == nil && op != "Create" {
		return nil, NotFound(path)
	}
	return s, nil
}

func (b *fakeBackend) Create(ctx context.Context, req *CreateRequest) (*CreateResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.beginLocked("Create", req.Path)
	if err != nil {
		return nil, err
	}
	if s != nil {
		if !SameContentType(s.ct, req.Config.ContentType) {
			return nil, Refuse(http.StatusConflict, "content type differs")
		}
		return &CreateResult{Info: s.info()}, nil
	}
	s = &fakeStream{ct: req.Config.ContentType, closed: req.Config.Closed}
	if len(req.Body) > 0 {
		if err := s.add(req.Body); err != nil {
			return nil, err
		}
	}
	b.streams[req.Path] = s
	return &CreateResult{Info: s.info(), Created: true}, nil
}

func (b *fakeBackend) Append(ctx context.Context, req *AppendRequest) (*AppendResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.appends = append(b.appends, req)
	s, err := b.beginLocked("Append", req.Path)
	if err != nil {
		return nil, err
	}
	if s.closed {
		return nil, &Refusal{Status: http.StatusConflict, Message: "closed", Closed: true, Tail: s.info().Tail}
	}
	if len(req.Body) > 0 {
		if !SameContentType(req.ContentType, s.ct) {
			return nil, Refuse(http.StatusConflict, "content type %q is not the stream's %q", req.ContentType, s.ct)
		}
		if err := s.add(req.Body); err != nil {
			return nil, err
		}
	}
	s.closed = s.closed || req.Close
	res := &AppendResult{Tail: s.info().Tail, Closed: s.closed}
	if req.Producer != nil {
		res.ProducerSeq = req.Producer.Seq
	}
	return res, nil
}

func (b *fakeBackend) Read(ctx context.Context, req *ReadRequest) (*ReadResult, error) {
	b.mu.Lock()
	b.reads = append(b.reads, req)
	s, err := b.beginLocked("Read", req.Path)
	if err != nil {
		b.mu.Unlock()
		return nil, err
	}
	o, kind, err := ParseOffset(req.Offset)
	if err != nil {
		b.mu.Unlock()
		return nil, Refuse(http.StatusBadRequest, "%v", err)
	}
	from := int(o.Record)
	if kind == AtNow {
		from = len(s.msgs)
	}
	if from > len(s.msgs) {
		b.mu.Unlock()
		return nil, Refuse(http.StatusBadRequest, "offset past the tail")
	}
	res := &ReadResult{Info: s.info(), Messages: s.msgs[from:], Start: token(from), Next: token(len(s.msgs)), UpToDate: true, Closed: s.closed}
	hold, held := b.hold, b.held
	b.mu.Unlock()
	if len(res.Messages) > 0 || req.Wait == 0 || res.Closed {
		return res, nil
	}
	if hold != nil {
		select {
		case held <- struct{}{}:
		default:
		}
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	} else {
		t := time.NewTimer(req.Wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	res.TimedOut = true
	return res, nil
}

func (b *fakeBackend) Head(ctx context.Context, path string) (*Info, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, err := b.beginLocked("Head", path)
	if err != nil {
		return nil, err
	}
	info := s.info()
	return &info, nil
}

func (b *fakeBackend) Authorize(_ context.Context, principal, op, path string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, principal+" "+op+" "+path)
	if b.deny != nil {
		return b.deny(principal, op, path)
	}
	return nil
}

func (b *fakeBackend) Delete(ctx context.Context, path string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, err := b.beginLocked("Delete", path); err != nil {
		return err
	}
	delete(b.streams, path)
	return nil
}

func (b *fakeBackend) recorded() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

var testLimits = Limits{MaxBody: 1 << 10, ReadChunk: 1 << 10, LongPoll: 20 * time.Millisecond, SSEReconnect: time.Second, MaxLiveReaders: 8}

// request builds a request; hdr is pairs of header name and value.
func request(method, target, body string, hdr ...string) *http.Request {
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	return r
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Paths that could name a stream twice or reach outside the namespace
// are refused with 400 for every method, before the backend hears of
// them.
func TestHandlerRefusesBadPaths(t *testing.T) {
	paths := []string{
		"/v1/stream/",           // empty
		"/v1/stream",            // not under the prefix
		"/v1/streams/a",         // not under the prefix
		"/a",                    // not under the prefix
		"/v1/stream/a/../b",     // .. segment
		"/v1/stream/..",         // .. segment
		"/v1/stream/%2e%2e/etc", // encoded .. segment
		"/v1/stream/a/./b",      // . segment
		"/v1/stream/a//b",       // empty segment
		"/v1/stream/a/",         // empty last segment
		"/v1/stream/a%00b",      // NUL
		"/v1/stream/a%2Fb",      // encoded separator
		"/v1/stream/a%2fb",      // encoded separator, lower case
		"/v1/stream/a%ffb",      // not UTF-8
		"/v1/stream/" + strings.Repeat("x", metadata.MaxStreamPathBytes+1),
	}
	methods := []string{http.MethodPut, http.MethodPost, http.MethodGet, http.MethodHead, http.MethodDelete, http.MethodPatch}
	for _, p := range paths {
		for _, m := range methods {
			t.Run(m+" "+clip(p), func(t *testing.T) {
				b := newFake()
				h := NewHandler(b, testLimits, nil)
				w := serve(h, request(m, p, "x", "Content-Type", "text/plain"))
				assert.Equal(t, http.StatusBadRequest, w.Code)
				assert.Empty(t, b.recorded(), "the backend must not hear of a refused path")
			})
		}
	}
	// The control: a good path reaches the backend.
	b := newFake()
	w := serve(NewHandler(b, testLimits, nil), request(http.MethodPut, "/v1/stream/a/b.c/d%20e", ""))
	assert.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, []string{"Create a/b.c/d e"}, b.recorded())
}

// A GET whose offset or live parameter is malformed is 400 and reads
// nothing; no live reader stays counted.
func TestHandlerRefusesBadOffsets(t *testing.T) {
	tests := []struct{ name, query string }{
		{"word", "offset=abc"},
		{"too long", "offset=" + strings.Repeat("0", 100)},
		{"too short", "offset=0000000000000001_000000000000000"},
		{"negative", "offset=-2"},
		{"negative zero", "offset=-0"},
		{"negative padded", "offset=-01"},
		{"mixed", "offset=0000000000000001_00000000000000a0"},
		{"wrong separator", "offset=0000000000000001-0000000000000000"},
		{"signed token", "offset=+000000000000001_0000000000000000"},
		{"upper case now", "offset=NOW"},
		{"space", "offset=%20-1"},
		{"empty", "offset="},
		{"twice", "offset=-1&offset=now"},
		{"long-poll bad offset", "offset=abc&live=long-poll"},
		{"sse bad offset", "offset=-2&live=sse"},
		{"unknown live", "offset=-1&live=websocket"},
		{"live without offset", "live=long-poll"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFake()
			b.put("s", "text/plain", "hello")
			h := NewHandler(b, testLimits, nil)
			w := serve(h, request(http.MethodGet, "/v1/stream/s?"+tt.query, ""))
			assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			assert.Empty(t, b.recorded(), "the backend must not be asked to read")
			assert.Empty(t, h.LiveReaders(), "no live reader may stay counted")
		})
	}
	for _, ok := range []string{"", "offset=-1", "offset=now", "offset=" + token(1), "offset=%2D1"} {
		t.Run("control "+ok, func(t *testing.T) {
			b := newFake()
			b.put("s", "text/plain", "hello")
			w := serve(NewHandler(b, testLimits, nil), request(http.MethodGet, "/v1/stream/s?"+ok, ""))
			assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, []string{"Read s"}, b.recorded())
		})
	}
}

// Producer headers go all three or none, and must be safe integers;
// otherwise the POST is 400 and nothing is appended.
func TestHandlerRefusesBadProducerHeaders(t *testing.T) {
	tests := []struct {
		name string
		hdr  []string
	}{
		{"id alone", []string{"Producer-Id", "p"}},
		{"id and epoch", []string{"Producer-Id", "p", "Producer-Epoch", "0"}},
		{"id and seq", []string{"Producer-Id", "p", "Producer-Seq", "0"}},
		{"epoch and seq", []string{"Producer-Epoch", "0", "Producer-Seq", "0"}},
		{"seq alone", []string{"Producer-Seq", "0"}},
		{"empty id", []string{"Producer-Id", "", "Producer-Epoch", "0", "Producer-Seq", "0"}},
		{"word epoch", []string{"Producer-Id", "p", "Producer-Epoch", "one", "Producer-Seq", "0"}},
		{"negative epoch", []string{"Producer-Id", "p", "Producer-Epoch", "-1", "Producer-Seq", "0"}},
		{"signed seq", []string{"Producer-Id", "p", "Producer-Epoch", "0", "Producer-Seq", "+1"}},
		{"fraction seq", []string{"Producer-Id", "p", "Producer-Epoch", "0", "Producer-Seq", "1.0"}},
		{"empty seq", []string{"Producer-Id", "p", "Producer-Epoch", "0", "Producer-Seq", ""}},
		{"seq above 2^53-1", []string{"Producer-Id", "p", "Producer-Epoch", "0", "Producer-Seq", "9007199254740992"}},
		{"epoch beyond int64", []string{"Producer-Id", "p", "Producer-Epoch", "99999999999999999999", "Producer-Seq", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFake()
			b.put("s", "text/plain")
			r := request(http.MethodPost, "/v1/stream/s", "data", append([]string{"Content-Type", "text/plain"}, tt.hdr...)...)
			w := serve(NewHandler(b, testLimits, nil), r)
			assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			assert.Empty(t, b.recorded())
		})
	}
	t.Run("control", func(t *testing.T) {
		b := newFake()
		b.put("s", "text/plain")
		r := request(http.MethodPost, "/v1/stream/s", "data", "Content-Type", "text/plain",
			"Producer-Id", "p", "Producer-Epoch", "3", "Producer-Seq", "9007199254740991")
		w := serve(NewHandler(b, testLimits, nil), r)
		assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
		require.Len(t, b.appends, 1)
		assert.Equal(t, &Producer{ID: "p", Epoch: 3, Seq: 9007199254740991}, b.appends[0].Producer)
		assert.Equal(t, "3", w.Header().Get(HeaderProducerEpoch))
		assert.Equal(t, "9007199254740991", w.Header().Get(HeaderProducerSeq))
	})
}

// A PUT with a malformed TTL, expiry or fork header is 400 and creates
// nothing.
func TestHandlerRefusesBadCreateHeaders(t *testing.T) {
	tests := []struct {
		name string
		hdr  []string
	}{
		{"negative ttl", []string{"Stream-TTL", "-1"}},
		{"word ttl", []string{"Stream-TTL", "soon"}},
		{"signed ttl", []string{"Stream-TTL", "+3600"}},
		{"padded ttl", []string{"Stream-TTL", "03600"}},
		{"fraction ttl", []string{"Stream-TTL", "3600.0"}},
		{"exponent ttl", []string{"Stream-TTL", "3.6e3"}},
		{"ttl above 2^53-1", []string{"Stream-TTL", "9007199254740992"}},
		{"ttl and expiry", []string{"Stream-TTL", "60", "Stream-Expires-At", "2030-01-01T00:00:00Z"}},
		{"word expiry", []string{"Stream-Expires-At", "tomorrow"}},
		{"expiry without zone", []string{"Stream-Expires-At", "2030-01-01T00:00:00"}},
		{"expiry month 13", []string{"Stream-Expires-At", "2030-13-01T00:00:00Z"}},
		{"expiry as seconds", []string{"Stream-Expires-At", "1893456000"}},
		{"fork offset alone", []string{"Stream-Fork-Offset", token(1)}},
		{"fork sub-offset alone", []string{"Stream-Fork-Sub-Offset", "0"}},
		{"fork of a bad path", []string{"Stream-Forked-From", "/v1/stream/a/../b"}},
		{"fork offset not a token", []string{"Stream-Forked-From", "src", "Stream-Fork-Offset", "now"}},
		{"negative fork sub-offset", []string{"Stream-Forked-From", "src", "Stream-Fork-Sub-Offset", "-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFake()
			w := serve(NewHandler(b, testLimits, nil), request(http.MethodPut, "/v1/stream/s", "", tt.hdr...))
			assert.Equal(t, http.StatusBadRequest, w.Code, w.Body.String())
			assert.Empty(t, b.recorded())
			assert.Empty(t, b.streams)
		})
	}
	t.Run("control", func(t *testing.T) {
		b := newFake()
		h := NewHandler(b, testLimits, nil)
		w := serve(h, request(http.MethodPut, "/v1/stream/ttl", "", "Stream-TTL", "3600"))
		assert.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		assert.Equal(t, "http://example.com/v1/stream/ttl", w.Header().Get("Location"))
		w = serve(h, request(http.MethodPut, "/v1/stream/exp", "", "Stream-Expires-At", "2030-01-01T00:00:00.5+02:00"))
		assert.Equal(t, http.StatusCreated, w.Code, w.Body.String())
		assert.Equal(t, []string{"Create ttl", "Create exp"}, b.recorded())
	})
}

// Methods outside the protocol are 405 with the Allow header, and reach
// nothing.
func TestHandlerRefusesOtherMethods(t *testing.T) {
	for _, m := range []string{http.MethodPatch, http.MethodTrace, http.MethodConnect, "PROPFIND", "FOO"} {
		t.Run(m, func(t *testing.T) {
			b := newFake()
			b.put("s", "text/plain")
			w := serve(NewHandler(b, testLimits, nil), request(m, "/v1/stream/s", ""))
			assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
			assert.Equal(t, "GET, HEAD, POST, PUT, DELETE, OPTIONS", w.Header().Get("Allow"))
			assert.Empty(t, b.recorded())
		})
	}
}

// A body over Limits.MaxBody is 413, however it is sent, and reaches
// nothing; one of exactly the limit is taken.
func TestHandlerBodyLimit(t *testing.T) {
	limits := testLimits
	limits.MaxBody = 8
	tests := []struct {
		name    string
		method  string
		body    string
		chunked bool // no Content-Length: the limit is found by reading
		want    int
	}{
		{"post over", http.MethodPost, "123456789", false, http.StatusRequestEntityTooLarge},
		{"post over chunked", http.MethodPost, "123456789", true, http.StatusRequestEntityTooLarge},
		{"put over", http.MethodPut, "123456789", false, http.StatusRequestEntityTooLarge},
		{"put over chunked", http.MethodPut, "123456789", true, http.StatusRequestEntityTooLarge},
		{"post at the limit", http.MethodPost, "12345678", true, http.StatusNoContent},
		{"put at the limit", http.MethodPut, "12345678", false, http.StatusCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFake()
			path := "new"
			if tt.method == http.MethodPost {
				path = "s"
				b.put(path, "text/plain")
			}
			r := request(tt.method, "/v1/stream/"+path, tt.body, "Content-Type", "text/plain")
			if tt.chunked {
				r.ContentLength = -1
			}
			w := serve(NewHandler(b, limits, nil), r)
			assert.Equal(t, tt.want, w.Code, w.Body.String())
			if tt.want == http.StatusRequestEntityTooLarge {
				assert.Empty(t, b.recorded())
			} else {
				assert.Len(t, b.recorded(), 1)
			}
		})
	}
}

// An empty POST is 400 unless it closes the stream (Stream-Closed: true,
// any case; other values are as if absent); a body needs a Content-Type.
func TestHandlerEmptyAppend(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		hdr    []string
		want   int
		closes bool
	}{
		{"empty", "", nil, http.StatusBadRequest, false},
		{"empty with type", "", []string{"Content-Type", "text/plain"}, http.StatusBadRequest, false},
		{"empty, closed false", "", []string{"Stream-Closed", "false"}, http.StatusBadRequest, false},
		{"empty, closed 1", "", []string{"Stream-Closed", "1"}, http.StatusBadRequest, false},
		{"body without type", "x", nil, http.StatusBadRequest, false},
		{"close", "", []string{"Stream-Closed", "true"}, http.StatusNoContent, true},
		{"close upper case", "", []string{"Stream-Closed", "TRUE"}, http.StatusNoContent, true},
		// An empty body is never refused for its Content-Type.
		{"close with another type", "", []string{"Stream-Closed", "true", "Content-Type", "application/json"}, http.StatusNoContent, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFake()
			s := b.put("s", "text/plain", "a")
			w := serve(NewHandler(b, testLimits, nil), request(http.MethodPost, "/v1/stream/s", tt.body, tt.hdr...))
			assert.Equal(t, tt.want, w.Code, w.Body.String())
			assert.Len(t, s.msgs, 1, "nothing appended")
			assert.Equal(t, tt.closes, s.closed)
			if !tt.closes {
				assert.Empty(t, b.recorded())
				return
			}
			require.Len(t, b.appends, 1)
			assert.True(t, b.appends[0].Close)
			assert.Empty(t, b.appends[0].ContentType, "the type of an empty body is not passed on")
			assert.Equal(t, "true", w.Header().Get(HeaderClosed))
			assert.Equal(t, token(1), w.Header().Get(HeaderNextOffset))
		})
	}
}

// The handler passes an append's Content-Type to the backend, which
// compares media types (the check lives in the backend: the fake makes it
// as the node does, with SameContentType), and answers its 409.
func TestHandlerContentTypeMismatch(t *testing.T) {
	tests := []struct {
		ct   string
		want int
	}{
		{"application/json", http.StatusConflict},
		{"text/html", http.StatusConflict},
		{"application/octet-stream", http.StatusConflict},
		{"text/plain", http.StatusNoContent},
		{"text/plain; charset=utf-8", http.StatusNoContent},
		{"TEXT/Plain", http.StatusNoContent},
	}
	for _, tt := range tests {
		t.Run(tt.ct, func(t *testing.T) {
			b := newFake()
			s := b.put("s", "text/plain")
			w := serve(NewHandler(b, testLimits, nil), request(http.MethodPost, "/v1/stream/s", "x", "Content-Type", tt.ct))
			assert.Equal(t, tt.want, w.Code, w.Body.String())
			require.Len(t, b.appends, 1)
			assert.Equal(t, tt.ct, b.appends[0].ContentType)
			if tt.want == http.StatusConflict {
				assert.Empty(t, s.msgs)
			} else {
				assert.Len(t, s.msgs, 1)
			}
		})
	}
}

// In JSON mode an empty array is 400 and writes nothing; an array appends
// one message per element, and a read gives them back as one array.
func TestHandlerJSONMode(t *testing.T) {
	b := newFake()
	h := NewHandler(b, testLimits, nil)
	post := func(body string) *httptest.ResponseRecorder {
		return serve(h, request(http.MethodPost, "/v1/stream/j", body, "Content-Type", "application/json"))
	}
	w := serve(h, request(http.MethodPut, "/v1/stream/j", "", "Content-Type", "application/json"))
	require.Equal(t, http.StatusCreated, w.Code)
	s := b.streams["j"]

	for _, bad := range []string{"[]", " [ ] ", "[1,", "1 2"} {
		w = post(bad)
		assert.Equal(t, http.StatusBadRequest, w.Code, bad)
		assert.Empty(t, s.msgs, bad)
	}
	w = post("[1,2]")
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	require.Len(t, s.msgs, 2)
	assert.Equal(t, token(2), w.Header().Get(HeaderNextOffset))
	w = post(` {"a":1} `)
	require.Equal(t, http.StatusNoContent, w.Code)

	w = serve(h, request(http.MethodGet, "/v1/stream/j?offset=-1", ""))
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `[1,2,{"a":1}]`, w.Body.String())
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	w = serve(h, request(http.MethodGet, "/v1/stream/j?offset="+token(3), ""))
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, `[]`, w.Body.String(), "a JSON read at the tail is an empty array")
}

// A preflight is answered at once with what a browser needs to send the
// protocol's headers and read its answers; no backend call.
func TestHandlerCORSPreflight(t *testing.T) {
	b := newFake()
	r := request(http.MethodOptions, "/v1/stream/s", "", "Origin", "https://app.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "content-type, producer-id")
	w := serve(NewHandler(b, testLimits, nil), r)
	assert.Equal(t, http.StatusNoContent, w.Code)
	assert.Empty(t, b.recorded())
	hd := w.Header()
	assert.Equal(t, "*", hd.Get("Access-Control-Allow-Origin"))
	list := func(name string) []string {
		var out []string
		for _, v := range strings.Split(hd.Get(name), ",") {
			out = append(out, strings.ToLower(strings.TrimSpace(v)))
		}
		return out
	}
	for _, m := range []string{"get", "post", "put", "delete", "head", "options"} {
		assert.Contains(t, list("Access-Control-Allow-Methods"), m)
	}
	for _, name := range []string{"Content-Type", "If-None-Match", HeaderSeq, HeaderTTL, HeaderExpiresAt, HeaderClosed,
		HeaderProducerID, HeaderProducerEpoch, HeaderProducerSeq, HeaderForkedFrom, HeaderForkOffset, HeaderForkSubOffset} {
		assert.Contains(t, list("Access-Control-Allow-Headers"), strings.ToLower(name))
	}
	for _, name := range []string{HeaderNextOffset, HeaderCursor, HeaderUpToDate, HeaderClosed, HeaderProducerEpoch, HeaderProducerSeq,
		HeaderExpectedSeq, HeaderReceivedSeq, HeaderTTL, HeaderExpiresAt, HeaderSSEEncoding, "ETag", "Content-Type", "Location"} {
		assert.Contains(t, list("Access-Control-Expose-Headers"), strings.ToLower(name))
	}
}

// Every answer, success or refusal, carries CORS and the browser
// security headers.
func TestHandlerSecurityHeaders(t *testing.T) {
	tests := []struct {
		name string
		r    *http.Request
		err  error
		want int
	}{
		{"read", request(http.MethodGet, "/v1/stream/s?offset=-1", ""), nil, http.StatusOK},
		{"head", request(http.MethodHead, "/v1/stream/s", ""), nil, http.StatusOK},
		{"append", request(http.MethodPost, "/v1/stream/s", "x", "Content-Type", "text/plain"), nil, http.StatusNoContent},
		{"not found", request(http.MethodGet, "/v1/stream/nope", ""), nil, http.StatusNotFound},
		{"bad path", request(http.MethodGet, "/v1/stream/a/../b", ""), nil, http.StatusBadRequest},
		{"bad method", request(http.MethodPatch, "/v1/stream/s", ""), nil, http.StatusMethodNotAllowed},
		{"too large", request(http.MethodPost, "/v1/stream/s", strings.Repeat("x", testLimits.MaxBody+1), "Content-Type", "text/plain"), nil, http.StatusRequestEntityTooLarge},
		{"unavailable", request(http.MethodGet, "/v1/stream/s", ""), errors.New("no leader"), http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFake()
			b.put("s", "text/plain", "a")
			b.err = tt.err
			w := serve(NewHandler(b, testLimits, nil), tt.r)
			require.Equal(t, tt.want, w.Code, w.Body.String())
			assert.Equal(t, "nosniff", w.Header().Get("X-Content-Type-Options"))
			assert.Equal(t, "cross-origin", w.Header().Get("Cross-Origin-Resource-Policy"))
			assert.Equal(t, "*", w.Header().Get("Access-Control-Allow-Origin"))
		})
	}
}

// A long-poll at the tail that times out is 204 with the tail, up-to-date
// and a cursor; a cursor echoed back is moved on, so that a cache never
// answers a client with what it already has.
func TestHandlerLongPollTimeout(t *testing.T) {
	b := newFake()
	b.put("s", "text/plain", "a", "b")
	h := NewHandler(b, testLimits, nil)
	w := serve(h, request(http.MethodGet, "/v1/stream/s?live=long-poll&offset="+token(2), ""))
	require.Equal(t, http.StatusNoContent, w.Code, w.Body.String())
	assert.Empty(t, w.Body.String())
	assert.Equal(t, token(2), w.Header().Get(HeaderNextOffset))
	assert.Equal(t, "true", w.Header().Get(HeaderUpToDate))
	cursor, err := strconv.ParseInt(w.Header().Get(HeaderCursor), 10, 64)
	require.NoError(t, err, "Stream-Cursor is a number")
	assert.Positive(t, cursor)
	require.Len(t, b.reads, 1)
	assert.Equal(t, testLimits.LongPoll, b.reads[0].Wait, "the backend waits as long as Limits.LongPoll")
	assert.Empty(t, h.LiveReaders())

	w = serve(h, request(http.MethodGet, fmt.Sprintf("/v1/stream/s?live=long-poll&offset=%s&cursor=%d", token(2), cursor), ""))
	require.Equal(t, http.StatusNoContent, w.Code)
	next, err := strconv.ParseInt(w.Header().Get(HeaderCursor), 10, 64)
	require.NoError(t, err)
	assert.Greater(t, next, cursor)

	// Data at the offset is answered at once, with a cursor, not cached.
	w = serve(h, request(http.MethodGet, "/v1/stream/s?live=long-poll&offset="+token(1), ""))
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "b", w.Body.String())
	assert.NotEmpty(t, w.Header().Get(HeaderCursor))
	assert.Equal(t, "no-store", w.Header().Get("Cache-Control"))
}

// Limits.MaxLiveReaders bounds long-polls and SSE connections: above it
// a live read is 503 with Retry-After, and a reader that ends frees its
// place.
func TestHandlerMaxLiveReaders(t *testing.T) {
	b := newFake()
	b.put("s", "text/plain", "a")
	b.hold, b.held = make(chan struct{}), make(chan struct{}, 1)
	limits := testLimits
	limits.MaxLiveReaders = 1
	limits.LongPoll = time.Minute // the first poll ends when hold is closed
	h := NewHandler(b, limits, nil)
	tail := "/v1/stream/s?live=long-poll&offset=" + token(1)

	first := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(first, request(http.MethodGet, tail, ""))
	}()
	select {
	case <-b.held:
	case <-time.After(10 * time.Second):
		t.Fatal("the first long-poll never reached the backend")
	}

	// A refused long-poll does not reach the backend; SSE reads once
	// (whether the stream exists) before it is refused, so neither waits.
	for _, tt := range []struct {
		target string
		reads  int
	}{{tail, 0}, {"/v1/stream/s?live=sse&offset=-1", 1}} {
		before := len(b.reads)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		w := serve(h, request(http.MethodGet, tt.target, "").WithContext(ctx))
		cancel()
		assert.Equal(t, http.StatusServiceUnavailable, w.Code, tt.target)
		assert.Equal(t, "1", w.Header().Get("Retry-After"), tt.target)
		assert.Equal(t, tt.reads, len(b.reads)-before, tt.target)
	}
	assert.Equal(t, map[string]int{"s": 1}, h.LiveReaders())
	// A catch-up read is not a live reader.
	w := serve(h, request(http.MethodGet, "/v1/stream/s?offset=-1", ""))
	assert.Equal(t, http.StatusOK, w.Code)

	close(b.hold)
	<-done
	assert.Equal(t, http.StatusNoContent, first.Code)
	assert.Empty(t, h.LiveReaders())
	w = serve(h, request(http.MethodGet, tail, ""))
	assert.Equal(t, http.StatusNoContent, w.Code, "the place of a finished reader is free again")
}

// LiveReaders counts the long-polls and SSE connections open now by
// stream path, and forgets a path once its last reader has ended.
func TestHandlerLiveReadersByStream(t *testing.T) {
	b := newFake()
	b.put("s", "text/plain", "a")
	b.put("dir/u", "text/plain", "a")
	b.hold, b.held = make(chan struct{}), make(chan struct{}, 3)
	limits := testLimits
	limits.LongPoll, limits.SSEReconnect = time.Minute, time.Minute // they end when the test ends them
	h := NewHandler(b, limits, nil)
	sseCtx, endSSE := context.WithCancel(context.Background())
	defer endSSE()
	var wg sync.WaitGroup
	for _, r := range []*http.Request{
		request(http.MethodGet, "/v1/stream/s?live=long-poll&offset="+token(1), ""),
		request(http.MethodGet, "/v1/stream/s?live=long-poll&offset="+token(1), ""),
		request(http.MethodGet, "/v1/stream/dir/u?live=sse&offset=-1", "").WithContext(sseCtx),
	} {
		wg.Go(func() { serve(h, r) })
	}
	for range 3 {
		select {
		case <-b.held:
		case <-time.After(10 * time.Second):
			t.Fatal("a live read never waited")
		}
	}
	assert.Equal(t, map[string]int{"s": 2, "dir/u": 1}, h.LiveReaders())
	// A catch-up read is not a live reader.
	serve(h, request(http.MethodGet, "/v1/stream/s?offset=-1", ""))
	assert.Equal(t, map[string]int{"s": 2, "dir/u": 1}, h.LiveReaders())

	endSSE()
	require.Eventually(t, func() bool { return h.LiveReaders()["dir/u"] == 0 }, 10*time.Second, time.Millisecond, "the SSE reader ended")
	assert.Equal(t, map[string]int{"s": 2}, h.LiveReaders(), "a path without readers is left out")
	close(b.hold)
	wg.Wait()
	assert.Empty(t, h.LiveReaders())
}

// A backend error that is not a Refusal is 503 with Retry-After, for every
// operation; a Refusal, even wrapped, is answered with its status and
// headers.
func TestHandlerBackendErrors(t *testing.T) {
	requests := []struct{ method, target, body string }{
		{http.MethodPut, "/v1/stream/s", ""},
		{http.MethodPost, "/v1/stream/s", "x"},
		{http.MethodGet, "/v1/stream/s?offset=-1", ""},
		{http.MethodGet, "/v1/stream/s?offset=-1&live=long-poll", ""},
		{http.MethodGet, "/v1/stream/s?offset=-1&live=sse", ""},
		{http.MethodHead, "/v1/stream/s", ""},
		{http.MethodDelete, "/v1/stream/s", ""},
	}
	epoch, exp, got := int64(4), int64(7), int64(9)
	tests := []struct {
		name  string
		err   error
		want  int
		retry bool
		hdr   map[string]string
	}{
		{"plain error", errors.New("leader unreachable"), http.StatusServiceUnavailable, true, nil},
		{"deadline", context.DeadlineExceeded, http.StatusServiceUnavailable, true, nil},
		{"not found", NotFound("s"), http.StatusNotFound, false, nil},
		{"wrapped refusal", fmt.Errorf("forward: %w", Gone("s")), http.StatusGone, false, nil},
		{"refused busy", Refuse(http.StatusTooManyRequests, "slow down"), http.StatusTooManyRequests, true, nil},
		{"closed", &Refusal{Status: http.StatusConflict, Message: "closed", Closed: true, Tail: token(3)}, http.StatusConflict, false,
			map[string]string{HeaderClosed: "true", HeaderNextOffset: token(3)}},
		{"stale producer", &Refusal{Status: http.StatusForbidden, Message: "stale", ProducerEpoch: &epoch}, http.StatusForbidden, false,
			map[string]string{HeaderProducerEpoch: "4"}},
		{"sequence gap", &Refusal{Status: http.StatusConflict, Message: "gap", ExpectedSeq: &exp, ReceivedSeq: &got}, http.StatusConflict, false,
			map[string]string{HeaderExpectedSeq: "7", HeaderReceivedSeq: "9"}},
	}
	for _, tt := range tests {
		for _, r := range requests {
			t.Run(tt.name+" "+r.method+" "+r.target, func(t *testing.T) {
				b := newFake()
				b.put("s", "text/plain", "a")
				b.err = tt.err
				h := NewHandler(b, testLimits, nil)
				w := serve(h, request(r.method, r.target, r.body, "Content-Type", "text/plain"))
				assert.Equal(t, tt.want, w.Code, w.Body.String())
				if tt.retry {
					assert.Equal(t, "1", w.Header().Get("Retry-After"))
				} else {
					assert.Empty(t, w.Header().Get("Retry-After"))
				}
				for k, v := range tt.hdr {
					assert.Equal(t, v, w.Header().Get(k), k)
				}
				assert.Len(t, b.recorded(), 1, "the backend was asked once")
				assert.Empty(t, h.LiveReaders())
			})
		}
	}
}

// A live read whose watch (SetWatch) ends it while it waits is cut at
// once: a long-poll is answered 401 with the cause, an SSE stream ends
// after what it sent, and one whose credential fell before its first
// read is answered 401. Each tells the watch when it is done.
func TestHandlerWatchEndsLiveReads(t *testing.T) {
	b := newFake()
	b.put("s", "text/plain", "a")
	b.hold, b.held = make(chan struct{}), make(chan struct{}, 1)
	limits := testLimits
	limits.LongPoll, limits.SSEReconnect = time.Minute, time.Minute // only the watch ends them
	h := NewHandler(b, limits, nil)
	var (
		mu     sync.Mutex
		cancel context.CancelCauseFunc
		dones  int
	)
	h.SetWatch(func(r *http.Request) (context.Context, func()) {
		ctx, c := context.WithCancelCause(r.Context())
		mu.Lock()
		cancel = c
		mu.Unlock()
		return ctx, func() {
			mu.Lock()
			dones++
			mu.Unlock()
		}
	})
	revoke := func() {
		mu.Lock()
		defer mu.Unlock()
		require.NotNil(t, cancel, "the live read asked its watch")
		cancel(errors.New("the token of \"reader\" was revoked"))
	}
	run := func(target string) (*httptest.ResponseRecorder, chan struct{}) {
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() {
			defer close(done)
			h.ServeHTTP(w, request(http.MethodGet, target, ""))
		}()
		select {
		case <-b.held:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s never waited", target)
		}
		return w, done
	}
	ended := func(target string, done chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s still runs after its watch ended it", target)
		}
	}

	poll := "/v1/stream/s?live=long-poll&offset=" + token(1)
	w, done := run(poll)
	revoke()
	ended(poll, done)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Contains(t, w.Body.String(), "revoked")
	assert.Contains(t, w.Header().Get("WWW-Authenticate"), "Bearer")

	sse := "/v1/stream/s?live=sse&offset=-1"
	w, done = run(sse)
	revoke()
	ended(sse, done)
	assert.Equal(t, http.StatusOK, w.Code, "the stream had begun")
	assert.Contains(t, w.Body.String(), "data:a", "what it sent before stays sent")
	assert.Empty(t, h.LiveReaders())

	// A credential that fell before the first read: 401, nothing read.
	h.SetWatch(func(r *http.Request) (context.Context, func()) {
		ctx, c := context.WithCancelCause(r.Context())
		c(errors.New("the token of \"reader\" was revoked"))
		return ctx, func() {
			mu.Lock()
			dones++
			mu.Unlock()
		}
	})
	w = serve(h, request(http.MethodGet, sse, ""))
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.NotContains(t, w.Body.String(), "data:")
	mu.Lock()
	assert.Equal(t, 3, dones, "each live read told its watch it was done")
	mu.Unlock()
}

// Every request that touches a stream is authorized by the backend, with
// the principal the handler was given, before anything is read or done:
// a refusal is answered with its status (401 with WWW-Authenticate), and
// the backend hears nothing else of the request. A fork asks for read on
// its source too.
func TestHandlerAuthorizesThroughTheBackend(t *testing.T) {
	b := newFake()
	b.deny = func(principal, op, path string) error {
		switch {
		case principal == "":
			return Refuse(http.StatusUnauthorized, "who are you")
		case principal == "alice" && op == "write":
			return Refuse(http.StatusForbidden, "alice may not write %s", path)
		case op == "read" && path == "secret":
			return Refuse(http.StatusForbidden, "no one reads secret")
		}
		return nil
	}
	h := NewHandler(b, testLimits, nil)
	h.SetPrincipal(func(r *http.Request) string { return r.Header.Get("X-Test-Principal") })

	w := serve(h, request(http.MethodPut, "/v1/stream/a", "", "Content-Type", "text/plain"))
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Equal(t, `Bearer realm="gostream"`, w.Header().Get("WWW-Authenticate"))
	assert.Empty(t, b.recorded(), "a refused create reaches nothing")

	w = serve(h, request(http.MethodPut, "/v1/stream/a", "", "Content-Type", "text/plain", "X-Test-Principal", "bob"))
	require.Equal(t, http.StatusCreated, w.Code)
	w = serve(h, request(http.MethodPost, "/v1/stream/a", "hello", "Content-Type", "text/plain", "X-Test-Principal", "alice"))
	assert.Equal(t, http.StatusForbidden, w.Code)
	assert.Contains(t, w.Body.String(), "alice may not write a")
	assert.Empty(t, w.Header().Get("WWW-Authenticate"))
	assert.Equal(t, []string{"Create a"}, b.recorded(), "a refused append reaches nothing")

	w = serve(h, request(http.MethodPut, "/v1/stream/fork", "", "Content-Type", "text/plain", "X-Test-Principal", "bob", HeaderForkedFrom, "secret"))
	assert.Equal(t, http.StatusForbidden, w.Code, "a fork needs read on its source")
	assert.Equal(t, []string{"Create a"}, b.recorded())
	assert.Equal(t, []string{" create a", "bob create a", "alice write a", "bob create fork", "bob read secret"}, b.asked)
}

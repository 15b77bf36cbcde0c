package durable

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"gostream/metadata"
)

// Prefix is the URL path under which streams are served.
const Prefix = "/v1/stream/"

// Header names of the protocol.
const (
	HeaderNextOffset    = "Stream-Next-Offset"
	HeaderUpToDate      = "Stream-Up-To-Date"
	HeaderCursor        = "Stream-Cursor"
	HeaderClosed        = "Stream-Closed"
	HeaderSeq           = "Stream-Seq"
	HeaderTTL           = "Stream-TTL"
	HeaderExpiresAt     = "Stream-Expires-At"
	HeaderForkedFrom    = "Stream-Forked-From"
	HeaderForkOffset    = "Stream-Fork-Offset"
	HeaderForkSubOffset = "Stream-Fork-Sub-Offset"
	HeaderProducerID    = "Producer-Id"
	HeaderProducerEpoch = "Producer-Epoch"
	HeaderProducerSeq   = "Producer-Seq"
	HeaderExpectedSeq   = "Producer-Expected-Seq"
	HeaderReceivedSeq   = "Producer-Received-Seq"
	HeaderSSEEncoding   = "Stream-SSE-Data-Encoding"
)

// Limits bound what one request may hold or wait for.
type Limits struct {
	// MaxBody is the largest request body (413 above it).
	MaxBody int
	// ReadChunk bounds the data of one GET response (the first message
	// is sent whole, whatever its size).
	ReadChunk int
	// LongPoll is how long a long-poll or an SSE connection waits for
	// data before it answers that there is none.
	LongPoll time.Duration
	// SSEReconnect is how long an SSE connection lives before the server
	// closes it, so that clients reconnect from their offset.
	SSEReconnect time.Duration
	// MaxLiveReaders bounds the long-polls and SSE connections open at
	// once (503 above it).
	MaxLiveReaders int
}

// Observer is told of every answered request, for metrics.
type Observer interface {
	Observe(method string, status int, took time.Duration)
	LiveReaders(delta int)
}

// Handler serves the Durable Streams protocol under Prefix.
type Handler struct {
	backend   Backend
	limits    Limits
	obs       Observer
	principal func(r *http.Request) string
	watch     WatchFunc

	mu struct {
		sync.Mutex
		// live counts the live reads open now (long-polls and SSE
		// connections); readers counts them by stream path, holding
		// only the paths that have one.
		live    int
		readers map[string]int
	}
}

// WatchFunc is called as a live read (a long-poll, an SSE stream) begins.
// The context it returns is the request's, ended early, with a cause,
// when the request's credential stops standing (its token revoked, its
// certificate expired); done is called when the read ends.
type WatchFunc func(r *http.Request) (ctx context.Context, done func())

// SetWatch makes the handler end each live read whose credential f says
// has stopped standing: a long-poll that has not answered yet answers 401
// with the cause, and an SSE stream ends (its client, reconnecting, is
// refused). Without it a live read runs to its end (LongPoll,
// SSEReconnect).
func (h *Handler) SetWatch(f WatchFunc) { h.watch = f }

// watched is the context of a live read (see SetWatch), and its done.
func (h *Handler) watched(r *http.Request) (context.Context, func()) {
	if h.watch == nil {
		return r.Context(), func() {}
	}
	return h.watch(r)
}

// cut answers a live read whose watch ended it, before it wrote anything:
// 401 with the cause. It reports whether it did (false while the
// request's own context stands, or once it has ended as well: a client
// that went away needs no answer).
func cut(ctx context.Context, w http.ResponseWriter, r *http.Request) bool {
	if ctx.Err() == nil || r.Context().Err() != nil {
		return false
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="gostream"`)
	plain(w, http.StatusUnauthorized, context.Cause(ctx).Error())
	return true
}

// SetPrincipal gives the handler the principal of a request (who
// authenticated it), for Backend.Authorize. Without it every request is
// anonymous (the empty principal).
func (h *Handler) SetPrincipal(f func(r *http.Request) string) { h.principal = f }

// opOf is the operation a protocol method does.
var opOf = map[string]string{
	http.MethodPut: "create", http.MethodPost: "write", http.MethodGet: "read",
	http.MethodHead: "describe", http.MethodDelete: "delete",
}

// allowed asks the backend whether the request may do op on the stream
// at path, and answers it when not.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request, op, path string) bool {
	principal := ""
	if h.principal != nil {
		principal = h.principal(r)
	}
	err := h.backend.Authorize(r.Context(), principal, op, path)
	if err == nil {
		return true
	}
	var ref *Refusal
	if errors.As(err, &ref) && ref.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="gostream"`)
	}
	h.fail(w, err)
	return false
}

// NewHandler returns a handler of the protocol over b.
func NewHandler(b Backend, l Limits, obs Observer) *Handler {
	return &Handler{backend: b, limits: l, obs: obs}
}

var (
	allowHeaders = "content-type, authorization, if-none-match, Stream-Seq, Stream-TTL, Stream-Expires-At, Stream-Closed, " +
		"Producer-Id, Producer-Epoch, Producer-Seq, Stream-Forked-From, Stream-Fork-Offset, Stream-Fork-Sub-Offset"
	exposeHeaders = "Stream-Next-Offset, Stream-Cursor, Stream-Up-To-Date, Stream-Closed, Producer-Epoch, Producer-Seq, " +
		"Producer-Expected-Seq, Producer-Received-Seq, Stream-TTL, Stream-Expires-At, Stream-SSE-Data-Encoding, etag, content-type, location"
)

// statusWriter remembers the status written, for the observer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	h.serve(sw, r)
	if h.obs != nil {
		h.obs.Observe(r.Method, sw.status, time.Since(start))
	}
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Access-Control-Allow-Origin", "*")
	hd.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, HEAD, OPTIONS")
	hd.Set("Access-Control-Allow-Headers", allowHeaders)
	hd.Set("Access-Control-Expose-Headers", exposeHeaders)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cross-Origin-Resource-Policy", "cross-origin")
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	path, err := StreamPath(r.URL)
	if err != nil {
		plain(w, http.StatusBadRequest, err.Error())
		return
	}
	if op, ok := opOf[r.Method]; ok && !h.allowed(w, r, op, path) {
		return
	}
	switch r.Method {
	case http.MethodPut:
		h.create(w, r, path)
	case http.MethodPost:
		h.append(w, r, path)
	case http.MethodGet:
		h.read(w, r, path)
	case http.MethodHead:
		h.head(w, r, path)
	case http.MethodDelete:
		h.delete(w, r, path)
	default:
		hd.Set("Allow", "GET, HEAD, POST, PUT, DELETE, OPTIONS")
		plain(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not part of the protocol")
	}
}

// StreamPath returns the stream path of a request URL: what follows
// Prefix, decoded once. An encoded slash (%2F) is refused: it would make
// two URLs name one stream.
func StreamPath(u *url.URL) (string, error) {
	raw := u.EscapedPath()
	if !strings.HasPrefix(raw, Prefix) {
		return "", fmt.Errorf("%w: streams are under %s", metadata.ErrInvalidStreamPath, Prefix)
	}
	raw = raw[len(Prefix):]
	if strings.Contains(strings.ToLower(raw), "%2f") {
		return "", fmt.Errorf("%w: an encoded / (%%2F) is not allowed in a stream path", metadata.ErrInvalidStreamPath)
	}
	p, err := url.PathUnescape(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", metadata.ErrInvalidStreamPath, err)
	}
	if err := metadata.CheckStreamPath(p); err != nil {
		return "", err
	}
	return p, nil
}

func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

// fail answers err: a Refusal with its status and headers, anything else
// 503 with Retry-After, since only the cluster's state can make a valid
// request fail.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	var ref *Refusal
	if !errors.As(err, &ref) {
		w.Header().Set("Retry-After", "1")
		plain(w, http.StatusServiceUnavailable, "the stream cannot be served right now, retry: "+err.Error())
		return
	}
	hd := w.Header()
	if ref.Closed {
		hd.Set(HeaderClosed, "true")
	}
	if ref.Tail != "" {
		hd.Set(HeaderNextOffset, ref.Tail)
	}
	if ref.ProducerEpoch != nil {
		hd.Set(HeaderProducerEpoch, strconv.FormatInt(*ref.ProducerEpoch, 10))
	}
	if ref.ExpectedSeq != nil {
		hd.Set(HeaderExpectedSeq, strconv.FormatInt(*ref.ExpectedSeq, 10))
	}
	if ref.ReceivedSeq != nil {
		hd.Set(HeaderReceivedSeq, strconv.FormatInt(*ref.ReceivedSeq, 10))
	}
	if ref.Status == http.StatusServiceUnavailable || ref.Status == http.StatusTooManyRequests {
		hd.Set("Retry-After", "1")
	}
	plain(w, ref.Status, ref.Message)
}

// readBody reads the request body, at most MaxBody bytes (413 above).
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.ContentLength > int64(h.limits.MaxBody) {
		plain(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body of %d bytes, more than the %d a request may carry", r.ContentLength, h.limits.MaxBody))
		return nil, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(h.limits.MaxBody)+1))
	if err != nil {
		plain(w, http.StatusBadRequest, "cannot read the body: "+err.Error())
		return nil, false
	}
	if len(body) > h.limits.MaxBody {
		plain(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("body of more than the %d bytes a request may carry", h.limits.MaxBody))
		return nil, false
	}
	return body, true
}

var (
	decimal   = regexp.MustCompile(`^(0|[1-9][0-9]*)$`)
	unsigned  = regexp.MustCompile(`^[0-9]+$`)
	mediaLike = regexp.MustCompile(`^[\w.+-]+/[\w.+-]+`)
)

// maxSafe is 2^53-1, the largest integer a JavaScript client holds.
const maxSafe = 1<<53 - 1

func (h *Handler) create(w http.ResponseWriter, r *http.Request, path string) {
	q := r.Header
	req := &CreateRequest{Path: path}
	ct := strings.TrimSpace(q.Get("Content-Type"))
	forked := strings.TrimSpace(q.Get(HeaderForkedFrom))
	if ct != "" && mediaLike.MatchString(ct) {
		req.Config.ContentType, req.ContentTypeGiven = ct, true
	} else if forked == "" {
		req.Config.ContentType = DefaultContentType
	}
	ttl, expires := q.Get(HeaderTTL), q.Get(HeaderExpiresAt)
	if ttl != "" && expires != "" {
		plain(w, http.StatusBadRequest, "Stream-TTL and Stream-Expires-At exclude each other")
		return
	}
	if ttl != "" {
		if !decimal.MatchString(ttl) {
			plain(w, http.StatusBadRequest, "Stream-TTL must be a decimal number of seconds without sign or leading zeros")
			return
		}
		v, err := strconv.ParseInt(ttl, 10, 64)
		if err != nil || v > maxSafe {
			plain(w, http.StatusBadRequest, "Stream-TTL is too large")
			return
		}
		req.Config.TTL = &v
	}
	if expires != "" {
		if _, err := time.Parse(time.RFC3339Nano, expires); err != nil {
			plain(w, http.StatusBadRequest, "Stream-Expires-At must be an RFC 3339 time: "+err.Error())
			return
		}
		req.Config.ExpiresAt = expires
	}
	req.Config.Closed = strings.EqualFold(q.Get(HeaderClosed), "true")
	if forked != "" {
		src := strings.TrimPrefix(forked, strings.TrimSuffix(Prefix, "/"))
		src = strings.TrimPrefix(src, "/")
		if u, err := url.Parse(Prefix + src); err == nil {
			if p, err := StreamPath(u); err == nil {
				src = p
			} else {
				plain(w, http.StatusBadRequest, "Stream-Forked-From: "+err.Error())
				return
			}
		}
		if err := metadata.CheckStreamPath(src); err != nil {
			plain(w, http.StatusBadRequest, "Stream-Forked-From: "+err.Error())
			return
		}
		if !h.allowed(w, r, "read", src) {
			return
		}
		req.Config.ForkedFrom = src
	}
	if off := q.Get(HeaderForkOffset); off != "" {
		if forked == "" {
			plain(w, http.StatusBadRequest, "Stream-Fork-Offset needs Stream-Forked-From")
			return
		}
		if _, kind, err := ParseOffset(off); err != nil || kind != AtToken {
			plain(w, http.StatusBadRequest, "Stream-Fork-Offset is not an offset of this server")
			return
		}
		req.Config.ForkOffset = off
	}
	if _, ok := q[http.CanonicalHeaderKey(HeaderForkSubOffset)]; ok {
		sub := q.Get(HeaderForkSubOffset)
		if forked == "" {
			plain(w, http.StatusBadRequest, "Stream-Fork-Sub-Offset needs Stream-Forked-From")
			return
		}
		if !decimal.MatchString(sub) {
			plain(w, http.StatusBadRequest, "Stream-Fork-Sub-Offset must be a non-negative decimal integer")
			return
		}
		v, err := strconv.ParseInt(sub, 10, 64)
		if err != nil || v > maxSafe {
			plain(w, http.StatusBadRequest, "Stream-Fork-Sub-Offset is too large")
			return
		}
		req.Config.ForkSubOffset = v
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	req.Body = body
	res, err := h.backend.Create(r.Context(), req)
	if err != nil {
		h.fail(w, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", res.Info.ContentType)
	hd.Set(HeaderNextOffset, res.Info.Tail)
	if res.Info.Closed {
		hd.Set(HeaderClosed, "true")
	}
	if res.Created {
		hd.Set("Location", locationOf(r))
		w.WriteHeader(http.StatusCreated)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// locationOf is the absolute URL of the request's stream.
func locationOf(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.EscapedPath()
}

func (h *Handler) append(w http.ResponseWriter, r *http.Request, path string) {
	q := r.Header
	req := &AppendRequest{Path: path, Close: strings.EqualFold(q.Get(HeaderClosed), "true")}
	_, hasID := q[http.CanonicalHeaderKey(HeaderProducerID)]
	_, hasEpoch := q[http.CanonicalHeaderKey(HeaderProducerEpoch)]
	_, hasSeq := q[http.CanonicalHeaderKey(HeaderProducerSeq)]
	if hasID || hasEpoch || hasSeq {
		if !hasID || !hasEpoch || !hasSeq {
			plain(w, http.StatusBadRequest, "Producer-Id, Producer-Epoch and Producer-Seq go together: all three or none")
			return
		}
		p := &Producer{ID: q.Get(HeaderProducerID)}
		if p.ID == "" {
			plain(w, http.StatusBadRequest, "Producer-Id must not be empty")
			return
		}
		var ok bool
		if p.Epoch, ok = safeInt(q.Get(HeaderProducerEpoch)); !ok {
			plain(w, http.StatusBadRequest, "Producer-Epoch must be a non-negative integer up to 2^53-1")
			return
		}
		if p.Seq, ok = safeInt(q.Get(HeaderProducerSeq)); !ok {
			plain(w, http.StatusBadRequest, "Producer-Seq must be a non-negative integer up to 2^53-1")
			return
		}
		req.Producer = p
	}
	if v, ok := q[http.CanonicalHeaderKey(HeaderSeq)]; ok {
		req.Seq, req.HasSeq = v[0], true
	}
	body, ok := h.readBody(w, r)
	if !ok {
		return
	}
	if len(body) == 0 && !req.Close {
		plain(w, http.StatusBadRequest, "an append needs a body (an empty one only with Stream-Closed: true)")
		return
	}
	if len(body) > 0 {
		req.ContentType = strings.TrimSpace(q.Get("Content-Type"))
		if req.ContentType == "" {
			plain(w, http.StatusBadRequest, "an append with a body needs a Content-Type")
			return
		}
	}
	req.Body = body
	res, err := h.backend.Append(r.Context(), req)
	if err != nil {
		h.fail(w, err)
		return
	}
	hd := w.Header()
	if res.Tail != "" {
		hd.Set(HeaderNextOffset, res.Tail)
	}
	if res.Closed {
		hd.Set(HeaderClosed, "true")
	}
	status := http.StatusNoContent
	if req.Producer != nil {
		hd.Set(HeaderProducerEpoch, strconv.FormatInt(req.Producer.Epoch, 10))
		hd.Set(HeaderProducerSeq, strconv.FormatInt(res.ProducerSeq, 10))
		if !res.Duplicate && len(body) > 0 {
			status = http.StatusOK
		}
	}
	w.WriteHeader(status)
}

func safeInt(s string) (int64, bool) {
	if !unsigned.MatchString(s) {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v <= maxSafe
}

func (h *Handler) head(w http.ResponseWriter, r *http.Request, path string) {
	info, err := h.backend.Head(r.Context(), path)
	if err != nil {
		h.fail(w, err)
		return
	}
	hd := w.Header()
	hd.Set(HeaderNextOffset, info.Tail)
	hd.Set("Cache-Control", "no-store")
	hd.Set("Content-Type", info.ContentType)
	if info.Closed {
		hd.Set(HeaderClosed, "true")
	}
	if info.TTL != nil {
		hd.Set(HeaderTTL, strconv.FormatInt(*info.TTL, 10))
	}
	if info.ExpiresAt != "" {
		hd.Set(HeaderExpiresAt, info.ExpiresAt)
	}
	hd.Set("ETag", etag(path, "-1", info.Tail, info.Closed))
	w.WriteHeader(http.StatusOK)
}

func (h *Handler) delete(w http.ResponseWriter, r *http.Request, path string) {
	if err := h.backend.Delete(r.Context(), path); err != nil {
		h.fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// etag names a response by the stream, the position read from, the
// position reached, and whether that is the closed end.
func etag(path, from, to string, closed bool) string {
	c := ""
	if closed {
		c = ":c"
	}
	return `"` + base64.RawURLEncoding.EncodeToString([]byte(path)) + ":" + from + ":" + to + c + `"`
}

// The cursor of live reads (Stream-Cursor): the number of 20-second
// intervals since an epoch, so that caches in front of the server collapse
// the long-polls of one interval; a client that echoes a cursor not older
// than the current interval is moved on by a random jump, so that it never
// gets the cached answer it already has.
var cursorEpoch = time.Date(2024, 10, 9, 0, 0, 0, 0, time.UTC)

const cursorInterval = 20 * time.Second

func responseCursor(client string) string {
	cur := int64(time.Since(cursorEpoch) / cursorInterval)
	c, err := strconv.ParseInt(client, 10, 64)
	if client == "" || err != nil || c < cur {
		return strconv.FormatInt(cur, 10)
	}
	jitter := int64(1 + rand.IntN(3600))
	steps := max(1, (jitter+int64(cursorInterval/time.Second)-1)/int64(cursorInterval/time.Second))
	return strconv.FormatInt(c+steps, 10)
}

// beginLive counts a live reader of the stream at path in, or refuses
// it above the limit.
func (h *Handler) beginLive(w http.ResponseWriter, path string) bool {
	h.mu.Lock()
	if h.limits.MaxLiveReaders > 0 && h.mu.live >= h.limits.MaxLiveReaders {
		h.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		plain(w, http.StatusServiceUnavailable, fmt.Sprintf("this node serves %d live readers, its limit", h.limits.MaxLiveReaders))
		return false
	}
	h.mu.live++
	if h.mu.readers == nil {
		h.mu.readers = map[string]int{}
	}
	h.mu.readers[path]++
	h.mu.Unlock()
	if h.obs != nil {
		h.obs.LiveReaders(1)
	}
	return true
}

// endLive counts out a live reader that beginLive counted in.
func (h *Handler) endLive(path string) {
	h.mu.Lock()
	h.mu.live--
	if h.mu.readers[path]--; h.mu.readers[path] == 0 {
		delete(h.mu.readers, path)
	}
	h.mu.Unlock()
	if h.obs != nil {
		h.obs.LiveReaders(-1)
	}
}

// LiveReaders returns the live reads (long-polls and SSE connections)
// open now on each stream path that has one: at most
// Limits.MaxLiveReaders paths when it is set. A long-poll counts from
// before its read, so a reader of a path that holds no stream counts
// until its 404 is answered.
func (h *Handler) LiveReaders() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.mu.readers)
}

func (h *Handler) read(w http.ResponseWriter, r *http.Request, path string) {
	query := r.URL.Query()
	offsets, given := query["offset"]
	offset := StartToken
	if given {
		if len(offsets) > 1 {
			plain(w, http.StatusBadRequest, "one offset parameter at most")
			return
		}
		if offsets[0] == "" {
			plain(w, http.StatusBadRequest, "the offset parameter is empty")
			return
		}
		if _, _, err := ParseOffset(offsets[0]); err != nil {
			plain(w, http.StatusBadRequest, err.Error())
			return
		}
		offset = offsets[0]
	}
	live := query.Get("live")
	switch live {
	case "", "long-poll", "sse":
	default:
		plain(w, http.StatusBadRequest, "live must be long-poll or sse")
		return
	}
	if live != "" && !given {
		plain(w, http.StatusBadRequest, "live reads need an offset parameter")
		return
	}
	cursor := query.Get("cursor")
	if live == "sse" {
		h.sse(w, r, path, offset, cursor)
		return
	}
	req := &ReadRequest{Path: path, Offset: offset, MaxBytes: h.limits.ReadChunk}
	ctx := r.Context()
	if live == "long-poll" {
		if !h.beginLive(w, path) {
			return
		}
		defer h.endLive(path)
		req.Wait = h.limits.LongPoll
		rc := http.NewResponseController(w)
		rc.SetWriteDeadline(time.Now().Add(h.limits.LongPoll + 30*time.Second))
		var done func()
		ctx, done = h.watched(r)
		defer done()
	}
	res, err := h.backend.Read(ctx, req)
	if cut(ctx, w, r) {
		return // what it read, it read for a credential that no longer stands
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", res.Info.ContentType)
	hd.Set(HeaderNextOffset, res.Next)
	if res.UpToDate {
		hd.Set(HeaderUpToDate, "true")
	}
	if res.Closed {
		hd.Set(HeaderClosed, "true")
	}
	if live == "long-poll" {
		hd.Set(HeaderCursor, responseCursor(cursor))
		if len(res.Messages) == 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	if offset == NowToken || live == "long-poll" || res.UpToDate {
		// The tail moves: a cache must not keep this answer.
		hd.Set("Cache-Control", "no-store")
	} else {
		// Data below the tail never changes.
		hd.Set("Cache-Control", "public, max-age=60, stale-while-revalidate=300")
	}
	tag := etag(path, offset, res.Next, res.Closed)
	hd.Set("ETag", tag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := formatBody(res.Info.ContentType, res.Messages)
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// formatBody is a read's body: the data concatenated, or in JSON mode one
// array of every message's values.
func formatBody(ct string, msgs []Message) []byte {
	if !IsJSON(ct) {
		n := 0
		for _, m := range msgs {
			n += len(m.Data)
		}
		out := make([]byte, 0, n)
		for _, m := range msgs {
			out = append(out, m.Data...)
		}
		return out
	}
	out := []byte{'['}
	for i, m := range msgs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m.Data...)
	}
	return append(out, ']')
}

// sse serves live=sse: a data event per message, each followed by a
// control event with the offset after it, then waits (long-polls of the
// backend) and goes on, until the stream is closed at its tail, the
// client goes, the reconnect interval ends the connection, or the
// request's credential stops standing (SetWatch).
func (h *Handler) sse(w http.ResponseWriter, r *http.Request, path, offset, cursor string) {
	ctx, done := h.watched(r)
	defer done()
	// The first read says whether the stream exists, before any header.
	first, err := h.backend.Read(ctx, &ReadRequest{Path: path, Offset: offset, MaxBytes: h.limits.ReadChunk})
	if cut(ctx, w, r) {
		return
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	if !h.beginLive(w, path) {
		return
	}
	defer h.endLive(path)
	ct := first.Info.ContentType
	b64 := !IsText(ct)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Connection", "keep-alive")
	if b64 {
		hd.Set(HeaderSSEEncoding, "base64")
	}
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(h.limits.SSEReconnect)
	rc.SetWriteDeadline(deadline.Add(h.limits.LongPoll + 30*time.Second))
	w.WriteHeader(http.StatusOK)
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(h.limits.LongPoll+5*time.Second))
	defer cancel()
	res := first
	for {
		var buf []byte
		for _, m := range res.Messages {
			buf = append(buf, "event: data\n"...)
			buf = appendSSEData(buf, eventPayload(ct, b64, m.Data))
			buf = append(buf, "event: control\n"...)
			buf = appendSSEData(buf, control(m.Next, res.Closed && m.Next == res.Next, res.UpToDate && m.Next == res.Next, cursor))
		}
		if len(res.Messages) == 0 {
			buf = append(buf, "event: control\n"...)
			buf = appendSSEData(buf, control(res.Next, res.Closed, res.UpToDate, cursor))
		}
		if _, err := w.Write(buf); err != nil {
			return
		}
		if rc.Flush() != nil || res.Closed || time.Now().After(deadline) {
			return
		}
		req := &ReadRequest{Path: path, Offset: res.Next, MaxBytes: h.limits.ReadChunk}
		if res.UpToDate {
			req.Wait = min(h.limits.LongPoll, time.Until(deadline))
		}
		res, err = h.backend.Read(ctx, req)
		if err != nil || ctx.Err() != nil {
			// The client resumes from the last control event's offset
			// (refused, if the watch ended the stream).
			return
		}
	}
}

func eventPayload(ct string, b64 bool, data []byte) string {
	switch {
	case b64:
		return base64.StdEncoding.EncodeToString(data)
	case IsJSON(ct):
		return "[" + string(data) + "]"
	default:
		return string(data)
	}
}

func control(next string, closed, upToDate bool, cursor string) string {
	m := map[string]any{"streamNextOffset": next}
	if closed {
		m["streamClosed"] = true
	} else {
		m["streamCursor"] = responseCursor(cursor)
		if upToDate {
			m["upToDate"] = true
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// appendSSEData appends payload as data lines and the blank line that
// ends the event. Every line terminator of the payload (CR, LF, CRLF)
// starts a new data line, so no payload can end an event or start one.
func appendSSEData(buf []byte, payload string) []byte {
	for {
		i := strings.IndexAny(payload, "\r\n")
		buf = append(buf, "data:"...)
		if i < 0 {
			buf = append(buf, payload...)
			break
		}
		buf = append(buf, payload[:i]...)
		buf = append(buf, '\n')
		if payload[i] == '\r' && i+1 < len(payload) && payload[i+1] == '\n' {
			i++
		}
		payload = payload[i+1:]
	}
	return append(buf, "\n\n"...)
}

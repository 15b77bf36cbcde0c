// Command dsbench measures a Durable Streams server over HTTP, the same
// way whichever server it is: gostream's nodes or the reference server.
// scripts/bench-ds.sh runs it against both in one run and compares them.
//
//	dsbench -base URL [-stream PATH] [-json] [flags] append|sse
//	dsbench -base URL -stream PATH -create-only append|sse
//
// URL is the servers' stream root, such as http://127.0.0.1:9712/v1/stream.
// Each run creates a fresh stream (PUT) at PATH, by default a unique name;
// a PATH created before with the same content type is used as it is (PUT
// is idempotent), which is how scripts/bench-ds.sh picks the node to go
// through once it knows the stream's leader. -create-only does that PUT
// alone.
//
//   - append: -clients clients, each with its own http.Client and so its own
//     connection, POST bodies of -size bytes (application/octet-stream) in
//     a loop, for -duration or until -count appends in all. It reports
//     appends/s, MB/s (10^6 bytes of bodies) and the p50/p99 of one POST.
//   - sse: one reader on GET ?offset=now&live=sse (a text/plain stream, so
//     the data is not base64), then -count appends, one at a time, each
//     sent once the one before was delivered on the SSE connection and
//     -gap has passed. It reports p50, p99 and max from the start of an
//     append's POST to its delivery as an SSE data event, and the p50 of
//     the POST itself. A connection the server ends (its reconnect
//     interval) is opened again from the last control event's offset.
//
// Any answer other than 2xx, a transport error, or a message not delivered
// within -timeout fails the run: the error is printed and the exit status
// is 2 (1 for bad usage). The result is one human line on stdout or, with
// -json, one JSON object on stdout and the human line on stderr.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	base     string
	stream   string
	clients  int
	size     int
	duration time.Duration
	count    int
	gap      time.Duration
	timeout  time.Duration
}

// appendResult is what append prints with -json.
type appendResult struct {
	Mode          string  `json:"mode"`
	URL           string  `json:"url"`
	Clients       int     `json:"clients"`
	Size          int     `json:"size"`
	Appends       int     `json:"appends"`
	Seconds       float64 `json:"seconds"`
	AppendsPerSec float64 `json:"appends_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"`
	P50Ms         float64 `json:"p50_ms"`
	P99Ms         float64 `json:"p99_ms"`
}

// sseResult is what sse prints with -json.
type sseResult struct {
	Mode        string  `json:"mode"`
	URL         string  `json:"url"`
	Messages    int     `json:"messages"`
	GapMs       float64 `json:"gap_ms"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	AppendP50Ms float64 `json:"append_p50_ms"`
	AppendP99Ms float64 `json:"append_p99_ms"`
	Connections int     `json:"connections"`
	Redelivered int     `json:"redelivered"`
}

func main() {
	var cfg config
	asJSON := flag.Bool("json", false, "print one JSON object (the human line goes to stderr)")
	createOnly := flag.Bool("create-only", false, "only create the stream the mode uses (PUT) and exit")
	flag.StringVar(&cfg.base, "base", "", "the servers' stream root URL, such as http://127.0.0.1:9712/v1/stream (required)")
	flag.StringVar(&cfg.stream, "stream", "", "path of the stream to create under -base (default a unique dsbench/... name)")
	flag.IntVar(&cfg.clients, "clients", 16, "append: concurrent clients, one connection each")
	flag.IntVar(&cfg.size, "size", 1024, "append: bytes per POST body")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "append: how long to append (unless -count)")
	flag.IntVar(&cfg.count, "count", 0, "append: appends in all, instead of -duration; sse: messages (default 500)")
	flag.DurationVar(&cfg.gap, "gap", 5*time.Millisecond, "sse: pause after a delivery before the next append")
	flag.DurationVar(&cfg.timeout, "timeout", 10*time.Second, "longest wait for one request or one SSE delivery")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: dsbench -base URL [-stream PATH] [-json | -create-only] [flags] append|sse")
		flag.PrintDefaults()
	}
	flag.Parse()
	mode := flag.Arg(0)
	if cfg.base == "" || flag.NArg() != 1 || (mode != "append" && mode != "sse") ||
		cfg.clients < 1 || cfg.size < 1 || cfg.count < 0 || cfg.duration <= 0 || cfg.timeout <= 0 {
		flag.Usage()
		os.Exit(1)
	}
	cfg.base = strings.TrimRight(cfg.base, "/")
	if cfg.stream == "" {
		cfg.stream = fmt.Sprintf("dsbench/%s-%d-%d", mode, time.Now().UnixNano(), os.Getpid())
	}

	ctx := context.Background()
	if *createOnly {
		if err := create(ctx, newClient(cfg.timeout), streamURL(cfg.base, cfg.stream), contentTypes[mode]); err != nil {
			fmt.Fprintf(os.Stderr, "dsbench: %s: %v\n", mode, err)
			os.Exit(2)
		}
		return
	}
	var (
		out   any
		human string
		err   error
	)
	switch mode {
	case "append":
		var r appendResult
		r, err = runAppend(ctx, cfg)
		out = r
		human = fmt.Sprintf("append %s: %d clients x %d B: %d appends in %.2f s, %.0f appends/s, %.2f MB/s, POST p50 %.3f ms, p99 %.3f ms",
			r.URL, r.Clients, r.Size, r.Appends, r.Seconds, r.AppendsPerSec, r.MBPerSec, r.P50Ms, r.P99Ms)
	case "sse":
		if cfg.count == 0 {
			cfg.count = 500
		}
		var r sseResult
		r, err = runSSE(ctx, cfg)
		out = r
		human = fmt.Sprintf("sse %s: %d messages, gap %s: append to SSE delivery p50 %.3f ms, p99 %.3f ms, max %.3f ms (POST p50 %.3f ms); %d connection(s), %d redelivered",
			r.URL, r.Messages, cfg.gap, r.P50Ms, r.P99Ms, r.MaxMs, r.AppendP50Ms, r.Connections, r.Redelivered)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dsbench: %s: %v\n", mode, err)
		os.Exit(2)
	}
	if !*asJSON {
		fmt.Println(human)
		return
	}
	fmt.Fprintln(os.Stderr, human)
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "dsbench:", err)
		os.Exit(2)
	}
}

// streamURL is the URL of the stream at path under base, each segment
// escaped.
func streamURL(base, path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return base + "/" + strings.Join(segs, "/")
}

// newClient is an HTTP client of one connection, with no proxy (the
// servers are local) and no transparent gzip (the bytes are the server's).
func newClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConnsPerHost: 1,
			MaxConnsPerHost:     1,
			DisableCompression:  true,
			IdleConnTimeout:     time.Minute,
		},
	}
}

// do sends one request and reads its answer whole; an answer other than
// 2xx is an error that carries the status and the start of the body.
func do(ctx context.Context, cl *http.Client, method, u, contentType string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, u, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %q", method, u, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// contentTypes are the content types of each mode's stream: binary for
// append; text for sse, whose data events then carry the bodies as they
// are, not in base64.
var contentTypes = map[string]string{"append": "application/octet-stream", "sse": "text/plain"}

func create(ctx context.Context, cl *http.Client, u, contentType string) error {
	return do(ctx, cl, http.MethodPut, u, contentType, nil)
}

// runAppend is the append measurement.
func runAppend(ctx context.Context, cfg config) (appendResult, error) {
	u := streamURL(cfg.base, cfg.stream)
	ct := contentTypes["append"]
	if err := create(ctx, newClient(cfg.timeout), u, ct); err != nil {
		return appendResult{}, err
	}
	body := make([]byte, cfg.size)
	for i := range body {
		body[i] = byte('a' + i%26)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		claimed  atomic.Int64 // appends begun, with -count
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	lats := make([][]time.Duration, cfg.clients)
	start := time.Now()
	deadline := start.Add(cfg.duration)
	for c := range cfg.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := newClient(cfg.timeout)
			defer cl.CloseIdleConnections()
			for ctx.Err() == nil {
				if cfg.count > 0 {
					if claimed.Add(1) > int64(cfg.count) {
						return
					}
				} else if !time.Now().Before(deadline) {
					return
				}
				t0 := time.Now()
				if err := do(ctx, cl, http.MethodPost, u, ct, body); err != nil {
					if ctx.Err() == nil {
						errOnce.Do(func() { firstErr = fmt.Errorf("client %d: %w", c, err); cancel() })
					}
					return
				}
				lats[c] = append(lats[c], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return appendResult{}, firstErr
	}
	all := slices.Concat(lats...)
	if len(all) == 0 {
		return appendResult{}, errors.New("no append completed")
	}
	slices.Sort(all)
	secs := elapsed.Seconds()
	return appendResult{
		Mode: "append", URL: u, Clients: cfg.clients, Size: cfg.size,
		Appends: len(all), Seconds: secs,
		AppendsPerSec: float64(len(all)) / secs,
		MBPerSec:      float64(len(all)*cfg.size) / secs / 1e6,
		P50Ms:         ms(quantile(all, 50)), P99Ms: ms(quantile(all, 99)),
	}, nil
}

// runSSE is the sse measurement.
func runSSE(ctx context.Context, cfg config) (sseResult, error) {
	u := streamURL(cfg.base, cfg.stream)
	ct := contentTypes["sse"]
	post := newClient(cfg.timeout)
	if err := create(ctx, post, u, ct); err != nil {
		return sseResult{}, err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rd := &sseReader{url: u, delivered: make(chan delivery, cfg.count+16), ready: make(chan struct{})}
	readerDone := make(chan error, 1)
	go func() { readerDone <- rd.run(ctx) }()
	select {
	case <-rd.ready:
	case err := <-readerDone:
		return sseResult{}, fmt.Errorf("SSE reader: %w", err)
	case <-time.After(cfg.timeout):
		return sseResult{}, fmt.Errorf("GET %s?offset=now&live=sse: no control event within %s", u, cfg.timeout)
	}

	sent := make([]time.Time, cfg.count) // append start of message i
	lat := make([]time.Duration, 0, cfg.count)
	postLat := make([]time.Duration, 0, cfg.count)
	redelivered := 0
	for i := range cfg.count {
		sent[i] = time.Now()
		if err := do(ctx, post, http.MethodPost, u, ct, []byte(strconv.Itoa(i)+";")); err != nil {
			return sseResult{}, fmt.Errorf("message %d: %w", i, err)
		}
		postLat = append(postLat, time.Since(sent[i]))
		wait := time.NewTimer(cfg.timeout)
	await:
		for {
			select {
			case d := <-rd.delivered:
				switch {
				case d.seq == i:
					lat = append(lat, d.at.Sub(sent[i]))
					break await
				case d.seq < i:
					redelivered++ // a resumed connection may send again what preceded its offset
				default:
					wait.Stop()
					return sseResult{}, fmt.Errorf("message %d delivered while waiting for message %d", d.seq, i)
				}
			case err := <-readerDone:
				wait.Stop()
				return sseResult{}, fmt.Errorf("SSE reader, waiting for message %d: %w", i, err)
			case <-wait.C:
				return sseResult{}, fmt.Errorf("message %d not delivered on SSE within %s", i, cfg.timeout)
			}
		}
		wait.Stop()
		time.Sleep(cfg.gap)
	}
	cancel()
	<-readerDone
	sorted := slices.Clone(lat)
	slices.Sort(sorted)
	slices.Sort(postLat)
	return sseResult{
		Mode: "sse", URL: u, Messages: cfg.count, GapMs: ms(cfg.gap),
		P50Ms: ms(quantile(sorted, 50)), P99Ms: ms(quantile(sorted, 99)), MaxMs: ms(sorted[len(sorted)-1]),
		AppendP50Ms: ms(quantile(postLat, 50)), AppendP99Ms: ms(quantile(postLat, 99)),
		Connections: int(rd.connections.Load()), Redelivered: redelivered,
	}, nil
}

// delivery is one message seen in an SSE data event, and when.
type delivery struct {
	seq int
	at  time.Time
}

// sseReader follows a stream over SSE, from offset now, resuming from the
// last control event's offset whenever the server ends the connection.
type sseReader struct {
	url         string
	delivered   chan delivery
	ready       chan struct{} // closed at the first control event
	connections atomic.Int32
}

// run reads until ctx is done (then it returns nil) or a connection fails
// otherwise than by being ended by the server.
func (r *sseReader) run(ctx context.Context) error {
	// No timeout: the connection lives as long as the server keeps it.
	cl := &http.Client{Transport: &http.Transport{Proxy: nil, DisableCompression: true}}
	defer cl.CloseIdleConnections()
	offset := "now"
	readyClosed := false
	for {
		r.connections.Add(1)
		next, closed, err := r.follow(ctx, cl, offset, &readyClosed)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if closed {
			return errors.New("stream closed")
		}
		if next == "" {
			return fmt.Errorf("GET %s?offset=%s&live=sse: connection ended before any control event", r.url, offset)
		}
		offset = next
	}
}

// follow reads one SSE connection from offset until the server ends it.
// It returns the last control event's streamNextOffset ("" if none came)
// and whether that event said the stream is closed.
func (r *sseReader) follow(ctx context.Context, cl *http.Client, offset string, readyClosed *bool) (next string, closed bool, err error) {
	u := r.url + "?offset=" + url.QueryEscape(offset) + "&live=sse"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := cl.Do(req)
	if err != nil {
		return "", false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return "", false, fmt.Errorf("GET %s: %s: %q", u, resp.Status, strings.TrimSpace(string(b)))
	}
	if enc := resp.Header.Get("Stream-SSE-Data-Encoding"); enc != "" {
		return "", false, fmt.Errorf("GET %s: Stream-SSE-Data-Encoding %q on a text/plain stream", u, enc)
	}
	sc := bufio.NewScanner(resp.Body) // ScanLines drops a \r before the \n too
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	event, data := "", []string(nil)
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				data = append(data, value)
			}
			continue
		}
		// A blank line dispatches the event.
		at := time.Now()
		payload := strings.Join(data, "\n")
		switch event {
		case "data":
			if err := r.deliver(payload, at); err != nil {
				return next, false, fmt.Errorf("GET %s: %w", u, err)
			}
		case "control":
			var c struct {
				StreamNextOffset string `json:"streamNextOffset"`
				StreamClosed     bool   `json:"streamClosed"`
			}
			if err := json.Unmarshal([]byte(payload), &c); err != nil || c.StreamNextOffset == "" {
				return next, false, fmt.Errorf("GET %s: control event %q without streamNextOffset", u, payload)
			}
			next, closed = c.StreamNextOffset, c.StreamClosed
			if !*readyClosed {
				close(r.ready)
				*readyClosed = true
			}
			if closed {
				return next, true, nil
			}
		}
		event, data = "", nil
	}
	// The connection ended, cleanly or not: the caller resumes from next,
	// and a server that is gone fails the new GET.
	return next, false, nil
}

// deliver hands on every message of one data event: the messages' bodies,
// "<seq>;" each, concatenated.
func (r *sseReader) deliver(payload string, at time.Time) error {
	for _, part := range strings.Split(payload, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		seq, err := strconv.Atoi(part)
		if err != nil {
			return fmt.Errorf("data event %q is not this benchmark's", payload)
		}
		select {
		case r.delivered <- delivery{seq: seq, at: at}:
		default:
			return errors.New("more deliveries than messages sent")
		}
	}
	return nil
}

// quantile is the q-th percentile of sorted, the nearest rank below.
func quantile(sorted []time.Duration, q int) time.Duration {
	return sorted[(len(sorted)*q-1)/100]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

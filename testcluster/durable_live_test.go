package testcluster

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/durable"
)

// liveReader is one Durable Streams SSE reader: it records the data
// events it receives.
type liveReader struct {
	mu   sync.Mutex
	seen map[string]time.Time // data payload -> when it arrived
	up   bool                 // the first control event arrived
	err  error
}

func (r *liveReader) has(data string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.seen[data]
	return at, ok
}

func (r *liveReader) connected() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.up
}

// openLiveReader starts a reader of path's live tail on node n, until ctx
// ends.
func openLiveReader(ctx context.Context, client *http.Client, n *Node, path string) *liveReader {
	r := &liveReader{seen: map[string]time.Time{}}
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.HTTP+durable.Prefix+path+"?offset=now&live=sse", nil)
		if err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			r.mu.Lock()
			r.err = err
			r.mu.Unlock()
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "data:"):
				r.mu.Lock()
				if event == "data" {
					r.seen[strings.TrimPrefix(line, "data:")] = time.Now()
				}
				r.up = true
				r.mu.Unlock()
			}
		}
		r.mu.Lock()
		if r.err == nil {
			r.err = fmt.Errorf("stream ended: status %d, %v", resp.StatusCode, sc.Err())
		}
		r.mu.Unlock()
	}()
	return r
}

// readersState counts the readers connected, and the errors of those
// that ended.
func readersState(rs []*liveReader) string {
	up := 0
	errs := map[string]int{}
	for _, r := range rs {
		r.mu.Lock()
		if r.up {
			up++
		}
		if r.err != nil {
			errs[r.err.Error()]++
		}
		r.mu.Unlock()
	}
	return fmt.Sprintf("%d of %d connected; ended: %v", up, len(rs), errs)
}

// openStalledReader opens a live read of path on node n that never reads
// what it is sent; it is closed when ctx ends.
func openStalledReader(ctx context.Context, t *testing.T, n *Node, path string) {
	t.Helper()
	conn, err := net.Dial("tcp", n.HTTP)
	require.NoError(t, err)
	_, err = fmt.Fprintf(conn, "GET %s%s?offset=-1&live=sse HTTP/1.1\r\nHost: %s\r\n\r\n", durable.Prefix, path, n.HTTP)
	require.NoError(t, err)
	go func() {
		<-ctx.Done()
		conn.Close()
	}()
}

// checkLiveReaders opens readers live readers of one stream on each node
// of via, and stalled ones that never read on the first, then appends
// records, each through another node in turn: every reader must see
// every record appended after it connected within a second of its
// acknowledgement, and each node's memory must stay bounded.
func checkLiveReaders(t *testing.T, c *Cluster, path string, via []*Node, readers, stalled int) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: readers}}
	rss := map[int32]int64{}
	for _, n := range c.Nodes {
		m, err := n.RSS()
		require.NoError(t, err)
		rss[n.ID] = m
	}
	var rs []*liveReader
	for _, n := range via {
		for range readers {
			rs = append(rs, openLiveReader(ctx, client, n, path))
		}
	}
	for range stalled {
		openStalledReader(ctx, t, via[0], path)
	}
	require.Eventually(t, func() bool {
		for _, r := range rs {
			if !r.connected() {
				return false
			}
		}
		return true
	}, time.Minute, 50*time.Millisecond, "every reader connected: %s", readersState(rs))
	for _, n := range via {
		// However many readers wait on a node, it follows the stream's
		// tail with one read from the leader.
		require.Eventually(t, func() bool { return metric(t, n, "gostream_ds_tails") == 1 }, 10*time.Second, 20*time.Millisecond,
			"node %d follows the stream with one subscription for its %d readers (gostream_ds_tails %v)", n.ID, readers, metric(t, n, "gostream_ds_tails"))
	}

	for i := range 6 {
		msg := fmt.Sprintf("after-%d", i)
		through := c.Nodes[i%len(c.Nodes)]
		r := dsDo(t, through, http.MethodPost, path, msg, "Content-Type", "text/plain")
		require.Equal(t, http.StatusNoContent, r.Status, "append through node %d: %s", through.ID, r.Body)
		acked := time.Now()
		deadline := acked.Add(10 * time.Second)
		for _, r := range rs {
			for {
				if _, ok := r.has(msg); ok {
					break
				}
				r.mu.Lock()
				err := r.err
				r.mu.Unlock()
				require.NoError(t, err, "a reader ended before %q arrived", msg)
				require.True(t, time.Now().Before(deadline), "a reader has not seen %q %s after its acknowledgement", msg, time.Since(acked))
				time.Sleep(5 * time.Millisecond) // poll the reader's state
			}
		}
		var last time.Duration
		for _, r := range rs {
			at, _ := r.has(msg)
			last = max(last, at.Sub(acked))
		}
		t.Logf("%q through node %d: all %d readers had it %s after its acknowledgement", msg, through.ID, len(rs), last.Round(time.Millisecond))
		assert.LessOrEqual(t, last, time.Second, "every reader within a second of the acknowledgement")
	}
	for _, n := range c.Nodes {
		m, err := n.RSS()
		require.NoError(t, err)
		t.Logf("node %d: RSS %d MiB before the readers, %d MiB with them", n.ID, rss[n.ID]>>20, m>>20)
		assert.Less(t, m-rss[n.ID], int64(256<<20), "node %d's memory grew by %d MiB with the readers", n.ID, (m-rss[n.ID])>>20)
	}
}

// TestLiveReadersThroughANodeThatDoesNotLead: 300 Durable Streams SSE
// readers, and 50 that never read, on a node that does not lead the
// stream. Each must see each record appended after it connected, within
// a second, whichever node takes the append; the node's memory stays
// bounded. Before, the node forwarded every reader's long-poll to the
// leader on one connection: the connection was presumed dead, a POST
// through the node got 503, and no reader saw another record.
func TestLiveReadersThroughANodeThatDoesNotLead(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3})
	const path = "live/many"
	require.Equal(t, http.StatusCreated, dsDo(t, c.Node(1), http.MethodPut, path, "", "Content-Type", "text/plain").Status)
	leader := streamLeader(t, c, path)
	via := c.Node(leader%3 + 1)
	t.Logf("the stream is led by node %d; the readers are on node %d", leader, via.ID)
	checkLiveReaders(t, c, path, []*Node{via}, 300, 50)
}

// TestLiveReadersSpreadOverTheNodes: 1,000 SSE readers of one stream,
// spread over the three nodes.
func TestLiveReadersSpreadOverTheNodes(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3})
	const path = "live/spread"
	require.Equal(t, http.StatusCreated, dsDo(t, c.Node(1), http.MethodPut, path, "", "Content-Type", "text/plain").Status)
	checkLiveReaders(t, c, path, c.Nodes, 334, 0)
}

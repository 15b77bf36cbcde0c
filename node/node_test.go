package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/httpapi"
	"gostream/internal/testaddr"
	"gostream/node"
	"gostream/storage"
)

// testLogger routes logs to t.Log, so they show only when a test fails.
func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:   "node-test",
		Level:  hclog.Debug,
		Output: writerFunc(func(p []byte) (int, error) { t.Log(strings.TrimRight(string(p), "\n")); return len(p), nil }),
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func testConfig(t *testing.T, id int32, dir string) node.Config {
	return node.Config{
		ID:      id,
		DataDir: dir,
		Listen:  testaddr.For(t),
		Gossip:  testaddr.For(t),
		HTTP:    testaddr.For(t),
		Logger:  testLogger(t),
	}
}

// runningNode is a node.Run running in a goroutine the test owns.
type runningNode struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Run has returned
	err    error         // Run's result, set before done is closed
}

// startNode runs node.Run in a goroutine; Cleanup stops it.
func startNode(t *testing.T, cfg node.Config) *runningNode {
	ctx, cancel := context.WithCancel(context.Background())
	n := &runningNode{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		n.err = node.Run(ctx, cfg)
	}()
	t.Cleanup(func() { n.stop(t) })
	return n
}

// stop cancels the node's context and returns Run's result. It may be
// called more than once.
func (n *runningNode) stop(t *testing.T) error {
	n.cancel()
	select {
	case <-n.done:
		return n.err
	case <-time.After(node.ShutdownTimeout + 5*time.Second):
		t.Fatal("node.Run did not return after cancel")
		return nil
	}
}

// waitHealthy waits for the node's health to answer 200. Its deadline is
// generous: a node's start (a Raft election, the replay of its logs) under
// the race detector, beside the rest of the suite, on two shared cores can
// take several seconds; the failure says what health last answered.
func waitHealthy(t *testing.T, addr string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		code, h, err := getHealth(addr)
		if err == nil && code == http.StatusOK {
			return
		}
		last = fmt.Sprintf("status %d, %+v, error %v", code, h, err)
	}
	t.Fatalf("health never answered 200 on %s within 30s; last: %s", addr, last)
}

func getHealth(addr string) (int, httpapi.Health, error) {
	client := &http.Client{Timeout: time.Second}
	resp, err := client.Get("http://" + addr + httpapi.HealthPath)
	if err != nil {
		return 0, httpapi.Health{}, err
	}
	defer resp.Body.Close()
	var h httpapi.Health
	err = json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h, err
}

func TestRunServesHealthUntilCanceled(t *testing.T) {
	cfg := testConfig(t, 3, t.TempDir())
	n := startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)
	code, h, err := getHealth(cfg.HTTP)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, httpapi.Health{Status: "ok", Node: 3}, h)

	assert.NoError(t, n.stop(t), "a clean stop returns nil")
	// The HTTP port is released: nothing answers and we can bind it.
	_, _, err = getHealth(cfg.HTTP)
	assert.Error(t, err)
	ln, err := net.Listen("tcp", cfg.HTTP)
	require.NoError(t, err, "the node left its HTTP port bound")
	ln.Close()
}

func TestRunStampsTheRootAndRefusesAnotherBrokers(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, 1, dir)
	n := startNode(t, cfg)
	waitHealthy(t, cfg.HTTP)
	require.NoError(t, n.stop(t))

	other := testConfig(t, 2, dir)
	err := node.Run(context.Background(), other)
	require.Error(t, err)
	assert.ErrorIs(t, err, storage.ErrStampMismatch)
	assert.Contains(t, err.Error(), "broker 1")

	// It refused before serving anything.
	ln, lerr := net.Listen("tcp", other.HTTP)
	require.NoError(t, lerr, "a node that refused to start left its HTTP port bound")
	ln.Close()

	// The root still belongs to broker 1.
	root, err := storage.OpenRoot(dir, 1, "", testLogger(t))
	require.NoError(t, err)
	assert.Equal(t, int32(1), root.Stamp().BrokerID)
	require.NoError(t, root.Close())
}

func TestRunCannotListen(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { busy.Close() })

	cfg := testConfig(t, 1, t.TempDir())
	cfg.HTTP = busy.Addr().String()
	err = node.Run(context.Background(), cfg)
	require.Error(t, err)
	assert.ErrorIs(t, err, node.ErrCannotListen)
	assert.Contains(t, err.Error(), cfg.HTTP)
}

func TestRunRejectsInvalidConfig(t *testing.T) {
	err := node.Run(context.Background(), node.Config{ID: 0, DataDir: t.TempDir()})
	assert.ErrorIs(t, err, node.ErrInvalidConfig)
}

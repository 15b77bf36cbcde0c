package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/internal/testaddr"
)

// testVersion is stamped into the binary under test.
const testVersion = "v0.0.0-test"

// nodeBin is the gostream-node binary TestMain builds once for all tests.
var nodeBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gostream-node-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	nodeBin = filepath.Join(dir, "gostream-node")
	args := []string{"build", "-o", nodeBin, "-ldflags", "-X main.version=" + testVersion}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build gostream-node: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// syncBuffer is a bytes.Buffer that a process's output copier and the test
// may use at the same time.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// logWriter sends what a process writes to t.Log, so it shows only when the
// test fails.
type logWriter struct {
	t      *testing.T
	prefix string
}

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s%s", w.prefix, strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// process is one gostream-node process owned by a test.
type process struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{} // closed once the process has exited and its output is copied
}

// startNode starts gostream-node with args and, on top of an environment
// without any GOSTREAM_ variable, env. Cleanup kills it if it still runs.
func startNode(t *testing.T, env []string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(nodeBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOSTREAM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, raceEnv()...)
	cmd.Env = append(cmd.Env, env...)
	p := &process{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout = io.MultiWriter(p.stdout, logWriter{t, "node stdout: "})
	cmd.Stderr = io.MultiWriter(p.stderr, logWriter{t, "node stderr: "})
	t.Logf("start: %s %s", strings.Join(env, " "), strings.Join(args, " "))
	require.NoError(t, cmd.Start())
	go func() {
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its exit status.
func (p *process) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(30 * time.Second):
		t.Fatalf("gostream-node did not exit; stderr:\n%s", p.stderr)
		return -1
	}
}

// stop sends sig and returns the exit status.
func (p *process) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	return p.wait(t)
}

// runNode runs gostream-node to completion.
func runNode(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	p := startNode(t, env, args...)
	code = p.wait(t)
	return code, p.stdout.String(), p.stderr.String()
}

// addrs are the addresses of one test node, all on free loopback ports.
type addrs struct{ listen, gossip, http string }

func freeAddrs(t *testing.T) addrs {
	return addrs{listen: testaddr.For(t), gossip: testaddr.For(t), http: testaddr.For(t)}
}

func (a addrs) flags() []string {
	return []string{"--listen", a.listen, "--gossip", a.gossip, "--http", a.http}
}

type health struct {
	Status string `json:"status"`
	Node   int32  `json:"node"`
}

var httpClient = &http.Client{Timeout: 2 * time.Second}

func getHealth(addr string) (int, health, error) {
	resp, err := httpClient.Get("http://" + addr + "/api/health")
	if err != nil {
		return 0, health{}, err
	}
	defer resp.Body.Close()
	var h health
	err = json.NewDecoder(resp.Body).Decode(&h)
	return resp.StatusCode, h, err
}

// waitHealthy polls GET /api/health until it answers 200 and returns the
// answer. It fails the test if the node exits first.
func waitHealthy(t *testing.T, p *process, addr string) health {
	t.Helper()
	require.Eventually(t, func() bool {
		if p.exited() {
			return true
		}
		code, _, err := getHealth(addr)
		return err == nil && code == http.StatusOK
	}, 20*time.Second, 20*time.Millisecond, "GET /api/health on %s never answered 200", addr)
	require.False(t, p.exited(), "gostream-node exited before it served; stderr:\n%s", p.stderr)
	code, h, err := getHealth(addr)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	return h
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestVersion(t *testing.T) {
	for _, flag := range []string{"--version", "-v"} {
		t.Run(flag, func(t *testing.T) {
			code, stdout, stderr := runNode(t, nil, flag)
			assert.Equal(t, 0, code)
			assert.Equal(t, "gostream-node version "+testVersion+"\n", stdout)
			assert.Empty(t, stderr)
		})
	}
}

// TestHelpListsEveryFlag checks the --help output against the gostream-node
// table of docs/cli.md: every flag, its environment twin, and its default.
func TestHelpListsEveryFlag(t *testing.T) {
	code, stdout, _ := runNode(t, nil, "--help")
	require.Equal(t, 0, code)
	for _, f := range []struct{ flag, env, def string }{
		{"--id N", "$GOSTREAM_ID", "required"},
		{"--data-dir PATH", "$GOSTREAM_DATA_DIR", "required"},
		{"--listen HOST:PORT", "$GOSTREAM_LISTEN", `"127.0.0.1:9400"`},
		{"--advertise HOST:PORT", "$GOSTREAM_ADVERTISE", "--listen"},
		{"--kafka-listen NAME://HOST:PORT,...", "$GOSTREAM_KAFKA_LISTEN", "off"},
		{"--kafka-advertise NAME://HOST:PORT,...", "$GOSTREAM_KAFKA_ADVERTISE", "each listener's own address"},
		{"--gossip HOST:PORT", "$GOSTREAM_GOSSIP", `"127.0.0.1:9401"`},
		{"--join HOST:PORT,...", "$GOSTREAM_JOIN", "none"},
		{"--http HOST:PORT", "$GOSTREAM_HTTP", `"127.0.0.1:9402"`},
		{"--controller ID@HOST:PORT", "$GOSTREAM_CONTROLLER", "this node"},
		{"--rack NAME", "$GOSTREAM_RACK", "none"},
		{"--log-level LEVEL", "$GOSTREAM_LOG_LEVEL", `"info"`},
		{"--log-format FORMAT", "$GOSTREAM_LOG_FORMAT", `"text"`},
		{"--max-batch-bytes BYTES", "$GOSTREAM_MAX_BATCH_BYTES", "4MiB"},
		{"--request-memory BYTES", "$GOSTREAM_REQUEST_MEMORY", "256MiB"},
		{"--request-memory-per-conn BYTES", "$GOSTREAM_REQUEST_MEMORY_PER_CONN", "two frames"},
		{"--max-conns N", "$GOSTREAM_MAX_CONNS", "4096"},
		{"--max-conns-per-ip N", "$GOSTREAM_MAX_CONNS_PER_IP", "1024"},
		{"--idle-timeout DURATION", "$GOSTREAM_IDLE_TIMEOUT", "2m"},
		{"--retention-bytes BYTES", "$GOSTREAM_RETENTION_BYTES", "-1"},
		{"--retention-ms MS", "$GOSTREAM_RETENTION_MS", "604800000, 7 days"},
		{"--segment-bytes BYTES", "$GOSTREAM_SEGMENT_BYTES", "128MiB"},
		{"--segment-ms MS", "$GOSTREAM_SEGMENT_MS", "604800000, 7 days"},
		{"--retention-check-interval DURATION", "$GOSTREAM_RETENTION_CHECK_INTERVAL", "1m"},
		{"--offsets-partitions N", "$GOSTREAM_OFFSETS_PARTITIONS", "16"},
		{"--group-initial-rebalance-delay DURATION", "$GOSTREAM_GROUP_INITIAL_REBALANCE_DELAY", "3s"},
		{"--group-max-member-bytes BYTES", "$GOSTREAM_GROUP_MAX_MEMBER_BYTES", "64KiB"},
		{"--group-consumer-session-timeout DURATION", "$GOSTREAM_GROUP_CONSUMER_SESSION_TIMEOUT", "45s"},
	} {
		t.Run(f.flag, func(t *testing.T) {
			var line string
			for _, l := range strings.Split(stdout, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), f.flag+" ") {
					line = l
				}
			}
			require.NotEmpty(t, line, "--help does not list %s:\n%s", f.flag, stdout)
			assert.Contains(t, line, "["+f.env+"]")
			assert.Contains(t, line, f.def)
		})
	}
	for _, level := range logLevels {
		assert.Contains(t, stdout, level)
	}
}

// TestBadFlagsExitOne runs every bad value once as a flag and once as its
// environment twin: each must exit 1 with one line naming the flag, before
// anything touches the data dir.
func TestBadFlagsExitOne(t *testing.T) {
	tests := []struct {
		flag, value string
		want        string // the whole stderr line, up to its end
	}{
		{"id", "abc", `InvalidFlag: --id "abc": want a positive integer`},
		{"id", "0", `InvalidFlag: --id "0": want a positive integer`},
		{"id", "-4", `InvalidFlag: --id "-4": want a positive integer`},
		{"id", "99999999999", `InvalidFlag: --id "99999999999": want a positive integer`},
		{"listen", "nope", `InvalidFlag: --listen "nope": want HOST:PORT`},
		{"advertise", "host", `InvalidFlag: --advertise "host": want HOST:PORT`},
		{"kafka-listen", "0.0.0.0:9092", `InvalidFlag: --kafka-advertise "": listener default binds every interface (0.0.0.0:9092): advertise the address clients dial for it`},
		{"kafka-listen", "Ext://127.0.0.1:9092", `InvalidFlag: --kafka-listen "Ext://127.0.0.1:9092": listener name "Ext": want [a-z0-9_-], 1 to 32 characters`},
		{"gossip", "a:b", `InvalidFlag: --gossip "a:b": want HOST:PORT with PORT a number from 0 to 65535`},
		{"rack", "rack 1", `InvalidFlag: --rack "rack 1": want 1 to 64 letters, digits and . _ - : /`},
		{"http", "127.0.0.1", `InvalidFlag: --http "127.0.0.1": want HOST:PORT`},
		{"join", "a:1,nope", `InvalidFlag: --join "nope": want HOST:PORT`},
		{"join", "a:1,,b:2", `InvalidFlag: --join "a:1,,b:2": want HOST:PORT,... without empty entries`},
		{"controller", "x", `InvalidFlag: --controller "x": want ID@HOST:PORT`},
		{"controller", "1@a:1,2@b", `InvalidFlag: --controller "2@b": want ID@HOST:PORT`},
		{"controller", "0@a:1", `InvalidFlag: --controller "0@a:1": want ID@HOST:PORT with ID a positive integer`},
		{"log-level", "loud", `InvalidFlag: --log-level "loud": want one of trace, debug, info, warn, error`},
		{"log-format", "xml", `InvalidFlag: --log-format "xml": want text or json`},
		{"max-batch-bytes", "big", `InvalidFlag: --max-batch-bytes "big": want a positive number of bytes, such as 4194304 or 4MiB`},
		{"max-batch-bytes", "0", `InvalidFlag: --max-batch-bytes "0": want a positive number of bytes, such as 4194304 or 4MiB`},
		{"max-batch-bytes", "512", `InvalidFlag: --max-batch-bytes "512": want a number of bytes from 1024 to 268435456`},
		{"max-batch-bytes", "1GiB", `InvalidFlag: --max-batch-bytes "1073741824": want a number of bytes from 1024 to 268435456`},
		{"request-memory", "1MiB", `InvalidFlag: --request-memory "1048576": want at least the request memory of one connection, 8519680 bytes`},
		{"request-memory-per-conn", "4MiB", `InvalidFlag: --request-memory-per-conn "4194304": want at least one frame, 4259840 bytes (the batch limit plus 65536)`},
		{"request-memory-per-conn", "-1", `InvalidFlag: --request-memory-per-conn "-1": want a positive number of bytes, such as 4194304 or 4MiB`},
		{"max-conns", "none", `InvalidFlag: --max-conns "none": want a positive integer`},
		{"max-conns-per-ip", "0", `InvalidFlag: --max-conns-per-ip "0": want a positive integer`},
		{"max-conns-per-ip", "5000", `InvalidFlag: --max-conns-per-ip "5000": want a positive number of connections, at most the total limit of 4096`},
		{"idle-timeout", "10", `InvalidFlag: --idle-timeout "10": want a positive duration, such as 2m or 90s`},
		{"idle-timeout", "-1s", `InvalidFlag: --idle-timeout "-1s": want a positive duration, such as 2m or 90s`},
		{"retention-bytes", "0", `InvalidFlag: --retention-bytes "0": want a positive number of bytes, such as 1073741824 or 1GiB, or -1`},
		{"retention-bytes", "lots", `InvalidFlag: --retention-bytes "lots": want a positive number of bytes, such as 1073741824 or 1GiB, or -1`},
		{"retention-bytes", "-2", `InvalidFlag: --retention-bytes "-2": want -1 (unlimited) or a positive number of bytes`},
		{"retention-ms", "7d", `InvalidFlag: --retention-ms "7d": want a positive number of milliseconds, or -1`},
		{"retention-ms", "-3", `InvalidFlag: --retention-ms "-3": want -1 (forever) or a positive number of milliseconds, at most 9223372036854`},
		{"segment-bytes", "64KiB", `InvalidFlag: --segment-bytes "65536": want a number of bytes from 1048576 (1 MiB) to 1073741824 (1 GiB)`},
		{"segment-bytes", "-1", `InvalidFlag: --segment-bytes "-1": want a number of bytes from 1048576 (1 MiB) to 1073741824 (1 GiB)`},
		{"segment-ms", "10", `InvalidFlag: --segment-ms "10": want a number of milliseconds from 1000 (1 s) to 9223372036854`},
		{"retention-check-interval", "0s", `InvalidFlag: --retention-check-interval "0s": want a positive duration, such as 2m or 90s`},
		{"offsets-partitions", "0", `InvalidFlag: --offsets-partitions "0": want a positive integer`},
		{"offsets-partitions", "1001", `InvalidFlag: --offsets-partitions "1001": want a number of partitions from 1 to 1000`},
		{"group-consumer-session-timeout", "soon", `InvalidFlag: --group-consumer-session-timeout "soon": want a duration from 1s to 5m, such as 45s`},
		{"group-consumer-session-timeout", "10m", `InvalidFlag: --group-consumer-session-timeout "10m0s": want a duration from 1s to 5m0s`},
	}
	for _, tt := range tests {
		for _, via := range []string{"flag", "env"} {
			t.Run(via+" "+tt.flag+"="+tt.value, func(t *testing.T) {
				dataDir := filepath.Join(t.TempDir(), "data")
				args := []string{"--data-dir", dataDir}
				if tt.flag != "id" {
					args = append(args, "--id", "1")
				}
				var env []string
				if via == "flag" {
					args = append(args, "--"+tt.flag, tt.value)
				} else {
					env = []string{envName(tt.flag) + "=" + tt.value}
				}
				code, stdout, stderr := runNode(t, env, args...)
				assert.Equal(t, 1, code)
				assert.Equal(t, tt.want+"\n", stderr)
				assert.Empty(t, stdout)
				assert.NoDirExists(t, dataDir, "a node with bad flags must not touch its data dir")
			})
		}
	}
}

func TestBadUsageExitsOne(t *testing.T) {
	dataDir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string // prefix of the one stderr line
	}{
		{"no flags", nil, "MissingFlag: --id is required (or set GOSTREAM_ID)"},
		{"no data dir", []string{"--id", "1"}, "MissingFlag: --data-dir is required (or set GOSTREAM_DATA_DIR)"},
		{"unknown flag", []string{"--id", "1", "--data-dir", dataDir, "--bogus"}, "UnknownFlag: unknown flag --bogus (see gostream-node --help)"},
		{"argument", []string{"--id", "1", "--data-dir", dataDir, "extra"}, `UnexpectedArgument: "extra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runNode(t, nil, tt.args...)
			assert.Equal(t, 1, code)
			assert.True(t, strings.HasPrefix(stderr, tt.want), "stderr %q should start with %q", stderr, tt.want)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
		})
	}
}

func TestNodeServesHealthAndStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			a := freeAddrs(t)
			dataDir := t.TempDir()
			p := startNode(t, nil, append([]string{"--id", "1", "--data-dir", dataDir}, a.flags()...)...)

			h := waitHealthy(t, p, a.http)
			assert.Equal(t, health{Status: "ok", Node: 1}, h)
			resp, err := httpClient.Post("http://"+a.http+"/api/health", "text/plain", nil)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
			assert.FileExists(t, filepath.Join(dataDir, "gostream.stamp"))

			assert.Equal(t, 0, p.stop(t, sig), "a signal is a clean stop")
			stderr := p.stderr.String()
			assert.Contains(t, stderr, "node started")
			assert.Contains(t, stderr, "node stopped")
			_, _, err = getHealth(a.http)
			assert.Error(t, err, "the HTTP server is gone after exit")
		})
	}
}

// The web console is served at /ui/ by default; --ui=false (or
// GOSTREAM_UI=false) turns it off, page and API alike, and nothing else.
func TestUIFlag(t *testing.T) {
	get := func(t *testing.T, url string) int {
		resp, err := httpClient.Get(url)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want int
	}{
		{"default", nil, nil, http.StatusOK},
		{"--ui=false", nil, []string{"--ui=false"}, http.StatusNotFound},
		{"GOSTREAM_UI=false", []string{"GOSTREAM_UI=false"}, nil, http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := freeAddrs(t)
			p := startNode(t, tc.env, append(append([]string{"--id", "1", "--data-dir", t.TempDir()}, a.flags()...), tc.args...)...)
			waitHealthy(t, p, a.http)
			assert.Equal(t, tc.want, get(t, "http://"+a.http+"/ui/"), "the page")
			assert.Equal(t, tc.want, get(t, "http://"+a.http+"/ui/api/whoami"), "the API")
			assert.Equal(t, http.StatusOK, get(t, "http://"+a.http+"/api/status"), "the rest of the HTTP surface")
			assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
		})
	}
}

// TestEnvTwinsAndFlagPrecedence starts real nodes configured through the
// environment and checks which value won by asking the node itself.
func TestEnvTwinsAndFlagPrecedence(t *testing.T) {
	t.Run("environment only", func(t *testing.T) {
		a := freeAddrs(t)
		p := startNode(t, []string{
			"GOSTREAM_ID=5",
			"GOSTREAM_DATA_DIR=" + t.TempDir(),
			"GOSTREAM_LISTEN=" + a.listen,
			"GOSTREAM_GOSSIP=" + a.gossip,
			"GOSTREAM_HTTP=" + a.http,
			"GOSTREAM_CONTROLLER=5@" + a.listen,
			"GOSTREAM_LOG_LEVEL=debug",
		})
		assert.Equal(t, health{Status: "ok", Node: 5}, waitHealthy(t, p, a.http))
		assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
		assert.Contains(t, p.stderr.String(), "[DEBUG]", "GOSTREAM_LOG_LEVEL=debug took effect")
	})
	t.Run("flags beat variables", func(t *testing.T) {
		a := freeAddrs(t)
		unused := testaddr.For(t)
		p := startNode(t, []string{
			"GOSTREAM_ID=7",
			"GOSTREAM_HTTP=" + unused,
			"GOSTREAM_LOG_LEVEL=loud", // invalid: would stop the node if it won
			"GOSTREAM_CONTROLLER=x",   // likewise
		}, append([]string{"--id", "3", "--data-dir", t.TempDir(), "--log-level", "info",
			"--controller", "3@" + a.listen}, a.flags()...)...)
		assert.Equal(t, health{Status: "ok", Node: 3}, waitHealthy(t, p, a.http))
		_, _, err := getHealth(unused)
		assert.Error(t, err, "GOSTREAM_HTTP must lose to --http")
		assert.Equal(t, 0, p.stop(t, syscall.SIGTERM))
	})
}

func TestLogFormatJSON(t *testing.T) {
	a := freeAddrs(t)
	p := startNode(t, nil, append([]string{"--id", "2", "--data-dir", t.TempDir(), "--log-format", "json"}, a.flags()...)...)
	waitHealthy(t, p, a.http)
	require.Equal(t, 0, p.stop(t, syscall.SIGTERM))

	var messages []string
	for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), "not a JSON log line: %q", line)
		messages = append(messages, fmt.Sprint(entry["@message"]))
		if entry["@message"] == "node started" {
			assert.EqualValues(t, 2, entry["node"])
			assert.Equal(t, a.http, entry["http"])
		}
	}
	assert.Contains(t, messages, "node started")
	assert.Contains(t, messages, "node stopped")
}

func TestNodeRefusesAnotherBrokersDataDir(t *testing.T) {
	dataDir := t.TempDir()
	a := freeAddrs(t)
	p := startNode(t, nil, append([]string{"--id", "1", "--data-dir", dataDir}, a.flags()...)...)
	waitHealthy(t, p, a.http)
	require.Equal(t, 0, p.stop(t, syscall.SIGTERM))

	b := freeAddrs(t)
	code, _, stderr := runNode(t, nil, append([]string{"--id", "2", "--data-dir", dataDir}, b.flags()...)...)
	assert.Equal(t, 2, code)
	line := lastLine(stderr)
	assert.True(t, strings.HasPrefix(line, "StampMismatch: "), "last stderr line: %q", line)
	assert.Contains(t, line, "broker 1")
	assert.NotContains(t, stderr, "node started")
}

func TestNodeCannotBindHTTP(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { busy.Close() })

	a := freeAddrs(t)
	a.http = busy.Addr().String()
	code, _, stderr := runNode(t, nil, append([]string{"--id", "1", "--data-dir", t.TempDir()}, a.flags()...)...)
	assert.Equal(t, 2, code)
	line := lastLine(stderr)
	assert.True(t, strings.HasPrefix(line, "CannotListen: "), "last stderr line: %q", line)
	assert.Contains(t, line, a.http)
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"4194304": 4 << 20, "4096KiB": 4 << 20, "4MiB": 4 << 20, "4 MiB": 4 << 20, "1GiB": 1 << 30,
	} {
		got, ok := parseBytes(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "0", "-1", "4MB", "MiB", "1.5MiB", "9223372036854775807KiB"} {
		_, ok := parseBytes(in)
		assert.False(t, ok, in)
	}
}

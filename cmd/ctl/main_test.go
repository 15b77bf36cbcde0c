package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"gostream/httpapi"
	"gostream/internal/testaddr"
)

// testVersion is stamped into the binary under test.
const testVersion = "v0.0.0-test"

// ctlBin is the gostream-ctl binary TestMain builds once for all tests.
var ctlBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gostream-ctl-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctlBin = filepath.Join(dir, "gostream-ctl")
	args := []string{"build", "-o", ctlBin, "-ldflags", "-X main.version=" + testVersion}
	if raceEnabled {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build gostream-ctl: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// runCtl runs gostream-ctl to completion with args and, on top of an
// environment without any GOSTREAM_ variable, env.
func runCtl(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ctlBin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOSTREAM_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, raceEnv()...)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader("")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "gostream-ctl %s did not finish", strings.Join(args, " "))
	if err != nil {
		var exitErr *exec.ExitError
		require.ErrorAs(t, err, &exitErr)
	}
	t.Logf("$ %s gostream-ctl %s  -> exit %d\nstdout: %s\nstderr: %s",
		strings.Join(env, " "), strings.Join(args, " "), cmd.ProcessState.ExitCode(), out.String(), errOut.String())
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// healthServer serves a node's real HTTP surface for node id.
func healthServer(t *testing.T, id int32) string {
	logger := hclog.New(&hclog.LoggerOptions{
		Level:  hclog.Debug,
		Output: logWriter{t},
	})
	srv := httptest.NewServer(httpapi.New(httpapi.Config{NodeID: id, Logger: logger}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// logWriter sends what it is given to t.Log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func TestVersion(t *testing.T) {
	code, stdout, _ := runCtl(t, nil, "--version")
	assert.Equal(t, 0, code)
	assert.Equal(t, "gostream-ctl version "+testVersion+"\n", stdout)
}

// TestHelpShowsTheContract checks --help against the gostream-ctl part of
// docs/cli.md: every command, the global flags, and each command's flags.
func TestHelpShowsTheContract(t *testing.T) {
	code, stdout, _ := runCtl(t, nil, "--help")
	require.Equal(t, 0, code)
	for _, want := range []string{
		"cluster", "broker", "topic", "produce", "consume", "catch-up", "failover",
		"recover", "verify", "group", "bench", "health",
		"--bootstrap", "$GOSTREAM_BOOTSTRAP", `"127.0.0.1:9400,127.0.0.1:9410,127.0.0.1:9420"`,
		"--output", "-o", "--timeout",
	} {
		assert.Contains(t, stdout, want)
	}

	tests := []struct {
		command string
		want    []string // in the command's --help
	}{
		{"cluster", []string{"status", "history", "rebalance"}},
		{"cluster rebalance", []string{"--topic T", "--out FILE", "partition reassign --plan FILE"}},
		{"broker", []string{"list", "decommission"}},
		{"broker decommission", []string{"ID", "--out FILE", "InvalidReplicationFactor", "UnknownBroker"}},
		{"topic", []string{"create", "alter", "list", "describe", "delete", "seal"}},
		{"topic create", []string{"NAME", "--partitions", "--replication-factor", "--config KEY=VALUE"}},
		{"topic alter", []string{"NAME", "--config KEY=VALUE", "--delete-config KEY", "retention.bytes", "retention.ms", "segment.bytes", "segment.ms", "--partitions N", "--dry-run"}},
		{"topic describe", []string{"NAME"}},
		{"topic delete", []string{"NAME"}},
		{"topic seal", []string{"NAME"}},
		{"produce", []string{"TOPIC", "VALUE", "--key", "--partition"}},
		{"consume", []string{"TOPIC", "--partition", "--offset", "--from-beginning", "--from-end",
			"--max", "--follow", "--group", "--instance-id", "--session-timeout"}},
		{"catch-up", []string{"--topic", "--partition", "--broker"}},
		{"failover", []string{"--topic", "--partition", "--broker", "--dry-run"}},
		{"recover", []string{"--topic", "--partition", "--broker"}},
		{"verify", []string{"--topic"}},
		{"group", []string{"list", "describe", "reset-offsets", "delete", "delete-offsets"}},
		{"group delete-offsets", []string{"G", "--topic", "--partition", "GroupSubscribedToTopic"}},
		{"group reset-offsets", []string{"--topic", "--partition", "--to-earliest", "--to-latest", "--to-offset", "--shift-by", "--to-datetime", "--execute"}},
		{"bench", []string{"produce", "consume", "commit"}},
		{"bench produce", []string{"--config KEY=VALUE", "retention.bytes=268435456", "cannot"}},
		{"bench consume", []string{"--topic", "--records", "--group", "--members", "--commit"}},
		{"bench commit", []string{"--topic", "--group-prefix", "--committers", "--commits", "--replication-factor", "--duration", "__consumer_offsets"}},
		{"health", []string{"--http", `"127.0.0.1:9402"`}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			code, stdout, _ := runCtl(t, nil, append(strings.Fields(tt.command), "--help")...)
			require.Equal(t, 0, code)
			for _, want := range tt.want {
				assert.Contains(t, stdout, want)
			}
		})
	}
}

// TestHealthWithGlobalFlagsAnywhere runs the one working command with the
// global flags in every position a user may put them.
func TestHealthWithGlobalFlagsAnywhere(t *testing.T) {
	addr := healthServer(t, 4)
	wantJSON := fmt.Sprintf(`{"address":%q,"status":"ok","node":4}`, addr)

	t.Run("table", func(t *testing.T) {
		code, stdout, stderr := runCtl(t, nil, "health", "--http", addr)
		require.Equal(t, 0, code, stderr)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Len(t, lines, 2)
		assert.Equal(t, []string{"ADDRESS", "NODE", "STATUS"}, strings.Fields(lines[0]))
		assert.Equal(t, []string{addr, "4", "ok"}, strings.Fields(lines[1]))
	})
	for _, args := range [][]string{
		{"-o", "json", "health", "--http", addr},
		{"health", "--http", addr, "-o", "json"},
		{"health", "-o", "json", "--http", addr},
		{"--output=json", "health", "--http=" + addr},
		{"health", "--http", addr, "--output", "json", "--timeout", "5s"},
		{"--timeout", "5s", "health", "-o=json", "--http", addr},
		{"-o", "table", "health", "--http", addr, "-o", "json"}, // the last one wins
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, stdout, stderr := runCtl(t, nil, args...)
			require.Equal(t, 0, code, stderr)
			assert.JSONEq(t, wantJSON, stdout)
		})
	}
}

func TestHealthFailuresExitTwo(t *testing.T) {
	t.Run("unreachable", func(t *testing.T) {
		code, _, stderr := runCtl(t, nil, "health", "--http", testaddr.For(t))
		assert.Equal(t, 2, code)
		assert.True(t, strings.HasPrefix(stderr, "Unreachable: "), stderr)
	})
	t.Run("degraded", func(t *testing.T) {
		problems := []string{"refusing connections: 7 on the rpc listener in the last 3s: 127.0.0.2 holds the per-address limit of 1024 (--max-conns-per-ip)"}
		srv := httptest.NewServer(httpapi.New(httpapi.Config{NodeID: 3, Problems: func() []string { return problems }}))
		t.Cleanup(srv.Close)
		addr := srv.Listener.Addr().String()

		code, stdout, stderr := runCtl(t, nil, "health", "--http", addr)
		assert.Equal(t, 2, code)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Len(t, lines, 3, stdout)
		assert.Equal(t, []string{addr, "3", "degraded"}, strings.Fields(lines[1]))
		assert.Equal(t, "  - "+problems[0], lines[2])
		assert.Equal(t, fmt.Sprintf("Degraded: node 3 at %s: %s\n", addr, problems[0]), stderr)

		code, stdout, _ = runCtl(t, nil, "health", "--http", addr, "-o", "json")
		assert.Equal(t, 2, code)
		assert.JSONEq(t, fmt.Sprintf(`{"address":%q,"status":"degraded","node":3,"problems":[%q]}`, addr, problems[0]), stdout)
	})
	t.Run("unhealthy", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
		}))
		t.Cleanup(srv.Close)
		code, _, stderr := runCtl(t, nil, "health", "--http", srv.Listener.Addr().String())
		assert.Equal(t, 2, code)
		assert.True(t, strings.HasPrefix(stderr, "Unhealthy: "), stderr)
		assert.Contains(t, stderr, "503")
	})
	// A node that never answers: --timeout bounds the wait, whether it comes
	// before or after the command (the default, 10s, would fail the check).
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	for _, args := range [][]string{
		{"--timeout", "300ms", "health", "--http", hang.Listener.Addr().String()},
		{"health", "--http", hang.Listener.Addr().String(), "--timeout", "300ms"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			start := time.Now()
			code, _, stderr := runCtl(t, nil, args...)
			assert.Equal(t, 2, code)
			assert.True(t, strings.HasPrefix(stderr, "Timeout: "), stderr)
			assert.Less(t, time.Since(start), 8*time.Second, "--timeout was ignored")
		})
	}
}

// TestUnreachableClusterExitsTwo runs commands that need the cluster with
// nobody listening at --bootstrap: each fails with BrokerNotAvailable, once
// its --timeout has passed (a cluster that is starting answers a moment
// later, so the client retries until then).
func TestUnreachableClusterExitsTwo(t *testing.T) {
	addr := testaddr.For(t)
	for _, args := range [][]string{
		{"cluster", "status"},
		{"broker", "list"},
		{"topic", "list"},
		{"topic", "create", "orders", "--partitions", "1"},
		{"produce", "orders", "v"},
		{"consume", "orders"},
		{"bench", "produce", "--records", "1"},
		{"bench", "commit", "--commits", "1"},
		{"bench", "consume", "--group", "g"},
		{"catch-up", "--topic", "orders", "--partition", "0", "--broker", "2"},
		{"failover", "--topic", "orders", "--partition", "0", "--dry-run"},
		{"failover", "--broker", "2"},
		{"recover", "--topic", "orders", "--partition", "0", "--broker", "2"},
		{"recover", "--broker", "2"},
		{"verify"},
		{"verify", "--topic", "orders"},
		{"cluster", "history"},
		{"group", "list"},
		{"group", "describe", "g"},
		{"group", "delete", "g"},
		{"group", "reset-offsets", "g", "--topic", "orders", "--to-earliest"},
		{"consume", "orders", "--group", "g"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			start := time.Now()
			code, stdout, stderr := runCtl(t, nil, append(args, "--bootstrap", addr, "--timeout", "1s")...)
			assert.Equal(t, 2, code)
			assert.True(t, strings.HasPrefix(stderr, "BrokerNotAvailable: "), stderr)
			assert.Less(t, time.Since(start), 10*time.Second, "--timeout bounds the retries")
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
			assert.Empty(t, stdout)
		})
	}
}

func TestBadUsageExitsOne(t *testing.T) {
	tests := []struct {
		args []string
		env  []string
		want string // prefix of the one stderr line
	}{
		{args: []string{"frob"}, want: `UnknownCommand: "frob" is not a command of gostream-ctl`},
		{args: []string{"topic", "frob"}, want: `UnknownCommand: "frob" is not a command of gostream-ctl topic`},
		{args: []string{"topic", "list", "--bogus"}, want: "UnknownFlag: unknown flag --bogus (see gostream-ctl topic list --help)"},
		{args: []string{"--bogus", "topic", "list"}, want: "UnknownFlag: unknown flag --bogus (see gostream-ctl --help)"},
		{args: []string{"topic", "create"}, want: "MissingArgument: usage: gostream-ctl topic create NAME"},
		{args: []string{"produce"}, want: "MissingArgument: usage: gostream-ctl produce TOPIC [VALUE ...]"},
		{args: []string{"topic", "describe", "a", "b"}, want: `UnexpectedArgument: "b"`},
		{args: []string{"cluster", "status", "x"}, want: `UnexpectedArgument: "x"`},
		{args: []string{"topic", "create", "x", "--partitions", "many"}, want: `InvalidFlag: invalid value "many" for --partitions: not a number`},
		// A name that cannot be a topic is the user's slip, found before
		// anything is sent: exit 1, not the cluster's refusal.
		{args: []string{"topic", "create", "../x", "--partitions", "1"}, want: `InvalidTopicName: topic name "../x": want 1 to 249 of`},
		{args: []string{"topic", "list", "-o"}, want: "InvalidFlag: flag needs an argument: -o"},
		// Global flags are checked wherever they are typed.
		{args: []string{"-o", "yaml", "topic", "list"}, want: `InvalidFlag: --output "yaml": want table or json`},
		{args: []string{"topic", "list", "-o", "yaml"}, want: `InvalidFlag: --output "yaml": want table or json`},
		{args: []string{"topic", "list", "--timeout", "0s"}, want: "InvalidFlag: --timeout 0s: want a positive duration"},
		{args: []string{"topic", "list", "--timeout", "soon"}, want: "InvalidFlag: "},
		{args: []string{"topic", "list", "--bootstrap", "nope"}, want: `InvalidFlag: --bootstrap "nope": want HOST:PORT,...`},
		{args: []string{"health", "--http", "nope"}, want: `InvalidFlag: --http "nope": want HOST:PORT`},
		// Command flags are checked before the cluster is asked anything.
		{args: []string{"topic", "create", "x"}, want: "MissingFlag: --partitions N is required"},
		{args: []string{"topic", "create", "x", "--partitions", "0"}, want: "InvalidFlag: --partitions 0: want a positive number"},
		{args: []string{"topic", "create", "x", "--partitions", "1", "--replication-factor", "0"}, want: "InvalidFlag: --replication-factor 0"},
		// A topic configuration the client can tell is bad is bad usage
		// too, naming the key; nothing is sent.
		{args: []string{"topic", "create", "x", "--partitions", "1", "--config", "segment.bytes=12"},
			want: "InvalidConfig: segment.bytes 12: want a number of bytes from 1048576 (1 MiB) to 1073741824 (1 GiB)"},
		{args: []string{"topic", "create", "x", "--partitions", "1", "--config", "retention.hours=1"},
			want: `InvalidConfig: unknown key "retention.hours": the keys are retention.bytes, retention.ms, segment.bytes, segment.ms`},
		{args: []string{"topic", "create", "x", "--partitions", "1", "--config", "retention.bytes=lots"},
			want: `InvalidConfig: retention.bytes "lots": not a number; want -1 (unlimited) or a positive number of bytes`},
		{args: []string{"topic", "create", "x", "--partitions", "1", "--config", "retention.ms"}, want: `InvalidConfig: "retention.ms": want KEY=VALUE`},
		{args: []string{"topic", "create", "x", "--partitions", "1", "--config", "retention.ms=0"}, want: "InvalidConfig: retention.ms 0: want -1 (forever)"},
		{args: []string{"topic", "create", "x", "--partitions", "1", "--config", "retention.ms=1", "--config", "retention.ms=2"},
			want: "InvalidConfig: --config retention.ms given twice"},
		{args: []string{"topic", "alter"}, want: "MissingArgument: usage: gostream-ctl topic alter NAME"},
		{args: []string{"topic", "alter", "x"}, want: "MissingFlag: give --config KEY=VALUE, --delete-config KEY or --partitions N"},
		{args: []string{"topic", "alter", "x", "--config", "segment.ms=10"}, want: "InvalidConfig: segment.ms 10: want a number of milliseconds from 1000"},
		{args: []string{"topic", "alter", "x", "--delete-config", "retention"}, want: `InvalidConfig: unknown key "retention"`},
		{args: []string{"topic", "alter", "x", "--config", "segment.ms=5000", "--delete-config", "segment.ms"},
			want: "InvalidConfig: segment.ms is both in --config and in --delete-config"},
		{args: []string{"bench", "produce", "--config", "retention.bytes=-5"}, want: "InvalidConfig: retention.bytes -5"},
		{args: []string{"produce", "x", "v", "--partition", "-1"}, want: "InvalidFlag: --partition -1"},
		{args: []string{"produce", "x", "v", "--header", "novalue"}, want: `InvalidFlag: --header "novalue": want KEY=VALUE`},
		{args: []string{"consume", "x", "--offset", "3"}, want: "InvalidFlag: --offset needs --partition"},
		{args: []string{"consume", "x", "--partition", "0", "--offset", "-3"}, want: "InvalidFlag: --offset -3"},
		{args: []string{"consume", "x", "--from-beginning", "--from-end"}, want: "InvalidFlag: --from-beginning and --from-end"},
		{args: []string{"consume", "x", "--partition", "0", "--offset", "1", "--from-end"}, want: "InvalidFlag: --from-end and --offset"},
		{args: []string{"consume", "x", "--max", "0"}, want: "InvalidFlag: --max 0: want a positive number"},
		{args: []string{"consume", "x", "y"}, want: `UnexpectedArgument: "y"`},
		{args: []string{"bench", "produce", "--records", "0"}, want: "InvalidFlag: --records 0"},
		{args: []string{"bench", "produce", "--producers", "0"}, want: "InvalidFlag: --producers 0"},
		{args: []string{"bench", "produce", "--linger", "soon"}, want: "InvalidFlag: "},
		{args: []string{"bench", "consume", "--records", "-1"}, want: "InvalidFlag: --records -1"},
		{args: []string{"catch-up", "--topic", "x", "--partition", "0"}, want: "MissingFlag: --topic, --partition and --broker are required"},
		{args: []string{"catch-up", "--topic", "x", "--partition", "-1", "--broker", "2"}, want: "InvalidFlag: --partition -1"},
		{args: []string{"catch-up", "--topic", "x", "--partition", "0", "--broker", "0"}, want: "InvalidFlag: --broker 0"},
		{args: []string{"catch-up", "--topic", "x", "--partition", "0", "--broker", "2", "extra"}, want: `UnexpectedArgument: "extra"`},
		{args: []string{"failover"}, want: "MissingFlag: name --topic T --partition P [--broker B], or --broker B"},
		{args: []string{"failover", "--topic", "x"}, want: "MissingFlag: --topic and --partition go together"},
		{args: []string{"failover", "--partition", "1", "--broker", "2"}, want: "MissingFlag: --topic and --partition go together"},
		{args: []string{"failover", "--broker", "0", "--dry-run"}, want: "InvalidFlag: --broker 0"},
		{args: []string{"failover", "--topic", "x", "--partition", "-1"}, want: "InvalidFlag: --partition -1"},
		{args: []string{"failover", "--topic", "", "--partition", "0"}, want: "InvalidFlag: --topic: want a topic name"},
		{args: []string{"recover"}, want: "MissingFlag: name --topic T --partition P --broker B, or --broker B"},
		{args: []string{"recover", "--topic", "x", "--partition", "0"}, want: "MissingFlag: name --topic T --partition P --broker B, or --broker B"},
		{args: []string{"recover", "--topic", "x", "--broker", "2"}, want: "MissingFlag: --topic and --partition go together"},
		{args: []string{"recover", "--broker", "-2"}, want: "InvalidFlag: --broker -2"},
		{args: []string{"verify", "--topic", ""}, want: "InvalidFlag: --topic: want a topic name"},
		{args: []string{"verify", "orders"}, want: `UnexpectedArgument: "orders"`},
		{args: []string{"cluster", "history", "x"}, want: `UnexpectedArgument: "x"`},
		// The environment twin of --bootstrap is checked too.
		{args: []string{"topic", "list"}, env: []string{"GOSTREAM_BOOTSTRAP=nope"},
			want: `InvalidFlag: --bootstrap "nope": want HOST:PORT,...`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append(tt.env, tt.args...), " "), func(t *testing.T) {
			code, _, stderr := runCtl(t, tt.env, tt.args...)
			assert.Equal(t, 1, code)
			assert.True(t, strings.HasPrefix(stderr, tt.want), "stderr %q should start with %q", stderr, tt.want)
			assert.Equal(t, 1, strings.Count(stderr, "\n"), "one line: %q", stderr)
		})
	}
}

func TestBootstrapFlagBeatsVariable(t *testing.T) {
	// The variable alone is invalid (exit 1); the flag, typed after the
	// command, replaces it, so the command is understood and tries the
	// address (where nobody listens).
	env := []string{"GOSTREAM_BOOTSTRAP=nope"}
	code, _, _ := runCtl(t, env, "topic", "list")
	require.Equal(t, 1, code)
	code, _, stderr := runCtl(t, env, "topic", "list", "--bootstrap", testaddr.For(t), "--timeout", "1s")
	assert.Equal(t, 2, code)
	assert.True(t, strings.HasPrefix(stderr, "BrokerNotAvailable: "), stderr)
}

func TestNoCommandShowsHelp(t *testing.T) {
	for _, args := range [][]string{nil, {"topic"}} {
		code, stdout, stderr := runCtl(t, nil, args...)
		assert.Equal(t, 0, code)
		assert.Contains(t, stdout, "USAGE:")
		assert.Empty(t, stderr)
	}
}

// TestEveryCommandHasHelp walks the command tree: every command has a
// one-line usage, every command that runs something (a leaf) a
// description in its --help, and no flag shows a default of 0 it does
// not have (an id such as --broker B has none: "default: 0" read as
// broker 0).
func TestEveryCommandHasHelp(t *testing.T) {
	app := newApp(strings.NewReader(""), io.Discard, io.Discard)
	var walk func(path []string, cmds []*cli.Command)
	leaves := 0
	walk = func(path []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(append([]string(nil), path...), c.Name)
			name := strings.Join(p, " ")
			assert.NotEmpty(t, c.Usage, "%s has no usage line", name)
			if len(c.Subcommands) > 0 {
				walk(p, c.Subcommands)
				continue
			}
			leaves++
			var stdout, stderr bytes.Buffer
			code := run(append(append([]string{"gostream-ctl"}, p...), "--help"), strings.NewReader(""), &stdout, &stderr)
			require.Equal(t, 0, code, "%s --help: %s", name, stderr.String())
			help := stdout.String()
			assert.NotEmpty(t, strings.TrimSpace(c.Description), "%s has no description", name)
			assert.Contains(t, help, "DESCRIPTION:", "%s --help", name)
			assert.NotContains(t, help, "(default: 0)", "%s --help shows a default of 0:\n%s", name, help)
		}
	}
	walk(nil, app.Commands)
	assert.Greater(t, leaves, 30, "the walk found the commands")
}

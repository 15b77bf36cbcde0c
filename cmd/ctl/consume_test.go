package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/testcluster"
)

func TestConsume(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "2")
	ctlOK(t, c, "", "produce", "t", "--partition", "0", "v0", "v1", "v2", "v3", "v4")
	ctlOK(t, c, "", "produce", "t", "--partition", "1", "--key", "k", "w0", "w1", "w2")

	all := []string{
		"0\t0\t(null)\tv0", "0\t1\t(null)\tv1", "0\t2\t(null)\tv2", "0\t3\t(null)\tv3", "0\t4\t(null)\tv4",
		"1\t0\tk\tw0", "1\t1\tk\tw1", "1\t2\tk\tw2",
	}
	tests := []struct {
		args []string
		want []string
	}{
		// The default start is the beginning; partitions print in order.
		{nil, all},
		{[]string{"--from-beginning"}, all},
		{[]string{"--partition", "1"}, all[5:]},
		{[]string{"--partition", "0", "--offset", "2"}, all[2:5]},
		{[]string{"--partition", "0", "--offset", "5"}, nil}, // the high watermark: nothing yet
		{[]string{"--partition", "0", "--offset", "6"}, nil}, // past it: nothing either, and no error
		{[]string{"--partition", "1", "--offset", "1", "--max", "1"}, all[6:7]},
		{[]string{"--max", "3"}, all[:3]},
		{[]string{"--max", "7"}, all[:7]},
		{[]string{"--max", "100"}, all},
		{[]string{"--from-end"}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out := ctlOK(t, c, "", append([]string{"consume", "t"}, tt.args...)...)
			assert.Equal(t, withHeader(tt.want...), lines(out))
		})
	}

	t.Run("json", func(t *testing.T) {
		out := ctlOK(t, c, "", "consume", "t", "--partition", "1", "--max", "1", "-o", "json")
		require.Len(t, lines(out), 1)
		m := requireKeys(t, json.RawMessage(out), "topic", "partition", "offset", "timestamp", "key", "value", "headers")
		assert.JSONEq(t, `"t"`, string(m["topic"]))
		assert.JSONEq(t, `1`, string(m["partition"]))
		assert.JSONEq(t, `0`, string(m["offset"]))
		assert.JSONEq(t, `"k"`, string(m["key"]))
		assert.JSONEq(t, `"w0"`, string(m["value"]))
		assert.JSONEq(t, `[]`, string(m["headers"]))
		var ts string
		require.NoError(t, json.Unmarshal(m["timestamp"], &ts))
		at, err := time.Parse(time.RFC3339Nano, ts)
		require.NoError(t, err, ts)
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`, ts)
		assert.WithinDuration(t, time.Now(), at, 10*time.Minute)
	})

	t.Run("errors", func(t *testing.T) {
		ctlFails(t, c, 2, "UnknownPartition: ", "", "consume", "t", "--partition", "2")
		ctlFails(t, c, 1, "InvalidFlag: ", "", "consume", "t", "--offset", "1")
	})
}

// consumeHeaderLine heads consume's table output.
const consumeHeaderLine = "PARTITION\tOFFSET\tKEY\tVALUE"

// withHeader is the lines of consume's table output for rows: the header,
// then the rows, or nothing at all when there is no row.
func withHeader(rows ...string) []string {
	if len(rows) == 0 {
		return nil
	}
	return append([]string{consumeHeaderLine}, rows...)
}

func TestConsumeBytesAndKeys(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "b", "--partitions", "1")
	ctlOK(t, c, "\xff\xfe\x00ok\n", "produce", "b")                          // not UTF-8, no key
	ctlOK(t, c, "", "produce", "b", "--key", "", "plain")                    // empty key
	ctlOK(t, c, "", "produce", "b", "--key", "k\xc3", "v")                   // a key that is not UTF-8
	ctlOK(t, c, "", "produce", "b", "--key", "ü", "tab\there", "-o", "json") // text with a control character

	recs := decodeLines[consumed](t, ctlOK(t, c, "", "consume", "b", "-o", "json"))
	require.Len(t, recs, 4)

	assert.Equal(t, "base64", recs[0].Encoding)
	assert.Nil(t, recs[0].Key, "null stays null")
	v, err := base64.StdEncoding.DecodeString(recs[0].Value)
	require.NoError(t, err)
	assert.Equal(t, []byte("\xff\xfe\x00ok"), v)

	assert.Empty(t, recs[1].Encoding)
	require.NotNil(t, recs[1].Key)
	assert.Equal(t, "", *recs[1].Key)
	assert.Equal(t, "plain", recs[1].Value)

	assert.Equal(t, "base64", recs[2].Encoding)
	require.NotNil(t, recs[2].Key)
	k, err := base64.StdEncoding.DecodeString(*recs[2].Key)
	require.NoError(t, err)
	assert.Equal(t, []byte("k\xc3"), k)
	assert.Equal(t, base64.StdEncoding.EncodeToString([]byte("v")), recs[2].Value, "every byte field of the record")

	assert.Empty(t, recs[3].Encoding)
	assert.Equal(t, "ü", *recs[3].Key)
	assert.Equal(t, "tab\there", recs[3].Value)

	// The raw line carries "encoding" only where needed.
	raw := lines(ctlOK(t, c, "", "consume", "b", "-o", "json"))
	requireKeys(t, json.RawMessage(raw[0]), "topic", "partition", "offset", "timestamp", "key", "value", "headers", "encoding")
	requireKeys(t, json.RawMessage(raw[1]), "topic", "partition", "offset", "timestamp", "key", "value", "headers")

	// Tables keep one record per line.
	assert.Equal(t, withHeader(
		"0\t0\t(null)\tbase64:"+base64.StdEncoding.EncodeToString([]byte("\xff\xfe\x00ok")),
		"0\t1\t\"\"\tplain",
		"0\t2\tbase64:a8M=\tv",
		"0\t3\tü\t\"tab\\there\"",
	), lines(ctlOK(t, c, "", "consume", "b")))
}

// follower is a gostream-ctl consume --follow running as a process, whose
// stdout lines arrive on a channel.
type follower struct {
	cmd   *exec.Cmd
	lines chan string // closed at the end of its output
}

func startFollower(t *testing.T, c *testcluster.Cluster, args ...string) *follower {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	cmd := c.CtlCommand(ctx, append([]string{"consume", "--follow"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	f := &follower{cmd: cmd, lines: make(chan string, 100)}
	go func() {
		defer close(f.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel() // kills it if the test did not end it
		for range f.lines {
		}
		cmd.Wait()
		if t.Failed() {
			t.Logf("consume --follow stderr: %s", stderr.String())
		}
	})
	return f
}

// next returns the next line of output, failing the test if none comes
// within the deadline.
func (f *follower) next(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-f.lines:
		require.True(t, ok, "consume --follow ended")
		return l
	case <-time.After(30 * time.Second):
		require.FailNow(t, "no line from consume --follow within 30s")
		return ""
	}
}

// wait waits for the process to exit and returns its exit status.
func (f *follower) wait(t *testing.T) int {
	t.Helper()
	exited := make(chan error, 1)
	go func() { exited <- f.cmd.Wait() }()
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		require.NoError(t, err)
		return 0
	case <-time.After(30 * time.Second):
		require.FailNow(t, "consume --follow did not exit within 30s")
		return -1
	}
}

func TestConsumeFollow(t *testing.T) {
	c := startCluster(t)
	ctlOK(t, c, "", "topic", "create", "f", "--partitions", "3")
	ctlOK(t, c, "", "produce", "f", "--partition", "2", "before")

	t.Run("sees records produced after it started; Ctrl-C ends it cleanly", func(t *testing.T) {
		f := startFollower(t, c, "f")
		assert.Equal(t, consumeHeaderLine, f.next(t), "the table's header comes first")
		assert.Equal(t, "2\t0\t(null)\tbefore", f.next(t))
		ctlOK(t, c, "", "produce", "f", "--partition", "0", "after")
		assert.Equal(t, "0\t0\t(null)\tafter", f.next(t))
		ctlOK(t, c, "", "produce", "f", "--partition", "2", "--key", "k", "later")
		assert.Equal(t, "2\t1\tk\tlater", f.next(t))
		require.NoError(t, f.cmd.Process.Signal(os.Interrupt))
		assert.Equal(t, 0, f.wait(t), "Ctrl-C is the normal end of --follow")
	})

	t.Run("from the end, until --max", func(t *testing.T) {
		f := startFollower(t, c, "f", "--from-end", "--max", "2", "-o", "json")
		// Produce until the follower has seen two records: it may start
		// after the first of them.
		var got []consumed
		for i := 0; len(got) < 2; i++ {
			require.Less(t, i, 20, "the follower saw %d records", len(got))
			ctlOK(t, c, "", "produce", "f", "--partition", "1", "new")
			select {
			case l := <-f.lines:
				got = append(got, decodeLines[consumed](t, l)...)
			case <-time.After(5 * time.Second):
			}
		}
		for _, r := range got {
			assert.Equal(t, "new", r.Value, "--from-end skips what was there")
		}
		assert.Equal(t, 0, f.wait(t), "--max ends it")
	})
}

// stderrLines collects a process's stderr lines as they come.
type stderrLines struct {
	mu    sync.Mutex
	lines []string
}

func (s *stderrLines) read(r io.Reader) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s.mu.Lock()
		s.lines = append(s.lines, sc.Text())
		s.mu.Unlock()
	}
}

func (s *stderrLines) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}

// count is how many lines start with prefix.
func (s *stderrLines) count(prefix string) int {
	n := 0
	for _, l := range s.all() {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// startFollowerLogging is startFollower with its stderr lines collected
// as they come.
func startFollowerLogging(t *testing.T, c *testcluster.Cluster, args ...string) (*follower, *stderrLines) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), ctlTimeout)
	cmd := c.CtlCommand(ctx, append([]string{"consume", "--follow"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	f := &follower{cmd: cmd, lines: make(chan string, 100)}
	errs := &stderrLines{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		errs.read(stderr)
	}()
	go func() {
		defer close(f.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		for range f.lines {
		}
		<-done
		cmd.Wait()
		t.Logf("consume --follow %s stderr:\n%s", strings.Join(args, " "), strings.Join(errs.all(), "\n"))
	})
	return f, errs
}

// nextRecords reads n records of consume --follow -o json.
func (f *follower) nextRecords(t *testing.T, n int) []consumed {
	t.Helper()
	var out []consumed
	for len(out) < n {
		out = append(out, decodeLines[consumed](t, f.next(t))...)
	}
	return out
}

// values are the values of recs, sorted.
func values(recs []consumed) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Value)
	}
	slices.Sort(out)
	return out
}

// With one node down and no failover, consume prints every partition it
// can read, names the one it cannot on stderr, and exits 2, well within
// its --timeout; with --follow it tails the others, says once that it
// cannot read that one, and reads it when its leader is back.
func TestConsumeDuringAnOutage(t *testing.T) {
	c := startClusterOf(t, 3)
	// One replica each: partition p is led by broker p+1 alone.
	ctlOK(t, c, "", "topic", "create", "o", "--partitions", "3")
	for p, prefix := range []string{"a", "b", "c"} {
		ctlOK(t, c, "", "produce", "o", "--partition", strconv.Itoa(p), prefix+"0", prefix+"1", prefix+"2")
	}
	live := []string{"a0", "a1", "a2", "c0", "c1", "c2"}
	require.NoError(t, c.Node(2).Kill())

	t.Run("without --follow", func(t *testing.T) {
		start := time.Now()
		res := ctl(t, c, "", "consume", "o", "--from-beginning", "--timeout", "10s", "-o", "json")
		took := time.Since(start)
		assert.Equal(t, 2, res.Exit)
		recs := decodeLines[consumed](t, res.Stdout)
		assert.Equal(t, live, values(recs), "every record of the partitions that can be read")
		for _, r := range recs {
			assert.NotEqual(t, int32(1), r.Partition)
		}
		errLines := lines(res.Stderr)
		require.Len(t, errLines, 1, "one line per partition that cannot be read")
		assert.True(t, strings.HasPrefix(errLines[0], "BrokerNotAvailable: o/1: its leader, broker 2, does not answer: "), "stderr: %s", res.Stderr)
		assert.Contains(t, errLines[0], c.Node(2).Addr())
		assert.Less(t, took, 8*time.Second, "well within its --timeout of 10s")

		// The table: the partitions in order, the one that cannot be read
		// passed over.
		res = ctl(t, c, "", "consume", "o")
		assert.Equal(t, 2, res.Exit)
		assert.Equal(t, withHeader("0\t0\t(null)\ta0", "0\t1\t(null)\ta1", "0\t2\t(null)\ta2",
			"2\t0\t(null)\tc0", "2\t1\t(null)\tc1", "2\t2\t(null)\tc2"), lines(res.Stdout))
		assert.True(t, strings.HasPrefix(res.Stderr, "BrokerNotAvailable: o/1: "), "stderr: %s", res.Stderr)

		// A partition named alone that cannot be read is the same error.
		res = ctlFails(t, c, 2, "BrokerNotAvailable: o/1: its leader, broker 2, does not answer: ", "", "consume", "o", "--partition", "1")
		assert.Empty(t, res.Stdout)
		// --max met before the partition that cannot be read: done.
		assert.Len(t, lines(ctlOK(t, c, "", "consume", "o", "--max", "2")), 3, "the header and two records")
	})

	t.Run("--follow, ended while a partition cannot be read", func(t *testing.T) {
		f, errs := startFollowerLogging(t, c, "o", "-o", "json")
		assert.Equal(t, live, values(f.nextRecords(t, len(live))))
		require.Eventually(t, func() bool { return errs.count("BrokerNotAvailable: o/1: ") == 1 }, 30*time.Second, 50*time.Millisecond)
		ctlOK(t, c, "", "produce", "o", "--partition", "2", "c3")
		assert.Equal(t, []string{"c3"}, values(f.nextRecords(t, 1)), "the others are tailed")
		require.NoError(t, f.cmd.Process.Signal(os.Interrupt))
		assert.Equal(t, 2, f.wait(t), "a partition could not be read")
		all := errs.all()
		require.NotEmpty(t, all)
		assert.True(t, strings.HasPrefix(all[len(all)-1], "BrokerNotAvailable: o/1: "), "the last line names it: %q", all)
	})

	t.Run("--follow picks the partition up when its leader is back", func(t *testing.T) {
		f, errs := startFollowerLogging(t, c, "o", "-o", "json")
		assert.Equal(t, append(slices.Clone(live), "c3"), values(f.nextRecords(t, len(live)+1)))
		require.Eventually(t, func() bool { return errs.count("BrokerNotAvailable: o/1: ") == 1 }, 30*time.Second, 50*time.Millisecond)
		// It keeps trying, without a line each time.
		ctlOK(t, c, "", "produce", "o", "--partition", "0", "a3")
		assert.Equal(t, []string{"a3"}, values(f.nextRecords(t, 1)))
		require.NoError(t, c.StartNode(2))
		assert.Equal(t, []string{"b0", "b1", "b2"}, values(f.nextRecords(t, 3)), "partition 1, once its leader is back")
		ctlOK(t, c, "", "produce", "o", "--partition", "1", "b3")
		assert.Equal(t, []string{"b3"}, values(f.nextRecords(t, 1)))
		assert.Equal(t, 1, errs.count("BrokerNotAvailable: o/1: "), "said once, not once per attempt")
		assert.Equal(t, 1, errs.count("gostream-ctl: o/1 can be read again"))
		require.NoError(t, f.cmd.Process.Signal(os.Interrupt))
		assert.Equal(t, 0, f.wait(t), "every partition could be read at the end")
	})
}

package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/client"
	"gostream/testcluster"
)

// The tests in this file run three real gostream-node processes and check
// that a user never sees a transient state that a retry a moment later
// would pass: a topic just created, a cluster just restarted.

// startCluster3 starts a three-node cluster that the test's cleanup kills.
func startCluster3(t *testing.T) *testcluster.Cluster { return startClusterOf(t, 3) }

// listOffsets asks every partition's leader for its offsets with a client
// of its own, as a program that starts now would.
func listOffsets(t *testing.T, c *testcluster.Cluster, topic string, partitions int) []client.PartitionOffsets {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.New(ctx, client.Config{Bootstrap: strings.Split(c.Bootstrap(), ",")})
	require.NoError(t, err)
	defer cl.Close()
	out := make([]client.PartitionOffsets, partitions)
	for p := range partitions {
		out[p], err = cl.ListOffsets(ctx, topic, int32(p))
		require.NoError(t, err, "list offsets of %s/%d", topic, p)
	}
	return out
}

// TestNewTopicServesAtOnce: right after topic create, consume, produce
// and list offsets of every partition work the first time.
func TestNewTopicServesAtOnce(t *testing.T) {
	c := startCluster3(t)
	const partitions = 6
	for round := range 4 {
		topic := fmt.Sprintf("fresh%d", round)
		out := ctlOK(t, c, "", "topic", "create", topic, "--partitions", strconv.Itoa(partitions), "--replication-factor", "3")
		assert.Equal(t, fmt.Sprintf("created topic %s: %d partitions, replication factor 3\n", topic, partitions), out)
		// Each command is run once: it must not need the user to retry.
		assert.Empty(t, ctlOK(t, c, "", "consume", topic, "--from-beginning"), "a new topic is empty")
		for p := range partitions {
			ctlOK(t, c, "", "produce", topic, "--partition", strconv.Itoa(p), fmt.Sprintf("v%d", p))
		}
		for p, offs := range listOffsets(t, c, topic, partitions) {
			assert.Equal(t, int64(1), offs.HighWatermark, "%s/%d", topic, p)
		}
		assert.Len(t, lines(ctlOK(t, c, "", "consume", topic, "--from-beginning")), 1+partitions, "the header and one record per partition")
	}
	out := ctlOK(t, c, "", "topic", "create", "one", "--partitions", "1", "--replication-factor", "3")
	assert.Equal(t, "created topic one: 1 partition, replication factor 3\n", out)
}

// TestFullRestartServesAtOnce stops every node (SIGTERM, then kill -9),
// starts them all again, and at once, without waiting for them to answer,
// produces and consumes: the commands wait for the cluster within their
// --timeout instead of failing with a state a moment would cure.
//
// A leader that is back before its followers refuses writes (NotReady,
// nothing appended, retried by the client) once it has failed to reach
// one of them. A write that arrives in the moment before that first
// attempt is appended and can still fail with ReplicationFailed: that
// outcome is ambiguous, so the client surfaces it and never sends it
// again; the record is in the leader's log and is read once its
// followers are back.
func TestFullRestartServesAtOnce(t *testing.T) {
	c := startCluster3(t)
	const partitions = 3
	want := map[string]int{}
	for _, topic := range []string{"rf1", "rf3"} {
		ctlOK(t, c, "", "topic", "create", topic, "--partitions", strconv.Itoa(partitions), "--replication-factor", topic[2:])
		for p := range partitions {
			ctlOK(t, c, "", "produce", topic, "--partition", strconv.Itoa(p), "before")
			want[topic]++
		}
	}
	ambiguous := 0
	produce := func(t *testing.T, topic string) {
		for p := range partitions {
			// Every failed write was appended by the leader, and is read
			// once a later write has caught its followers up.
			deadline := time.Now().Add(30 * time.Second)
			for value := "after"; ; value = "again" {
				res := ctl(t, c, "", "produce", topic, "--partition", strconv.Itoa(p), "--timeout", "30s", value)
				want[topic]++
				if res.Exit == 0 {
					assert.Regexp(t, fmt.Sprintf(`^%s/%d@\d+ \(value 1\)\n$`, topic, p), res.Stdout)
					break
				}
				require.Equal(t, "rf3", topic, "a write to one replica cannot fail for want of followers: %s", res.Stderr)
				require.True(t, strings.HasPrefix(res.Stderr, "ReplicationFailed: "), "only an ambiguous failure reaches the user: %s", res.Stderr)
				assert.Contains(t, res.Stderr, "outcome unknown")
				ambiguous++
				require.True(t, time.Now().Before(deadline), "the followers of %s/%d are not back after 30s", topic, p)
			}
		}
	}
	for _, kill := range []bool{false, true} {
		for _, first := range []string{"rf1", "rf3"} {
			t.Run(fmt.Sprintf("%s, then %s first", map[bool]string{false: "SIGTERM", true: "kill -9"}[kill], first), func(t *testing.T) {
				for _, n := range c.Nodes {
					if kill {
						require.NoError(t, n.Kill())
					} else {
						require.NoError(t, n.Stop(30*time.Second))
					}
				}
				for _, n := range c.Nodes {
					require.NoError(t, n.Start(c.Controller(), nil))
				}
				// No wait: the first command meets nodes that are still
				// starting.
				produce(t, first)
				got := lines(ctlOK(t, c, "", "consume", "rf3", "--from-beginning", "--timeout", "30s"))
				if kill {
					// A leader reads up to the high watermark it checkpointed
					// (once a second) until its followers answer.
					assert.LessOrEqual(t, len(got), 1+want["rf3"])
				} else if first == "rf1" {
					assert.Len(t, got, 1+want["rf3"], "the header and every record acknowledged before the restart")
				}
				produce(t, map[string]string{"rf1": "rf3", "rf3": "rf1"}[first])
				for _, topic := range []string{"rf1", "rf3"} {
					assert.Len(t, lines(ctlOK(t, c, "", "consume", topic, "--from-beginning", "--timeout", "30s")), 1+want[topic],
						"%s: the header and every record produced, once", topic)
				}
			})
		}
	}
	t.Logf("writes to rf3 that met a leader back before its followers (ReplicationFailed, not retried): %d, besides %d that succeeded at once or later", ambiguous, 4*partitions)
}

// TestDeadlineNamesThePartitionThatCannotServe: a command whose --timeout
// ends while a partition cannot serve (its leader is down, and nobody
// failed it over) fails at its deadline with the last error, naming the
// partition; a topic created while a broker is down is placed on the
// others, and every partition of it serves at once.
func TestDeadlineNamesThePartitionThatCannotServe(t *testing.T) {
	c := startCluster3(t)
	ctlOK(t, c, "", "topic", "create", "t", "--partitions", "3", "--replication-factor", "1")
	require.NoError(t, c.Node(3).Kill())
	// Placement: partition p is led by broker p+1.
	start := time.Now()
	res := ctlFails(t, c, 2, "BrokerNotAvailable: ", "", "consume", "t", "--partition", "2", "--timeout", "2s")
	took := time.Since(start)
	assert.Contains(t, res.Stderr, "list offsets of t/2: ")
	assert.Contains(t, res.Stderr, c.Node(3).Addr(), "the leader it could not reach")
	assert.Contains(t, res.Stderr, " attempts in ")
	assert.GreaterOrEqual(t, took, time.Second, "it retried until near the deadline")
	assert.Less(t, took, 10*time.Second)
	ctlOK(t, c, "", "consume", "t", "--partition", "1", "--timeout", "2s") // the others serve

	ctlOK(t, c, "", "topic", "create", "late", "--partitions", "3", "--replication-factor", "1", "--timeout", "3s")
	for p := range 3 {
		ctlOK(t, c, "", "produce", "late", "--partition", fmt.Sprint(p), "x", "--timeout", "3s")
	}
}

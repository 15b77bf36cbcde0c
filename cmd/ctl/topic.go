package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/metadata"
	"gostream/transport"
)

func topicCommand() *cli.Command {
	return parent("topic", "create, inspect, configure, seal and delete topics",
		described(leaf("create", "create a topic; it returns once every partition serves", "NAME", args(1, 1), topicCreateAction,
			&cli.IntFlag{Name: "partitions", Usage: "the topic's number of partitions, `N`", DefaultText: "none, required"},
			&cli.IntFlag{Name: "replication-factor", Usage: "replicas per partition, `R`", Value: 1},
			configFlag(),
		),
			`Creates topic NAME ([A-Za-z0-9._-], 1 to 249 characters, not . or ..;
names beginning with __ are the cluster's own) with --partitions
partitions of --replication-factor replicas each, at most the number of
registered brokers. It returns once every partition's leader answers, so
that a produce or consume right after it works; when --timeout ends
first the topic exists all the same, and it exits 2 with NotReady naming
the partitions that cannot serve yet.`),
		topicAlterCommand(),
		described(leaf("list", "list topics", "", args(0, 0), topicListAction),
			`Every topic with its partition count, replication factor, whether it is
sealed, and the Durable Streams stream (path and content type) it holds,
if any.`),
		described(leaf("describe", "partitions, leaders, replicas, offsets, replica lag and configuration", "NAME", args(1, 1), topicDescribeAction),
			`The topic's metadata and configuration (each key's value, and whether
the topic sets it or takes the node's default), each partition's leader,
epoch, replicas, active set, log start and high watermark as its leader
reports them, and each replica's log end, lag and state as its own broker
reports it (? or null for what did not answer).`),
		described(leaf("delete", "delete a topic and its records", "NAME", args(1, 1), topicDeleteAction),
			`Deletes topic NAME and its records on every broker. A topic created
again under the same name is a new topic (a new id): producers and
consumers of the old one never write to or read from it.`),
		described(leaf("seal", "refuse further appends; reads go on (a sealed topic stays sealed)",
			"NAME", args(1, 1), topicSealAction),
			`Makes topic NAME refuse every further append (TopicSealed) while reads
go on; a sealed topic stays sealed. A consume --follow of it ends once
it has printed every partition to its end.`),
	)
}

// topicJSON is a topic's metadata in JSON: what topic create prints, and
// the part of topic describe that comes from the metadata.
type topicJSON struct {
	Name              string `json:"name"`
	ID                string `json:"id"`
	ReplicationFactor int    `json:"replication_factor"`
	Sealed            bool   `json:"sealed"`
	// Stream is set on the topic of a Durable Streams stream.
	Stream *streamJSON `json:"stream,omitempty"`
}

type streamJSON struct {
	Path        string `json:"path"`
	ContentType string `json:"content_type"`
	ForkedFrom  string `json:"forked_from,omitempty"`
	Deleted     bool   `json:"deleted,omitempty"`
}

type partitionJSON struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	Active      []int32 `json:"active"`
}

func newPartitionJSON(p client.PartitionMetadata) partitionJSON {
	return partitionJSON{
		Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		Replicas: orEmpty(p.Replicas), Active: orEmpty(p.Active),
	}
}

// createdTopic is what topic create -o json prints.
type createdTopic struct {
	topicJSON
	Partitions []partitionJSON `json:"partitions"`
	Config     []configJSON    `json:"config"`
}

// describedTopic is what topic describe -o json prints (docs/cli.md).
type describedTopic struct {
	topicJSON
	Partitions []describedPartition `json:"partitions"`
	Config     []configJSON         `json:"config"`
}

type describedPartition struct {
	partitionJSON
	// HighWatermark and LogStartOffset are the leader's, null when the
	// leader did not answer.
	HighWatermark  *int64          `json:"high_watermark"`
	LogStartOffset *int64          `json:"log_start_offset"`
	ReplicaStatus  []replicaStatus `json:"replica_status"`
}

// replicaStatus is one replica of a partition. LogEndOffset and Lag are
// null when the state is unknown.
type replicaStatus struct {
	Broker       int32  `json:"broker"`
	LogEndOffset *int64 `json:"log_end_offset"`
	Lag          *int64 `json:"lag"`
	State        string `json:"state"`
	// Problem is why a failed replica cannot serve, as its broker says.
	Problem string `json:"problem,omitempty"`
}

// Replica states in topic describe.
const (
	// replicaLeader is the leader, which answered ListOffsets.
	replicaLeader = "leader"
	// replicaInSync is an active follower with the leader's log end.
	replicaInSync = string(transport.FollowerInSync)
	// replicaLagging is an active follower behind the leader's log end.
	replicaLagging = string(transport.FollowerLagging)
	// replicaInactive is a replica outside the active set: writes do not
	// wait for it.
	replicaInactive = "inactive"
	// replicaDiverged is a replica whose log passes the leader's: it is not
	// a prefix of the leader's log, and only recovery repairs it.
	replicaDiverged = string(transport.FollowerDiverged)
	// replicaFailed is an active follower whose own broker says it cannot
	// serve (damaged, its storage failed, a full disk): writes to the
	// partition fail until it is dropped, or until it resumes (a full
	// disk freed). cluster status gives the fix.
	replicaFailed = "failed"
	// replicaUnknown is a replica whose broker did not report its log end,
	// or whose leader did not report its own.
	replicaUnknown = string(transport.FollowerUnknown)
)

func topicCreateAction(c *cli.Context) error {
	name := c.Args().First()
	if err := metadata.ValidateTopicName(name); err != nil {
		return exitcode.Usagef("InvalidTopicName", "topic name %q: want 1 to 249 of A-Z a-z 0-9 . _ -, and not . or ..", name)
	}
	if !c.IsSet("partitions") {
		return exitcode.Usagef("MissingFlag", "--partitions N is required (see %s --help)", helpName(c))
	}
	partitions, rf := c.Int("partitions"), c.Int("replication-factor")
	if partitions < 1 {
		return exitcode.Usagef("InvalidFlag", "--partitions %d: want a positive number", partitions)
	}
	if rf < 1 {
		return exitcode.Usagef("InvalidFlag", "--replication-factor %d: want a positive number", rf)
	}
	config, err := configFromFlags(c)
	if err != nil {
		return err
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var t client.TopicMetadata
		err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl topic describe "+name, func() (err error) {
			t, err = cl.CreateTopicWithConfig(ctx, name, partitions, rf, config)
			return err
		})
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			out := createdTopic{topicJSON: newTopicJSON(t), Partitions: make([]partitionJSON, 0, len(t.Partitions)),
				Config: newConfigJSON(t.Config)}
			for _, p := range t.Partitions {
				out.Partitions = append(out.Partitions, newPartitionJSON(p))
			}
			return writeJSON(c.App.Writer, out)
		}
		line := fmt.Sprintf("created topic %s: %s, replication factor %d", t.Name, plural(len(t.Partitions), "partition"), t.ReplicationFactor)
		var own []string
		for _, v := range t.Config {
			if !v.Default {
				own = append(own, fmt.Sprintf("%s=%d", v.Key, v.Value))
			}
		}
		if len(own) > 0 {
			line += ", " + strings.Join(own, ", ")
		}
		_, err = fmt.Fprintln(c.App.Writer, line)
		return err
	})
}

func newTopicJSON(t client.TopicMetadata) topicJSON {
	tj := topicJSON{Name: t.Name, ID: t.ID, ReplicationFactor: t.ReplicationFactor, Sealed: t.Sealed}
	if st := t.Stream; st != nil {
		tj.Stream = &streamJSON{Path: st.Path, ContentType: st.ContentType, ForkedFrom: st.ForkedFrom, Deleted: st.Deleted}
	}
	return tj
}

// streamColumns are a topic's STREAM and CONTENT-TYPE columns: the
// Durable Streams path it holds (marked when deleted while forks remain),
// or - for a topic that is not a stream.
func streamColumns(st *client.StreamMetadata) (path, contentType string) {
	if st == nil {
		return "-", "-"
	}
	path = "/v1/stream/" + st.Path
	if st.Deleted {
		path += " (deleted)"
	}
	return path, st.ContentType
}

// listedTopic is one topic of topic list -o json.
type listedTopic struct {
	topicJSON
	Partitions int `json:"partitions"`
}

func topicListAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		topics, err := cl.ListTopics(ctx)
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			out := struct {
				Topics []listedTopic `json:"topics"`
			}{Topics: make([]listedTopic, 0, len(topics))}
			for _, t := range topics {
				out.Topics = append(out.Topics, listedTopic{topicJSON: newTopicJSON(t), Partitions: len(t.Partitions)})
			}
			return writeJSON(c.App.Writer, out)
		}
		tw := newTable(c.App.Writer)
		fmt.Fprintln(tw, "NAME\tPARTITIONS\tREPLICATION-FACTOR\tSEALED\tSTREAM\tCONTENT-TYPE")
		for _, t := range topics {
			path, ct := streamColumns(t.Stream)
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\n", t.Name, len(t.Partitions), t.ReplicationFactor, yesNo(t.Sealed), path, ct)
		}
		return tw.Flush()
	})
}

// describeTopic is DescribeTopic, with a plain message for a topic that
// does not exist: UnknownTopic: topic "x" does not exist.
func describeTopic(ctx context.Context, cl *client.Client, name string) (client.TopicMetadata, error) {
	t, err := cl.DescribeTopic(ctx, name)
	if errors.Is(err, transport.ErrUnknownTopic) {
		return t, exitcode.Fail("UnknownTopic", &namedError{msg: fmt.Sprintf("topic %q does not exist", name), err: err})
	}
	return t, err
}

func topicDescribeAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		t, err := describeTopic(ctx, cl, c.Args().First())
		if err != nil {
			return err
		}
		d := describe(ctx, newReplicaProber(cl, g), t)
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, d)
		}
		return printDescribed(c.App.Writer, d)
	})
}

// describe adds to a topic's metadata every partition's offsets, asked of
// its leader, and every replica's log end, asked of its broker with
// ReplicaState (observing only: it never fences), each under the prober's
// short deadline. A partition whose leader does not answer keeps null
// offsets.
func describe(ctx context.Context, prober *client.Prober, t client.TopicMetadata) describedTopic {
	d := describedTopic{topicJSON: newTopicJSON(t), Partitions: make([]describedPartition, len(t.Partitions)), Config: newConfigJSON(t.Config)}
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentProbes)
	for i, p := range t.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// Followers first, then the leader: the leader appends before it
			// replicates, so a follower in sync never seems ahead of it.
			ends := make(map[int32]int64, len(p.Replicas))
			problems := map[int32]string{}
			for _, r := range p.Replicas {
				if r == p.Leader {
					continue
				}
				if st, err := prober.ReplicaState(ctx, r, t.Name, p.Partition); err == nil {
					ends[r] = st.LogEndOffset
					if st.Problem != "" {
						problems[r] = st.Problem
					}
				}
			}
			offs, err := prober.LeaderOffsets(ctx, p.Leader, t.Name, p.Partition)
			if err != nil {
				d.Partitions[i] = describedPartitionOf(p, nil, ends, problems)
				return
			}
			d.Partitions[i] = describedPartitionOf(p, &offs, ends, problems)
		}()
	}
	wg.Wait()
	return d
}

// describedPartitionOf joins a partition's metadata, its leader's offsets
// (nil when the leader did not answer), the log ends its other replicas
// reported (a replica that did not answer is missing from ends) and the
// problems they reported.
//
// The leader is listed with its own log end and a lag of 0. Another
// replica's lag is the leader's log end minus its own; its state is
// diverged below 0, else inactive outside the active set, else failed
// when it reported a problem, else in-sync at lag 0 and lagging above. A
// replica that did not answer is unknown, with null log end and lag; so
// is every replica when the leader did not answer, since there is nothing
// to measure the lag against.
func describedPartitionOf(p client.PartitionMetadata, offs *client.PartitionOffsets, ends map[int32]int64, problems map[int32]string) describedPartition {
	dp := describedPartition{partitionJSON: newPartitionJSON(p), ReplicaStatus: make([]replicaStatus, 0, len(p.Replicas))}
	if offs != nil {
		dp.HighWatermark, dp.LogStartOffset = &offs.HighWatermark, &offs.LogStartOffset
	}
	for _, r := range p.Replicas {
		rs := replicaStatus{Broker: r, State: replicaUnknown}
		end, answered := ends[r]
		switch {
		case offs == nil:
		case r == p.Leader:
			lag := int64(0)
			rs.LogEndOffset, rs.Lag, rs.State = &offs.LogEndOffset, &lag, replicaLeader
		case answered:
			lag := offs.LogEndOffset - end
			rs.LogEndOffset, rs.Lag = &end, &lag
			switch {
			case lag < 0:
				rs.State = replicaDiverged
			case !slices.Contains(p.Active, r):
				rs.State = replicaInactive
			case problems[r] != "":
				rs.State, rs.Problem = replicaFailed, problems[r]
			case lag == 0:
				rs.State = replicaInSync
			default:
				rs.State = replicaLagging
			}
		}
		dp.ReplicaStatus = append(dp.ReplicaStatus, rs)
	}
	return dp
}

func printDescribed(w io.Writer, d describedTopic) error {
	fmt.Fprintf(w, "Topic: %s   Partitions: %d   Replication factor: %d   Sealed: %s   ID: %s\n\n",
		d.Name, len(d.Partitions), d.ReplicationFactor, yesNo(d.Sealed), d.ID)
	if st := d.Stream; st != nil {
		fmt.Fprintf(w, "Durable Stream: /v1/stream/%s   Content-Type: %s", st.Path, st.ContentType)
		if st.ForkedFrom != "" {
			fmt.Fprintf(w, "   Forked from: /v1/stream/%s", st.ForkedFrom)
		}
		if st.Deleted {
			fmt.Fprint(w, "   Deleted (forks remain)")
		}
		fmt.Fprint(w, "\n\n")
	}
	if err := printConfig(w, d.Config); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tACTIVE\tLOG-START\tHIGH-WATERMARK")
	for _, p := range d.Partitions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, p.LeaderEpoch,
			joinIDs(p.Replicas), joinIDs(p.Active), optional(p.LogStartOffset), optional(p.HighWatermark))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = newTable(w)
	fmt.Fprintln(tw, "PARTITION\tBROKER\tLOG-END\tLAG\tSTATE")
	for _, p := range d.Partitions {
		for _, r := range p.ReplicaStatus {
			fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", p.Partition, r.Broker, optional(r.LogEndOffset), optional(r.Lag), r.State)
		}
	}
	return tw.Flush()
}

// optional renders a number that may be unknown.
func optional(n *int64) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprint(*n)
}

func topicDeleteAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		name := c.Args().First()
		if err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl topic list", func() error { return cl.DeleteTopic(ctx, name) }); err != nil {
			return err
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, map[string]any{"topic": name, "deleted": true})
		}
		_, err := fmt.Fprintf(c.App.Writer, "deleted topic %s\n", name)
		return err
	})
}

func topicSealAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		name := c.Args().First()
		if err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl topic describe "+name, func() error { return cl.SealTopic(ctx, name) }); err != nil {
			return err
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, map[string]any{"topic": name, "sealed": true})
		}
		_, err := fmt.Fprintf(c.App.Writer, "sealed topic %s: it takes no more records; reads go on\n", name)
		return err
	})
}

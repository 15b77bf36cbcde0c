package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/transport"
)

func groupCommand() *cli.Command {
	reset := leaf("reset-offsets", "move a group's committed offsets (a dry run unless --execute)", "G", args(1, 1), groupResetAction,
		&cli.StringFlag{Name: "topic", Usage: "the topic `T` whose offsets move", DefaultText: "none, required"},
		&cli.IntFlag{Name: "partition", Usage: "move partition `P` only", DefaultText: "every partition"},
		&cli.BoolFlag{Name: "to-earliest", Usage: "to each partition's log start"},
		&cli.BoolFlag{Name: "to-latest", Usage: "to each partition's high watermark"},
		&cli.Int64Flag{Name: "to-offset", Usage: "to offset `N`", DefaultText: "none"},
		&cli.Int64Flag{Name: "shift-by", Usage: "by `N` from the committed offset (negative: back)", DefaultText: "none"},
		&cli.StringFlag{Name: "to-datetime", Usage: "to the first record appended at or after `TIME` (RFC 3339)"},
		&cli.BoolFlag{Name: "execute", Usage: "write the new offsets; without it, only print them"},
	)
	reset.Description = `Prints, for each partition, the committed offset and the one it would
become. Only with --execute are the new offsets written, all or none, and
only while the group has no member (GroupNotEmpty otherwise). This is the
one way to move a committed offset back.

New offsets are kept between each partition's log start and its high
watermark: --to-offset and --shift-by beyond them stop at them, however
large N is. --shift-by moves from the committed offset; a partition never
committed is left out.`
	return parent("group", "consumer groups: members, assignment, committed offsets and lag",
		described(leaf("list", "list consumer groups", "", args(0, 0), groupListAction),
			`Every group of every coordinator, sorted by name, with its state
(stable, rebalancing or empty), members and generation. A coordinator
that does not answer is a warning on stderr; its groups are missing.`),
		described(leaf("describe", "a group's state, members and their partitions, committed offsets and lag", "G", args(1, 1), groupDescribeAction),
			`Group G's state, generation and coordinator; its members, each with what
it owns and what the assignment gives it; and per partition the
committed offset (none when never committed), the log end and the lag
(unknown, with a warning on stderr, when the leader does not answer). A
group that holds nothing is UnknownGroup.`),
		reset,
		described(leaf("delete", "delete a group with no members, and its committed offsets", "G", args(1, 1), groupDeleteAction),
			`Deletes group G and its committed offsets. Refused while it has members
(GroupNotEmpty); a group that holds nothing is UnknownGroup.`),
		groupDeleteOffsetsCommand(),
	)
}

func groupListAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		list, err := cl.ListGroups(ctx)
		if err != nil {
			return err
		}
		for _, e := range list.Unavailable {
			fmt.Fprintf(c.App.ErrWriter, "warning: groups missing: %v\n", e)
		}
		if g.output == outputJSON {
			type groupJSON struct {
				Group      string `json:"group"`
				State      string `json:"state"`
				Members    int    `json:"members"`
				Generation int32  `json:"generation"`
			}
			out := struct {
				Groups      []groupJSON `json:"groups"`
				Unavailable []string    `json:"unavailable"`
			}{Groups: []groupJSON{}, Unavailable: []string{}}
			for _, gr := range list.Groups {
				out.Groups = append(out.Groups, groupJSON{gr.Name, gr.State, gr.Members, gr.GroupEpoch})
			}
			for _, e := range list.Unavailable {
				out.Unavailable = append(out.Unavailable, e.Error())
			}
			return writeJSON(c.App.Writer, out)
		}
		tw := newTable(c.App.Writer)
		fmt.Fprintln(tw, "GROUP\tSTATE\tMEMBERS\tGENERATION")
		for _, gr := range list.Groups {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", gr.Name, gr.State, gr.Members, gr.GroupEpoch)
		}
		return tw.Flush()
	})
}

type assignedJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

func assignedOf(tps []client.TopicPartition) []assignedJSON {
	out := []assignedJSON{}
	for _, tp := range tps {
		if len(out) == 0 || out[len(out)-1].Topic != tp.Topic {
			out = append(out, assignedJSON{Topic: tp.Topic, Partitions: []int32{}})
		}
		last := &out[len(out)-1]
		last.Partitions = append(last.Partitions, tp.Partition)
	}
	return out
}

// partitionsText is a member's partitions for people: "t:0,1 u:3", or "-".
func partitionsText(tps []client.TopicPartition) string {
	var parts []string
	for _, a := range assignedOf(tps) {
		parts = append(parts, a.Topic+":"+joinIDs(a.Partitions))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

// nullable is an offset for JSON: null when never committed or unknown.
func nullable(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return &v
}

func offsetText(v int64, none string) string {
	if v < 0 {
		return none
	}
	return fmt.Sprint(v)
}

func groupDescribeAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		d, err := cl.DescribeGroup(ctx, c.Args().First())
		if err != nil {
			return err
		}
		for _, p := range d.Partitions {
			if p.LogEndErr != nil {
				fmt.Fprintf(c.App.ErrWriter, "warning: log end of %s/%d unknown: %v\n", p.Topic, p.Partition, p.LogEndErr)
			}
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, newGroupJSON(d))
		}
		w := c.App.Writer
		if d.ProtocolType != "" {
			// A group of Kafka's protocol: its leader assigns.
			fmt.Fprintf(w, "group %s: %s, Kafka protocol type %s, generation %d, protocol %s, coordinator broker %d\n",
				d.Group, d.State, d.ProtocolType, d.GroupEpoch, orDash(d.Assignor), d.Coordinator)
		} else {
			fmt.Fprintf(w, "group %s: %s, generation %d, assignor %s, coordinator broker %d\n", d.Group, d.State, d.GroupEpoch, d.Assignor, d.Coordinator)
		}
		if len(d.Members) > 0 {
			fmt.Fprintln(w)
			tw := newTable(w)
			if d.ProtocolType != "" {
				fmt.Fprintln(tw, "MEMBER\tINSTANCE\tCLIENT\tHOST\tASSIGNED\tLAST-HEARD")
			} else {
				fmt.Fprintln(tw, "MEMBER\tINSTANCE\tHOST\tEPOCH\tOWNS\tTARGET\tLAST-HEARTBEAT")
			}
			for _, m := range d.Members {
				hb := "-"
				if m.SinceHeartbeat >= 0 {
					hb = m.SinceHeartbeat.Round(time.Millisecond).String() + " ago"
				}
				if d.ProtocolType != "" {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.MemberID, orDash(m.InstanceID), orDash(m.ClientID), orDash(m.Host),
						partitionsText(m.Owned), hb)
					continue
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", m.MemberID, orDash(m.InstanceID), orDash(m.Host), m.MemberEpoch,
					partitionsText(m.Owned), partitionsText(m.Target), hb)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
		}
		if len(d.Partitions) > 0 {
			fmt.Fprintln(w)
			tw := newTable(w)
			fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG")
			for _, p := range d.Partitions {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, offsetText(p.Committed, "none"),
					offsetText(p.LogEnd, "unknown"), offsetText(p.Lag, "unknown"))
			}
			return tw.Flush()
		}
		return nil
	})
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type memberJSON struct {
	MemberID           string         `json:"member_id"`
	InstanceID         *string        `json:"instance_id"`
	Host               string         `json:"host"`
	MemberEpoch        int32          `json:"member_epoch"`
	Topics             []string       `json:"topics"`
	SessionTimeoutMs   int64          `json:"session_timeout_ms"`
	Assigned           []assignedJSON `json:"assigned"`
	Target             []assignedJSON `json:"target"`
	LastHeartbeatAgoMs *int64         `json:"last_heartbeat_ago_ms"`
	ClientID           string         `json:"client_id,omitempty"`
}

type groupOffsetJSON struct {
	Topic        string `json:"topic"`
	Partition    int32  `json:"partition"`
	Committed    *int64 `json:"committed"`
	Metadata     string `json:"metadata"`
	LogEndOffset *int64 `json:"log_end_offset"`
	Lag          *int64 `json:"lag"`
}

type groupJSON struct {
	Group       string            `json:"group"`
	State       string            `json:"state"`
	Generation  int32             `json:"generation"`
	Assignor    string            `json:"assignor"`
	Coordinator int32             `json:"coordinator"`
	Members     []memberJSON      `json:"members"`
	Offsets     []groupOffsetJSON `json:"offsets"`
	// ProtocolType is a Kafka-protocol group's; absent for a native one.
	ProtocolType string `json:"protocol_type,omitempty"`
}

func newGroupJSON(d client.GroupDescription) groupJSON {
	out := groupJSON{Group: d.Group, State: d.State, Generation: d.GroupEpoch, Assignor: d.Assignor, Coordinator: d.Coordinator,
		Members: []memberJSON{}, Offsets: []groupOffsetJSON{}, ProtocolType: d.ProtocolType}
	for _, m := range d.Members {
		mj := memberJSON{MemberID: m.MemberID, Host: m.Host, MemberEpoch: m.MemberEpoch, Topics: m.Topics,
			SessionTimeoutMs: m.SessionTimeout.Milliseconds(), Assigned: assignedOf(m.Owned), Target: assignedOf(m.Target), ClientID: m.ClientID}
		if m.InstanceID != "" {
			mj.InstanceID = &m.InstanceID
		}
		if m.Topics == nil {
			mj.Topics = []string{}
		}
		if m.SinceHeartbeat >= 0 {
			ms := m.SinceHeartbeat.Milliseconds()
			mj.LastHeartbeatAgoMs = &ms
		}
		out.Members = append(out.Members, mj)
	}
	for _, p := range d.Partitions {
		out.Offsets = append(out.Offsets, groupOffsetJSON{Topic: p.Topic, Partition: p.Partition, Committed: nullable(p.Committed),
			Metadata: p.Metadata, LogEndOffset: nullable(p.LogEnd), Lag: nullable(p.Lag)})
	}
	return out
}

func groupDeleteAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		name := c.Args().First()
		if err := cl.DeleteGroup(ctx, name); err != nil {
			return err
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, map[string]any{"group": name, "deleted": true})
		}
		_, err := fmt.Fprintf(c.App.Writer, "deleted group %s and its committed offsets\n", name)
		return err
	})
}

// resetTargetOf reads where reset-offsets moves each partition from its
// flags: exactly one of them.
func resetTargetOf(c *cli.Context) (client.ResetTarget, error) {
	var set []string
	var t client.ResetTarget
	if c.Bool("to-earliest") {
		set, t.To = append(set, "--to-earliest"), client.ResetEarliest
	}
	if c.Bool("to-latest") {
		set, t.To = append(set, "--to-latest"), client.ResetLatest
	}
	if c.IsSet("to-offset") {
		set, t.To, t.Offset = append(set, "--to-offset"), client.ResetOffset, c.Int64("to-offset")
		if t.Offset < 0 {
			return t, exitcode.Usagef("InvalidFlag", "--to-offset %d: want an offset, 0 or more", t.Offset)
		}
	}
	if c.IsSet("shift-by") {
		set, t.To, t.Offset = append(set, "--shift-by"), client.ResetShift, c.Int64("shift-by")
	}
	if c.IsSet("to-datetime") {
		set, t.To = append(set, "--to-datetime"), client.ResetTime
		at, err := time.Parse(time.RFC3339, c.String("to-datetime"))
		if err != nil {
			return t, exitcode.Usagef("InvalidFlag", "--to-datetime %q: want an RFC 3339 time such as 2024-05-01T12:00:00Z", c.String("to-datetime"))
		}
		t.Time = at
	}
	switch len(set) {
	case 0:
		return t, exitcode.Usagef("MissingFlag", "say where to: --to-earliest, --to-latest, --to-offset N, --shift-by N or --to-datetime TIME")
	case 1:
		return t, nil
	}
	return t, exitcode.Usagef("InvalidFlag", "%s and %s: give one place to move to", set[0], set[1])
}

type resetRowJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed *int64 `json:"committed"`
	New       *int64 `json:"new"`
	Note      string `json:"note,omitempty"`
}

func groupResetAction(c *cli.Context) error {
	target, err := resetTargetOf(c)
	if err != nil {
		return err
	}
	topic := c.String("topic")
	if topic == "" {
		return exitcode.Usagef("MissingFlag", "--topic T is required: offsets belong to a topic")
	}
	var partitions []int32
	if c.IsSet("partition") {
		if p := c.Int("partition"); p < 0 {
			return exitcode.Usagef("InvalidFlag", "--partition %d: want a partition number, 0 or more", p)
		} else {
			partitions = []int32{int32(p)}
		}
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		group := c.Args().First()
		plan, err := cl.PlanOffsetReset(ctx, group, topic, partitions, target)
		if errors.Is(err, transport.ErrUnknownTopic) {
			return exitcode.Fail("UnknownTopic", &namedError{msg: fmt.Sprintf("topic %q does not exist", topic), err: err})
		}
		if err != nil {
			return err
		}
		rows := make([]resetRowJSON, 0, len(plan))
		for _, r := range plan {
			rows = append(rows, resetRowJSON{Topic: r.Topic, Partition: r.Partition, Committed: nullable(r.Committed), New: nullable(r.New), Note: r.Note})
		}
		execute := c.Bool("execute")
		if moves := client.ResetMoves(plan); execute && len(moves) > 0 {
			if err := cl.ResetOffsets(ctx, group, requester(), moves...); err != nil {
				return err
			}
		}
		return printReset(c.App.Writer, g.output, group, execute, rows)
	})
}

func printReset(w io.Writer, format, group string, executed bool, rows []resetRowJSON) error {
	if format == outputJSON {
		return writeJSON(w, map[string]any{"group": group, "executed": executed, "offsets": rows})
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED\tNEW\tNOTE")
	for _, r := range rows {
		committed, next := "none", "-"
		if r.Committed != nil {
			committed = fmt.Sprint(*r.Committed)
		}
		if r.New != nil {
			next = fmt.Sprint(*r.New)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", r.Topic, r.Partition, committed, next, orDash(r.Note))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if executed {
		_, err := fmt.Fprintf(w, "group %s: offsets reset\n", group)
		return err
	}
	_, err := fmt.Fprintln(w, "dry run: nothing written; add --execute to reset")
	return err
}

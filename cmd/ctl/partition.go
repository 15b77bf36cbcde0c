package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/transport"
)

// Moving replicas (docs/reassignment.md): the controller checks a plan
// and drives the moves; these commands hand it a plan, show its moves
// and cancel them.

func partitionCommand() *cli.Command {
	return parent("partition", "move a partition's replicas", described(leaf("reassign",
		"move replicas: one partition (--replicas) or a plan (--plan); --status, --cancel",
		"[TOPIC PARTITION]", args(0, 2), reassignAction,
		&cli.StringFlag{Name: "topic", Usage: "the partition's topic `T` (or TOPIC), with --partition"},
		intFlag("partition", "partition `P` of --topic (or PARTITION)", "none"),
		&cli.StringFlag{Name: "replicas", Usage: "the partition's new replicas `B,B,...`, preferred leader first"},
		&cli.StringFlag{Name: "plan", Usage: "a plan `FILE` of moves (JSON, as cluster rebalance and broker decommission print; - reads standard input)"},
		&cli.BoolFlag{Name: "execute", Usage: "start the moves (without it: a dry run that changes nothing)"},
		&cli.Float64Flag{Name: "throttle", Usage: "`MB/s` each broker sends, all its moves' copies together (0.1 to 10000)", Value: float64(defaultThrottle) / 1e6},
		&cli.BoolFlag{Name: "status", Usage: "show the moves under way (of TOPIC, or all)"},
		&cli.BoolFlag{Name: "cancel", Usage: "roll back the move of TOPIC PARTITION, or every move"},
	),
		`   gostream-ctl partition reassign --topic T --partition P --replicas 4,2,3 [--execute] [--throttle MB/s]
   gostream-ctl partition reassign --plan FILE [--execute] [--throttle MB/s]
   gostream-ctl partition reassign --status [--topic T]
   gostream-ctl partition reassign --cancel [--topic T --partition P]

   TOPIC PARTITION as arguments name the partition as --topic and
   --partition do.

Moves replicas while producers and consumers go on: each replica added
is copied from the partition's leader (at most --throttle MB/s from each
broker) and joins the active set once it holds every record; then
leadership goes to the first replica listed, and the replicas left out
are removed and deleted. Every step is in gostream-ctl cluster history.
Without --execute it prints what would move and changes nothing. A plan
is checked whole: one wrong partition refuses it all.`))
}

// defaultThrottle mirrors controller.DefaultMoveThrottle, in bytes/s.
const defaultThrottle = 50_000_000

func reassignAction(c *cli.Context) error {
	modes := 0
	for _, f := range []string{"replicas", "plan", "status", "cancel"} {
		if c.IsSet(f) {
			modes++
		}
	}
	if modes != 1 {
		return exitcode.Usagef("MissingFlag", "name one of --replicas (with --topic and --partition), --plan FILE, --status or --cancel (see %s --help)", helpName(c))
	}
	named := c.IsSet("topic") || c.IsSet("partition")
	if named && c.Args().Len() > 0 {
		return exitcode.Usagef("UnexpectedArgument", "%q: the partition is named by --topic and --partition already", c.Args().First())
	}
	switch {
	case c.Bool("status"):
		if c.IsSet("partition") {
			return exitcode.Usagef("UnexpectedFlag", "--status takes --topic at most")
		}
		if c.Args().Len() > 1 {
			return exitcode.Usagef("UnexpectedArgument", "--status takes a TOPIC at most")
		}
		topic := c.String("topic")
		if topic == "" {
			topic = c.Args().First()
		}
		return reassignStatusAction(c, topic)
	case c.Bool("cancel"):
		var plan client.MovePlan
		if named || c.Args().Len() > 0 {
			pm, err := partitionArgs(c)
			if err != nil {
				return err
			}
			plan.Partitions = []client.PlannedMove{pm}
		}
		return reassignRun(c, client.ReassignRequest{Plan: plan, Cancel: true, Requester: requester()})
	}
	throttle := c.Float64("throttle")
	if math.IsNaN(throttle) || throttle < 0.1 || throttle > 10_000 {
		return exitcode.Usagef("InvalidFlag", "--throttle %g: want MB/s from 0.1 to 10000", throttle)
	}
	req := client.ReassignRequest{Execute: c.Bool("execute"), Throttle: int64(throttle * 1e6), Requester: requester()}
	if c.IsSet("plan") {
		if named || c.Args().Len() > 0 {
			return exitcode.Usagef("UnexpectedArgument", "--plan names its partitions itself: no --topic, --partition or TOPIC PARTITION")
		}
		plan, err := readPlan(c.String("plan"), c.App.Reader)
		if err != nil {
			return err
		}
		req.Plan = plan
	} else {
		pm, err := partitionArgs(c)
		if err != nil {
			return err
		}
		if pm.Replicas, err = parseBrokerIDs(c.String("replicas")); err != nil {
			return exitcode.Usagef("InvalidFlag", "--replicas %q: %v", c.String("replicas"), err)
		}
		req.Plan.Partitions = []client.PlannedMove{pm}
	}
	return reassignRun(c, req)
}

// partitionArgs reads the partition: --topic T --partition P, or TOPIC
// PARTITION.
func partitionArgs(c *cli.Context) (client.PlannedMove, error) {
	if c.IsSet("topic") || c.IsSet("partition") {
		if !c.IsSet("topic") || !c.IsSet("partition") {
			return client.PlannedMove{}, exitcode.Usagef("MissingFlag", "name the partition with both --topic and --partition")
		}
		p := c.Int("partition")
		if p < 0 || p > math.MaxInt32 {
			return client.PlannedMove{}, exitcode.Usagef("InvalidFlag", "--partition %d: want a partition number", p)
		}
		return client.PlannedMove{Topic: c.String("topic"), Partition: int32(p)}, nil
	}
	if c.Args().Len() != 2 {
		return client.PlannedMove{}, exitcode.Usagef("MissingArgument", "name the partition: --topic T --partition P (see %s --help)", helpName(c))
	}
	p, err := strconv.ParseInt(c.Args().Get(1), 10, 32)
	if err != nil || p < 0 {
		return client.PlannedMove{}, exitcode.Usagef("InvalidArgument", "partition %q: want a partition number", c.Args().Get(1))
	}
	return client.PlannedMove{Topic: c.Args().First(), Partition: int32(p)}, nil
}

// parseBrokerIDs reads "4,2,3".
func parseBrokerIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		id, err := strconv.ParseInt(f, 10, 32)
		if err != nil || id < 1 {
			return nil, fmt.Errorf("%q is not a broker id", f)
		}
		ids = append(ids, int32(id))
	}
	return ids, nil
}

// readPlan reads a plan file ("-": r). Unknown fields are an error: a
// misspelt "replicas" would otherwise move a partition to nothing.
func readPlan(path string, r io.Reader) (client.MovePlan, error) {
	var plan client.MovePlan
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return plan, exitcode.Usagef("InvalidFlag", "--plan: %v", err)
		}
		defer f.Close()
		r = f
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&plan); err != nil {
		return plan, exitcode.Usagef("InvalidPlan", "--plan %s: not a plan: %v (see docs/reassignment.md)", path, err)
	}
	return plan, nil
}

func reassignRun(c *cli.Context, req client.ReassignRequest) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var rep client.ChangeReport
		err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl partition reassign --status", func() (err error) {
			rep, err = cl.Reassign(ctx, req)
			return err
		})
		if err != nil {
			return refused(err)
		}
		w := c.App.Writer
		if g.output == outputJSON {
			err = writeJSON(w, changeReportJSON(rep.Results, 0))
		} else {
			err = printReassign(w, req, rep.Results)
		}
		if err != nil {
			return err
		}
		return partitionsFailed(rep.Results)
	})
}

func printReassign(w io.Writer, req client.ReassignRequest, results []client.ChangeResult) error {
	if !req.Execute && !req.Cancel {
		fmt.Fprintln(w, "Dry run: nothing was changed. Run again with --execute to start these moves.")
		fmt.Fprintln(w)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PARTITION\tREPLICAS\tTO\tLEADER\tACTIVE\tRESULT")
	started := 0
	for _, r := range results {
		res := r.Note
		switch {
		case r.Error != "":
			res = "failed: " + r.Error
		case r.Action == client.ActionReassign && req.Execute && r.Note != "already on these replicas: nothing to move":
			started++
		}
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%d\t%s\t%s\n", r.Topic, r.Partition, joinIDs(r.OldReplicas), joinIDs(r.NewReplicas), r.NewLeader, joinIDs(r.NewActive), res)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if started > 0 {
		_, err := fmt.Fprintf(w, "\nStarted %d move(s), copying at most %.1f MB/s from each broker; follow them with gostream-ctl partition reassign --status\n",
			started, float64(req.Throttle)/1e6)
		return err
	}
	return nil
}

func reassignStatusAction(c *cli.Context, topic string) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		st, err := cl.ReassignStatus(ctx, topic)
		if err != nil {
			return refused(err)
		}
		w := c.App.Writer
		if g.output == outputJSON {
			return writeJSON(w, st)
		}
		if len(st.Moves) == 0 {
			_, err := fmt.Fprintln(w, "no partition is moving")
			return err
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "PARTITION\tSTEP\tFROM\tTO\tLEADER\tACTIVE\tRUNNING FOR\tCOPIES\tWAITING")
		for _, m := range st.Moves {
			waiting := m.Waiting
			if waiting == "" {
				waiting = "-"
			}
			fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", m.Topic, m.Partition, m.Step, joinIDs(m.From), joinIDs(m.Target), m.Leader, joinIDs(m.Active),
				time.Since(time.UnixMilli(m.Started)).Round(time.Second), copiesText(m.Copies), waiting)
		}
		return tw.Flush()
	})
}

// copiesText is a move's copies for people: "4: 120.0 of 500.0 MB, 48.1
// MB/s, 8 s left; 5: active".
func copiesText(cs []transport.CopyStatus) string {
	if len(cs) == 0 {
		return "-"
	}
	parts := make([]string, len(cs))
	for i, cp := range cs {
		switch {
		case cp.Active:
			parts[i] = fmt.Sprintf("%d: copied, active", cp.Broker)
		case cp.BytesPerSec > 0:
			parts[i] = fmt.Sprintf("%d: %.1f of %.1f MB, %.1f MB/s, %s left", cp.Broker, float64(cp.CopiedBytes)/1e6, float64(cp.TotalBytes)/1e6,
				cp.BytesPerSec/1e6, (time.Duration(cp.SecondsLeft) * time.Second).String())
		default:
			parts[i] = fmt.Sprintf("%d: %.1f MB copied", cp.Broker, float64(cp.CopiedBytes)/1e6)
		}
	}
	return strings.Join(parts, "; ")
}

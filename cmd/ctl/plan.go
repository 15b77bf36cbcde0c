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

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
)

// The planners: cluster rebalance and broker decommission print a plan of
// moves (docs/reassignment.md, "Placement and planning") and write it for
// partition reassign --plan.

// outFlag is where a planner writes its plan. Not --output, which is the
// global format flag.
func outFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "out", Usage: "write the plan to `FILE` (JSON), for gostream-ctl partition reassign --plan FILE"}
}

// executeFlags carry a plan out as partition reassign --plan --execute
// does.
func executeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "execute", Usage: "start the plan's moves (as partition reassign --plan FILE --execute)"},
		&cli.Float64Flag{Name: "throttle", Usage: "with --execute: `MB/s` each broker sends, all its moves' copies together (0.1 to 10000)", Value: float64(defaultThrottle) / 1e6},
	}
}

func rebalanceCommand() *cli.Command {
	return described(leaf("rebalance", "plan moves that even out rack spread, replicas, preferred leaders and bytes per broker; --execute starts them",
		"", args(0, 0), rebalanceAction,
		append([]cli.Flag{
			&cli.StringSliceFlag{Name: "topic", Usage: "plan topic `T` only (repeat it for several); every topic when none"},
			outFlag(),
		}, executeFlags()...)...,
	),
		`Plans the moves that even out, in this order, rack spread (no two
replicas of a partition in one rack while another rack has room),
replicas per broker, preferred leaders per broker (by reordering
replica lists, which copies nothing), and bytes per broker, onto the
brokers that answer, preferring moves that copy fewer bytes. Prints the moves,
the bytes to copy and each broker's share before and after; with --out
FILE it also writes the plan, which partition reassign --plan FILE
--execute carries out. A balanced cluster gives an empty plan. Moves
nothing unless --execute: then the plan's moves start at once, as
partition reassign --plan --execute starts them (--throttle MB/s).
Partitions being moved are left out (the notes say so).`)
}

func decommissionCommand() *cli.Command {
	return described(leaf("decommission", "plan moving every replica off broker ID; --execute starts the moves",
		"ID", args(1, 1), decommissionAction, append([]cli.Flag{outFlag()}, executeFlags()...)...),
		`Plans moving every replica off broker ID: each goes to a broker the
partition does not hold, in a rack it has no replica in first, then the
least loaded. Where ID is a partition's first replica, leadership goes
to one of its other replicas. Refused (InvalidReplicationFactor, naming
the partitions) when a partition's replica count cannot be kept with
the brokers left, and for an unknown ID (UnknownBroker). Prints the plan
as cluster rebalance does; --out FILE writes it for partition reassign
--plan FILE --execute. Moves nothing unless --execute: then the moves
start at once (--throttle MB/s); once they are done the broker holds
nothing and can be stopped.`)
}

func rebalanceAction(c *cli.Context) error {
	topics := c.StringSlice("topic")
	for _, t := range topics {
		if strings.TrimSpace(t) == "" {
			return exitcode.Usagef("InvalidFlag", "--topic %q: want a topic name", t)
		}
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		p, err := cl.PlanRebalance(ctx, topics...)
		if err != nil {
			return refused(err)
		}
		if err := showPlan(c, g, p, "The cluster is balanced: nothing to move."); err != nil {
			return err
		}
		return executePlan(ctx, c, cl, g, p)
	})
}

func decommissionAction(c *cli.Context) error {
	id, err := strconv.ParseInt(c.Args().First(), 10, 32)
	if err != nil || id < 1 {
		return exitcode.Usagef("InvalidArgument", "broker id %q: want a positive number", c.Args().First())
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		p, err := cl.PlanDecommission(ctx, int32(id))
		if err != nil {
			return refused(err)
		}
		if err := showPlan(c, g, p, fmt.Sprintf("Broker %d holds no replicas: nothing to move.", id)); err != nil {
			return err
		}
		return executePlan(ctx, c, cl, g, p)
	})
}

// executePlan starts the plan's moves with --execute (a plan that moves
// nothing starts nothing), and prints what started as partition reassign
// does; with -o json, its change report on a line of its own.
func executePlan(ctx context.Context, c *cli.Context, cl *client.Client, g globals, p client.MovePlan) error {
	if !c.Bool("execute") || len(p.Partitions) == 0 {
		return nil
	}
	throttle := c.Float64("throttle")
	if math.IsNaN(throttle) || throttle < 0.1 || throttle > 10_000 {
		return exitcode.Usagef("InvalidFlag", "--throttle %g: want MB/s from 0.1 to 10000", throttle)
	}
	req := client.ReassignRequest{Plan: p, Execute: true, Throttle: int64(throttle * 1e6), Requester: requester()}
	rep, err := cl.Reassign(ctx, req)
	if err != nil {
		return refused(err)
	}
	w := c.App.Writer
	if g.output == outputJSON {
		err = writeJSON(w, changeReportJSON(rep.Results, 0))
	} else {
		fmt.Fprintln(w)
		err = printReassign(w, req, rep.Results)
	}
	if err != nil {
		return err
	}
	return partitionsFailed(rep.Results)
}

// showPlan writes the plan to --out, if given, and prints it: the plan
// itself with -o json, else a table.
func showPlan(c *cli.Context, g globals, p client.MovePlan, empty string) error {
	out := c.String("out")
	if out != "" {
		data, err := json.MarshalIndent(p, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(out, append(data, '\n'), 0o644); err != nil {
			return exitcode.Fail("CannotWrite", err)
		}
	}
	w := c.App.Writer
	if g.output == outputJSON {
		if out != "" {
			fmt.Fprintf(c.App.ErrWriter, "plan written to %s\n", out)
		}
		return writeJSON(w, p)
	}
	if err := printPlan(w, p, empty); err != nil {
		return err
	}
	switch {
	case out != "" && len(p.Partitions) > 0:
		fmt.Fprintf(w, "\nPlan written to %s. Carry it out with: gostream-ctl partition reassign --plan %s --execute\n", out, out)
	case out != "":
		fmt.Fprintf(w, "\nPlan written to %s.\n", out)
	case len(p.Partitions) > 0 && !c.Bool("execute"):
		fmt.Fprintln(w, "\nNothing was moved. Run again with --execute, or write the plan with --out FILE, then: gostream-ctl partition reassign --plan FILE --execute")
	}
	return nil
}

func printPlan(w io.Writer, p client.MovePlan, empty string) error {
	s := p.Summary
	if s == nil {
		s = &client.PlanSummary{}
	}
	if len(p.Partitions) == 0 {
		fmt.Fprintln(w, empty)
	} else {
		fmt.Fprintf(w, "Plan: %s, %s to copy (%s).\n\n", plural(s.Moves, "move"), plural(s.NewReplicas, "replica"), bytesText(s.BytesToCopy))
		tw := newTable(w)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tFROM\tTO\tCOPY\tREASON")
		for _, m := range p.Partitions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", m.Topic, m.Partition, joinIDs(m.From), joinIDs(m.Replicas), bytesText(m.Bytes), m.Reason)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(s.Brokers) > 0 {
		fmt.Fprintln(w)
		tw := newTable(w)
		fmt.Fprintln(tw, "BROKER\tRACK\tREPLICAS\tLEADERS\tBYTES")
		for _, b := range s.Brokers {
			rack := b.Rack
			if rack == "" {
				rack = "-"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", b.Broker, rack, beforeAfter(fmt.Sprint(b.Replicas), fmt.Sprint(b.ReplicasAfter)),
				beforeAfter(fmt.Sprint(b.Leaders), fmt.Sprint(b.LeadersAfter)), beforeAfter(bytesText(b.Bytes), bytesText(b.BytesAfter)))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(s.Notes) > 0 {
		fmt.Fprintln(w, "\nNotes:")
		for _, n := range s.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
	return nil
}

// beforeAfter is a value before and after a plan: "3", or "3 -> 4".
func beforeAfter(before, after string) string {
	if before == after {
		return before
	}
	return before + " -> " + after
}

// bytesText is a size for people: 0 B, 512 B, 1.5 KiB, 12.0 MiB, 3.2 GiB.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

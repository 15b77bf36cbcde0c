package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/transport"
)

// verify prints client.Verify's report: every active replica of a
// partition compared with its leader, by content, over the offsets both
// hold below the high watermark, after each replica's broker read every
// batch of the range whole and checked it.

func verifyCommand() *cli.Command {
	return described(leaf("verify", "read every active replica up to the high watermark, check every batch, and compare it with its leader",
		"", args(0, 0), verifyAction,
		&cli.StringFlag{Name: "topic", Usage: "topic `T` (default every topic)"},
	),
		`For every partition (of --topic T, or of every topic), each active
replica's own broker reads its log whole up to the high watermark and
checks every batch (checksum, records, offsets without a gap); then the
replicas' digests are compared with the leader's. It reads everything:
it costs what reading the whole cluster's data costs. Exit 2 when a
replica is damaged (StorageFailed, with the command that fixes it),
differs (ReplicaDivergence) or could not be compared (Unverified).`)
}

func verifyAction(c *cli.Context) error {
	topic := c.String("topic")
	if c.IsSet("topic") && topic == "" {
		return exitcode.Usagef("InvalidFlag", "--topic: want a topic name")
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var topics []string
		if topic != "" {
			topics = []string{topic}
		}
		rep, err := cl.Verify(ctx, topics...)
		if errors.Is(err, transport.ErrUnknownTopic) {
			return exitcode.Fail("UnknownTopic", &namedError{msg: fmt.Sprintf("topic %q does not exist", topic), err: err})
		}
		if err != nil {
			return err
		}
		w := c.App.Writer
		if g.output == outputJSON {
			err = writeJSON(w, rep)
		} else {
			err = printVerify(w, rep)
		}
		if err != nil {
			return err
		}
		return verifyFailed(rep)
	})
}

// problems lists, for people, what is wrong with a partition's replicas.
func problems(vp client.VerifiedPartition) []string {
	var out []string
	for _, r := range vp.Replicas {
		switch r.State {
		case client.VerifyDiffers:
			out = append(out, fmt.Sprintf("broker %d %s", r.Broker, r.Error))
		case client.VerifyUnknown:
			out = append(out, fmt.Sprintf("broker %d unknown: %s", r.Broker, r.Error))
		case client.VerifyDamaged:
			out = append(out, fmt.Sprintf("broker %d damaged: %s; fix: %s", r.Broker, r.Error, r.Command))
		}
	}
	return out
}

func printVerify(w io.Writer, rep client.VerifyReport) error {
	if len(rep.Partitions) == 0 {
		_, err := fmt.Fprintln(w, "No partitions to verify.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tHIGH-WATERMARK\tFOLLOWERS\tRESULT")
	for _, vp := range rep.Partitions {
		var followers []int32
		for _, r := range vp.Replicas {
			if r.State != client.VerifyLeader {
				followers = append(followers, r.Broker)
			}
		}
		result := "OK"
		if ps := problems(vp); len(ps) > 0 {
			result = strings.Join(ps, "; ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", partitionName(vp.Topic, vp.Partition), vp.Leader,
			optional(vp.HighWatermark), joinIDs(followers), result)
	}
	return tw.Flush()
}

// verifyFailed is the error verify exits with: StorageFailed when a
// replica is damaged, ReplicaDivergence when one differs from its leader,
// Unverified when none differs but some could not be compared.
func verifyFailed(rep client.VerifyReport) error {
	var differs, unknown, damage []string
	for _, vp := range rep.Partitions {
		for _, r := range vp.Replicas {
			where := fmt.Sprintf("%s broker %d", partitionName(vp.Topic, vp.Partition), r.Broker)
			switch r.State {
			case client.VerifyDiffers:
				differs = append(differs, where)
			case client.VerifyUnknown:
				unknown = append(unknown, where)
			case client.VerifyDamaged:
				damage = append(damage, where+" (fix: "+r.Command+")")
			}
		}
	}
	switch {
	case len(damage) > 0:
		return exitcode.Fail("StorageFailed", fmt.Errorf("%s %s damaged: %s", plural(len(damage), "replica"), agree(len(damage), "is", "are"), strings.Join(damage, ", ")))
	case len(differs) > 0:
		msg := fmt.Sprintf("%s %s: %s", plural(len(differs), "replica"), agree(len(differs), "differs from its leader", "differ from their leader"), strings.Join(differs, ", "))
		if len(unknown) > 0 {
			msg += fmt.Sprintf("; %d could not be compared: %s", len(unknown), strings.Join(unknown, ", "))
		}
		return exitcode.Fail("ReplicaDivergence", errors.New(msg))
	case len(unknown) > 0:
		return exitcode.Fail("Unverified", fmt.Errorf("%s could not be compared with %s: %s", plural(len(unknown), "replica"), agree(len(unknown), "its leader", "their leader"), strings.Join(unknown, ", ")))
	}
	return nil
}

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
	"gostream/metadata"
)

// keysMoveNote is what topic alter --partitions says after every growth,
// dry run or not: Kafka's warning, in plain words. The table prints it as
// these lines, JSON as one.
var keysMoveNote = []string{
	"Records of a key may go to another partition from now on: a key maps to its",
	"partition by the partition count. A key's records stay in order within each",
	"partition, not across this change; consumers that rely on a key's partition",
	"must expect it. Producers route by the new count once they refresh their",
	"metadata (the Go client within its MetadataMaxAge, 30 s by default; Kafka",
	"clients within their metadata refresh interval, 5 minutes by default).",
}

// grownTopic is what topic alter --partitions -o json prints.
type grownTopic struct {
	Topic            string           `json:"topic"`
	DryRun           bool             `json:"dry_run"`
	PartitionsBefore int32            `json:"partitions_before"`
	Partitions       int32            `json:"partitions"`
	Added            []grownPartition `json:"added"`
	Note             string           `json:"note"`
}

type grownPartition struct {
	Partition int32   `json:"partition"`
	Leader    int32   `json:"leader"`
	Replicas  []int32 `json:"replicas"`
}

func topicGrowAction(c *cli.Context) error {
	name := c.Args().First()
	if err := metadata.ValidateTopicName(name); err != nil {
		return exitcode.Usagef("InvalidTopicName", "topic name %q: want 1 to 249 of A-Z a-z 0-9 . _ -, and not . or ..", name)
	}
	if len(c.StringSlice("config")) > 0 || len(c.StringSlice("delete-config")) > 0 {
		return exitcode.Usagef("InvalidFlag", "--partitions is a change of its own: run topic alter once with --partitions, and once with --config or --delete-config")
	}
	count := c.Int("partitions")
	if count < 1 || count > metadata.MaxPartitions {
		return exitcode.Usagef("InvalidFlag", "--partitions %d: want a number from 1 to %d, above the topic's partition count", count, metadata.MaxPartitions)
	}
	dry := c.Bool("dry-run")
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var rep client.ChangeReport
		err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl topic describe "+name, func() (err error) {
			rep, err = cl.CreatePartitions(ctx, client.CreatePartitionsRequest{Topic: name, Count: int32(count), DryRun: dry, Requester: requester()})
			return err
		})
		if len(rep.Results) == 0 {
			return err
		}
		// Grown, whether or not every new partition serves yet (err then
		// names those that do not): say what changed first.
		out := grownOf(name, int32(count), dry, rep.Results)
		if g.output == outputJSON {
			if werr := writeJSON(c.App.Writer, out); werr != nil {
				return errors.Join(err, werr)
			}
			return err
		}
		return errors.Join(err, printGrown(c.App.Writer, out))
	})
}

func grownOf(name string, count int32, dry bool, results []client.ChangeResult) grownTopic {
	out := grownTopic{Topic: name, DryRun: dry, PartitionsBefore: results[0].Partition, Partitions: count,
		Added: make([]grownPartition, 0, len(results)), Note: strings.Join(keysMoveNote, " ")}
	for _, r := range results {
		out.Added = append(out.Added, grownPartition{Partition: r.Partition, Leader: r.NewLeader, Replicas: orEmpty(r.NewActive)})
	}
	return out
}

func printGrown(w io.Writer, g grownTopic) error {
	if g.DryRun {
		fmt.Fprintf(w, "topic %s would grow from %d to %d partitions (dry run: nothing changed):\n\n", g.Topic, g.PartitionsBefore, g.Partitions)
	} else {
		fmt.Fprintf(w, "topic %s grew from %d to %d partitions:\n\n", g.Topic, g.PartitionsBefore, g.Partitions)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tREPLICAS")
	for _, p := range g.Added {
		fmt.Fprintf(tw, "%d\t%d\t%s\n", p.Partition, p.Leader, joinIDs(p.Replicas))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\n%s\n", strings.Join(keysMoveNote, "\n"))
	return err
}

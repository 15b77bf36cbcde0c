package main

import (
	"context"
	"fmt"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
)

func groupDeleteOffsetsCommand() *cli.Command {
	return described(leaf("delete-offsets", "delete a group's committed offsets of a topic", "G", args(1, 1), groupDeleteOffsetsAction,
		&cli.StringFlag{Name: "topic", Usage: "the topic `T` whose offsets go", DefaultText: "none, required"},
		&cli.IntFlag{Name: "partition", Usage: "delete partition `P`'s only", DefaultText: "every partition committed"},
	),
		`Deletes group G's committed offsets of topic T (of partition P only with
--partition), all or none, as Kafka's OffsetDelete does: a member that
reads T next starts by its reset policy. Refused while a member of G
subscribes to T (GroupSubscribedToTopic) or, for a Kafka group of another
protocol type than consumer, while it has members (GroupNotEmpty); a
group that holds nothing is UnknownGroup. A group left with no member and
no offset is deleted. Prints the offsets deleted. The offsets of a topic
that no longer exists can be deleted too.`)
}

type deletedOffsetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

func groupDeleteOffsetsAction(c *cli.Context) error {
	topic := c.String("topic")
	if topic == "" {
		return exitcode.Usagef("MissingFlag", "--topic T is required: offsets belong to a topic")
	}
	var partitions []int32
	if c.IsSet("partition") {
		p := c.Int("partition")
		if p < 0 {
			return exitcode.Usagef("InvalidFlag", "--partition %d: want a partition number, 0 or more", p)
		}
		partitions = []int32{int32(p)}
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		group := c.Args().First()
		deleted, err := cl.DeleteOffsets(ctx, group, requester(), topic, partitions...)
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			out := []deletedOffsetJSON{}
			for _, o := range deleted {
				out = append(out, deletedOffsetJSON{o.Topic, o.Partition, o.Offset})
			}
			return writeJSON(c.App.Writer, map[string]any{"group": group, "topic": topic, "deleted": out})
		}
		w := c.App.Writer
		if len(deleted) == 0 {
			_, err := fmt.Fprintf(w, "group %s has no committed offset of %s to delete\n", group, topicOrPartition(topic, partitions))
			return err
		}
		tw := newTable(w)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCOMMITTED")
		for _, o := range deleted {
			fmt.Fprintf(tw, "%s\t%d\t%d\n", o.Topic, o.Partition, o.Offset)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		noun := "offsets"
		if len(deleted) == 1 {
			noun = "offset"
		}
		_, err = fmt.Fprintf(w, "deleted %d committed %s of group %s\n", len(deleted), noun, group)
		return err
	})
}

// topicOrPartition names a topic, or one of its partitions.
func topicOrPartition(topic string, partitions []int32) string {
	if len(partitions) == 1 {
		return fmt.Sprintf("%s/%d", topic, partitions[0])
	}
	return topic
}

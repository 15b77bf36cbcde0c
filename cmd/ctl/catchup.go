package main

import (
	"context"
	"fmt"
	"math"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
)

func catchUpCommand() *cli.Command {
	return described(leaf("catch-up", "bring a lagging active follower up to the leader", "", args(0, 0), catchUpAction,
		topicFlag(), intFlag("partition", "partition `P` (required)", "none, required"),
		intFlag("broker", "the follower, broker `B` (required)", "none, required"),
	),
		`Asks the partition's leader to bring its active follower B up to its log
end now (the leader also does so by itself before its next write is
acknowledged). All three flags are required. Refused (InvalidRequest)
when B leads the partition or is not an active replica, and
(ReplicaDivergence) when B's log is not a prefix of the leader's: that
takes recover.`)
}

// caughtUp is what catch-up -o json prints.
type caughtUp struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	Broker     int32  `json:"broker"`
	FromOffset int64  `json:"from_offset"`
	ToOffset   int64  `json:"to_offset"`
}

func catchUpAction(c *cli.Context) error {
	topic := c.String("topic")
	for _, f := range []string{"topic", "partition", "broker"} {
		if !c.IsSet(f) {
			return exitcode.Usagef("MissingFlag", "--topic, --partition and --broker are required (see %s --help)", helpName(c))
		}
	}
	if topic == "" {
		return exitcode.Usagef("InvalidFlag", "--topic: want a topic name")
	}
	partition, broker := c.Int("partition"), c.Int("broker")
	if partition < 0 || partition > math.MaxInt32 {
		return exitcode.Usagef("InvalidFlag", "--partition %d: want a partition number", partition)
	}
	if broker < 1 || broker > math.MaxInt32 {
		return exitcode.Usagef("InvalidFlag", "--broker %d: want a broker id, a positive number", broker)
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		if _, err := describeTopic(ctx, cl, topic); err != nil {
			return err
		}
		res, err := cl.CatchUp(ctx, topic, int32(partition), int32(broker))
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, caughtUp{
				Topic: topic, Partition: int32(partition), Broker: int32(broker),
				FromOffset: res.FromOffset, ToOffset: res.ToOffset,
			})
		}
		_, err = fmt.Fprintf(c.App.Writer, "caught up broker %d on %s/%d from offset %d to %d\n",
			broker, topic, partition, res.FromOffset, res.ToOffset)
		return err
	})
}

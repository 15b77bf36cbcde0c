package main

import (
	"strings"

	"github.com/urfave/cli/v2"

	"gostream/cmd/internal/exitcode"
)

// globalsNote ends the help of every command, whose own help would
// otherwise not mention the global options it accepts.
const globalsNote = `
GLOBAL OPTIONS (before or after the command, see gostream-ctl --help):
   --bootstrap HOST:PORT,...  -o, --output table|json  --timeout DURATION
`

// commands returns the command tree of CLI.md. Commands that a later issue
// brings are registered with their arguments and flags, so that --help
// shows the contract, and fail with NotImplemented.
func commands() []*cli.Command {
	return []*cli.Command{
		parent("cluster", "the cluster as a whole",
			leaf("status", "controller, brokers, partition health, and warnings with the command that fixes each",
				"", args(0, 0), notImplemented),
		),
		parent("broker", "brokers",
			leaf("list", "brokers with addresses and states", "", args(0, 0), notImplemented),
		),
		parent("topic", "create, inspect, seal and delete topics",
			leaf("create", "create a topic", "NAME", args(1, 1), notImplemented,
				intFlag("partitions", "the topic's number of partitions, `N`"),
				intFlag("replication-factor", "replicas per partition, `R`"),
			),
			leaf("list", "list topics", "", args(0, 0), notImplemented),
			leaf("describe", "partitions, leaders, replicas and their lag", "NAME", args(1, 1), notImplemented),
			leaf("delete", "delete a topic", "NAME", args(1, 1), notImplemented),
			leaf("seal", "refuse further appends; reads go on (a sealed topic stays sealed)",
				"NAME", args(1, 1), notImplemented),
		),
		leaf("produce", "append one record per VALUE, or per stdin line when none is given",
			"TOPIC [VALUE ...]", args(1, -1), notImplemented,
			&cli.StringFlag{Name: "key", Usage: "record key `K`"},
			&cli.IntFlag{Name: "partition", Usage: "write to partition `P`", Value: -1, DefaultText: "chosen by the key"},
		),
		leaf("consume", "print records; without --follow stop at the high watermark, with it tail",
			"TOPIC", args(1, 1), notImplemented,
			intFlag("partition", "read partition `P`"),
			&cli.Int64Flag{Name: "offset", Usage: "start at offset `N`"},
			&cli.BoolFlag{Name: "from-beginning", Usage: "start at the log start offset"},
			&cli.BoolFlag{Name: "from-end", Usage: "start at the high watermark"},
			&cli.Int64Flag{Name: "max", Usage: "stop after `N` records"},
			&cli.BoolFlag{Name: "follow", Usage: "keep waiting for new records"},
			&cli.StringFlag{Name: "group", Usage: "consume as consumer group `G`"},
		),
		leaf("catch-up", "bring a lagging active follower up to the leader", "", args(0, 0), notImplemented,
			topicFlag(), intFlag("partition", "partition `P`"), intFlag("broker", "the follower, broker `B`"),
		),
		leaf("failover", "replace a failed leader (--topic --partition) or drop a lost replica (--broker)",
			"", args(0, 0), notImplemented,
			topicFlag(), intFlag("partition", "partition `P`"), intFlag("broker", "the lost broker `B`"),
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would change and change nothing"},
		),
		leaf("recover", "bring a returning replica (or all of a broker's) back as a follower",
			"", args(0, 0), notImplemented,
			topicFlag(), intFlag("partition", "partition `P`"), intFlag("broker", "the returning broker `B`"),
		),
		leaf("verify", "compare every active replica with its leader up to the high watermark",
			"", args(0, 0), notImplemented, topicFlag()),
		parent("group", "consumer groups (when they exist)",
			leaf("list", "list consumer groups", "", args(0, 0), notImplemented),
			leaf("describe", "members, committed offsets and lag of a group", "G", args(1, 1), notImplemented),
			leaf("reset-offsets", "move a group's committed offsets", "G ...", args(1, -1), notImplemented),
		),
		parent("bench", "load generator: records/s, MB/s, latency p50/p99/p999",
			leaf("produce", "measure producing", "", args(0, 0), notImplemented,
				&cli.StringFlag{Name: "topic", Usage: "topic `T` to write to", Value: "bench"},
				&cli.Int64Flag{Name: "records", Usage: "number of records `N`", Value: 100000},
				&cli.IntFlag{Name: "record-size", Usage: "value size in `BYTES`", Value: 100},
			),
			leaf("consume", "measure consuming", "", args(0, 0), notImplemented,
				&cli.StringFlag{Name: "topic", Usage: "topic `T` to read", Value: "bench"},
				&cli.Int64Flag{Name: "records", Usage: "number of records `N`", Value: 100000},
			),
		),
		healthCommand(),
	}
}

func parent(name, usage string, subcommands ...*cli.Command) *cli.Command {
	return &cli.Command{
		Name:        name,
		Usage:       usage,
		Subcommands: subcommands,
		Action:      parentAction,
	}
}

// leaf returns a command that checks its positional arguments against spec
// before it runs action.
func leaf(name, usage, argsUsage string, spec argSpec, action cli.ActionFunc, flags ...cli.Flag) *cli.Command {
	return &cli.Command{
		Name:               name,
		Usage:              usage,
		ArgsUsage:          argsUsage,
		Flags:              flags,
		CustomHelpTemplate: cli.CommandHelpTemplate + globalsNote,
		Action: func(c *cli.Context) error {
			if err := spec.check(c); err != nil {
				return err
			}
			return action(c)
		},
	}
}

func intFlag(name, usage string) *cli.IntFlag {
	return &cli.IntFlag{Name: name, Usage: usage}
}

func topicFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "topic", Usage: "topic `T`"}
}

// argSpec is how many positional arguments a command takes; max < 0 means
// any number from min.
type argSpec struct{ min, max int }

func args(min, max int) argSpec { return argSpec{min: min, max: max} }

// check returns a usage error when c has too few or too many positional
// arguments.
func (s argSpec) check(c *cli.Context) error {
	n := c.Args().Len()
	usage := strings.TrimSpace(helpName(c) + " " + c.Command.ArgsUsage)
	switch {
	case n < s.min:
		return exitcode.Usagef("MissingArgument", "usage: %s", usage)
	case s.max >= 0 && n > s.max:
		return exitcode.Usagef("UnexpectedArgument", "%q: usage: %s", c.Args().Get(s.max), usage)
	}
	return nil
}

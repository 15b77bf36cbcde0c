package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/metadata"
)

// configKeysUsage names the topic configuration keys, for --help.
var configKeysUsage = strings.Join(metadata.ConfigKeys(), ", ")

func configFlag() *cli.StringSliceFlag {
	return &cli.StringSliceFlag{Name: "config",
		Usage: "topic configuration `KEY=VALUE`, one of " + configKeysUsage + "; repeat for more"}
}

func topicAlterCommand() *cli.Command {
	cmd := leaf("alter", "change a topic's configuration (retention, segments), or add partitions", "NAME", args(1, 1), topicAlterAction,
		configFlag(),
		&cli.StringSliceFlag{Name: "delete-config", Usage: "configuration `KEY` the topic stops setting (it takes each node's default again); repeat for more"},
		intFlag("partitions", "grow the topic to `N` partitions (never fewer); keys map to other partitions from then on", "none"),
		&cli.BoolFlag{Name: "dry-run", Usage: "with --partitions: print where the new partitions would go, and change nothing"},
	)
	cmd.Description = `With --partitions N, grows the topic to N partitions, never fewer (see
below). Otherwise sets the --config keys and removes the --delete-config
keys of a topic's configuration, as one change, and prints the
configuration after it. The keys, with Kafka's names and meanings (values
are integers):

   retention.bytes  what a partition keeps, in bytes: its oldest segments are
                    deleted while the rest still hold this much; -1 any amount
   retention.ms     how long a partition keeps records, in milliseconds: a
                    segment is deleted once its newest record is older; -1 forever
   segment.bytes    the size at which a partition's active segment rolls,
                    from 1048576 (1 MiB) to 1073741824 (1 GiB)
   segment.ms       the age at which it rolls, at least 1000

Retention deletes whole segments, never the active one, and never a record
that not every active replica holds (the high watermark). Every broker
applies the change to its replicas when the new metadata reaches it; the
next retention run (gostream-node --retention-check-interval) deletes what
is no longer kept.

--partitions N adds partitions to the topic, placed on the brokers that
answer with the topic's replication factor, their leaders spread on from
the topic's (--dry-run shows where, and changes nothing); it returns once
each new partition's leader answers. A key maps to its partition by the
partition count, so records of a key may go to another partition from then
on: a key's records stay in order within each partition, not across the
change, and consumers that rely on a key's partition must expect it. The
topic of a Durable Streams stream, the cluster's internal topics and a
sealed topic cannot grow. --partitions is a change of its own: it does not
go with --config or --delete-config.`
	return cmd
}

// configFromFlags reads the repeated --config KEY=VALUE flags. A bad entry
// is bad usage (exit 1), named InvalidConfig and naming the key: nothing
// is sent.
func configFromFlags(c *cli.Context) (metadata.TopicConfig, error) {
	var config metadata.TopicConfig
	for _, entry := range c.StringSlice("config") {
		key, value, err := metadata.ParseConfig(entry)
		if err != nil {
			return nil, invalidConfig(err)
		}
		if _, dup := config[key]; dup {
			return nil, exitcode.Usagef("InvalidConfig", "--config %s given twice", key)
		}
		if config == nil {
			config = metadata.TopicConfig{}
		}
		config[key] = value
	}
	return config, nil
}

// invalidConfig is the usage error for a configuration entry that
// package metadata refused.
func invalidConfig(err error) error {
	return exitcode.Usagef("InvalidConfig", "%s", strings.TrimPrefix(err.Error(), metadata.ErrInvalidConfig.Error()+": "))
}

func topicAlterAction(c *cli.Context) error {
	if c.IsSet("partitions") {
		return topicGrowAction(c)
	}
	if c.Bool("dry-run") {
		return exitcode.Usagef("InvalidFlag", "--dry-run goes with --partitions (a configuration change has no dry run)")
	}
	name := c.Args().First()
	set, err := configFromFlags(c)
	if err != nil {
		return err
	}
	remove := c.StringSlice("delete-config")
	for _, k := range remove {
		if err := metadata.CheckConfigKey(k); err != nil {
			return invalidConfig(err)
		}
		if _, both := set[k]; both {
			return exitcode.Usagef("InvalidConfig", "%s is both in --config and in --delete-config", k)
		}
	}
	if len(set) == 0 && len(remove) == 0 {
		return exitcode.Usagef("MissingFlag", "give --config KEY=VALUE, --delete-config KEY or --partitions N (see %s --help)", helpName(c))
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var t client.TopicMetadata
		err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl topic describe "+name, func() (err error) {
			t, err = cl.AlterTopicConfig(ctx, name, set, remove)
			return err
		})
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, map[string]any{"topic": name, "config": newConfigJSON(t.Config)})
		}
		fmt.Fprintf(c.App.Writer, "altered topic %s; its configuration is now:\n\n", name)
		return printConfig(c.App.Writer, newConfigJSON(t.Config))
	})
}

// configJSON is one configuration key in topic describe and topic alter
// -o json. Source is "topic" for a key the topic sets, "default" for the
// default of the broker that answered.
type configJSON struct {
	Key    string `json:"key"`
	Value  int64  `json:"value"`
	Source string `json:"source"`
}

// Sources of a configuration value.
const (
	configTopic   = "topic"
	configDefault = "default"
)

func newConfigJSON(values []client.TopicConfigValue) []configJSON {
	out := make([]configJSON, 0, len(values))
	for _, v := range values {
		src := configTopic
		if v.Default {
			src = configDefault
		}
		out = append(out, configJSON{Key: v.Key, Value: v.Value, Source: src})
	}
	return out
}

func printConfig(w io.Writer, config []configJSON) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "CONFIG\tVALUE\tSOURCE")
	for _, c := range config {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Key, configValueText(c.Key, c.Value), c.Source)
	}
	return tw.Flush()
}

// configValueText is a value as topic describe shows it: the number, and
// what it means where that helps (-1, bytes, milliseconds).
func configValueText(key string, v int64) string {
	byteKey := strings.HasSuffix(key, ".bytes")
	switch {
	case v == -1 && byteKey:
		return "-1 (unlimited)"
	case v == -1:
		return "-1 (forever)"
	case byteKey:
		for _, u := range []struct {
			unit string
			size int64
		}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
			if v >= u.size && v%u.size == 0 {
				return fmt.Sprintf("%d (%d %s)", v, v/u.size, u.unit)
			}
		}
		return fmt.Sprint(v)
	case strings.HasSuffix(key, ".ms"):
		return fmt.Sprintf("%d (%s)", v, durationText(time.Duration(v)*time.Millisecond))
	}
	return fmt.Sprint(v)
}

// durationText writes whole days as days: 168h is 7d.
func durationText(d time.Duration) string {
	const day = 24 * time.Hour
	if d >= day && d%day == 0 {
		return fmt.Sprintf("%dd", d/day)
	}
	return d.String()
}

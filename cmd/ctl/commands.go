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
   --tls-ca FILE  --tls-cert FILE  --tls-key FILE  --token-file FILE
`

// commands returns the command tree of docs/cli.md, each group of commands
// defined in the file of its concern (topic.go, produce.go, ...).
func commands() []*cli.Command {
	return []*cli.Command{
		clusterCommand(),
		controllerCommand(),
		brokerCommand(),
		topicCommand(),
		produceCommand(),
		consumeCommand(),
		catchUpCommand(),
		failoverCommand(),
		recoverCommand(),
		electLeadersCommand(),
		partitionCommand(),
		autopilotCommand(),
		verifyCommand(),
		groupCommand(),
		benchCommand(),
		healthCommand(),
		aclCommand(),
		certCommand(),
		tokenCommand(),
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

// described gives c the text --help prints under DESCRIPTION: what the
// command does, in a few lines; docs/cli.md has the rest.
func described(c *cli.Command, description string) *cli.Command {
	c.Description = description
	return c
}

// intFlag is a flag of a number with no default value, such as a broker
// id: unset says what without means (none says it for --help, which
// would otherwise show "default: 0").
func intFlag(name, usage, unset string) *cli.IntFlag {
	return &cli.IntFlag{Name: name, Usage: usage, DefaultText: unset}
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

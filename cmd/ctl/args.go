package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// hoistFlags rewrites a command line (args[0] is the program) so that every
// flag is seen wherever the user typed it, as in kubectl:
//
//	gostream-ctl topic describe orders -o json
//	gostream-ctl -o json topic describe orders
//
// urfave/cli v2, like the standard flag package, stops reading a command's
// flags at its first positional argument and reads the app's global flags
// only before the command name. So hoistFlags walks the line once, following
// the command tree of app, and rebuilds it as
//
//	program  global flags  command path  command flags  [--]  positional args
//
// A flag is looked up first among the flags of the command reached so far,
// then among the app's flags. A flag that takes a value carries the next
// argument with it unless written --flag=value. Relative order within each
// group is kept, so a repeated flag still means its last value. A flag
// nobody defines stays in the group where it was typed, and urfave/cli then
// reports it. After "--" nothing is a flag or a command.
//
// The only error is a value-taking flag at the very end of the line.
func hoistFlags(app *cli.App, args []string) ([]string, error) {
	if len(args) == 0 {
		return args, nil
	}
	var (
		globals, path, local, positional []string
		commands                         = app.Commands
		current                          *cli.Command
		dashDash                         bool
	)
	rest := args[1:]
	for i := 0; i < len(rest); i++ {
		tok := rest[i]
		if dashDash {
			positional = append(positional, tok)
			continue
		}
		if tok == "--" {
			dashDash = true
			continue
		}
		if len(tok) < 2 || tok[0] != '-' {
			// A positional argument, or the next command of the path.
			if len(positional) == 0 {
				if cmd := findCommand(commands, tok); cmd != nil {
					path = append(path, tok)
					current, commands = cmd, cmd.Subcommands
					continue
				}
			}
			positional = append(positional, tok)
			continue
		}

		name, _, inline := strings.Cut(strings.TrimLeft(tok, "-"), "=")
		dest := &local
		if current == nil {
			dest = &globals
		}
		var f cli.Flag
		if current != nil {
			f = findFlag(current.Flags, name)
		}
		if f == nil {
			if f = findFlag(app.Flags, name); f != nil {
				dest = &globals
			}
		}
		*dest = append(*dest, tok)
		if f == nil || inline || !takesValue(f) {
			continue
		}
		if i+1 == len(rest) {
			return nil, errFlagNeedsValue(tok)
		}
		i++
		*dest = append(*dest, rest[i])
	}

	out := make([]string, 0, len(args)+1)
	out = append(out, args[0])
	out = append(out, globals...)
	out = append(out, path...)
	out = append(out, local...)
	if dashDash {
		out = append(out, "--")
	}
	return append(out, positional...), nil
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

func findFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// takesValue reports whether a flag reads the argument after it.
func takesValue(f cli.Flag) bool {
	_, isBool := f.(*cli.BoolFlag)
	return !isBool
}

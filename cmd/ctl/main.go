// Command gostream-ctl administers a gostream cluster from a shell: status,
// topics, produce and consume, failover, recovery, verify, bench. Its
// commands, flags and exit statuses are the contract of docs/cli.md; see
// gostream-ctl --help.
package main

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/cmd/internal/exitcode"
	"gostream/security"
)

// version is the release this binary was built from, set at build time with
// -ldflags "-X main.version=...".
var version = "dev"

// Global flag names. They may come before or after the command (hoistFlags).
const (
	flagBootstrap = "bootstrap"
	flagOutput    = "output"
	flagTimeout   = "timeout"
	flagTLSCA     = "tls-ca"
	flagTLSCert   = "tls-cert"
	flagTLSKey    = "tls-key"
	flagTokenFile = "token-file"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
)

func main() {
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	context.AfterFunc(ctx, stop)

	app := newApp(stdin, stdout, stderr)
	args, err := hoistFlags(app, args)
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	return exitcode.Report(stderr, err)
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:      "gostream-ctl",
		Usage:     "administer a gostream cluster",
		UsageText: "gostream-ctl [global options] command [command options] [arguments...]",
		Description: "Global options may come before or after the command, as in kubectl:\n" +
			"`gostream-ctl topic describe orders -o json` is `gostream-ctl -o json topic describe orders`.\n\n" +
			"Exit status: 0 done; 1 bad usage; 2 the cluster refused or the operation failed.\n" +
			"Errors go to stderr and start with the error's name.",
		Version:         version,
		HideHelpCommand: true,
		// --header k=a,b is one header whose value has a comma.
		DisableSliceFlagSeparator: true,
		Reader:                    stdin,
		Writer:                    stdout,
		ErrWriter:                 stderr,
		Flags: []cli.Flag{
			&cli.StringFlag{
				Name:  flagBootstrap,
				Usage: "RPC addresses `HOST:PORT,...` of nodes to ask first",
				// The three nodes of `make run`, so that one being down
				// does not fail a command.
				Value:   "127.0.0.1:9400,127.0.0.1:9410,127.0.0.1:9420",
				EnvVars: []string{"GOSTREAM_BOOTSTRAP"},
			},
			&cli.StringFlag{
				Name:    flagOutput,
				Aliases: []string{"o"},
				Usage:   "output `FORMAT`: table or json",
				Value:   outputTable,
			},
			&cli.DurationFlag{
				Name:  flagTimeout,
				Usage: "give up after `DURATION`: on the whole command, or on each request for produce, consume and bench",
				Value: 10 * time.Second,
			},
			&cli.StringFlag{Name: flagTLSCA, EnvVars: []string{"GOSTREAM_TLS_CA"},
				Usage: "the cluster's CA certificate `FILE` (PEM): every connection is TLS, verified against it"},
			&cli.StringFlag{Name: flagTLSCert, EnvVars: []string{"GOSTREAM_TLS_CERT"},
				Usage: "a client certificate `FILE` (PEM) for nodes that ask for one; its Common Name is your principal"},
			&cli.StringFlag{Name: flagTLSKey, EnvVars: []string{"GOSTREAM_TLS_KEY"},
				Usage: "the key `FILE` (PEM) of --tls-cert"},
			&cli.StringFlag{Name: flagTokenFile, EnvVars: []string{"GOSTREAM_TOKEN_FILE"},
				Usage: "a `FILE` holding your bearer token (gostream-ctl token create); needs --tls-ca"},
		},
		Before:         checkGlobals,
		Action:         parentAction,
		Commands:       commands(),
		OnUsageError:   onUsageError,
		ExitErrHandler: func(*cli.Context, error) {}, // run reports errors and picks the exit status
	}
	forEachCommand(app.Commands, func(c *cli.Command) {
		c.OnUsageError = onUsageError
		c.HideHelpCommand = true
	})
	return app
}

func forEachCommand(cmds []*cli.Command, fn func(*cli.Command)) {
	for _, c := range cmds {
		fn(c)
		forEachCommand(c.Subcommands, fn)
	}
}

// onUsageError names the errors urfave/cli finds while parsing flags.
func onUsageError(c *cli.Context, err error, _ bool) error {
	return exitcode.FlagError(err, helpName(c))
}

func errFlagNeedsValue(flag string) error {
	return exitcode.Usagef("InvalidFlag", "flag needs an argument: %s", flag)
}

// helpName returns the command line that names c's command, such as
// "gostream-ctl topic create".
func helpName(c *cli.Context) string {
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return c.App.Name
}

// checkGlobals validates the global flags once, before any command runs.
func checkGlobals(c *cli.Context) error {
	switch out := c.String(flagOutput); out {
	case outputTable, outputJSON:
	default:
		return exitcode.Usagef("InvalidFlag", "--output %q: want table or json", out)
	}
	if d := c.Duration(flagTimeout); d <= 0 {
		return exitcode.Usagef("InvalidFlag", "--timeout %s: want a positive duration", d)
	}
	bootstrap := c.String(flagBootstrap)
	for _, addr := range strings.Split(bootstrap, ",") {
		if err := checkHostPort(strings.TrimSpace(addr)); err != nil {
			return exitcode.Usagef("InvalidFlag", "--bootstrap %q: want HOST:PORT,...", bootstrap)
		}
	}
	if localCommands[c.Args().First()] {
		return nil // they talk to no node: their credentials are not read
	}
	_, _, err := credentialsOf(c)
	return err
}

// localCommands make files and talk to no node: a --tls-ca or
// --token-file set in the environment for the files they are about to
// make is not read.
var localCommands = map[string]bool{"cert": true, "token": true}

// credentialsOf reads --tls-ca, --tls-cert, --tls-key and --token-file:
// the TLS configuration (nil without --tls-ca) and the token ("" without
// --token-file).
func credentialsOf(c *cli.Context) (*tls.Config, string, error) {
	ca, cert, key, tokenFile := c.String(flagTLSCA), c.String(flagTLSCert), c.String(flagTLSKey), c.String(flagTokenFile)
	if ca == "" {
		switch {
		case cert != "" || key != "":
			return nil, "", exitcode.Usagef("InvalidFlag", "--tls-cert and --tls-key need --tls-ca, the cluster's CA, to verify the nodes")
		case tokenFile != "":
			return nil, "", exitcode.Usagef("InvalidFlag", "--token-file needs --tls-ca: a token is never sent in the clear")
		}
		return nil, "", nil
	}
	tc, err := security.ClientTLS(ca, cert, key)
	if err != nil {
		return nil, "", exitcode.Usagef("InvalidFlag", "%v", err)
	}
	token := ""
	if tokenFile != "" {
		if token, err = security.ReadTokenFile(tokenFile); err != nil {
			return nil, "", exitcode.Usagef("InvalidFlag", "--token-file: %v", err)
		}
	}
	return tc, token, nil
}

func checkHostPort(addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return err
	}
	return nil
}

// parentAction runs when a command that only groups others (or the app
// itself) is given no known subcommand: help without arguments, a usage
// error with one.
func parentAction(c *cli.Context) error {
	if c.Args().Present() {
		return exitcode.Usagef("UnknownCommand", "%q is not a command of %s (see %s --help)",
			c.Args().First(), helpName(c), helpName(c))
	}
	if c.Command != nil && c.Command.HelpName != "" && c.Command.HelpName != c.App.Name {
		return cli.ShowSubcommandHelp(c)
	}
	return cli.ShowAppHelp(c)
}

// globals are the global flags as one command sees them.
type globals struct {
	bootstrap []string
	output    string
	timeout   time.Duration
	tls       *tls.Config // nil: plaintext
	token     string
}

func globalsOf(c *cli.Context) globals {
	var g globals
	for _, addr := range strings.Split(c.String(flagBootstrap), ",") {
		g.bootstrap = append(g.bootstrap, strings.TrimSpace(addr))
	}
	g.output = c.String(flagOutput)
	g.timeout = c.Duration(flagTimeout)
	g.tls, g.token, _ = credentialsOf(c) // checked by checkGlobals
	return g
}

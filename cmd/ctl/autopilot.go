package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v2"

	"gostream/autopilot"
	"gostream/cmd/internal/exitcode"
)

// The autopilot (docs/autopilot.md): a long-running process on the
// operator's side that runs failover, recover and elect-leaders by a
// policy, logging why; package autopilot is the loop.

// Flags of the autopilot's policy, and whether each may be off.
var autopilotDurations = []struct {
	name, usage string
	mayBeOff    bool
}{
	{"failover-after", "the grace period: fail a broker over once it has been silent for `D`", false},
	{"recover-after", "recover a returning broker once it has answered for `D` (off: never)", true},
	{"leaders-back-after", "run elect-leaders once the cluster has been whole for `D` with leaders off their preferred replicas (off: never)", true},
	{"poll-interval", "look at the cluster every `D`", false},
	{"lease-ttl", "the lease lasts `D` without a renewal: how long another autopilot waits after this one dies", false},
}

func autopilotCommand() *cli.Command {
	def := autopilot.DefaultPolicy()
	defaults := map[string]time.Duration{"failover-after": def.FailoverAfter, "recover-after": def.RecoverAfter,
		"leaders-back-after": def.LeadersBackAfter, "poll-interval": def.PollInterval, "lease-ttl": def.LeaseTTL}
	flags := []cli.Flag{
		&cli.StringFlag{Name: "policy", Usage: "read the policy from `FILE` (JSON: failover_after, recover_after, leaders_back_after, poll_interval, lease_ttl); flags win over it"},
	}
	for _, d := range autopilotDurations {
		flags = append(flags, &cli.StringFlag{Name: d.name, Usage: d.usage, DefaultText: defaults[d.name].String()})
	}
	flags = append(flags,
		&cli.BoolFlag{Name: "dry-run", Usage: "log what it would run, run nothing, take no lease"},
		&cli.StringFlag{Name: "name", Usage: "this autopilot's `NAME`: its lease's holder and the requester of its commands", DefaultText: "autopilot:USER@HOST:PID"},
		&cli.StringFlag{Name: "metrics-addr", Usage: "serve Prometheus metrics on `HOST:PORT` at /metrics", DefaultText: "off"},
	)
	return described(leaf("autopilot", "watch the cluster and run failover, recover and elect-leaders by a policy, as an operator would",
		"", args(0, 0), autopilotAction, flags...),
		`A long-running process on the operator's side: every --poll-interval it
surveys the cluster as cluster status does, and runs
  gostream-ctl failover --broker N   for a broker silent for --failover-after,
  gostream-ctl recover --broker N    for one back for --recover-after,
  gostream-ctl elect-leaders         once the cluster is whole for --leaders-back-after,
logging each with its reason (one line each, on stdout; JSON with -o json).
Only the autopilot that holds the lease (kept by the controller) acts;
others stand by and take over when it expires. --dry-run logs what it
would run and runs nothing.

It stops, exit 2, when a command it ran failed twice in a row
(CommandFailedTwice), or when half of the brokers or more stay silent for
the grace period (MostBrokersSilent: a network problem, not dead brokers).
A grace period shorter than gossip needs to find a dead node dead
(5.5s up to 9 nodes) is refused (InvalidPolicy, exit 1). Ctrl-C stops it
cleanly, giving the lease back. See docs/autopilot.md.`)
}

// autopilotPolicy reads --policy and the policy's flags over the default
// policy.
func autopilotPolicy(c *cli.Context) (autopilot.Policy, error) {
	p := autopilot.DefaultPolicy()
	if file := c.String("policy"); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return p, exitcode.Usagef("InvalidPolicy", "--policy: %v", err)
		}
		if p, err = autopilot.ParsePolicy(data, p); err != nil {
			return p, policyError(fmt.Errorf("--policy %s: %w", file, err))
		}
	}
	to := map[string]*time.Duration{"failover-after": &p.FailoverAfter, "recover-after": &p.RecoverAfter,
		"leaders-back-after": &p.LeadersBackAfter, "poll-interval": &p.PollInterval, "lease-ttl": &p.LeaseTTL}
	for _, d := range autopilotDurations {
		if !c.IsSet(d.name) {
			continue
		}
		v, err := autopilot.ParseDuration(c.String(d.name), d.mayBeOff)
		if err != nil {
			return p, exitcode.Usagef("InvalidPolicy", "--%s %v", d.name, err)
		}
		*to[d.name] = v
	}
	return p, nil
}

// policyError names a policy the autopilot refuses: bad usage.
func policyError(err error) error {
	return exitcode.Usagef("InvalidPolicy", "%s", strings.Replace(err.Error(), autopilot.ErrInvalidPolicy.Error()+": ", "", 1))
}

func autopilotAction(c *cli.Context) error {
	policy, err := autopilotPolicy(c)
	if err != nil {
		return err
	}
	g := globalsOf(c)
	name := c.String("name")
	if name == "" {
		name = fmt.Sprintf("autopilot:%s:%d", requester(), os.Getpid())
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "autopilot", Output: c.App.Writer, Level: hclog.Info, JSONFormat: g.output == outputJSON})
	metrics := autopilot.NewMetrics()
	cfg := autopilot.Config{Policy: policy, Name: name, DryRun: c.Bool("dry-run"), Logger: log, Metrics: metrics}
	// The policy is checked before anything is started.
	if _, err := autopilot.New(cfg); err != nil {
		return policyError(err)
	}
	if addr := c.String("metrics-addr"); addr != "" {
		if err := checkHostPort(addr); err != nil {
			return exitcode.Usagef("InvalidFlag", "--metrics-addr %q: want HOST:PORT", addr)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return exitcode.Fail("CannotListen", fmt.Errorf("--metrics-addr %s: %w", addr, err))
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", metrics.Handler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		log.Info("metrics", "url", "http://"+ln.Addr().String()+"/metrics")
	}
	ctx, cancel := context.WithTimeout(c.Context, g.timeout)
	cl, err := connect(ctx, g)
	cancel()
	if err != nil {
		return err
	}
	defer cl.Close()
	cfg.Cluster = cl
	ap, err := autopilot.New(cfg)
	if err != nil {
		return policyError(err)
	}
	err = ap.Run(c.Context)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, autopilot.ErrInvalidPolicy):
		return policyError(err)
	case errors.Is(err, autopilot.ErrCommandFailedTwice):
		return stopped("CommandFailedTwice", autopilot.ErrCommandFailedTwice, err)
	case errors.Is(err, autopilot.ErrMostBrokersSilent):
		return stopped("MostBrokersSilent", autopilot.ErrMostBrokersSilent, err)
	}
	return failed(err)
}

// stopped reports why the autopilot stopped, under name, without the
// sentinel's own words.
func stopped(name string, sentinel, err error) error {
	return exitcode.Fail(name, &namedError{msg: strings.Replace(err.Error(), sentinel.Error()+": ", "", 1), err: err})
}

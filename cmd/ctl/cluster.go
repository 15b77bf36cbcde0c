package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
)

// maxDialTimeout bounds opening one connection, below --timeout when that
// is longer, so that one unreachable bootstrap address leaves time to try
// the next.
const maxDialTimeout = 5 * time.Second

// connect returns a Client of the cluster that --bootstrap names, once one
// of its addresses has answered, or an error named for the failure
// (BrokerNotAvailable, Timeout, ...). Every request of the Client is bounded
// by --timeout, and so are the retries of a call made without a deadline
// of its own. The caller closes it.
func connect(ctx context.Context, g globals) (*client.Client, error) {
	cl, err := client.New(ctx, client.Config{
		Bootstrap:      g.bootstrap,
		RequestTimeout: g.timeout,
		DialTimeout:    min(g.timeout, maxDialTimeout),
		RetryTimeout:   g.timeout,
		TLS:            g.tls,
		Token:          g.token,
	})
	if err != nil {
		return nil, failed(err)
	}
	return cl, nil
}

// withClient runs fn with a Client under --timeout, for the commands that
// make a few requests and are done: --timeout bounds the whole command.
func withClient(c *cli.Context, fn func(ctx context.Context, cl *client.Client, g globals) error) error {
	g := globalsOf(c)
	ctx, cancel := context.WithTimeout(c.Context, g.timeout)
	defer cancel()
	cl, err := connect(ctx, g)
	if err != nil {
		return err
	}
	defer cl.Close()
	return failed(fn(ctx, cl, g))
}

func clusterCommand() *cli.Command {
	return parent("cluster", "the cluster as a whole",
		described(leaf("status", "controller, brokers, partition health, and warnings with the command that fixes each",
			"", args(0, 0), clusterStatusAction),
			`Asks every broker at once (each under 2 s) what it sees, and judges the
cluster from the answers: a dead or paused broker shows as such instead of
holding the command up. Prints the controller (and its group, when it is
replicated), the brokers with their registered, gossip and RPC states,
the partition counts (total, under-replicated, offline), and one warning
per problem with the gostream-ctl command that fixes it, meant to be run
as it is. Exit 0 whatever the cluster's state, once the survey ran.`),
		described(leaf("history", "the audit trail of failovers and recoveries, oldest first",
			"", args(0, 0), clusterHistoryAction),
			`The controller's audit trail, oldest first: failovers, dropped followers,
recoveries, leadership moves, catch-ups, replaced brokers, metadata
restores, changes of the controller group, ACLs added and removed,
partitions added to a topic (topic creation, deletion and configuration
are not in it), each with when, who asked (user@host) and what changed.`),
		described(leaf("restore-metadata", "make the controller adopt the newest copy of the metadata the brokers hold, when its own is missing or older than theirs",
			"", args(0, 0), restoreMetadataAction,
			intFlag("from-broker", "adopt broker `B`'s copy instead of the newest", "none: the newest copy"),
			&cli.BoolFlag{Name: "dry-run", Usage: "print every copy and what would change, and change nothing"},
		),
			`For a controller that refuses every change (StaleMetadata) because its
metadata file is missing or older than a broker's copy: it adopts the
newest copy the brokers hold (or broker B's with --from-broker), with an
epoch above every one seen. Prints every copy found and the topics gained
and lost. With --dry-run it prints the same and changes nothing.`),
		rebalanceCommand(),
	)
}

func restoreMetadataAction(c *cli.Context) error {
	from := c.Int("from-broker")
	if c.IsSet("from-broker") && (from < 1 || from > math.MaxInt32) {
		return exitcode.Usagef("InvalidFlag", "--from-broker %d: want a broker id, a positive number", from)
	}
	dry := c.Bool("dry-run")
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		rep, err := cl.RestoreMetadata(ctx, client.RestoreRequest{FromBroker: int32(from), DryRun: dry, Requester: requester()})
		if err != nil {
			return refused(err)
		}
		w := c.App.Writer
		if g.output == outputJSON {
			return writeJSON(w, rep)
		}
		return printRestore(w, rep)
	})
}

func printRestore(w io.Writer, rep client.RestoreReport) error {
	switch {
	case rep.Missing:
		fmt.Fprintln(w, "The controller's metadata file is missing.")
	default:
		fmt.Fprintf(w, "The controller's metadata is at epoch %d.\n", rep.ControllerEpoch)
	}
	if rep.Refused != "" {
		fmt.Fprintf(w, "It refuses every change: %s\n", rep.Refused)
	}
	fmt.Fprintln(w)
	tw := newTable(w)
	fmt.Fprintln(tw, "BROKER\tADDRESS\tEPOCH\tTOPICS\tCHOSEN\tNOTE")
	for _, s := range rep.Sources {
		epoch := "?"
		if s.Answered && s.Epoch >= 0 {
			epoch = fmt.Sprint(s.Epoch)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", s.Broker, s.Address, epoch, s.Topics, yesNo(s.Chosen), s.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	verb := "Adopted"
	if rep.DryRun {
		verb = "Dry run: nothing was changed. Would adopt"
	}
	for _, s := range rep.Sources {
		if s.Chosen {
			fmt.Fprintf(w, "%s broker %d's copy as epoch %d.\n", verb, s.Broker, rep.NewEpoch)
		}
	}
	if len(rep.TopicsGained) > 0 {
		fmt.Fprintf(w, "Topics the controller gets back: %s\n", strings.Join(rep.TopicsGained, ", "))
	}
	if len(rep.TopicsLost) > 0 {
		fmt.Fprintf(w, "Topics only the controller's copy has (gone from the adopted one): %s\n", strings.Join(rep.TopicsLost, ", "))
	}
	return nil
}

func brokerCommand() *cli.Command {
	return parent("broker", "brokers",
		described(leaf("list", "brokers with addresses and states", "", args(0, 0), brokerListAction),
			`The brokers part of cluster status: each broker's id, RPC address,
whether the controller has it registered, its gossip state (alive,
suspect, dead, left) and whether it answers RPC, and its role.`),
		described(leaf("replace", "accept a new storage root for broker ID, whose disk is lost: fail over what it leads, drop it everywhere; then start the new node and run recover --broker ID",
			"ID", args(1, 1), brokerReplaceAction,
			&cli.BoolFlag{Name: "dry-run", Usage: "print what would change, and change nothing"},
		),
			`For a broker whose disk is lost for good: fails over every partition it
leads, drops it from every active set, then unbinds its storage root, so
that a node started with --id ID on an empty --data-dir is accepted. Then
start that node and run gostream-ctl recover --broker ID. Refused while
the broker answers (BrokerAlive) and when a partition it leads has no
other active replica (NoEligibleReplica). With --dry-run it prints what
would change and changes nothing.`),
		decommissionCommand(),
	)
}

// Registration states of a broker: in the controller's metadata, or only
// seen in gossip.
const (
	stateRegistered   = "registered"
	stateUnregistered = "unregistered"
)

// brokerStatus is one broker as cluster status and broker list show it.
type brokerStatus struct {
	ID         int32  `json:"id"`
	Address    string `json:"address"`
	Rack       string `json:"rack,omitempty"`
	Registered string `json:"registered"`
	// Gossip is the broker's gossip state as the controller sees it, or as
	// most answering brokers see it when the controller does not answer.
	Gossip string `json:"gossip"`

	// answers is whether the broker answered the survey (tables only: the
	// JSON of docs/cli.md has no field for it; warnings say it).
	answers bool
}

// clusterStatus is what cluster status prints (docs/cli.md).
type clusterStatus struct {
	Controller int32 `json:"controller"`
	// ControllerGroup is the replicated controller's group; absent for a
	// single controller.
	ControllerGroup *controllerGroup `json:"controller_group,omitempty"`
	Brokers         []brokerStatus   `json:"brokers"`
	Partitions      partitionHealth  `json:"partitions"`
	Warnings        []warning        `json:"warnings"`
}

type partitionHealth struct {
	Total           int `json:"total"`
	UnderReplicated int `json:"under_replicated"`
	Offline         int `json:"offline"`
}

// warning is something an operator should act on, with the command that
// does it when there is one: a client.Warning as docs/cli.md shows it.
type warning struct {
	Message string `json:"message"`
	Command string `json:"command,omitempty"`
}

// clusterStatusOf is the part of a cluster report that cluster status
// prints.
func clusterStatusOf(r client.ClusterReport) clusterStatus {
	st := clusterStatus{
		Controller: r.Controller, Brokers: brokerStatuses(r.BrokersReport),
		Partitions: partitionHealth{Total: r.Counts.Total, UnderReplicated: r.Counts.UnderReplicated, Offline: r.Counts.Offline},
		Warnings:   make([]warning, 0, len(r.Warnings)),
	}
	for _, w := range r.Warnings {
		st.Warnings = append(st.Warnings, warning{Message: w.Message, Command: w.Command})
	}
	if g := r.Group; g != nil {
		st.ControllerGroup = &controllerGroup{Active: g.Active, Answering: g.Answering, Voters: g.Voters, Quorum: g.Quorum, Candidates: g.Members}
	}
	return st
}

// controllerGroup is the controller group in cluster status -o json.
type controllerGroup struct {
	Active     int32                    `json:"active"`
	Answering  int                      `json:"answering"`
	Voters     int                      `json:"voters"`
	Quorum     int                      `json:"quorum"`
	Candidates []client.CandidateReport `json:"candidates"`
}

func clusterStatusAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		r, err := cl.ClusterStatus(ctx)
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, clusterStatusOf(r))
		}
		return printClusterStatus(c.App.Writer, r)
	})
}

func printClusterStatus(w io.Writer, r client.ClusterReport) error {
	st := clusterStatusOf(r)
	answers := "answers"
	if !r.ControllerAnswers {
		answers = "does not answer"
	}
	fmt.Fprintf(w, "Controller: broker %d (%s)\n", st.Controller, answers)
	if g := r.Group; g != nil {
		var ids []string
		for _, m := range g.Members {
			s := fmt.Sprint(m.ID)
			if !m.Answers {
				s += " (down)"
			}
			ids = append(ids, s)
		}
		fmt.Fprintf(w, "Controller group: candidates %s; %d of %d answer, quorum %d\n", strings.Join(ids, ", "), g.Answering, g.Voters, g.Quorum)
	}
	fmt.Fprintln(w)
	if err := printBrokers(w, st.Brokers, st.Controller); err != nil {
		return err
	}
	fmt.Fprintf(w, "Gossip states as seen by %s.\n", r.GossipFrom)
	fmt.Fprintf(w, "\nPartitions: %d total, %d under-replicated, %d offline\n",
		st.Partitions.Total, st.Partitions.UnderReplicated, st.Partitions.Offline)
	if len(st.Warnings) == 0 {
		_, err := fmt.Fprintln(w, "\nNo warnings.")
		return err
	}
	fmt.Fprintln(w, "\nWarnings:")
	for _, wn := range st.Warnings {
		fmt.Fprintf(w, "  - %s\n", wn.Message)
		if wn.Command != "" {
			fmt.Fprintf(w, "    fix: %s\n", wn.Command)
		}
	}
	return nil
}

// brokerList is what broker list -o json prints.
type brokerList struct {
	Controller int32          `json:"controller"`
	Brokers    []brokerStatus `json:"brokers"`
}

func brokerListAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		r, err := cl.DescribeBrokers(ctx)
		if err != nil {
			return err
		}
		brokers := brokerStatuses(r)
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, brokerList{Controller: r.Controller, Brokers: brokers})
		}
		if err := printBrokers(c.App.Writer, brokers, r.Controller); err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.App.Writer, "Gossip states as seen by %s.\n", r.GossipFrom)
		return err
	})
}

func printBrokers(w io.Writer, brokers []brokerStatus, controller int32) error {
	tw := newTable(w)
	// The RACK column only in clusters whose brokers name racks.
	racks := slices.ContainsFunc(brokers, func(b brokerStatus) bool { return b.Rack != "" })
	if racks {
		fmt.Fprintln(tw, "ID\tADDRESS\tRACK\tREGISTERED\tGOSSIP\tRPC\tROLE")
	} else {
		fmt.Fprintln(tw, "ID\tADDRESS\tREGISTERED\tGOSSIP\tRPC\tROLE")
	}
	for _, b := range brokers {
		role := "broker"
		if b.ID == controller {
			role = "controller"
		}
		rpc := "answers"
		if !b.answers {
			rpc = "unreachable"
		}
		addr := b.Address
		if addr == "" {
			addr = "-"
		}
		if racks {
			rack := b.Rack
			if rack == "" {
				rack = "-"
			}
			addr += "\t" + rack
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", b.ID, addr, b.Registered, b.Gossip, rpc, role)
	}
	return tw.Flush()
}

// brokerStatuses is every broker of a report as cluster status and broker
// list show it.
func brokerStatuses(r client.BrokersReport) []brokerStatus {
	out := make([]brokerStatus, 0, len(r.Brokers))
	for _, b := range r.Brokers {
		registered := stateUnregistered
		if b.Registered {
			registered = stateRegistered
		}
		out = append(out, brokerStatus{ID: b.ID, Address: b.Address, Rack: b.Rack, Registered: registered, Gossip: string(b.Gossip), answers: b.Answers})
	}
	return out
}

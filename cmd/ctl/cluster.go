package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"gostream/client"
)

// maxDialTimeout bounds opening one connection, below --timeout when that
// is longer, so that one unreachable bootstrap address leaves time to try
// the next.
const maxDialTimeout = 5 * time.Second

// connect returns a Client of the cluster that --bootstrap names, once one
// of its addresses has answered, or an error named for the failure
// (BrokerNotAvailable, Timeout, ...). Every request of the Client is bounded
// by --timeout. The caller closes it.
func connect(ctx context.Context, g globals) (*client.Client, error) {
	cl, err := client.New(ctx, client.Config{
		Bootstrap:      g.bootstrap,
		RequestTimeout: g.timeout,
		DialTimeout:    min(g.timeout, maxDialTimeout),
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
		leaf("status", "controller, brokers, partition health, and warnings with the command that fixes each",
			"", args(0, 0), clusterStatusAction),
	)
}

func brokerCommand() *cli.Command {
	return parent("broker", "brokers",
		leaf("list", "brokers with addresses and states", "", args(0, 0), brokerListAction),
	)
}

// Broker states until the parts that know more exist. Every broker in the
// metadata has registered with the controller; gossip state arrives with
// gossip.
const (
	stateRegistered = "registered"
	stateUnknown    = "unknown"
)

// brokerStatus is one broker as cluster status and broker list show it.
type brokerStatus struct {
	ID         int32  `json:"id"`
	Address    string `json:"address"`
	Registered string `json:"registered"`
	Gossip     string `json:"gossip"`
}

// clusterStatus is what cluster status prints (CLI.md).
type clusterStatus struct {
	Controller int32           `json:"controller"`
	Brokers    []brokerStatus  `json:"brokers"`
	Partitions partitionHealth `json:"partitions"`
	Warnings   []warning       `json:"warnings"`
}

type partitionHealth struct {
	Total           int `json:"total"`
	UnderReplicated int `json:"under_replicated"`
	Offline         int `json:"offline"`
}

// warning is something an operator should act on, with the command that
// does it.
type warning struct {
	Message string `json:"message"`
	Command string `json:"command,omitempty"`
}

func brokerStatuses(m client.Metadata) []brokerStatus {
	out := make([]brokerStatus, 0, len(m.Brokers))
	for _, b := range m.Brokers {
		out = append(out, brokerStatus{ID: b.ID, Address: b.Addr, Registered: stateRegistered, Gossip: stateUnknown})
	}
	return out
}

// statusOf judges the cluster from its metadata alone. A partition is
// offline when its leader is none or not a registered broker, and under
// replicated when some of its replicas are not active.
func statusOf(m client.Metadata) clusterStatus {
	st := clusterStatus{Controller: m.ControllerID, Brokers: brokerStatuses(m), Warnings: []warning{}}
	registered := func(id int32) bool {
		return slices.ContainsFunc(m.Brokers, func(b client.Broker) bool { return b.ID == id })
	}
	if !registered(m.ControllerID) {
		st.Warnings = append(st.Warnings, warning{
			Message: fmt.Sprintf("the controller, broker %d, is not among the registered brokers", m.ControllerID),
		})
	}
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			st.Partitions.Total++
			if p.Leader < 0 || !registered(p.Leader) {
				st.Partitions.Offline++
				st.Warnings = append(st.Warnings, warning{
					Message: fmt.Sprintf("partition %s/%d is offline: its leader %s is not available", t.Name, p.Partition, leaderName(p.Leader)),
					Command: fmt.Sprintf("gostream-ctl failover --topic %s --partition %d", t.Name, p.Partition),
				})
			}
			if len(p.Active) < len(p.Replicas) {
				st.Partitions.UnderReplicated++
				for _, r := range p.Replicas {
					if !slices.Contains(p.Active, r) {
						st.Warnings = append(st.Warnings, warning{
							Message: fmt.Sprintf("partition %s/%d is under-replicated: its replica on broker %d is not active", t.Name, p.Partition, r),
							Command: fmt.Sprintf("gostream-ctl recover --topic %s --partition %d --broker %d", t.Name, p.Partition, r),
						})
					}
				}
			}
		}
	}
	return st
}

func leaderName(id int32) string {
	if id < 0 {
		return "(none)"
	}
	return fmt.Sprintf("broker %d", id)
}

func clusterStatusAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		m, err := cl.Metadata(ctx)
		if err != nil {
			return err
		}
		st := statusOf(m)
		w := c.App.Writer
		if g.output == outputJSON {
			return writeJSON(w, st)
		}
		fmt.Fprintf(w, "Controller: broker %d\n\n", st.Controller)
		if err := printBrokers(w, st.Brokers, st.Controller); err != nil {
			return err
		}
		fmt.Fprintf(w, "\nPartitions: %d total, %d under-replicated, %d offline\n",
			st.Partitions.Total, st.Partitions.UnderReplicated, st.Partitions.Offline)
		if len(st.Warnings) == 0 {
			fmt.Fprintln(w, "\nNo warnings.")
			return nil
		}
		fmt.Fprintln(w, "\nWarnings:")
		for _, wn := range st.Warnings {
			fmt.Fprintf(w, "  - %s\n", wn.Message)
			if wn.Command != "" {
				fmt.Fprintf(w, "    fix: %s\n", wn.Command)
			}
		}
		return nil
	})
}

// brokerList is what broker list -o json prints.
type brokerList struct {
	Controller int32          `json:"controller"`
	Brokers    []brokerStatus `json:"brokers"`
}

func brokerListAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		m, err := cl.Metadata(ctx)
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, brokerList{Controller: m.ControllerID, Brokers: brokerStatuses(m)})
		}
		return printBrokers(c.App.Writer, brokerStatuses(m), m.ControllerID)
	})
}

func printBrokers(w io.Writer, brokers []brokerStatus, controller int32) error {
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tADDRESS\tREGISTERED\tGOSSIP\tROLE")
	for _, b := range brokers {
		role := "broker"
		if b.ID == controller {
			role = "controller"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", b.ID, b.Address, b.Registered, b.Gossip, role)
	}
	return tw.Flush()
}

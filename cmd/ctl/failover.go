package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/transport"
)

// Failover and recovery (docs/design.md section 7): the controller does the
// work; these commands ask it, print what it did per partition, and exit 2
// when it refused or any partition failed.

func failoverCommand() *cli.Command {
	return described(leaf("failover", "replace a failed leader (--topic --partition) or drop a lost replica (--broker, or --topic --partition --broker)",
		"", args(0, 0), failoverAction,
		topicFlag(), intFlag("partition", "partition `P`, with --topic", "none"),
		intFlag("broker", "the lost broker `B`: fail over every partition it leads, drop it from those it follows; with --topic and --partition, only its replica of that partition",
			"none: with --topic and --partition, the partition's leader"),
		&cli.BoolFlag{Name: "dry-run", Usage: "print what would change, per candidate, and change nothing"},
	),
		`   gostream-ctl failover --topic T --partition P [--broker B] [--dry-run]
   gostream-ctl failover --broker B [--dry-run]

With --topic and --partition: replaces the partition's failed leader by
the active follower with the most history, after fencing the followers
with a new epoch and checking by digest that they agree; with --broker B
as well, takes only B's replica out (failed over when it leads, dropped
when it follows). With --broker alone: every partition B leads is failed
over, and B is dropped from the active set of those it follows.

Refused while the leader (or B) answers with a healthy replica
(LeaderStillAvailable); no follower answering is NoEligibleReplica,
candidates that disagree ReplicaDivergence. It prints one line per
partition. --dry-run prints what would change, with every candidate and
the offset from which records held only by the old leader would be lost,
and changes nothing. Every change is in gostream-ctl cluster history.`)
}

func recoverCommand() *cli.Command {
	return described(leaf("recover", "bring a returning replica (or all of a broker's) back as a follower",
		"", args(0, 0), recoverAction,
		topicFlag(), intFlag("partition", "partition `P`, with --topic", "none"),
		intFlag("broker", "the returning broker `B` (required); alone, every replica of it outside the active set", "none, required"),
	),
		`   gostream-ctl recover --topic T --partition P --broker B
   gostream-ctl recover --broker B

Brings broker B's replica of one partition (or, with --broker alone,
every replica of B outside its partition's active set) back as an active
follower: it is cut back to its longest common prefix with the leader
(the cut kept in quarantine/), filled from the leader, checked identical
by digest, and only then made active again.`)
}

func electLeadersCommand() *cli.Command {
	return described(leaf("elect-leaders", "move leadership back to each partition's preferred replica (the first of its replicas)",
		"", args(0, 0), electLeadersAction,
		&cli.StringFlag{Name: "topic", Usage: "only the partitions of topic `T` (default: every topic)"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print what would change, per candidate, and change nothing"},
	),
		`Moves the leadership of every partition (of --topic T, or of every topic)
whose leader is not its preferred replica, the first of its replicas,
back to it when that replica is active: after failovers, leadership
gathers on the brokers that survived, and stays there. A replica left
out by a move (it held a write that was never acknowledged) is recovered
in the same request. --dry-run prints what would change and changes
nothing.`)
}

func electLeadersAction(c *cli.Context) error {
	dry := c.Bool("dry-run")
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var rep client.ChangeReport
		err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl cluster history", func() (err error) {
			rep, err = cl.ElectLeaders(ctx, client.ElectLeadersRequest{Topic: c.String("topic"), DryRun: dry, Requester: requester()})
			return err
		})
		if err != nil {
			return refused(err)
		}
		w := c.App.Writer
		switch {
		case g.output == outputJSON:
			err = writeJSON(w, changeReportJSON(rep.Results, 0))
		case len(rep.Results) == 0:
			_, err = fmt.Fprintln(w, "every partition is led by its preferred replica: nothing to move")
		default:
			err = printFailover(w, rep.Results, target{}, dry)
		}
		if err != nil {
			return err
		}
		return partitionsFailed(rep.Results)
	})
}

// target is what an operator command names: one partition, or a broker's
// partitions (topic empty).
type target struct {
	topic     string
	partition int32
	broker    int32 // 0 when not given
}

// parseTarget reads --topic, --partition and --broker. --topic and
// --partition go together; brokerRequired makes --broker required,
// otherwise exactly one of the partition and --broker is named.
func parseTarget(c *cli.Context, brokerRequired bool) (target, error) {
	var tg target
	hasTopic, hasPartition, hasBroker := c.IsSet("topic"), c.IsSet("partition"), c.IsSet("broker")
	usage := "name --topic T --partition P [--broker B], or --broker B"
	if brokerRequired {
		usage = "name --topic T --partition P --broker B, or --broker B"
	}
	switch {
	case hasTopic != hasPartition:
		return tg, exitcode.Usagef("MissingFlag", "--topic and --partition go together: %s (see %s --help)", usage, helpName(c))
	case brokerRequired && !hasBroker, !hasTopic && !hasBroker:
		return tg, exitcode.Usagef("MissingFlag", "%s (see %s --help)", usage, helpName(c))
	}
	if hasTopic {
		tg.topic = c.String("topic")
		if tg.topic == "" {
			return tg, exitcode.Usagef("InvalidFlag", "--topic: want a topic name")
		}
		p := c.Int("partition")
		if p < 0 || p > math.MaxInt32 {
			return tg, exitcode.Usagef("InvalidFlag", "--partition %d: want a partition number", p)
		}
		tg.partition = int32(p)
	}
	if hasBroker {
		b := c.Int("broker")
		if b < 1 || b > math.MaxInt32 {
			return tg, exitcode.Usagef("InvalidFlag", "--broker %d: want a broker id, a positive number", b)
		}
		tg.broker = int32(b)
	}
	return tg, nil
}

// requester names who runs this command, for the controller's audit trail:
// user@host, or "" to let the controller name the connection.
func requester() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	switch {
	case name != "" && host != "":
		return name + "@" + host
	case name != "":
		return name
	}
	return host
}

func failoverAction(c *cli.Context) error {
	tg, err := parseTarget(c, false)
	if err != nil {
		return err
	}
	dry := c.Bool("dry-run")
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		req := client.FailoverRequest{Topic: tg.topic, Partition: tg.partition, Broker: tg.broker, DryRun: dry, Requester: requester()}
		if tg.topic == "" {
			req.Partition = 0
		} else {
			req.Broker, req.BrokerOfPartition = 0, tg.broker
		}
		var rep client.ChangeReport
		err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl cluster history", func() (err error) {
			rep, err = cl.Failover(ctx, req)
			return err
		})
		if err != nil {
			return refused(err)
		}
		w := c.App.Writer
		if g.output == outputJSON {
			err = writeJSON(w, changeReportJSON(rep.Results, 0))
		} else {
			err = printFailover(w, rep.Results, tg, dry)
		}
		if err != nil {
			return err
		}
		return partitionsFailed(rep.Results)
	})
}

func recoverAction(c *cli.Context) error {
	tg, err := parseTarget(c, true)
	if err != nil {
		return err
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var rep client.ChangeReport
		err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl cluster history", func() (err error) {
			rep, err = cl.Recover(ctx, client.RecoverRequest{Topic: tg.topic, Partition: tg.partition, Broker: tg.broker, Requester: requester()})
			return err
		})
		if err != nil {
			return refused(err)
		}
		w := c.App.Writer
		if g.output == outputJSON {
			err = writeJSON(w, changeReportJSON(rep.Results, tg.broker))
		} else {
			err = printRecover(w, rep.Results, tg)
		}
		if err != nil {
			return err
		}
		return partitionsFailed(rep.Results)
	})
}

// refused reports the controller's refusal of a whole request under its
// code's name, with the controller's own words: "LeaderStillAvailable:
// partition orders/0 is led by broker 2, which answers". Other errors
// (the controller unreachable, a timeout) keep the client's context.
func refused(err error) error {
	var te *transport.Error
	if errors.As(err, &te) && te.Message != "" {
		name := te.Code.String()
		return exitcode.Fail(name, &namedError{msg: strings.TrimPrefix(te.Message, name+": "), err: err})
	}
	return failed(err)
}

// partitionsFailed returns the failures of a change of several partitions
// as one error, named for the first: every result has been printed already.
func partitionsFailed(results []client.ChangeResult) error {
	var name string
	var msgs []string
	for _, r := range results {
		if r.Error == "" {
			continue
		}
		rn := r.ErrorName
		if rn == "" {
			rn = "Error"
		}
		msg := r.Error
		if !strings.HasPrefix(msg, rn+":") {
			msg = rn + ": " + msg
		}
		if name == "" {
			name = rn
			msg = strings.TrimPrefix(msg, rn+": ")
		}
		msgs = append(msgs, msg)
	}
	if name == "" {
		return nil
	}
	return exitcode.Fail(name, errors.New(strings.Join(msgs, "; ")))
}

// changeResultJSON is one result of failover or recover -o json: the
// controller's report, with the recovered broker for recover.
type changeResultJSON struct {
	Broker int32 `json:"broker,omitempty"`
	client.ChangeResult
}

// changeReportJSON is what failover and recover -o json print (docs/cli.md):
// {"results":[...]}, with [] rather than null for empty lists.
func changeReportJSON(results []client.ChangeResult, broker int32) any {
	out := struct {
		Results []changeResultJSON `json:"results"`
	}{Results: make([]changeResultJSON, 0, len(results))}
	for _, r := range results {
		r.OldActive, r.NewActive = orEmpty(r.OldActive), orEmpty(r.NewActive)
		out.Results = append(out.Results, changeResultJSON{Broker: broker, ChangeResult: r})
	}
	return out
}

// partitionName is topic/partition; "-" for a change of no partition (a
// broker replaced).
func partitionName(topic string, partition int32) string {
	if topic == "" {
		return "-"
	}
	return fmt.Sprintf("%s/%d", topic, partition)
}

// change renders a value that a change may have moved: "2 -> 1", or "1"
// when it stayed.
func change[T comparable](old, new T) string {
	if old == new {
		return fmt.Sprint(old)
	}
	return fmt.Sprintf("%v -> %v", old, new)
}

func changeIDs(old, new []int32) string {
	return change(joinIDs(old), joinIDs(new))
}

// outcome is the last column of a change table: ok, or the error's name.
func outcome(r client.ChangeResult) string {
	switch {
	case r.Error == "":
		return "ok"
	case r.ErrorName != "":
		return r.ErrorName
	}
	return "Error"
}

func printFailover(w io.Writer, results []client.ChangeResult, tg target, dry bool) error {
	if len(results) == 0 {
		_, err := fmt.Fprintf(w, "broker %d leads and follows no partition: nothing to fail over\n", tg.broker)
		return err
	}
	if dry {
		fmt.Fprintln(w, "Dry run: nothing was changed.")
		fmt.Fprintln(w)
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PARTITION\tACTION\tLEADER\tEPOCH\tACTIVE\tLOST-FROM\tRESULT")
	for _, r := range results {
		lost := "-"
		if lf := lostFrom(r); lf != nil {
			lost = fmt.Sprint(*lf)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", partitionName(r.Topic, r.Partition), r.Action,
			change(r.OldLeader, r.NewLeader), change(r.OldEpoch, r.NewEpoch), changeIDs(r.OldActive, r.NewActive),
			lost, outcome(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if r.Note != "" {
			fmt.Fprintf(w, "%s: %s\n", partitionName(r.Topic, r.Partition), r.Note)
		}
	}
	if !dry {
		return nil
	}
	for _, r := range results {
		if (r.Action != client.ActionFailover && r.Action != client.ActionElectLeader) || (len(r.Candidates) == 0 && r.LostFrom == nil) {
			continue
		}
		fmt.Fprintf(w, "\nCandidates for %s (old leader %d):\n", partitionName(r.Topic, r.Partition), r.OldLeader)
		if err := printCandidates(w, r.Candidates); err != nil {
			return err
		}
		switch lf := lostFrom(r); {
		case lf != nil && r.Error == "":
			fmt.Fprintf(w, "  Records at or past offset %d held only by the old leader would be lost.\n", *lf)
		case r.LostFrom != nil && r.Error == "":
			fmt.Fprintf(w, "  Nothing would be lost: the old leader's log ends where the new leader's does, at offset %d.\n", *r.LostFrom)
		}
	}
	return nil
}

// lostFrom is where the records held only by the old leader begin, nil when
// there are none: a leadership move whose old leader answered with a log
// no longer than the new leader's loses nothing. (The controller reports
// LostFrom for every move all the same: it is where the new epoch begins.)
func lostFrom(r client.ChangeResult) *int64 {
	if r.LostFrom == nil || r.Action != client.ActionElectLeader {
		return r.LostFrom
	}
	for _, c := range r.Candidates {
		if c.Broker == r.OldLeader && c.Reachable && c.LogEndOffset <= *r.LostFrom {
			return nil
		}
	}
	return r.LostFrom
}

func printCandidates(w io.Writer, cands []client.Candidate) error {
	if len(cands) == 0 {
		_, err := fmt.Fprintln(w, "  none: the partition has no other active replica")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "  BROKER\tREACHABLE\tLAST-EPOCH\tLOG-END\tAGREES\tCHOSEN\tNOTE")
	for _, cd := range cands {
		epoch, end, agrees := "?", "?", "?"
		if cd.Reachable {
			epoch, end, agrees = fmt.Sprint(cd.LastEpoch), fmt.Sprint(cd.LogEndOffset), yesNo(cd.Agrees)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", cd.Broker, yesNo(cd.Reachable), epoch, end, agrees, yesNo(cd.Chosen), cd.Note)
	}
	return tw.Flush()
}

func printRecover(w io.Writer, results []client.ChangeResult, tg target) error {
	if len(results) == 0 {
		_, err := fmt.Fprintf(w, "broker %d is active wherever it holds a replica: nothing to recover\n", tg.broker)
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PARTITION\tBROKER\tLEADER\tEPOCH\tTRUNCATED\tCOPIED-AND-VERIFIED-TO\tACTIVE\tRESULT")
	for _, r := range results {
		cut, copied := "-", "-"
		if r.Truncated != nil {
			cut = fmt.Sprintf("%d -> %d", r.Truncated[0], r.Truncated[1])
		}
		if r.Error == "" {
			copied = fmt.Sprint(r.CopiedTo)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", partitionName(r.Topic, r.Partition), tg.broker,
			r.NewLeader, r.NewEpoch, cut, copied, changeIDs(r.OldActive, r.NewActive), outcome(r))
	}
	return tw.Flush()
}

func brokerReplaceAction(c *cli.Context) error {
	id, err := strconv.ParseInt(c.Args().First(), 10, 32)
	if err != nil || id < 1 {
		return exitcode.Usagef("InvalidArgument", "broker id %q: want a positive number", c.Args().First())
	}
	dry := c.Bool("dry-run")
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var rep client.ChangeReport
		err := watchedChange(ctx, cl, c.App.ErrWriter, "gostream-ctl cluster history", func() (err error) {
			rep, err = cl.ReplaceBroker(ctx, int32(id), dry, requester())
			return err
		})
		if err != nil {
			return refused(err)
		}
		w := c.App.Writer
		if g.output == outputJSON {
			err = writeJSON(w, changeReportJSON(rep.Results, 0))
		} else {
			err = printReplace(w, rep.Results, int32(id), dry)
		}
		if err != nil {
			return err
		}
		return partitionsFailed(rep.Results)
	})
}

// printReplace prints what broker replace did to each partition, then
// what the operator does next.
func printReplace(w io.Writer, results []client.ChangeResult, id int32, dry bool) error {
	var moves []client.ChangeResult
	var last *client.ChangeResult
	for i, r := range results {
		if r.Action == client.ActionReplaceBroker {
			last = &results[i]
			continue
		}
		moves = append(moves, r)
	}
	if len(moves) > 0 {
		if err := printFailover(w, moves, target{broker: id}, dry); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	switch {
	case last == nil:
		return nil
	case last.Error != "":
		_, err := fmt.Fprintf(w, "broker %d was not replaced: %s\n", id, last.Error)
		return err
	case dry:
		_, err := fmt.Fprintf(w, "Broker %d would be active nowhere, and its id free for a new storage root.\n", id)
		return err
	}
	_, err := fmt.Fprintf(w, "Broker %d is active nowhere; its id is free for a new storage root.\n"+
		"Next: start the new node with --id %d (an empty --data-dir), then rebuild its replicas from their leaders:\n"+
		"  gostream-ctl recover --broker %d\n", id, id, id)
	return err
}

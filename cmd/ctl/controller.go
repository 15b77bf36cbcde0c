package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"slices"
	"sync"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/transport"
)

func controllerCommand() *cli.Command {
	return parent("controller", "the replicated controller's group of candidates",
		described(leaf("status", "each candidate's Raft state, term, last and applied index, and which one is active",
			"", args(0, 0), controllerStatusAction),
			`Asks every broker, and every candidate a candidate names, for its part in
the controller group: its Raft state, term, last, commit and applied
index and metadata epoch (unreachable when it does not answer); then the
active candidate and the quorum. It needs no active controller. With a
single controller it says so.`),
		described(leaf("transfer", "make another candidate the active controller",
			"", args(0, 0), controllerTransferAction,
			intFlag("to", "candidate `N` (required)", "none, required")),
			`Hands the active role to candidate N (a Raft leadership transfer) and
returns once the old active one sees N lead. Partition leaders do not
move. An id that is not a member is refused (InvalidRequest).`),
		described(leaf("add", "add a candidate to the group (a Raft membership change); list it in every node's --controller first",
			"", args(0, 0), controllerAddAction,
			intFlag("id", "candidate `N`, its broker id (required)", "none, required"),
			&cli.StringFlag{Name: "addr", Usage: "its RPC address `HOST:PORT`, as --controller lists it"}),
			`A Raft membership change, made by the active controller. It takes only a
candidate that the active controller's own --controller lists at that
address: list it in every node's --controller first (restarting them one
at a time), then add it; it catches up by itself.`),
		described(leaf("remove", "remove a candidate from the group, refused when the others would have no quorum",
			"", args(0, 0), controllerRemoveAction,
			intFlag("id", "candidate `N` (required)", "none, required")),
			`A Raft membership change, made by the active controller. Refused
(InvalidRequest, nothing changed) when the voters left that answer now
would be fewer than a quorum of the group without it. Take the removed
candidate out of every node's --controller afterwards.`),
	)
}

// candidateRow is one line of controller status: a node asked, and what
// it said.
type candidateRow struct {
	ID      int32                    `json:"id"`
	Address string                   `json:"address"`
	Answers bool                     `json:"answers"`
	Error   string                   `json:"error,omitempty"`
	Status  *client.ControllerStatus `json:"status,omitempty"`
}

// controllerReport is controller status -o json.
type controllerReport struct {
	Mode       string         `json:"mode"` // single or replicated
	Active     int32          `json:"active"`
	Quorum     int            `json:"quorum,omitempty"`
	Candidates []candidateRow `json:"candidates"`
}

// surveyController asks every broker of the metadata, then every member
// a candidate names, for its part in the controller group.
func surveyController(ctx context.Context, cl *client.Client) (controllerReport, error) {
	md, err := cl.Metadata(ctx)
	if err != nil {
		return controllerReport{}, err
	}
	asked := map[int32]*candidateRow{}
	var denied error // an Unauthorized answer: every node gives it alike
	ask := func(targets map[int32]string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for id, addr := range targets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				row := &candidateRow{ID: id, Address: addr}
				st, err := cl.ControllerStatus(ctx, addr)
				switch {
				case err != nil:
					row.Error = err.Error()
				case st.Node != id:
					row.Error = fmt.Sprintf("%s answers as broker %d", addr, st.Node)
				default:
					row.Answers, row.Status = true, &st
				}
				mu.Lock()
				asked[id] = row
				if errors.Is(err, transport.ErrUnauthorized) {
					denied = err
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	first := map[int32]string{}
	for _, b := range md.Brokers {
		first[b.ID] = b.Addr
	}
	ask(first)
	if denied != nil {
		return controllerReport{}, denied
	}
	more := map[int32]string{}
	for _, r := range asked {
		if r.Status == nil {
			continue
		}
		for _, m := range r.Status.Members {
			if _, ok := asked[m.ID]; !ok {
				more[m.ID] = m.Addr
			}
		}
	}
	ask(more)
	rep := controllerReport{Mode: "single", Candidates: []candidateRow{}}
	members := map[int32]bool{}
	for _, r := range asked {
		if r.Status == nil {
			continue
		}
		if r.Status.Mode == "candidate" {
			rep.Mode = "replicated"
			for _, m := range r.Status.Members {
				members[m.ID] = true
			}
		}
		if r.Status.Active {
			rep.Active = r.ID
		}
	}
	for _, r := range asked {
		switch {
		case rep.Mode == "replicated" && (members[r.ID] || r.Status != nil && r.Status.Mode == "candidate"):
		case rep.Mode == "single" && r.Status != nil && r.Status.Mode == "single":
		case rep.Mode == "single" && r.ID == md.ControllerID:
		default:
			continue
		}
		rep.Candidates = append(rep.Candidates, *r)
	}
	slices.SortFunc(rep.Candidates, func(a, b candidateRow) int { return int(a.ID - b.ID) })
	if rep.Mode == "replicated" {
		rep.Quorum = len(members)/2 + 1
	}
	return rep, nil
}

func controllerStatusAction(c *cli.Context) error {
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		rep, err := surveyController(ctx, cl)
		if err != nil {
			return err
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, rep)
		}
		return printControllerStatus(c.App.Writer, rep)
	})
}

func printControllerStatus(w io.Writer, rep controllerReport) error {
	if rep.Mode == "single" {
		id := int32(0)
		if len(rep.Candidates) > 0 {
			id = rep.Candidates[0].ID
		}
		_, err := fmt.Fprintf(w, "A single controller, broker %d: there is no controller group. "+
			"To replicate it, list three candidates in every node's --controller (README, \"Upgrading to a replicated controller\").\n", id)
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tADDRESS\tSTATE\tACTIVE\tTERM\tLAST-INDEX\tCOMMIT\tAPPLIED\tEPOCH")
	answering := 0
	for _, r := range rep.Candidates {
		if r.Status == nil {
			fmt.Fprintf(tw, "%d\t%s\tunreachable\t-\t-\t-\t-\t-\t-\n", r.ID, r.Address)
			continue
		}
		answering++
		s := r.Status
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\n", r.ID, r.Address, s.State, yesNo(s.Active), s.Term, s.LastIndex, s.CommitIndex, s.AppliedIndex, s.MetadataEpoch)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if rep.Active != 0 {
		fmt.Fprintf(w, "Active controller: candidate %d. ", rep.Active)
	} else {
		fmt.Fprint(w, "No candidate is active now. ")
	}
	_, err := fmt.Fprintf(w, "%d of %d candidates answer; a quorum is %d.\n", answering, len(rep.Candidates), rep.Quorum)
	return err
}

// candidateFlag reads a candidate id flag.
func candidateFlag(c *cli.Context, name string) (int32, error) {
	if !c.IsSet(name) {
		return 0, exitcode.Usagef("MissingFlag", "--%s is required", name)
	}
	id := c.Int(name)
	if id < 1 || id > math.MaxInt32 {
		return 0, exitcode.Usagef("InvalidFlag", "--%s %d: want a broker id, a positive number", name, id)
	}
	return int32(id), nil
}

func controllerChange(c *cli.Context, req transport.ControllerChangeRequest, done string) error {
	req.Requester = requester()
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		st, err := cl.ChangeController(ctx, req)
		if err != nil {
			return refused(err)
		}
		if g.output == outputJSON {
			return writeJSON(c.App.Writer, st)
		}
		fmt.Fprintln(c.App.Writer, done)
		if st.Leader != 0 {
			fmt.Fprintf(c.App.Writer, "Active controller: candidate %d (%s).\n", st.Leader, st.LeaderAddr)
		}
		return nil
	})
}

func controllerTransferAction(c *cli.Context) error {
	to, err := candidateFlag(c, "to")
	if err != nil {
		return err
	}
	return controllerChange(c, transport.ControllerChangeRequest{Op: transport.ControllerTransfer, ID: to},
		fmt.Sprintf("Transferred the active controller to candidate %d.", to))
}

func controllerAddAction(c *cli.Context) error {
	id, err := candidateFlag(c, "id")
	if err != nil {
		return err
	}
	addr := c.String("addr")
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return exitcode.Usagef("InvalidFlag", "--addr %q: want HOST:PORT, the candidate's RPC address", addr)
	}
	return controllerChange(c, transport.ControllerChangeRequest{Op: transport.ControllerAdd, ID: id, Addr: addr},
		fmt.Sprintf("Added candidate %d@%s to the controller group; it catches up by itself.", id, addr))
}

func controllerRemoveAction(c *cli.Context) error {
	id, err := candidateFlag(c, "id")
	if err != nil {
		return err
	}
	return controllerChange(c, transport.ControllerChangeRequest{Op: transport.ControllerRemove, ID: id},
		fmt.Sprintf("Removed candidate %d from the controller group. Take it out of every node's --controller too.", id))
}

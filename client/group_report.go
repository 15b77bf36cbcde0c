package client

import (
	"fmt"
	"slices"
	"strings"
)

// ControllerGroupReport is the controller group of a replicated controller as the
// survey found it (docs/controller-raft.md).
type ControllerGroupReport struct {
	// Members are the group's candidates, by id, as the active one (or
	// else any candidate that answered) lists them.
	Members []CandidateReport
	// Active is the active controller's id, 0 when no candidate says it is.
	Active int32
	// Answering counts the voters that answered; Quorum is how many
	// voters the group needs to commit anything.
	Answering, Voters, Quorum int
}

// CandidateReport is one candidate of the group.
type CandidateReport struct {
	ID      int32  `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
	// Answers is whether it answered the survey as a candidate; State is
	// its Raft state then (Leader, Follower, Candidate).
	Answers bool   `json:"answers"`
	State   string `json:"state,omitempty"`
	Term    uint64 `json:"term,omitempty"`
	Active  bool   `json:"active"`
}

// groupReport builds the group's report and its warnings; nil when no
// broker said it is a candidate.
func (s *survey) groupReport() (*ControllerGroupReport, []Warning) {
	var src *ControllerStatus
	said := map[int32]*ControllerStatus{}
	for _, id := range sortedKeys(s.views) {
		v := s.views[id]
		if !v.answered() || v.group == nil || v.group.Mode != "candidate" {
			continue
		}
		said[id] = v.group
		if src == nil || v.group.Active || (!src.Active && len(v.group.Members) > len(src.Members)) {
			src = v.group
		}
	}
	if src == nil {
		return nil, nil
	}
	g := &ControllerGroupReport{}
	for _, m := range src.Members {
		gm := CandidateReport{ID: m.ID, Address: m.Addr, Voter: m.Voter}
		if st, ok := said[m.ID]; ok {
			gm.Answers, gm.State, gm.Term, gm.Active = true, st.State, st.Term, st.Active
			if st.Active {
				g.Active = m.ID
			}
		}
		if gm.Voter {
			g.Voters++
			if gm.Answers {
				g.Answering++
			}
		}
		g.Members = append(g.Members, gm)
	}
	slices.SortFunc(g.Members, func(a, b CandidateReport) int { return int(a.ID - b.ID) })
	g.Quorum = g.Voters/2 + 1
	var ws []Warning
	var down, lost []string // the voters that do not answer; how to rebuild each
	for _, m := range g.Members {
		if m.Voter && !m.Answers {
			down = append(down, fmt.Sprintf("%d (%s)", m.ID, m.Address))
			lost = append(lost, fmt.Sprintf("gostream-ctl controller remove --id %d, start it with an empty --data-dir, then gostream-ctl controller add --id %d --addr %s", m.ID, m.ID, m.Address))
		}
	}
	switch {
	case g.Answering < g.Quorum:
		ws = append(ws, noCommand(
			fmt.Sprintf("the controller group has lost its quorum: %d of its %d candidates answer, %d are needed, so no admin change can be made (candidates down: %s)",
				g.Answering, g.Voters, g.Quorum, strings.Join(down, ", ")),
			"start the candidates that are down (gostream-ctl controller status shows each one's Raft state)", NoCommandBrokerDown, ""))
	case len(down) > 0:
		spare := g.Answering - g.Quorum
		noun, verb := "candidate", "does"
		if len(down) > 1 {
			noun, verb = "candidates", "do"
		}
		ws = append(ws, noCommand(
			fmt.Sprintf("controller %s %s not answer: %d of %d candidates answer, so the group survives %s more",
				noun, strings.Join(down, ", ")+" "+verb, g.Answering, g.Voters, pluralOf(spare, "loss", "losses")),
			"start it again; if its disk is lost: "+strings.Join(lost, "; "), NoCommandBrokerDown, ""))
	case g.Active == 0:
		ws = append(ws, noCommand("no controller candidate is active: the group is electing one",
			"wait a second and look again (gostream-ctl controller status)", NoCommandManual, ""))
	}
	return g, ws
}

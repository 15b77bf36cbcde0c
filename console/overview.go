package console

import (
	"net/http"
	"slices"
	"strings"

	"gostream/client"
	"gostream/metadata"
)

// Overview is the answer of GET /ui/api/overview: the cluster as
// `gostream-ctl cluster status` judges it (client.ClusterStatus, asked
// then), and the autopilot.
type Overview struct {
	ClusterID     string `json:"clusterId"`
	MetadataEpoch int64  `json:"metadataEpoch"`
	// Controller is the active controller's broker id; ControllerAnswers
	// whether it answered. ControllerRefusal says why it refuses every
	// change, "" when it accepts them.
	Controller        int32  `json:"controller"`
	ControllerAnswers bool   `json:"controllerAnswers"`
	ControllerRefusal string `json:"controllerRefusal,omitempty"`
	// GossipFrom says whose view the brokers' gossip states are, in words.
	GossipFrom string           `json:"gossipFrom"`
	Brokers    []OverviewBroker `json:"brokers"`
	// ControllerGroup is the replicated controller's group; null for a
	// single controller.
	ControllerGroup *ControllerGroup `json:"controllerGroup"`
	Partitions      PartitionCounts  `json:"partitions"`
	// Warnings are what an operator should act on, in the order to read
	// them, each with the command that fixes it when there is one.
	Warnings  []Warning `json:"warnings"`
	Autopilot Autopilot `json:"autopilot"`
}

// OverviewBroker is one broker: a registered one, or a gossip member
// that is not registered (Registered false, no addresses).
type OverviewBroker struct {
	ID   int32  `json:"id"`
	Rack string `json:"rack"`
	// Registered is whether the broker is in the cluster's metadata.
	Registered bool `json:"registered"`
	// Answers is whether it answered; Error says why not.
	Answers bool   `json:"answers"`
	Error   string `json:"error,omitempty"`
	// Gossip is its gossip state (alive, suspect, dead, left, unknown);
	// GossipDisputed is set when no majority agreed on it.
	Gossip         string `json:"gossip"`
	GossipDisputed bool   `json:"gossipDisputed"`
	// MetadataEpoch is the metadata epoch it holds, -1 when unknown.
	MetadataEpoch int64 `json:"metadataEpoch"`
	// RPC and HTTP are its addresses as the cluster knows them; Listeners
	// its named native listeners and Kafka its Kafka listeners, as
	// clients dial them.
	RPC       string     `json:"rpc"`
	HTTP      string     `json:"http"`
	Listeners []Listener `json:"listeners"`
	Kafka     []Listener `json:"kafka"`
	// Replicas and Leaders count the replicas it hosts and leads, and
	// DataBytes their size on its disk, from its status document; all
	// null when it did not give one (StatusError says why).
	Replicas    *int   `json:"replicas"`
	Leaders     *int   `json:"leaders"`
	DataBytes   *int64 `json:"dataBytes"`
	StatusError string `json:"statusError,omitempty"`
}

// Listener is one named listener's address, as clients dial it.
type Listener struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// ControllerGroup is the replicated controller's group.
type ControllerGroup struct {
	// Active is the active controller's id, 0 when no candidate says.
	Active int32 `json:"active"`
	// Answering counts the voters that answered; Quorum is how many the
	// group needs to commit anything.
	Answering  int         `json:"answering"`
	Voters     int         `json:"voters"`
	Quorum     int         `json:"quorum"`
	Candidates []Candidate `json:"candidates"`
}

// Candidate is one candidate of the controller group.
type Candidate struct {
	ID      int32  `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
	Answers bool   `json:"answers"`
	// State is its Raft state when it answered (Leader, Follower,
	// Candidate).
	State  string `json:"state"`
	Term   uint64 `json:"term"`
	Active bool   `json:"active"`
}

// PartitionCounts counts the cluster's partitions.
type PartitionCounts struct {
	Total           int `json:"total"`
	UnderReplicated int `json:"underReplicated"`
	Offline         int `json:"offline"`
}

// Warning is one problem an operator should act on (client.Warning).
type Warning struct {
	// Message is the whole warning for people.
	Message string `json:"message"`
	Problem string `json:"problem"`
	Advice  string `json:"advice,omitempty"`
	// Command is the gostream-ctl command that fixes it, to run now; ""
	// when there is none, and then NoCommand says why (manual,
	// broker-down, controller-down, covered, resumes) and Pending is the
	// command to run once that no longer holds, if any.
	Command   string `json:"command,omitempty"`
	NoCommand string `json:"noCommand,omitempty"`
	Pending   string `json:"pending,omitempty"`
}

// Autopilot is the autopilot that holds the lease to act, and what
// autopilots did lately.
type Autopilot struct {
	// Holder names the autopilot that holds the lease, "" when none
	// does; TTLMs is the time to live it was granted.
	Holder string `json:"holder"`
	TTLMs  int64  `json:"ttlMs"`
	// Actions are the audit trail's events an autopilot requested (the
	// holder, or a requester named autopilot:...), newest first, at most
	// autopilotActions; ActionsError says why they are missing.
	Actions      []HistoryEvent `json:"actions"`
	ActionsError string         `json:"actionsError,omitempty"`
}

// autopilotActions bounds the autopilot's actions in the overview.
const autopilotActions = 20

// autopilotPrefix begins an autopilot's default name (docs/autopilot.md).
const autopilotPrefix = "autopilot:"

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	c, ctx, cancel, ok := s.ask(w, r, metadata.OpDescribe, metadata.ResourceCluster, "")
	if !ok {
		return
	}
	defer cancel()
	rep, err := c.ClusterStatus(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := overviewOf(rep)
	events, err := c.History(ctx)
	if err != nil {
		out.Autopilot.ActionsError = err.Error()
	} else {
		out.Autopilot.Actions = autopilotActionsOf(events, out.Autopilot.Holder)
	}
	writeJSON(w, http.StatusOK, out)
}

// overviewOf is a cluster report as the overview shows it.
func overviewOf(rep client.ClusterReport) Overview {
	out := Overview{
		ClusterID: rep.ClusterID, MetadataEpoch: rep.MetadataEpoch, Controller: rep.Controller,
		ControllerAnswers: rep.ControllerAnswers, ControllerRefusal: rep.ControllerRefusal, GossipFrom: rep.GossipFrom.String(),
		Brokers:    make([]OverviewBroker, 0, len(rep.Brokers)),
		Partitions: PartitionCounts{Total: rep.Counts.Total, UnderReplicated: rep.Counts.UnderReplicated, Offline: rep.Counts.Offline},
		Warnings:   make([]Warning, 0, len(rep.Warnings)),
		Autopilot:  Autopilot{Actions: []HistoryEvent{}},
	}
	for _, b := range rep.Brokers {
		ob := OverviewBroker{ID: b.ID, Rack: b.Rack, Registered: b.Registered, Answers: b.Answers, Gossip: string(b.Gossip),
			GossipDisputed: b.GossipDisputed, MetadataEpoch: b.MetadataEpoch, RPC: b.Address, HTTP: b.HTTP,
			Listeners: listenersOf(b.Listeners), Kafka: listenersOf(b.Kafka)}
		if b.Err != nil {
			ob.Error = b.Err.Error()
		}
		if st := b.Status; st != nil {
			replicas, leaders := len(st.Partitions), 0
			var size int64
			for _, p := range st.Partitions {
				size += p.SizeBytes
				if p.Leader == st.Node {
					leaders++
				}
			}
			ob.Replicas, ob.Leaders, ob.DataBytes = &replicas, &leaders, &size
		} else if b.StatusErr != nil {
			ob.StatusError = b.StatusErr.Error()
		}
		out.Brokers = append(out.Brokers, ob)
	}
	if g := rep.Group; g != nil {
		cg := &ControllerGroup{Active: g.Active, Answering: g.Answering, Voters: g.Voters, Quorum: g.Quorum, Candidates: make([]Candidate, 0, len(g.Members))}
		for _, m := range g.Members {
			cg.Candidates = append(cg.Candidates, Candidate{ID: m.ID, Address: m.Address, Voter: m.Voter, Answers: m.Answers, State: m.State, Term: m.Term, Active: m.Active})
		}
		out.ControllerGroup = cg
	}
	for _, wn := range rep.Warnings {
		out.Warnings = append(out.Warnings, Warning{Message: wn.Message, Problem: wn.Problem, Advice: wn.Advice, Command: wn.Command,
			NoCommand: string(wn.NoCommand), Pending: wn.Pending})
	}
	if l := rep.Autopilot; l != nil {
		out.Autopilot.Holder, out.Autopilot.TTLMs = l.Holder, l.TTLMillis
	}
	return out
}

// autopilotActionsOf picks, newest first, the events an autopilot
// requested: holder (the lease's, "" for none), or any requester with an
// autopilot's default name.
func autopilotActionsOf(events []client.HistoryEvent, holder string) []HistoryEvent {
	out := []HistoryEvent{}
	for _, ev := range slices.Backward(events) {
		if len(out) == autopilotActions {
			break
		}
		if (holder != "" && ev.Requester == holder) || strings.HasPrefix(ev.Requester, autopilotPrefix) {
			out = append(out, historyEventOf(ev))
		}
	}
	return out
}

// listenersOf reads a broker's listeners, NAME://HOST:PORT,... as the
// metadata writes them (metadata.FormatEndpoints).
func listenersOf(list string) []Listener {
	out := []Listener{}
	if list == "" {
		return out
	}
	for _, part := range strings.Split(list, ",") {
		name, addr, ok := strings.Cut(part, "://")
		if !ok {
			continue
		}
		out = append(out, Listener{Name: name, Address: addr})
	}
	return out
}

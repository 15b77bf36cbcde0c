package console

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"gostream/client"
	"gostream/metadata"
	"gostream/transport"
)

// Groups is the answer of GET /ui/api/groups: every consumer group the
// principal may describe, from the survey's last round.
type Groups struct {
	SurveyReport
	Groups []GroupSummary `json:"groups"`
}

// GroupSummary is one group in the list.
type GroupSummary struct {
	Name string `json:"name"`
	// State is stable, rebalancing or empty (Kafka's groups have their
	// own: Stable, PreparingRebalance...).
	State   string `json:"state"`
	Members int    `json:"members"`
	// Protocol is "native" for a group of gostream's own protocol, else
	// the Kafka protocol type ("consumer", "connect"...).
	Protocol string `json:"protocol"`
	// Lag is the group's lag summed over the topics it reads that the
	// principal may describe; null when its coordinator did not answer.
	Lag *int64 `json:"lag"`
}

// GroupDetail is the answer of GET /ui/api/groups/{group}: the group as
// its coordinator describes it, with every partition's log end, asked
// then. Topics the principal may not describe are left out, as
// `gostream-ctl group describe` leaves them out.
type GroupDetail struct {
	Name       string `json:"name"`
	State      string `json:"state"`
	Generation int32  `json:"generation"`
	// Protocol is as in GroupSummary; Assignor is the assignor (a native
	// group) or the protocol its leader chose (a Kafka group).
	Protocol    string        `json:"protocol"`
	Assignor    string        `json:"assignor"`
	Coordinator int32         `json:"coordinator"`
	Members     []GroupMember `json:"members"`
	// Partitions are every partition of each topic the group committed
	// on or subscribes to, by topic and partition.
	Partitions []GroupPartition `json:"partitions"`
	// Lag sums the partitions' lags that are known.
	Lag int64 `json:"lag"`
}

// GroupMember is one member of a group.
type GroupMember struct {
	ID string `json:"id"`
	// InstanceID is a static member's, "" for a dynamic one; ClientID a
	// Kafka member's client id.
	InstanceID string `json:"instanceId"`
	ClientID   string `json:"clientId"`
	Host       string `json:"host"`
	// Owned is what the member owns now, by topic.
	Owned []TopicPartitions `json:"owned"`
	// LastHeartbeatMs is how long ago it was last heard from; null when
	// not since its coordinator took over.
	LastHeartbeatMs *int64 `json:"lastHeartbeatMs"`
}

// TopicPartitions are partitions of one topic.
type TopicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// GroupPartition is a group's progress in one partition.
type GroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Committed is the committed offset, null when never committed;
	// LogEnd is the high watermark and Lag the records from Committed
	// (the log start when never committed) to it, both null when the
	// partition's leader did not answer (Error says why).
	Committed *int64 `json:"committed"`
	LogEnd    *int64 `json:"logEnd"`
	Lag       *int64 `json:"lag"`
	Error     string `json:"error,omitempty"`
}

// ResetRequest is the body of POST /ui/api/groups/{group}/reset-offsets:
// move the group's committed offsets on Topic (of Partitions, or every
// partition when empty) To earliest, latest, offset (Value), shift
// (by Value, negative: back) or time (Value, Unix milliseconds). Without
// Execute it is a dry run that changes nothing.
type ResetRequest struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
	To         string  `json:"to"`
	Value      *int64  `json:"value"`
	Execute    bool    `json:"execute"`
}

// ResetAnswer is the answer of a reset: each partition's committed
// offset and the one it gets, and whether they were written.
type ResetAnswer struct {
	Group    string        `json:"group"`
	Topic    string        `json:"topic"`
	Executed bool          `json:"executed"`
	Offsets  []OffsetReset `json:"offsets"`
}

// OffsetReset is one partition of a reset.
type OffsetReset struct {
	Partition int32 `json:"partition"`
	// Committed is the offset before, null when never committed; New the
	// one the reset commits, null when the partition is left out (a
	// shift of a partition never committed).
	Committed *int64 `json:"committed"`
	New       *int64 `json:"new"`
	// Note says why New is not where To points (kept at the log start or
	// the high watermark), or why the partition is left out.
	Note string `json:"note,omitempty"`
}

func (s *Server) groups(w http.ResponseWriter, r *http.Request) {
	snap := s.snapshot(w, r)
	if snap == nil {
		return
	}
	out := Groups{SurveyReport: s.surveyReport(r, snap), Groups: []GroupSummary{}}
	for _, g := range snap.groups {
		if !s.may(r, metadata.OpDescribe, metadata.ResourceGroup, g.name) {
			continue
		}
		gs := GroupSummary{Name: g.name, State: g.state, Members: g.members, Protocol: g.protocol}
		if g.lag != nil {
			var lag int64
			for topic, l := range g.lag {
				if s.may(r, metadata.OpDescribe, metadata.ResourceTopic, topic) {
					lag += l
				}
			}
			gs.Lag = &lag
		}
		out.Groups = append(out.Groups, gs)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) group(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	c, ctx, cancel, ok := s.ask(w, r, metadata.OpDescribe, metadata.ResourceGroup, name)
	if !ok {
		return
	}
	defer cancel()
	d, err := c.DescribeGroup(ctx, name)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := GroupDetail{Name: d.Group, State: d.State, Generation: d.GroupEpoch, Protocol: "native", Assignor: d.Assignor,
		Coordinator: d.Coordinator, Members: make([]GroupMember, 0, len(d.Members)), Partitions: make([]GroupPartition, 0, len(d.Partitions))}
	if d.ProtocolType != "" {
		out.Protocol = d.ProtocolType
	}
	describable := func(topic string) bool { return s.may(r, metadata.OpDescribe, metadata.ResourceTopic, topic) }
	for _, m := range d.Members {
		gm := GroupMember{ID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.Host, Owned: []TopicPartitions{}}
		for _, tp := range m.Owned {
			if !describable(tp.Topic) {
				continue
			}
			if n := len(gm.Owned); n == 0 || gm.Owned[n-1].Topic != tp.Topic {
				gm.Owned = append(gm.Owned, TopicPartitions{Topic: tp.Topic, Partitions: []int32{}})
			}
			last := &gm.Owned[len(gm.Owned)-1]
			last.Partitions = append(last.Partitions, tp.Partition)
		}
		if m.SinceHeartbeat >= 0 {
			ms := m.SinceHeartbeat.Milliseconds()
			gm.LastHeartbeatMs = &ms
		}
		out.Members = append(out.Members, gm)
	}
	for _, p := range d.Partitions {
		if !describable(p.Topic) {
			continue
		}
		gp := GroupPartition{Topic: p.Topic, Partition: p.Partition, Committed: known(p.Committed), LogEnd: known(p.LogEnd), Lag: known(p.Lag)}
		if p.LogEndErr != nil {
			gp.Error = p.LogEndErr.Error()
		}
		if gp.Lag != nil {
			out.Lag += *gp.Lag
		}
		out.Partitions = append(out.Partitions, gp)
	}
	writeJSON(w, http.StatusOK, out)
}

// known is an offset for JSON: null when never committed or unknown
// (client.Never, client.Unknown).
func known(v int64) *int64 {
	if v < 0 {
		return nil
	}
	return &v
}

// resetTargetOf checks a reset's body and says where it moves to.
func resetTargetOf(req ResetRequest) (client.ResetTarget, error) {
	if req.Topic == "" {
		return client.ResetTarget{}, errors.New("name the topic whose offsets move: topic")
	}
	if err := metadata.ValidateTopicName(req.Topic); err != nil {
		return client.ResetTarget{}, err
	}
	if len(req.Partitions) > metadata.MaxPartitions {
		return client.ResetTarget{}, fmt.Errorf("%d partitions: a topic has at most %d", len(req.Partitions), metadata.MaxPartitions)
	}
	for _, p := range req.Partitions {
		if p < 0 {
			return client.ResetTarget{}, fmt.Errorf("partition %d: want a partition number, 0 or more", p)
		}
	}
	t := client.ResetTarget{To: client.ResetTo(req.To)}
	switch t.To {
	case client.ResetEarliest, client.ResetLatest:
		if req.Value != nil {
			return t, fmt.Errorf("to %s takes no value", req.To)
		}
		return t, nil
	case client.ResetOffset, client.ResetShift, client.ResetTime:
	default:
		return t, fmt.Errorf("to %q: want earliest, latest, offset, shift or time", req.To)
	}
	if req.Value == nil {
		return t, fmt.Errorf("to %s needs a value: the %s", req.To, map[client.ResetTo]string{
			client.ResetOffset: "offset", client.ResetShift: "records to move by", client.ResetTime: "time, in Unix milliseconds"}[t.To])
	}
	v := *req.Value
	switch t.To {
	case client.ResetOffset:
		if v < 0 {
			return t, fmt.Errorf("offset %d: want an offset, 0 or more", v)
		}
		t.Offset = v
	case client.ResetShift:
		t.Offset = v
	case client.ResetTime:
		if v < 0 {
			return t, fmt.Errorf("time %d: want Unix milliseconds, 0 or more", v)
		}
		t.Time = time.UnixMilli(v)
	}
	return t, nil
}

func (s *Server) resetOffsets(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	if err := s.allowed(r, metadata.OpOperate, metadata.ResourceCluster, ""); err != nil {
		writeErr(w, err)
		return
	}
	var req ResetRequest
	if !readJSON(w, r, &req) {
		return
	}
	target, err := resetTargetOf(req)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	c, ctx, cancel, ok := s.dial(w, r)
	if !ok {
		return
	}
	defer cancel()
	plan, err := c.PlanOffsetReset(ctx, group, req.Topic, req.Partitions, target)
	if err != nil {
		writeErr(w, err)
		return
	}
	if moves := client.ResetMoves(plan); req.Execute && len(moves) > 0 {
		if err := c.ResetOffsets(ctx, group, s.requester(r), moves...); err != nil {
			writeErr(w, err)
			return
		}
	}
	out := ResetAnswer{Group: group, Topic: req.Topic, Executed: req.Execute, Offsets: make([]OffsetReset, 0, len(plan))}
	for _, p := range plan {
		out.Offsets = append(out.Offsets, OffsetReset{Partition: p.Partition, Committed: known(p.Committed), New: known(p.New), Note: p.Note})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteGroup(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("group")
	c, ctx, cancel, ok := s.ask(w, r, metadata.OpDelete, metadata.ResourceGroup, name)
	if !ok {
		return
	}
	defer cancel()
	if err := c.DeleteGroup(ctx, name); err != nil {
		if errors.Is(err, transport.ErrGroupNotEmpty) {
			writeError(w, http.StatusConflict, transport.CodeGroupNotEmpty.String(),
				fmt.Sprintf("group %q has members: stop its consumers first, then delete it", name))
			return
		}
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

package console

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"gostream/client"
	"gostream/metadata"
	"gostream/transport"
)

// Topics is the answer of GET /ui/api/topics: every topic the principal
// may describe, from the survey's last round.
type Topics struct {
	SurveyReport
	Topics []TopicSummary `json:"topics"`
}

// TopicSummary is one topic in the list.
type TopicSummary struct {
	Name              string `json:"name"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replicationFactor"`
	// Bytes and Records are what the topic holds, one copy: the sums
	// over its partitions of the leader's replica size and of its high
	// watermark minus its log start. PartitionsUnknown counts the
	// partitions whose leader did not tell, left out of the sums.
	Bytes             int64 `json:"bytes"`
	Records           int64 `json:"records"`
	PartitionsUnknown int   `json:"partitionsUnknown"`
	// RecordsPerSecond is the rate records were appended between the
	// survey's last two rounds; null after its first.
	RecordsPerSecond *float64 `json:"recordsPerSecond"`
	// Internal is set on the cluster's own topics (__consumer_offsets,
	// the topics of Durable Streams' streams); Stream is the path of the
	// stream a topic holds, "" for none.
	Internal bool   `json:"internal"`
	Sealed   bool   `json:"sealed"`
	Stream   string `json:"stream"`
	// Groups are the groups the principal may describe that read the
	// topic (committed on it or subscribe to it), with their lag on it.
	Groups []GroupLag `json:"groups"`
}

// GroupLag is a group's lag on one topic: the records between its
// committed offsets (each partition's log start where it never
// committed) and the high watermarks.
type GroupLag struct {
	Group string `json:"group"`
	Lag   int64  `json:"lag"`
}

// TopicDetail is the answer of GET /ui/api/topics/{topic}: the topic as
// the cluster describes it and its replicas' brokers report them, asked
// then.
type TopicDetail struct {
	Name string `json:"name"`
	// ID tells this topic from an earlier or later one of its name.
	ID                string `json:"id"`
	ReplicationFactor int    `json:"replicationFactor"`
	Sealed            bool   `json:"sealed"`
	Internal          bool   `json:"internal"`
	// Stream is the Durable Streams stream the topic holds; null for
	// none.
	Stream     *StreamInfo       `json:"stream"`
	Partitions []PartitionDetail `json:"partitions"`
	// Config is every configuration key with the value the answering
	// broker applies; Default when the topic does not set it.
	Config []ConfigValue `json:"config"`
	// Groups are the groups the principal may describe that read the
	// topic, from the survey's round of GroupsAt (Unix milliseconds);
	// GroupsError says why they are missing.
	Groups      []GroupLag `json:"groups"`
	GroupsAt    int64      `json:"groupsAt"`
	GroupsError string     `json:"groupsError,omitempty"`
	// Unavailable says which brokers did not give their status: their
	// replicas' positions are null.
	Unavailable []string `json:"unavailable"`
}

// StreamInfo is the Durable Streams stream a topic holds.
type StreamInfo struct {
	Path        string `json:"path"`
	ContentType string `json:"contentType"`
	// ForkedFrom is the path of the stream it was forked from, "" for
	// none; Deleted is set on a stream deleted while forks of it remain.
	ForkedFrom string `json:"forkedFrom"`
	Deleted    bool   `json:"deleted"`
}

// PartitionDetail is one partition: its leadership, and its leader's
// positions (null when the leader did not tell).
type PartitionDetail struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	Replicas    []int32 `json:"replicas"`
	Active      []int32 `json:"active"`
	// HighWatermark, LogStart and LogEnd are the leader's; Bytes its
	// replica's size.
	HighWatermark *int64 `json:"highWatermark"`
	LogStart      *int64 `json:"logStart"`
	LogEnd        *int64 `json:"logEnd"`
	Bytes         *int64 `json:"bytes"`
	// ReplicaStates has one entry per replica, in Replicas' order.
	ReplicaStates []ReplicaDetail `json:"replicaStates"`
}

// ReplicaDetail is one replica of a partition, as its broker reports it.
type ReplicaDetail struct {
	Broker int32 `json:"broker"`
	// Leader and Active say whether it leads, and whether it is in the
	// active set (writes wait for it).
	Leader bool `json:"leader"`
	Active bool `json:"active"`
	// LogEnd is its log end and Bytes its size; Lag is the leader's log
	// end minus its own. All null when its broker or the leader did not
	// tell.
	LogEnd *int64 `json:"logEnd"`
	Bytes  *int64 `json:"bytes"`
	Lag    *int64 `json:"lag"`
	// State is the leader's word on a follower (in-sync, lagging,
	// diverged), "" for the leader or when it did not say.
	State string `json:"state"`
	// Problem is why its broker says the replica cannot serve, "" when
	// it can.
	Problem string `json:"problem,omitempty"`
}

// ConfigValue is one configuration key of a topic.
type ConfigValue struct {
	Key     string `json:"key"`
	Value   int64  `json:"value"`
	Default bool   `json:"default"`
}

func (s *Server) topics(w http.ResponseWriter, r *http.Request) {
	snap := s.snapshot(w, r)
	if snap == nil {
		return
	}
	out := Topics{SurveyReport: s.surveyReport(r, snap), Topics: []TopicSummary{}}
	for i := range snap.topics {
		t := &snap.topics[i]
		if !s.may(r, metadata.OpDescribe, metadata.ResourceTopic, t.meta.Name) {
			continue
		}
		bytes, records, unknown := t.sums()
		ts := TopicSummary{Name: t.meta.Name, Partitions: len(t.meta.Partitions), ReplicationFactor: t.meta.ReplicationFactor,
			Bytes: bytes, Records: records, PartitionsUnknown: unknown, RecordsPerSecond: t.rate,
			Internal: strings.HasPrefix(t.meta.Name, metadata.InternalPrefix), Sealed: t.meta.Sealed,
			Groups: s.readersOf(r, snap, t.meta.Name)}
		if st := t.meta.Stream; st != nil {
			ts.Stream = st.Path
		}
		out.Topics = append(out.Topics, ts)
	}
	writeJSON(w, http.StatusOK, out)
}

// readersOf are the groups of a round that read topic and that the
// principal may describe.
func (s *Server) readersOf(r *http.Request, snap *snapshot, topic string) []GroupLag {
	out := []GroupLag{}
	for _, g := range snap.readers[topic] {
		if s.may(r, metadata.OpDescribe, metadata.ResourceGroup, g.group) {
			out = append(out, GroupLag{Group: g.group, Lag: g.lag})
		}
	}
	return out
}

func (s *Server) topic(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("topic")
	// Authorization first, the same answer whether the topic exists or
	// not (docs/security.md).
	c, ctx, cancel, ok := s.ask(w, r, metadata.OpDescribe, metadata.ResourceTopic, name)
	if !ok {
		return
	}
	defer cancel()
	md, err := c.Metadata(ctx)
	if err != nil {
		writeErr(w, err)
		return
	}
	i, ok := slices.BinarySearchFunc(md.Topics, name, func(t client.TopicMetadata, name string) int { return strings.Compare(t.Name, name) })
	if !ok {
		writeErr(w, fmt.Errorf("%w: topic %q does not exist", transport.ErrUnknownTopic, name))
		return
	}
	t := md.Topics[i]
	out := TopicDetail{Name: t.Name, ID: t.ID, ReplicationFactor: t.ReplicationFactor, Sealed: t.Sealed,
		Internal: strings.HasPrefix(t.Name, metadata.InternalPrefix), Config: []ConfigValue{}, Groups: []GroupLag{}, Unavailable: []string{}}
	if st := t.Stream; st != nil {
		out.Stream = &StreamInfo{Path: st.Path, ContentType: st.ContentType, ForkedFrom: st.ForkedFrom, Deleted: st.Deleted}
	}
	for _, cv := range t.Config {
		out.Config = append(out.Config, ConfigValue{Key: cv.Key, Value: cv.Value, Default: cv.Default})
	}
	statuses, unavailable := replicaStatuses(ctx, c, md.Brokers, t)
	out.Unavailable = unavailable
	out.Partitions = partitionDetails(t, statuses)

	snap, err := s.survey.current(ctx)
	if err != nil {
		out.GroupsError = err.Error()
	} else {
		out.Groups, out.GroupsAt = s.readersOf(r, snap, t.Name), snap.at.UnixMilli()
	}
	writeJSON(w, http.StatusOK, out)
}

// replicaStatuses asks every broker that hosts a replica of t for its
// status document (nodeStatuses), and returns them by broker id with
// what did not answer, sorted.
func replicaStatuses(ctx context.Context, c *client.Client, brokers []client.Broker, t client.TopicMetadata) (map[int32]*transport.NodeStatus, []string) {
	hosts := map[int32]bool{}
	for _, p := range t.Partitions {
		for _, id := range p.Replicas {
			hosts[id] = true
		}
	}
	ask := make([]client.Broker, 0, len(hosts))
	for id := range hosts {
		b := client.Broker{ID: id} // not in the metadata: no address to ask
		if i, ok := slices.BinarySearchFunc(brokers, id, func(b client.Broker, id int32) int { return int(b.ID - id) }); ok {
			b = brokers[i]
		}
		ask = append(ask, b)
	}
	statuses, unavailable := nodeStatuses(ctx, c, ask)
	out := map[int32]*transport.NodeStatus{}
	for i, st := range statuses {
		if st != nil {
			out[ask[i].ID] = st
		}
	}
	slices.Sort(unavailable)
	return out, unavailable
}

// partitionDetails is every partition of t with its replicas' positions, as
// their brokers' statuses tell them.
func partitionDetails(t client.TopicMetadata, statuses map[int32]*transport.NodeStatus) []PartitionDetail {
	// Each broker's replicas of t, by partition.
	replicas := map[int32]map[int32]transport.PartitionStatus{}
	for id, st := range statuses {
		m := map[int32]transport.PartitionStatus{}
		for _, p := range st.Partitions {
			if p.Topic == t.Name {
				m[p.Partition] = p
			}
		}
		replicas[id] = m
	}
	out := make([]PartitionDetail, 0, len(t.Partitions))
	for _, p := range t.Partitions {
		pd := PartitionDetail{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, Replicas: orEmpty(p.Replicas),
			Active: orEmpty(p.Active), ReplicaStates: make([]ReplicaDetail, 0, len(p.Replicas))}
		leader, led := replicas[p.Leader][p.Partition]
		led = led && leader.Offline == "" && leader.Leader == p.Leader
		followers := map[int32]transport.FollowerStatus{}
		if led {
			pd.HighWatermark, pd.LogStart, pd.LogEnd, pd.Bytes = &leader.HighWatermark, &leader.LogStartOffset, &leader.LogEndOffset, &leader.SizeBytes
			for _, f := range leader.Followers {
				followers[f.Broker] = f
			}
		}
		for _, id := range p.Replicas {
			rd := ReplicaDetail{Broker: id, Leader: id == p.Leader, Active: slices.Contains(p.Active, id)}
			if rs, ok := replicas[id][p.Partition]; ok {
				rd.Problem = rs.Unusable()
				if rs.Offline == "" {
					rd.LogEnd, rd.Bytes = &rs.LogEndOffset, &rs.SizeBytes
					if led {
						lag := max(leader.LogEndOffset-rs.LogEndOffset, 0)
						rd.Lag = &lag
					}
				}
			}
			if f, ok := followers[id]; ok && !rd.Leader {
				rd.State = string(f.State)
			}
			pd.ReplicaStates = append(pd.ReplicaStates, rd)
		}
		out = append(out, pd)
	}
	return out
}

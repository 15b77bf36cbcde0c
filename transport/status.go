package transport

// The status document: what a node serves as GET /api/status on its HTTP
// surface (package httpapi), and what the client decodes (package client,
// whose cluster report is built from every node's). It is JSON, not a
// framed message, but it crosses the same boundary between a node and its
// callers, so its one definition lives here with the others. The field
// names are a contract: scripts read them.

// StatusPath is the path of the status document on a node's HTTP surface.
const StatusPath = "/api/status"

// NodeStatus is the body of GET /api/status: the cluster as one node knows
// it, and every replica that node hosts.
type NodeStatus struct {
	Node          int32             `json:"node"`
	ClusterID     string            `json:"cluster_id"`
	Controller    int32             `json:"controller"`
	MetadataEpoch int64             `json:"metadata_epoch"`
	Brokers       []BrokerStatus    `json:"brokers"`
	Partitions    []PartitionStatus `json:"partitions"`
	// StreamReaders are the node's live readers of Durable Streams
	// (long-polls and SSE connections it serves now, whichever node leads
	// the stream), by stream path: only the streams with one, so at most
	// the node's --ds-max-live-readers of them. Absent when it has none,
	// and from a node of a version before it.
	StreamReaders []StreamReaderCount `json:"stream_readers,omitempty"`
}

// StreamReaderCount is the number of a node's live readers of one stream.
type StreamReaderCount struct {
	Path    string `json:"path"`
	Readers int    `json:"readers"`
}

// Partition returns the node's replica of topic/partition, if it hosts
// one.
func (s *NodeStatus) Partition(topic string, partition int32) (PartitionStatus, bool) {
	if s == nil {
		return PartitionStatus{}, false
	}
	for _, p := range s.Partitions {
		if p.Topic == topic && p.Partition == partition {
			return p, true
		}
	}
	return PartitionStatus{}, false
}

// BrokerStatus is one registered broker, with its gossip state as the node
// sees it.
type BrokerStatus struct {
	ID     int32       `json:"id"`
	Addr   string      `json:"address"`
	HTTP   string      `json:"http"`
	Gossip string      `json:"gossip"` // gossip address
	State  GossipState `json:"gossip_state"`
}

// PartitionStatus is one replica a node hosts. A replica that could not be
// opened has only Topic, Partition, Leader -1 and Offline.
type PartitionStatus struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	FencedEpoch    int32   `json:"fenced_epoch"`
	Replicas       []int32 `json:"replicas"`
	Active         []int32 `json:"active"`
	Sealed         bool    `json:"sealed"`
	HighWatermark  int64   `json:"high_watermark"`
	LogStartOffset int64   `json:"log_start_offset"`
	LogEndOffset   int64   `json:"log_end_offset"`
	SizeBytes      int64   `json:"size_bytes"`
	// UnderReplicated is set on a leader's replica whose active set is
	// smaller than its replicas, or with a follower not in sync.
	UnderReplicated bool `json:"under_replicated"`
	// Offline says why the replica could not be opened (it is damaged).
	Offline string `json:"offline,omitempty"`
	// Problem says why the replica cannot be trusted: damaged, failed (a
	// full disk), or behind a follower.
	Problem string `json:"problem,omitempty"`
	// Followers is the leader's view of each follower, on the leader's
	// replica only.
	Followers []FollowerStatus `json:"followers,omitempty"`
}

// Unusable says why the replica cannot serve, or "" when it can.
func (p PartitionStatus) Unusable() string {
	if p.Offline != "" {
		return p.Offline
	}
	return p.Problem
}

// FollowerStatus is a leader's view of one of its followers.
type FollowerStatus struct {
	Broker       int32         `json:"broker"`
	LogEndOffset int64         `json:"log_end_offset"` // -1 when unknown
	State        FollowerState `json:"state"`          // FollowerInSync, FollowerLagging or FollowerDiverged
	// Error is why the follower diverged, or the leader's last error
	// replicating to a lagging one.
	Error string `json:"error,omitempty"`
}

// FollowerState is how an active follower stands with its leader.
type FollowerState string

// A leader reports each follower as one of the first three states. A
// cluster report (package client), judging from outside, adds the last
// two for a follower whose leader did not say.
const (
	// FollowerInSync holds every record its leader acknowledged.
	FollowerInSync FollowerState = "in-sync"
	// FollowerLagging lacks records its leader holds; catch-up brings it
	// up, after checking its log is a prefix of the leader's.
	FollowerLagging FollowerState = "lagging"
	// FollowerDiverged holds a log that is not a prefix of its leader's:
	// only recovery repairs it, never catch-up.
	FollowerDiverged FollowerState = "diverged"
	// FollowerOffline does not answer, or gossip says it is gone.
	FollowerOffline FollowerState = "offline"
	// FollowerUnknown could not be judged: neither its leader nor the
	// replicas' log ends said.
	FollowerUnknown FollowerState = "unknown"
)

// GossipState is a member's state in gossip (memberlist's names), or
// GossipUnknown when gossip does not show it.
type GossipState string

// Gossip states.
const (
	GossipAlive   GossipState = "alive"
	GossipSuspect GossipState = "suspect"
	GossipDead    GossipState = "dead"
	GossipLeft    GossipState = "left"
	GossipUnknown GossipState = "unknown"
)

// Gone reports whether the state says the process is not there: dead or
// left.
func (s GossipState) Gone() bool { return s == GossipDead || s == GossipLeft }

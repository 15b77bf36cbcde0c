package node

import "gostream/metadata"

// Status is the body of GET /api/status: the same facts as
// `gostream-ctl cluster status`, as this node knows them.
type Status struct {
	Node          int32             `json:"node"`
	ClusterID     string            `json:"cluster_id"`
	Controller    int32             `json:"controller"`
	MetadataEpoch int64             `json:"metadata_epoch"`
	Brokers       []BrokerStatus    `json:"brokers"`
	Partitions    []PartitionStatus `json:"partitions"`
}

// BrokerStatus is one registered broker, with its gossip state as this
// node sees it.
type BrokerStatus struct {
	ID     int32  `json:"id"`
	Addr   string `json:"address"`
	HTTP   string `json:"http"`
	Gossip string `json:"gossip"`
	State  string `json:"gossip_state"`
}

// PartitionStatus is one replica hosted by this node.
type PartitionStatus struct {
	Topic           string           `json:"topic"`
	Partition       int32            `json:"partition"`
	Leader          int32            `json:"leader"`
	LeaderEpoch     int32            `json:"leader_epoch"`
	FencedEpoch     int32            `json:"fenced_epoch"`
	Replicas        []int32          `json:"replicas"`
	Active          []int32          `json:"active"`
	Sealed          bool             `json:"sealed"`
	HighWatermark   int64            `json:"high_watermark"`
	LogStartOffset  int64            `json:"log_start_offset"`
	LogEndOffset    int64            `json:"log_end_offset"`
	SizeBytes       int64            `json:"size_bytes"`
	UnderReplicated bool             `json:"under_replicated"`
	Offline         string           `json:"offline,omitempty"` // why the replica could not be opened
	Problem         string           `json:"problem,omitempty"` // why the replica cannot be trusted: damaged, behind, failed
	Followers       []FollowerStatus `json:"followers,omitempty"`
}

// FollowerStatus is a leader's view of one follower.
type FollowerStatus struct {
	Broker       int32  `json:"broker"`
	LogEndOffset int64  `json:"log_end_offset"` // -1 when unknown
	State        string `json:"state"`          // in-sync, lagging, diverged
	Error        string `json:"error,omitempty"`
}

func (n *Node) status() Status {
	meta := n.broker.metadata()
	st := Status{Node: n.cfg.ID, Brokers: []BrokerStatus{}, Partitions: n.broker.partitionStatuses()}
	if meta == nil {
		return st
	}
	st.ClusterID, st.Controller, st.MetadataEpoch = meta.ClusterID, meta.ControllerID, meta.Epoch
	var members []gossipMember
	if n.gossip != nil {
		members = n.gossip.members()
	}
	for _, b := range meta.Brokers {
		st.Brokers = append(st.Brokers, BrokerStatus{ID: b.ID, Addr: b.Addr, HTTP: b.HTTP, Gossip: b.Gossip, State: gossipStateOf(b, members)})
	}
	return st
}

// gossipStateOf is the gossip state of the member that is broker b: the
// one with b's storage root when gossip shows several claiming b's id
// (another process started with the same --id), else the one member with
// the id; "unknown" when none.
func gossipStateOf(b metadata.Broker, members []gossipMember) string {
	state := "unknown"
	for _, m := range members {
		if m.BrokerID != b.ID {
			continue
		}
		if b.RootID != "" && m.RootID == b.RootID {
			return m.State
		}
		if b.RootID == "" || m.RootID == "" {
			state = m.State
		}
	}
	return state
}

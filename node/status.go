package node

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
	Offline         string           `json:"offline,omitempty"` // why the replica cannot be used`
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
	states := map[int32]string{}
	if n.gossip != nil {
		for _, m := range n.gossip.members() {
			states[m.BrokerID] = m.State
		}
	}
	for _, b := range meta.Brokers {
		s, ok := states[b.ID]
		if !ok {
			s = "unknown"
		}
		st.Brokers = append(st.Brokers, BrokerStatus{ID: b.ID, Addr: b.Addr, HTTP: b.HTTP, Gossip: b.Gossip, State: s})
	}
	return st
}

package node

import (
	"sort"
)

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

// BrokerStatus is one registered broker.
type BrokerStatus struct {
	ID     int32  `json:"id"`
	Addr   string `json:"address"`
	HTTP   string `json:"http"`
	Gossip string `json:"gossip"`
}

// PartitionStatus is one replica hosted by this node.
type PartitionStatus struct {
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	Leader         int32   `json:"leader"`
	LeaderEpoch    int32   `json:"leader_epoch"`
	Active         []int32 `json:"active"`
	Sealed         bool    `json:"sealed"`
	HighWatermark  int64   `json:"high_watermark"`
	LogStartOffset int64   `json:"log_start_offset"`
	LogEndOffset   int64   `json:"log_end_offset"`
	SizeBytes      int64   `json:"size_bytes"`
}

func (n *Node) status() Status {
	meta := n.broker.metadata()
	st := Status{Node: n.cfg.ID, Brokers: []BrokerStatus{}, Partitions: []PartitionStatus{}}
	if meta == nil {
		return st
	}
	st.ClusterID, st.Controller, st.MetadataEpoch = meta.ClusterID, meta.ControllerID, meta.Epoch
	for _, b := range meta.Brokers {
		st.Brokers = append(st.Brokers, BrokerStatus{ID: b.ID, Addr: b.Addr, HTTP: b.HTTP, Gossip: b.Gossip})
	}
	n.broker.mu.RLock()
	for tp, r := range n.broker.mu.replicas {
		s := r.part.State()
		start, hw, end := r.part.Offsets()
		sealed := false
		if t := meta.Topic(tp.topic); t != nil {
			sealed = t.Sealed
		}
		st.Partitions = append(st.Partitions, PartitionStatus{
			Topic: tp.topic, Partition: tp.partition, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch,
			Active: s.Active, Sealed: sealed, HighWatermark: hw, LogStartOffset: start, LogEndOffset: end,
			SizeBytes: r.log.Size(),
		})
	}
	n.broker.mu.RUnlock()
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	return st
}

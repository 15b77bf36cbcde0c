package node

import (
	"maps"
	"slices"

	"gostream/metadata"
	"gostream/transport"
)

// status is the body of GET /api/status (transport.NodeStatus): the same
// facts as `gostream-ctl cluster status`, as this node knows them, and
// readers, the node's live readers of each Durable Streams path
// (durable.Handler.LiveReaders).
func (n *Node) status(readers map[string]int) transport.NodeStatus {
	meta := n.broker.Metadata()
	st := transport.NodeStatus{Node: n.cfg.ID, Brokers: []transport.BrokerStatus{}, Partitions: n.broker.PartitionStatuses()}
	for _, path := range slices.Sorted(maps.Keys(readers)) {
		st.StreamReaders = append(st.StreamReaders, transport.StreamReaderCount{Path: path, Readers: readers[path]})
	}
	if meta == nil {
		return st
	}
	st.ClusterID, st.Controller, st.MetadataEpoch = meta.ClusterID, meta.ControllerID, meta.Epoch
	var members []gossipMember
	if n.gossip != nil {
		members = n.gossip.members()
	}
	for _, b := range meta.Brokers {
		st.Brokers = append(st.Brokers, transport.BrokerStatus{ID: b.ID, Addr: b.Addr, HTTP: b.HTTP, Gossip: b.Gossip, State: gossipStateOf(b, members)})
	}
	return st
}

// gossipStateOf is the gossip state of the member that is broker b: the
// one with b's storage root when gossip shows several claiming b's id
// (another process started with the same --id), else the one member with
// the id; unknown when none.
func gossipStateOf(b metadata.Broker, members []gossipMember) transport.GossipState {
	state := transport.GossipUnknown
	for _, m := range members {
		if m.BrokerID != b.ID {
			continue
		}
		if b.RootID != "" && m.RootID == b.RootID {
			return transport.GossipState(m.State)
		}
		if b.RootID == "" || m.RootID == "" {
			state = transport.GossipState(m.State)
		}
	}
	return state
}

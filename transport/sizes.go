package transport

// APIReplicaSizes asks a broker for the size on disk of each replica it
// hosts (controller → broker), for the planners of rebalance and
// decommission: JSONMessage of ReplicaSizesRequest → JSONMessage of
// ReplicaSizes.
const APIReplicaSizes API = 60

func init() { apiNames[APIReplicaSizes] = "ReplicaSizes" }

// ReplicaSizesRequest asks for the replicas of Topics, of every topic
// when empty.
type ReplicaSizesRequest struct {
	Topics []string `json:"topics,omitempty"`
}

// ReplicaSizes are the replicas a broker hosts, with their sizes.
type ReplicaSizes struct {
	Replicas []ReplicaSize `json:"replicas"`
}

// ReplicaSize is one replica's log on disk: the bytes of its segments.
// Leader says whether the broker leads the partition.
type ReplicaSize struct {
	Topic     string `json:"topic"`
	TopicID   string `json:"topic_id,omitempty"`
	Partition int32  `json:"partition"`
	Bytes     int64  `json:"bytes"`
	Leader    bool   `json:"leader,omitempty"`
}

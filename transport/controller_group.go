package transport

// Controller group APIs (docs/controller-raft.md): the Raft state of a
// candidate of a replicated controller, and the operator's changes of the
// group. Both travel as JSON (JSONMessage), like the operator reports.
const (
	// APIControllerStatus asks a node for its part in the controller
	// group: any node answers (Candidate false when it is none).
	APIControllerStatus API = 42
	// APIControllerChange asks the active controller to transfer the
	// active role, or add or remove a candidate.
	APIControllerChange API = 43
)

func init() {
	apiNames[APIControllerStatus] = "ControllerStatus"
	apiNames[APIControllerChange] = "ControllerChange"
}

// ControllerMember is one member of the controller group, as a candidate
// sees it.
type ControllerMember struct {
	ID    int32  `json:"id"`
	Addr  string `json:"address"`
	Voter bool   `json:"voter"`
	// Reachable is false when the active controller fails to reach it
	// (known only to the active one; true elsewhere).
	Reachable bool `json:"reachable"`
}

// ControllerStatus is one node's part in the controller group.
type ControllerStatus struct {
	Node int32 `json:"node"`
	// Mode is "single" (the node is the cluster's one controller),
	// "candidate" (a candidate of a replicated controller) or "none".
	Mode string `json:"mode"`
	// The rest is a candidate's Raft state.
	State        string             `json:"state,omitempty"` // Leader, Follower, Candidate, Shutdown
	Active       bool               `json:"active"`          // its controller makes changes now
	Term         uint64             `json:"term"`
	LastIndex    uint64             `json:"last_index"`
	CommitIndex  uint64             `json:"commit_index"`
	AppliedIndex uint64             `json:"applied_index"`
	Leader       int32              `json:"leader"` // 0 when none is known
	LeaderAddr   string             `json:"leader_address,omitempty"`
	Members      []ControllerMember `json:"members,omitempty"`
	// MetadataEpoch is the metadata epoch applied (the group's, or the
	// single controller's).
	MetadataEpoch int64 `json:"metadata_epoch"`
}

// Controller group changes (ControllerChangeRequest.Op).
const (
	ControllerTransfer = "transfer"
	ControllerAdd      = "add"
	ControllerRemove   = "remove"
)

// ControllerChangeRequest is one change of the controller group: transfer
// the active role to ID, add candidate ID at Addr, or remove ID.
type ControllerChangeRequest struct {
	Op        string `json:"op"`
	ID        int32  `json:"id"`
	Addr      string `json:"address,omitempty"`
	Requester string `json:"requester,omitempty"`
}

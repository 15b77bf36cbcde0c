package transport

// Growing, shrinking and healing the cluster (docs/reassignment.md):
// moving replicas, adding partitions, the planners of rebalance and
// decommission, and the autopilot's lease. The operator's requests travel
// as JSON in a JSONMessage, as the other operator APIs do; their JSON is
// the CLI's --output json and, for a MovePlan, the plan file.
const (
	// APIReassign starts moves, or cancels them (ctl → controller):
	// ReassignRequest → ChangeReport.
	APIReassign API = 54
	// APIReassignStatus lists the moves under way (ctl → controller):
	// ReassignStatusRequest → ReassignStatus.
	APIReassignStatus API = 55
	// APIMoveProgress asks a partition's leader how far its copy to a
	// replica being added has come (controller → leader): CatchUpRequest
	// (the partition and the broker) → MoveProgressResponse.
	APIMoveProgress API = 56
	// APICreatePartitions grows a topic (ctl, the Kafka front end →
	// controller): CreatePartitionsRequest → ChangeReport.
	APICreatePartitions API = 57
	// APIAutopilotLease takes, renews or gives back the autopilot's lease
	// (autopilot → controller): AutopilotLeaseRequest →
	// AutopilotLeaseResponse.
	APIAutopilotLease API = 58
	// APIPlanMoves plans moves: rebalance or decommission (ctl →
	// controller): PlanRequest → MovePlan.
	APIPlanMoves API = 59
)

func init() {
	apiNames[APIReassign] = "Reassign"
	apiNames[APIReassignStatus] = "ReassignStatus"
	apiNames[APIMoveProgress] = "MoveProgress"
	apiNames[APICreatePartitions] = "CreatePartitions"
	apiNames[APIAutopilotLease] = "AutopilotLease"
	apiNames[APIPlanMoves] = "PlanMoves"
}

// MovePlanVersion is the version of the plan file's format.
const MovePlanVersion = 1

// MovePlan is a list of moves: what `partition reassign --plan` reads and
// what the planners (`cluster rebalance`, `broker decommission`) print.
type MovePlan struct {
	Version    int           `json:"version"`
	Partitions []PlannedMove `json:"partitions"`
	// Summary is a planner's account of the plan (what it evens out, the
	// bytes to copy); reassign ignores it.
	Summary *PlanSummary `json:"summary,omitempty"`
}

// PlannedMove is one partition's move: to Replicas, preferred leader
// first. From, Bytes and Reason are a planner's, for the reader;
// reassign reads Topic, Partition and Replicas.
type PlannedMove struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	From      []int32 `json:"from,omitempty"`
	Bytes     int64   `json:"bytes,omitempty"`
	Reason    string  `json:"reason,omitempty"`
}

// PlanSummary describes a planned set of moves, per broker before and
// after.
type PlanSummary struct {
	Moves       int            `json:"moves"`        // partitions whose replica list changes
	NewReplicas int            `json:"new_replicas"` // replicas to copy
	BytesToCopy int64          `json:"bytes_to_copy"`
	Brokers     []BrokerLoad   `json:"brokers"`
	Notes       []string       `json:"notes,omitempty"`
	Racks       map[string]int `json:"racks,omitempty"` // brokers per rack
}

// BrokerLoad is one broker's share before and after a plan.
type BrokerLoad struct {
	Broker        int32  `json:"broker"`
	Rack          string `json:"rack,omitempty"`
	Replicas      int    `json:"replicas"`
	Leaders       int    `json:"leaders"` // preferred leaders: first of their replica lists
	Bytes         int64  `json:"bytes"`
	ReplicasAfter int    `json:"replicas_after"`
	LeadersAfter  int    `json:"leaders_after"`
	BytesAfter    int64  `json:"bytes_after"`
}

// ReassignRequest starts the moves of Plan (a dry run unless Execute), or
// with Cancel rolls back the moves under way of the partitions Plan names
// (their Replicas ignored; all moves when Plan names none).
type ReassignRequest struct {
	Plan    MovePlan `json:"plan"`
	Execute bool     `json:"execute"`
	Cancel  bool     `json:"cancel,omitempty"`
	// Throttle bounds the bytes per second each source broker sends to
	// copy replicas; 0 takes the default.
	Throttle  int64  `json:"throttle,omitempty"`
	Requester string `json:"requester,omitempty"`
}

// ReassignStatusRequest asks for the moves under way, of Topic or of
// every topic.
type ReassignStatusRequest struct {
	Topic string `json:"topic,omitempty"`
}

// ReassignStatus lists the moves under way.
type ReassignStatus struct {
	Moves []MoveStatus `json:"moves"`
}

// MoveStatus is one partition's move: its step and the progress of each
// replica being added.
type MoveStatus struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	From      []int32 `json:"from"`
	Target    []int32 `json:"target"`
	Leader    int32   `json:"leader"`
	Active    []int32 `json:"active"`
	// Step is copy, lead or finish (docs/reassignment.md).
	Step     string       `json:"step"`
	Throttle int64        `json:"throttle"`
	Started  int64        `json:"started"` // Unix milliseconds
	Copies   []CopyStatus `json:"copies,omitempty"`
	Waiting  string       `json:"waiting,omitempty"` // why the move waits, when it does
}

// CopyStatus is the copy of a partition's log to one replica being added.
type CopyStatus struct {
	Broker      int32   `json:"broker"`
	Active      bool    `json:"active"` // copied, verified and in the active set
	CopiedBytes int64   `json:"copied_bytes"`
	TotalBytes  int64   `json:"total_bytes"`
	BytesPerSec float64 `json:"bytes_per_sec"`
	// SecondsLeft is the time left at the rate so far; -1 when unknown.
	SecondsLeft float64 `json:"seconds_left"`
}

// MoveProgressResponse is a leader's last copy to a replica being added,
// running or not: all zero when there was none.
type MoveProgressResponse struct {
	Running     bool  `json:"running"`
	CopiedBytes int64 `json:"copied_bytes"`
	TotalBytes  int64 `json:"total_bytes"`
	Started     int64 `json:"started"` // Unix milliseconds
}

// CreatePartitionsRequest grows a topic to Count partitions (never
// fewer). Assignments, when given, are the replicas of each new
// partition, preferred leader first; else the controller places them.
type CreatePartitionsRequest struct {
	Topic       string    `json:"topic"`
	Count       int32     `json:"count"`
	Assignments [][]int32 `json:"assignments,omitempty"`
	DryRun      bool      `json:"dry_run"`
	Requester   string    `json:"requester,omitempty"`
}

// PlanRequest asks the controller for a plan: Kind "rebalance" evens out
// replicas, leaders and bytes per broker (and racks); "decommission"
// moves every replica off Broker.
type PlanRequest struct {
	Kind   string `json:"kind"`
	Broker int32  `json:"broker,omitempty"`
	// Topics limits a rebalance to these topics; all when empty.
	Topics []string `json:"topics,omitempty"`
}

// Plan kinds.
const (
	PlanRebalance    = "rebalance"
	PlanDecommission = "decommission"
)

// AutopilotLeaseRequest takes or renews the lease for Holder (a name
// unique to one autopilot process) for TTLMillis, or gives it back
// (Release).
type AutopilotLeaseRequest struct {
	Holder    string `json:"holder"`
	TTLMillis int64  `json:"ttl_ms"`
	Release   bool   `json:"release,omitempty"`
}

// AutopilotLeaseResponse says who holds the lease and until when (Unix
// milliseconds, as the controller's clock counts it).
type AutopilotLeaseResponse struct {
	Holder  string `json:"holder"`
	Granted bool   `json:"granted"` // the requester holds it now
	Expires int64  `json:"expires"`
}

package transport

import "time"

// The operator's requests to the controller and its answers (failover,
// recovery, elect-leaders, broker replace, metadata restore, the audit
// trail) travel as JSON in a JSONMessage. These are their one definition:
// the controller fills them, the client and gostream-ctl read them, and
// their JSON is the CLI's --output json.

// FailoverRequest names what a failover (or elect-leaders, or broker
// replace) acts on: one partition (Topic and Partition), or every
// partition a broker leads or follows (Broker).
type FailoverRequest struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	// Broker, when set, is the lost broker: the partitions it leads fail
	// over to another replica and it is dropped from the active set of the
	// partitions it follows.
	Broker int32 `json:"broker,omitempty"`
	// BrokerOfPartition, with Topic and Partition, names one replica of
	// the partition to take out of its active set: failed over when it
	// leads, dropped when it follows (refused while it answers with a
	// healthy replica).
	BrokerOfPartition int32 `json:"broker_of_partition,omitempty"`
	// DryRun asks what would happen and changes nothing.
	DryRun bool `json:"dry_run"`
	// Requester names who asked, for the audit trail; the controller uses
	// the connection's address when it is empty.
	Requester string `json:"requester,omitempty"`
}

// RecoverRequest names the returning replica: Broker's replica of one
// partition (Topic and Partition), or, with Topic empty, every replica of
// Broker that is outside its partition's active set.
type RecoverRequest struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Broker    int32  `json:"broker"`
	Requester string `json:"requester,omitempty"`
}

// ElectLeadersRequest asks for the leadership of every partition (of
// Topic, or of every topic when empty) to go back to its preferred
// replica, the first of its replicas.
type ElectLeadersRequest struct {
	Topic     string `json:"topic,omitempty"`
	DryRun    bool   `json:"dry_run"`
	Requester string `json:"requester,omitempty"`
}

// Candidate is one replica a failover considered for leader.
type Candidate struct {
	Broker       int32  `json:"broker"`
	Reachable    bool   `json:"reachable"`
	LastEpoch    int32  `json:"last_epoch"`     // leader epoch of its last batch, -1 when unknown
	LogEndOffset int64  `json:"log_end_offset"` // -1 when unknown
	Agrees       bool   `json:"agrees"`         // holds what the chosen one holds on every shared offset
	Chosen       bool   `json:"chosen"`
	Note         string `json:"note,omitempty"`
}

// Action names what a ChangeResult (and an audit trail event) did.
type Action string

// Actions of a ChangeResult.
const (
	ActionFailover     Action = "failover"
	ActionDropFollower Action = "drop-follower"
	ActionRecover      Action = "recover"
	ActionElectLeader  Action = "elect-leader"
	ActionCatchUp      Action = "catch-up"
	// ActionReplaceBroker is the last result of a broker replace: the
	// broker's storage root unbound (Topic empty, Partition -1).
	ActionReplaceBroker Action = "replace-broker"
	// ActionRestoreMetadata is the audit trail's event of a metadata
	// restore.
	ActionRestoreMetadata Action = "restore-metadata"
	// The audit trail's events of changes of the controller group (Topic
	// empty, Partition -1): the leaders are the active controllers, the
	// active sets the voting candidates, before and after.
	ActionControllerTransfer Action = "controller-transfer"
	ActionControllerAdd      Action = "controller-add"
	ActionControllerRemove   Action = "controller-remove"
	// The audit trail's events of ACL changes (Topic empty, Partition
	// -1), one per entry, its Note saying what the entry allows.
	ActionACLAdd    Action = "acl-add"
	ActionACLRemove Action = "acl-remove"
	// The steps of a partition's move (docs/reassignment.md): its start,
	// a replica being added joining the active set once copied, its finish
	// (the replicas it takes off removed), and its rollback. Leadership
	// moves within a move are elect-leader results.
	ActionReassign       Action = "reassign"
	ActionReassignJoin   Action = "reassign-join"
	ActionReassignFinish Action = "reassign-finish"
	ActionReassignCancel Action = "reassign-cancel"
	// ActionCreatePartition is a partition a topic grew by (topic alter
	// --partitions, Kafka's CreatePartitions): its replicas in NewActive,
	// its leader in NewLeader.
	ActionCreatePartition Action = "create-partition"
)

// ChangeResult is what an operator change did to one partition (or, for a
// dry run, would do). A result whose Error is set changed nothing.
type ChangeResult struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Action    Action  `json:"action"`
	DryRun    bool    `json:"dry_run,omitempty"`
	OldLeader int32   `json:"old_leader"`
	NewLeader int32   `json:"new_leader"`
	OldEpoch  int32   `json:"old_epoch"`
	NewEpoch  int32   `json:"new_epoch"`
	OldActive []int32 `json:"old_active"`
	NewActive []int32 `json:"new_active"`
	// OldReplicas and NewReplicas, for the steps of a move, are the
	// partition's replica list before and after.
	OldReplicas []int32     `json:"old_replicas,omitempty"`
	NewReplicas []int32     `json:"new_replicas,omitempty"`
	Candidates  []Candidate `json:"candidates,omitempty"`
	// LostFrom, for a failover, is the offset at and past which records
	// held only by the old leader are lost: the new leader's log end.
	LostFrom *int64 `json:"lost_from_offset,omitempty"`
	// Truncated, for a recovery, is where the replica's log was cut: from
	// its end Truncated[0] back to the common prefix Truncated[1]. Nil when
	// nothing was cut.
	Truncated *[2]int64 `json:"truncated,omitempty"`
	// CopiedTo, for a recovery, is the leader's log end the replica was
	// copied up to and verified against.
	CopiedTo int64 `json:"copied_to,omitempty"`
	// Note says why a leader or follower that still answers was replaced
	// or dropped: its replica cannot serve (damaged, failed, behind).
	Note string `json:"note,omitempty"`
	// Error and ErrorName say why this partition failed, when it did, in a
	// change of several partitions. ErrorName is the wire code's name
	// (LeaderStillAvailable, ReplicaDivergence, ...).
	Error     string `json:"error,omitempty"`
	ErrorName string `json:"error_name,omitempty"`
}

// ChangeReport is the answer to an operator change: one result per
// partition.
type ChangeReport struct {
	Results []ChangeResult `json:"results"`
}

// HistoryEvent is one entry of the controller's audit trail: a change that
// was made, when, and at whose request.
type HistoryEvent struct {
	Time      time.Time `json:"time"`
	Requester string    `json:"requester,omitempty"`
	ChangeResult
}

// RestoreRequest asks the controller to adopt a broker's copy of the
// cluster's metadata: the newest one any broker holds, or FromBroker's.
type RestoreRequest struct {
	FromBroker int32  `json:"from_broker,omitempty"`
	DryRun     bool   `json:"dry_run"`
	Requester  string `json:"requester,omitempty"`
}

// RestoreSource is one broker's copy of the metadata, as a restore found
// it.
type RestoreSource struct {
	Broker    int32  `json:"broker"`
	Address   string `json:"address"`
	Answered  bool   `json:"answered"`
	ClusterID string `json:"cluster_id,omitempty"`
	Epoch     int64  `json:"epoch"` // -1 when unknown
	Topics    int    `json:"topics"`
	Chosen    bool   `json:"chosen"`
	Note      string `json:"note,omitempty"`
}

// RestoreReport says what a restore found and did.
type RestoreReport struct {
	// ControllerEpoch is the epoch of the controller's own metadata, -1
	// when its file is missing (Missing).
	ControllerEpoch int64           `json:"controller_epoch"`
	Missing         bool            `json:"missing"`
	Refused         string          `json:"refused,omitempty"` // why the controller refused changes
	Sources         []RestoreSource `json:"sources"`
	// NewEpoch is the epoch the adopted metadata gets: above every epoch
	// seen, so every broker takes it.
	NewEpoch int64 `json:"new_epoch,omitempty"`
	// TopicsGained are in the adopted copy and not in the controller's;
	// TopicsLost the other way round.
	TopicsGained []string `json:"topics_gained"`
	TopicsLost   []string `json:"topics_lost"`
	DryRun       bool     `json:"dry_run"`
	Restored     bool     `json:"restored"`
}

package rpcapi

import (
	"gostream/metadata"
	"gostream/transport"
)

// Every request is authorized (docs/security.md) before it is served.
// apiAccess says, for each API, what it needs on the cluster as a whole,
// or that only nodes make it, or that its handler checks the resource it
// names (a topic, a group) once it has decoded the request. An API
// missing here is refused while authorization is on: a new API must say
// what it needs.

// access is what a request of an API needs before its handler runs.
type access int

const (
	// accessResource: the handler checks the operation on the resource
	// the request names.
	accessResource access = iota + 1
	// accessPeer: only the cluster's nodes make it.
	accessPeer
	// accessDescribeCluster: describe on the cluster.
	accessDescribeCluster
	// accessOperate: operate on the cluster (the operator's commands).
	accessOperate
)

var apiAccess = map[transport.API]access{
	transport.APIProduce:          accessResource, // write on the topic
	transport.APIFetch:            accessResource, // read on the topic
	transport.APIListOffsets:      accessResource, // describe on the topic
	transport.APIMetadata:         accessResource, // describe on each topic named; the rest left out
	transport.APICreateTopic:      accessResource, // create on the topic or the cluster
	transport.APIDeleteTopic:      accessResource, // delete on the topic, operate on the cluster
	transport.APISealTopic:        accessResource, // alter on the topic
	transport.APIAlterTopicConfig: accessResource, // alter on the topic
	transport.APIFindCoordinator:  accessResource, // describe on the group
	transport.APIOffsetCommit:     accessResource, // read on the group and its topics; a reset: operate
	transport.APIOffsetFetch:      accessResource, // describe on the group
	transport.APIGroupHeartbeat:   accessResource, // read on the group
	transport.APIListGroups:       accessResource, // groups not describable left out
	transport.APIDescribeGroup:    accessResource, // describe on the group
	transport.APIDeleteGroup:      accessResource, // delete on the group
	transport.APIOffsetDelete:     accessResource, // delete on the group, read on the topic
	transport.APIReplicaState:     accessResource, // describe on the topic; fencing: nodes only
	transport.APIReplicaDigest:    accessResource, // describe on the topic
	transport.APIACL:              accessResource, // list: describe the cluster; add, remove: alter it
	transport.APIInitProducerID:   accessResource, // write on the cluster or on a topic

	transport.APIDescribeCluster:  accessDescribeCluster,
	transport.APIHistory:          accessDescribeCluster,
	transport.APIControllerStatus: accessDescribeCluster,

	transport.APICatchUp:          accessOperate,
	transport.APIFailover:         accessOperate,
	transport.APIRecover:          accessOperate,
	transport.APIElectLeaders:     accessOperate,
	transport.APIReassign:         accessOperate,
	transport.APIReassignStatus:   accessDescribeCluster,
	transport.APIPlanMoves:        accessDescribeCluster,
	transport.APIAutopilotLease:   accessOperate,
	transport.APICreatePartitions: accessResource, // alter on the topic
	transport.APIReplaceBroker:    accessOperate,
	transport.APIRestoreMetadata:  accessOperate,
	transport.APIControllerChange: accessOperate,

	transport.APIReplicate:       accessPeer,
	transport.APIRegisterBroker:  accessPeer,
	transport.APIUpdateMetadata:  accessPeer,
	transport.APIFetchMetadata:   accessPeer,
	transport.APIReplicaBatches:  accessPeer,
	transport.APITruncateReplica: accessPeer,
	transport.APIRecoverReplica:  accessPeer,
	transport.APIMoveProgress:    accessPeer,
	transport.APIReplicaSizes:    accessPeer,
	transport.APIResetReplica:    accessPeer,
	transport.APIAudit:           accessPeer,
	transport.APIStreamAdmin:     accessPeer,
	transport.APIStreamAppend:    accessPeer,
	transport.APIStreamRead:      accessPeer,
	transport.APIStreamHead:      accessPeer,
	transport.APIStreamInit:      accessPeer,
	transport.APIStreamLog:       accessPeer,

	transport.APIAllocateProducerIDs: accessPeer,
}

// admit checks what a request needs before its handler runs.
func (h *Handler) admit(req *transport.Request) error {
	s := h.cfg.Security
	api := transport.API(req.API)
	switch apiAccess[api] {
	case accessResource:
		return nil
	case accessPeer:
		return s.PeerOnly(req.Principal, api.String())
	case accessDescribeCluster:
		return s.Authorize(req.Principal, metadata.OpDescribe, metadata.ResourceCluster, "")
	case accessOperate:
		return s.Authorize(req.Principal, metadata.OpOperate, metadata.ResourceCluster, "")
	}
	return s.Authorize(req.Principal, metadata.OpOperate, metadata.ResourceCluster, "") // unknown: operators only
}

// allow checks that the request's principal may do op on a resource.
func (h *Handler) allow(req *transport.Request, op metadata.Operation, rt metadata.ResourceType, name string) error {
	return h.cfg.Security.Authorize(req.Principal, op, rt, name)
}

// allowing runs an authorization check before find, for serveWith: both
// run once the request is decoded.
func allowing[T any](check func() error, find func() (T, error)) func() (T, error) {
	return func() (T, error) {
		if err := check(); err != nil {
			var zero T
			return zero, err
		}
		return find()
	}
}

// canSee reports whether the request's principal may describe a
// resource, for the lists that leave out what it may not see.
func (h *Handler) canSee(req *transport.Request, rt metadata.ResourceType, name string) bool {
	return h.cfg.Security.CanDescribe(req.Principal, rt, name)
}

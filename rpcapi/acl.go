package rpcapi

import (
	"context"
	"encoding/json"
	"fmt"

	"gostream/metadata"
	"gostream/transport"
)

// acl lists the ACLs (any node, from its metadata: describe on the
// cluster) or adds or removes some (the active controller: alter on the
// cluster).
func (h *Handler) acl(req *transport.Request) transport.Reply {
	var m transport.JSONMessage
	if err := decode(req, &m); err != nil {
		return transport.Immediate(nil, err)
	}
	var r transport.ACLRequest
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return transport.Immediate(nil, fmt.Errorf("%w: ACL request: %v", transport.ErrInvalidRequest, err))
	}
	if len(r.Entries) > transport.MaxACLEntries {
		return transport.Immediate(nil, fmt.Errorf("%w: %d ACL entries in one request; at most %d", transport.ErrInvalidRequest, len(r.Entries), transport.MaxACLEntries))
	}
	switch r.Op {
	case transport.ACLList:
		if err := h.allow(req, metadata.OpDescribe, metadata.ResourceCluster, ""); err != nil {
			return transport.Immediate(nil, err)
		}
		meta := h.cfg.Replicas.Metadata()
		if meta == nil {
			return transport.Immediate(nil, fmt.Errorf("%w: this node has no metadata yet", transport.ErrControllerUnavailable))
		}
		resp := transport.ACLResponse{Entries: []transport.ACLEntry{}, MetadataEpoch: meta.Epoch}
		for _, a := range meta.ACLs {
			if r.Principal == "" || a.Principal == r.Principal {
				resp.Entries = append(resp.Entries, aclToWire(a))
			}
		}
		return transport.Immediate(jsonReply(resp, nil))
	case transport.ACLAdd, transport.ACLRemove:
	default:
		return transport.Immediate(nil, fmt.Errorf("%w: ACL op %q: want list, add or remove", transport.ErrInvalidRequest, r.Op))
	}
	if err := h.allow(req, metadata.OpAlter, metadata.ResourceCluster, ""); err != nil {
		return transport.Immediate(nil, err)
	}
	acls := make([]metadata.ACL, len(r.Entries))
	for i, e := range r.Entries {
		acls[i] = aclFromWire(e)
		if err := acls[i].Validate(); err != nil {
			return transport.Immediate(nil, fmt.Errorf("%w: %v", transport.ErrInvalidRequest, err))
		}
	}
	if len(acls) == 0 {
		return transport.Immediate(nil, fmt.Errorf("%w: no ACL entry to %s", transport.ErrInvalidRequest, r.Op))
	}
	c, err := h.controller()
	if err != nil {
		return transport.Immediate(nil, err)
	}
	requester := r.Requester
	if requester == "" {
		requester = req.Principal + "@" + req.RemoteAddr
	}
	return func(ctx context.Context) (transport.Message, error) {
		changed, epoch, err := c.ChangeACLs(ctx, r.Op == transport.ACLAdd, acls, requester)
		if err != nil {
			return nil, err
		}
		resp := transport.ACLResponse{Entries: []transport.ACLEntry{}, MetadataEpoch: epoch}
		for _, a := range changed {
			resp.Entries = append(resp.Entries, aclToWire(a))
		}
		return jsonReply(resp, nil)
	}
}

func aclToWire(a metadata.ACL) transport.ACLEntry {
	return transport.ACLEntry{Principal: a.Principal, Resource: string(a.Resource), Name: a.Name, Pattern: string(a.Pattern), Operation: string(a.Operation)}
}

func aclFromWire(e transport.ACLEntry) metadata.ACL {
	p := metadata.PatternType(e.Pattern)
	if p == "" {
		p = metadata.PatternLiteral
	}
	return metadata.ACL{Principal: e.Principal, Resource: metadata.ResourceType(e.Resource), Name: e.Name, Pattern: p, Operation: metadata.Operation(e.Operation)}
}

package client

import (
	"context"
	"fmt"

	"gostream/transport"
)

// ACL is one access control entry (docs/security.md): Principal may do
// Operation on the resource of type Resource (cluster, topic, group,
// stream) named Name ("" for the cluster), or on every one whose name
// begins with Name when Pattern is "prefix".
type ACL = transport.ACLEntry

// ListACLs returns the cluster's ACLs, of principal only when it is not
// empty, as the active controller holds them. It needs describe on the
// cluster.
func (c *Client) ListACLs(ctx context.Context, principal string) ([]ACL, error) {
	var resp transport.ACLResponse
	if err := c.operatorJSON(ctx, transport.APIACL, true, transport.ACLRequest{Op: transport.ACLList, Principal: principal}, &resp); err != nil {
		return nil, fmt.Errorf("acl list: %w", err)
	}
	return resp.Entries, nil
}

// AddACLs adds entries, in one change of the metadata, and returns those
// that were not there already. It needs alter on the cluster.
func (c *Client) AddACLs(ctx context.Context, entries []ACL, requester string) ([]ACL, error) {
	return c.changeACLs(ctx, transport.ACLAdd, entries, requester)
}

// RemoveACLs removes entries, in one change, and returns those that were
// there. It needs alter on the cluster.
func (c *Client) RemoveACLs(ctx context.Context, entries []ACL, requester string) ([]ACL, error) {
	return c.changeACLs(ctx, transport.ACLRemove, entries, requester)
}

func (c *Client) changeACLs(ctx context.Context, op string, entries []ACL, requester string) ([]ACL, error) {
	var resp transport.ACLResponse
	if err := c.operatorCall(ctx, transport.APIACL, transport.ACLRequest{Op: op, Entries: entries, Requester: requester}, &resp); err != nil {
		return nil, fmt.Errorf("acl %s: %w", op, err)
	}
	return resp.Entries, nil
}

package controller

import (
	"context"
	"fmt"
	"slices"

	"gostream/metadata"
	"gostream/transport"
)

// describeACL says what an ACL allows, for the audit trail:
// `alice may write topic "orders"`.
func describeACL(a metadata.ACL) string {
	who := a.Principal
	if who == metadata.AnyPrincipal {
		who = "every principal"
	}
	what := "the cluster"
	switch {
	case a.Resource == metadata.ResourceCluster:
	case a.Pattern == metadata.PatternPrefix:
		what = fmt.Sprintf("every %s whose name begins with %q", a.Resource, a.Name)
	case a.Name == metadata.AnyName:
		what = fmt.Sprintf("every %s", a.Resource)
	default:
		what = fmt.Sprintf("%s %q", a.Resource, a.Name)
	}
	return fmt.Sprintf("%s may %s %s", who, a.Operation, what)
}

// ChangeACLs adds acls to the cluster's ACLs (or removes them, with add
// false), in one change, and returns those it changed: the new ones, or
// the ones it removed. Nothing changes when every entry is already there
// (or already absent). The entries are validated first; one that is not
// valid changes nothing.
func (c *Controller) ChangeACLs(ctx context.Context, add bool, acls []metadata.ACL, requester string) ([]metadata.ACL, int64, error) {
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return nil, 0, fmt.Errorf("%w: %v", ErrInvalidRequest, err)
		}
	}
	var changed []metadata.ACL
	verb, action := "remove", transport.ActionACLRemove
	if add {
		verb, action = "add", transport.ActionACLAdd
	}
	err := c.changeAudited(ctx, fmt.Sprintf("%s %d ACLs", verb, len(acls)), requester, func(m *metadata.Cluster) ([]transport.ChangeResult, error) {
		changed = changed[:0]
		var evs []transport.ChangeResult
		for _, a := range acls {
			has := slices.Contains(m.ACLs, a)
			if add && !has && m.AddACLs([]metadata.ACL{a}) == 1 || !add && has && m.RemoveACLs([]metadata.ACL{a}) == 1 {
				changed = append(changed, a)
				evs = append(evs, transport.ChangeResult{Partition: -1, Action: action, Note: describeACL(a)})
			}
		}
		if len(changed) == 0 {
			return nil, errNoChange
		}
		return evs, nil
	})
	if err != nil {
		return nil, 0, err
	}
	epoch := c.Metadata().Epoch
	if len(changed) > 0 {
		c.logger.Info("ACLs changed", "op", verb, "entries", len(changed), "requester", requester, "metadata_epoch", epoch)
	}
	return changed, epoch, nil
}

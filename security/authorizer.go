package security

import (
	"fmt"
	"slices"
	"strings"

	"gostream/metadata"
)

// Authorizer says whether a principal may do an operation on a resource:
// superusers may do everything; anyone else what an ACL of the cluster
// metadata allows; nothing else (default deny).
type Authorizer struct {
	superusers map[string]bool
	acls       func() []metadata.ACL
}

// NewAuthorizer makes an authorizer with the superusers and the ACLs acls
// returns at each check (the node's metadata of the moment).
func NewAuthorizer(superusers []string, acls func() []metadata.ACL) *Authorizer {
	a := &Authorizer{superusers: map[string]bool{}, acls: acls}
	for _, s := range superusers {
		a.superusers[s] = true
	}
	return a
}

// Superuser reports whether principal may do everything.
func (a *Authorizer) Superuser(principal string) bool {
	return principal != "" && a.superusers[principal]
}

// Allowed reports whether principal may do op on the resource of type rt
// named name ("" for the cluster). An unauthenticated principal ("") may
// do nothing.
func (a *Authorizer) Allowed(principal string, op metadata.Operation, rt metadata.ResourceType, name string) bool {
	if principal == "" {
		return false
	}
	if a.superusers[principal] {
		return true
	}
	return metadata.Allows(a.acls(), principal, op, rt, name)
}

// ParseSuperusers reads --superusers: principals separated by commas,
// spaces around them ignored.
func ParseSuperusers(s string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if err := CheckPrincipal(p); err != nil {
			return nil, err
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// Describe names a resource for people: "topic orders", "the cluster".
func Describe(rt metadata.ResourceType, name string) string {
	if rt == metadata.ResourceCluster {
		return "the cluster"
	}
	return fmt.Sprintf("%s %q", rt, name)
}

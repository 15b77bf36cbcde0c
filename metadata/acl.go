package metadata

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ACL allows one principal one operation on one resource, or on every
// resource whose name begins with Name (Pattern prefix). ACLs only allow:
// once authorization is on, whatever no ACL allows is denied
// (docs/security.md).
type ACL struct {
	// Principal is a principal's name, or "*" for every authenticated
	// principal.
	Principal string       `json:"principal"`
	Resource  ResourceType `json:"resource"`
	// Name is the resource's name: a topic, a group, a stream's path;
	// empty for the cluster. Literal "*" is every resource of the type.
	Name      string      `json:"name,omitempty"`
	Pattern   PatternType `json:"pattern"`
	Operation Operation   `json:"operation"`
}

// ResourceType is what an ACL is about.
type ResourceType string

// Resource types.
const (
	ResourceCluster ResourceType = "cluster"
	ResourceTopic   ResourceType = "topic"
	ResourceGroup   ResourceType = "group"
	ResourceStream  ResourceType = "stream"
)

// PatternType says how an ACL's Name matches a resource's.
type PatternType string

// Pattern types.
const (
	PatternLiteral PatternType = "literal"
	PatternPrefix  PatternType = "prefix"
)

// Operation is what a principal does to a resource.
type Operation string

// Operations.
const (
	OpRead     Operation = "read"
	OpWrite    Operation = "write"
	OpCreate   Operation = "create"
	OpDelete   Operation = "delete"
	OpAlter    Operation = "alter"
	OpDescribe Operation = "describe"
	OpOperate  Operation = "operate"
)

// AnyPrincipal in an ACL is every authenticated principal.
const AnyPrincipal = "*"

// AnyName, literal, is every resource of the ACL's type.
const AnyName = "*"

// maxACLName bounds an ACL's resource name (a stream's path is the
// longest kind).
const maxACLName = 1024

// operationsOf lists the operations each resource type has.
var operationsOf = map[ResourceType][]Operation{
	ResourceCluster: {OpDescribe, OpAlter, OpOperate, OpCreate},
	ResourceTopic:   {OpRead, OpWrite, OpCreate, OpDelete, OpAlter, OpDescribe},
	ResourceGroup:   {OpRead, OpDescribe, OpDelete},
	ResourceStream:  {OpRead, OpWrite, OpCreate, OpDelete, OpDescribe},
}

// OperationsOf returns the operations resource type rt has, nil for a
// type that does not exist.
func OperationsOf(rt ResourceType) []Operation { return slices.Clone(operationsOf[rt]) }

// CheckPrincipal refuses names that cannot be principals: empty, over
// 256 bytes, not UTF-8, "*" (it means every principal in an ACL), holding
// white space, commas or control characters of any kind (they could not
// be written in a tokens file or in --superusers, or would garble a
// terminal), or beginning with # (a comment in a tokens file).
func CheckPrincipal(name string) error {
	switch {
	case name == "":
		return errors.New("a principal needs a name")
	case len(name) > 256:
		return fmt.Errorf("a principal's name is at most 256 bytes, not %d", len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("principal %q: not UTF-8", name)
	case name == AnyPrincipal:
		return errors.New(`"*" means every principal in an ACL; it cannot be one`)
	case strings.HasPrefix(name, "#"):
		return fmt.Errorf("principal %q: a name cannot begin with # (a comment in a tokens file)", name)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == ',' {
			return fmt.Errorf("principal %q: no white space, commas or control characters", name)
		}
	}
	return nil
}

// Validate checks one ACL.
func (a ACL) Validate() error {
	if a.Principal != AnyPrincipal {
		if err := CheckPrincipal(a.Principal); err != nil {
			return fmt.Errorf("ACL principal: %v (or * for every principal)", err)
		}
	}
	ops, ok := operationsOf[a.Resource]
	if !ok {
		return fmt.Errorf("ACL resource %q: want cluster, topic, group or stream", a.Resource)
	}
	if !slices.Contains(ops, a.Operation) {
		return fmt.Errorf("ACL operation %q on a %s: want one of %v", a.Operation, a.Resource, ops)
	}
	switch a.Pattern {
	case PatternLiteral, PatternPrefix:
	default:
		return fmt.Errorf("ACL pattern %q: want literal or prefix", a.Pattern)
	}
	if a.Resource == ResourceCluster {
		if a.Name != "" || a.Pattern != PatternLiteral {
			return fmt.Errorf("an ACL on the cluster names no resource and has no prefix")
		}
		return nil
	}
	if a.Name == "" || len(a.Name) > maxACLName || !utf8.ValidString(a.Name) {
		return fmt.Errorf("ACL on a %s: want a name of 1 to %d bytes of UTF-8 (* for every %s)", a.Resource, maxACLName, a.Resource)
	}
	for _, r := range a.Name {
		if unicode.IsControl(r) {
			return fmt.Errorf("ACL name %q: no control characters", a.Name)
		}
	}
	if a.Name == AnyName && a.Pattern == PatternPrefix {
		return fmt.Errorf("ACL name * with a prefix: * alone, literal, is every %s", a.Resource)
	}
	return nil
}

// compareACL orders ACLs: by principal, resource, name, pattern and
// operation.
func compareACL(a, b ACL) int {
	return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Resource, b.Resource),
		cmp.Compare(a.Name, b.Name), cmp.Compare(a.Pattern, b.Pattern), cmp.Compare(a.Operation, b.Operation))
}

// validateACLs checks every ACL and that the list is sorted without
// duplicates, as AddACLs leaves it.
func validateACLs(acls []ACL) error {
	for i, a := range acls {
		if err := a.Validate(); err != nil {
			return err
		}
		if i > 0 && compareACL(acls[i-1], a) >= 0 {
			return fmt.Errorf("ACLs out of order or repeated at %d", i)
		}
	}
	return nil
}

// AddACLs adds acls to the metadata; it reports how many were new.
func (c *Cluster) AddACLs(acls []ACL) int {
	added := 0
	for _, a := range acls {
		i, found := slices.BinarySearchFunc(c.ACLs, a, compareACL)
		if !found {
			c.ACLs = slices.Insert(c.ACLs, i, a)
			added++
		}
	}
	return added
}

// RemoveACLs removes acls from the metadata; it reports how many it
// held.
func (c *Cluster) RemoveACLs(acls []ACL) int {
	removed := 0
	for _, a := range acls {
		if i, found := slices.BinarySearchFunc(c.ACLs, a, compareACL); found {
			c.ACLs = slices.Delete(c.ACLs, i, i+1)
			removed++
		}
	}
	if len(c.ACLs) == 0 {
		c.ACLs = nil
	}
	return removed
}

// Allows reports whether the ACLs let principal do op on the resource of
// type rt named name ("" for the cluster). Read, write, create, delete,
// alter and operate on a resource imply describe on it.
func Allows(acls []ACL, principal string, op Operation, rt ResourceType, name string) bool {
	for _, a := range acls {
		if a.Resource != rt || (a.Principal != principal && a.Principal != AnyPrincipal) {
			continue
		}
		if a.Operation != op && op != OpDescribe {
			continue
		}
		if a.matches(name) {
			return true
		}
	}
	return false
}

// matches reports whether the ACL's name covers a resource named name.
func (a ACL) matches(name string) bool {
	switch {
	case a.Resource == ResourceCluster:
		return true
	case a.Pattern == PatternPrefix:
		return strings.HasPrefix(name, a.Name)
	default:
		return a.Name == AnyName || a.Name == name
	}
}

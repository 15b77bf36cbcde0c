package security

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

var allResourceTypes = []metadata.ResourceType{metadata.ResourceCluster, metadata.ResourceTopic, metadata.ResourceGroup, metadata.ResourceStream}

var allOperations = []metadata.Operation{metadata.OpRead, metadata.OpWrite, metadata.OpCreate, metadata.OpDelete, metadata.OpAlter, metadata.OpDescribe, metadata.OpOperate}

// nameFor is a resource name of type rt: "" for the cluster.
func nameFor(rt metadata.ResourceType) string {
	if rt == metadata.ResourceCluster {
		return ""
	}
	return "orders"
}

func noACLs() []metadata.ACL { return nil }

func TestAuthorizerSuperuser(t *testing.T) {
	a := NewAuthorizer([]string{"node1", "admin"}, noACLs)
	assert.True(t, a.Superuser("admin"))
	assert.True(t, a.Superuser("node1"))
	assert.False(t, a.Superuser("alice"))
	assert.False(t, a.Superuser("Admin"), "names are case sensitive")
	assert.False(t, a.Superuser(""))
	for _, rt := range allResourceTypes {
		for _, op := range allOperations {
			assert.True(t, a.Allowed("admin", op, rt, nameFor(rt)), "superuser: %s on %s", op, rt)
			assert.True(t, a.Allowed("node1", op, rt, "anything/else"), "superuser: %s on %s", op, rt)
			assert.False(t, a.Allowed("alice", op, rt, nameFor(rt)), "no ACL: %s on %s", op, rt)
		}
	}
}

// The unauthenticated principal "" may do nothing: not as a superuser
// (even if "" was given as one), not through an ACL for every principal.
func TestAuthorizerEmptyPrincipal(t *testing.T) {
	acls := []metadata.ACL{
		{Principal: metadata.AnyPrincipal, Resource: metadata.ResourceCluster, Pattern: metadata.PatternLiteral, Operation: metadata.OpDescribe},
		{Principal: metadata.AnyPrincipal, Resource: metadata.ResourceTopic, Name: metadata.AnyName, Pattern: metadata.PatternLiteral, Operation: metadata.OpRead},
		{Principal: "", Resource: metadata.ResourceTopic, Name: "orders", Pattern: metadata.PatternLiteral, Operation: metadata.OpWrite},
	}
	a := NewAuthorizer([]string{"", "admin"}, func() []metadata.ACL { return acls })
	assert.False(t, a.Superuser(""))
	for _, rt := range allResourceTypes {
		for _, op := range allOperations {
			assert.False(t, a.Allowed("", op, rt, nameFor(rt)), "%s on %s", op, rt)
		}
	}
	// The same ACLs do let an authenticated principal in.
	assert.True(t, a.Allowed("alice", metadata.OpDescribe, metadata.ResourceCluster, ""))
	assert.True(t, a.Allowed("alice", metadata.OpRead, metadata.ResourceTopic, "orders"))
}

func TestAuthorizerACLs(t *testing.T) {
	acls := []metadata.ACL{
		{Principal: "alice", Resource: metadata.ResourceTopic, Name: "orders", Pattern: metadata.PatternLiteral, Operation: metadata.OpWrite},
		{Principal: "bob", Resource: metadata.ResourceGroup, Name: "billing-", Pattern: metadata.PatternPrefix, Operation: metadata.OpRead},
	}
	calls := 0
	a := NewAuthorizer([]string{"admin"}, func() []metadata.ACL { calls++; return acls })

	tests := []struct {
		principal string
		op        metadata.Operation
		rt        metadata.ResourceType
		name      string
		want      bool
	}{
		{"alice", metadata.OpWrite, metadata.ResourceTopic, "orders", true},
		{"alice", metadata.OpDescribe, metadata.ResourceTopic, "orders", true},
		{"alice", metadata.OpRead, metadata.ResourceTopic, "orders", false},
		{"alice", metadata.OpWrite, metadata.ResourceTopic, "orders2", false},
		{"alice", metadata.OpWrite, metadata.ResourceStream, "orders", false},
		{"bob", metadata.OpWrite, metadata.ResourceTopic, "orders", false},
		{"bob", metadata.OpRead, metadata.ResourceGroup, "billing-eu", true},
		{"bob", metadata.OpRead, metadata.ResourceGroup, "shipping", false},
		{"alice", metadata.OpRead, metadata.ResourceGroup, "billing-eu", false},
		{"carol", metadata.OpDescribe, metadata.ResourceTopic, "orders", false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, a.Allowed(tt.principal, tt.op, tt.rt, tt.name), "%s %s %s %q", tt.principal, tt.op, tt.rt, tt.name)
	}

	// The ACLs are read at each check: a change takes effect at once,
	// with no new authorizer.
	require.NotZero(t, calls)
	acls = append(acls, metadata.ACL{Principal: "carol", Resource: metadata.ResourceCluster, Pattern: metadata.PatternLiteral, Operation: metadata.OpOperate})
	assert.True(t, a.Allowed("carol", metadata.OpOperate, metadata.ResourceCluster, ""))
	acls = acls[:1]
	assert.False(t, a.Allowed("bob", metadata.OpRead, metadata.ResourceGroup, "billing-eu"), "a removed ACL allows nothing")
	assert.True(t, a.Allowed("alice", metadata.OpWrite, metadata.ResourceTopic, "orders"))
}

func TestParseSuperusers(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"admin", []string{"admin"}},
		{"node1,node2,node3,admin", []string{"node1", "node2", "node3", "admin"}},
		{" node1 , node2,,\tadmin ", []string{"node1", "node2", "admin"}},
		{"node1,admin,node1,admin", []string{"node1", "admin"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSuperusers(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	for _, bad := range []string{"*", "node1,*", "two words", "node1, two words", "nul\x00", strings.Repeat("a", 257)} {
		t.Run(bad, func(t *testing.T) {
			got, err := ParseSuperusers(bad)
			assert.Error(t, err)
			assert.Nil(t, got)
		})
	}
}

func TestDescribe(t *testing.T) {
	assert.Equal(t, "the cluster", Describe(metadata.ResourceCluster, ""))
	assert.Equal(t, `topic "orders"`, Describe(metadata.ResourceTopic, "orders"))
	assert.Equal(t, `stream "chat/room-1"`, Describe(metadata.ResourceStream, "chat/room-1"))
}

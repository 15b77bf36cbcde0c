package metadata_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"gostream/metadata"
)

const (
	rtCluster  = metadata.ResourceCluster
	rtTopic    = metadata.ResourceTopic
	rtGroup    = metadata.ResourceGroup
	rtStream   = metadata.ResourceStream
	patLiteral = metadata.PatternLiteral
	patPrefix  = metadata.PatternPrefix
	opRead     = metadata.OpRead
	opWrite    = metadata.OpWrite
	opCreate   = metadata.OpCreate
	opDelete   = metadata.OpDelete
	opAlter    = metadata.OpAlter
	opDescribe = metadata.OpDescribe
	opOperate  = metadata.OpOperate
)

var aclOperations = []metadata.Operation{opRead, opWrite, opCreate, opDelete, opAlter, opDescribe, opOperate}

// aclOperationsOf are the operations of each resource type, as
// docs/security.md's table of what each request needs uses them.
var aclOperationsOf = map[metadata.ResourceType][]metadata.Operation{
	rtCluster: {opCreate, opAlter, opDescribe, opOperate},
	rtTopic:   {opRead, opWrite, opCreate, opDelete, opAlter, opDescribe},
	rtGroup:   {opRead, opDelete, opDescribe},
	rtStream:  {opRead, opWrite, opCreate, opDelete, opDescribe},
}

func newACL(principal string, rt metadata.ResourceType, name string, p metadata.PatternType, op metadata.Operation) metadata.ACL {
	return metadata.ACL{Principal: principal, Resource: rt, Name: name, Pattern: p, Operation: op}
}

// aclNameOf is a valid resource name of type rt: "" for the rtCluster.
func aclNameOf(rt metadata.ResourceType) string {
	switch rt {
	case rtCluster:
		return ""
	case rtStream:
		return "chat/room-1"
	}
	return "orders"
}

// Each resource type has exactly its operations.
func TestACLValidateOperations(t *testing.T) {
	for rt, ops := range aclOperationsOf {
		assert.ElementsMatch(t, ops, metadata.OperationsOf(rt), "OperationsOf(%s)", rt)
		for _, op := range aclOperations {
			t.Run(fmt.Sprintf("%s on a %s", op, rt), func(t *testing.T) {
				err := newACL("alice", rt, aclNameOf(rt), patLiteral, op).Validate()
				if slices.Contains(ops, op) {
					assert.NoError(t, err)
				} else {
					assert.Error(t, err)
				}
			})
		}
	}
	assert.Nil(t, metadata.OperationsOf("queue"))
	// OperationsOf hands out a copy.
	ops := metadata.OperationsOf(rtTopic)
	ops[0] = opOperate
	assert.NotContains(t, metadata.OperationsOf(rtTopic), opOperate)
}

func TestACLValidate(t *testing.T) {
	tests := []struct {
		name string
		acl  metadata.ACL
		ok   bool
	}{
		{"cluster", newACL("admin", rtCluster, "", patLiteral, opOperate), true},
		{"topic literal", newACL("alice", rtTopic, "orders", patLiteral, opWrite), true},
		{"topic prefix", newACL("alice", rtTopic, "orders.", patPrefix, opRead), true},
		{"every topic", newACL("alice", rtTopic, "*", patLiteral, opDescribe), true},
		{"every principal", newACL("*", rtTopic, "orders", patLiteral, opRead), true},
		{"group prefix", newACL("alice", rtGroup, "billing-", patPrefix, opRead), true},
		{"stream path", newACL("alice", rtStream, "chat/room-1", patLiteral, opWrite), true},
		{"stream path prefix", newACL("alice", rtStream, "chat/", patPrefix, opRead), true},
		{"unicode name", newACL("élodie", rtTopic, "événements", patLiteral, opRead), true},
		{"name with spaces", newACL("alice", rtStream, "my stream", patLiteral, opRead), true},
		{"longest name", newACL("alice", rtStream, strings.Repeat("p", 1024), patLiteral, opRead), true},
		{"longest principal", newACL(strings.Repeat("p", 256), rtTopic, "t", patLiteral, opRead), true},

		{"operate on a topic", newACL("alice", rtTopic, "orders", patLiteral, opOperate), false},
		{"write on a group", newACL("alice", rtGroup, "g", patLiteral, opWrite), false},
		{"alter on a stream", newACL("alice", rtStream, "s", patLiteral, opAlter), false},
		{"read on the cluster", newACL("alice", rtCluster, "", patLiteral, opRead), false},
		{"cluster with a name", newACL("admin", rtCluster, "prod", patLiteral, opOperate), false},
		{"cluster with a prefix", newACL("admin", rtCluster, "", patPrefix, opOperate), false},
		{"cluster named *", newACL("admin", rtCluster, "*", patLiteral, opOperate), false},
		{"unknown resource", newACL("alice", "queue", "q", patLiteral, opRead), false},
		{"empty resource", newACL("alice", "", "q", patLiteral, opRead), false},
		{"unknown operation", newACL("alice", rtTopic, "t", patLiteral, "all"), false},
		{"empty operation", newACL("alice", rtTopic, "t", patLiteral, ""), false},
		{"operation in upper case", newACL("alice", rtTopic, "t", patLiteral, "READ"), false},
		{"unknown pattern", newACL("alice", rtTopic, "t", "regex", opRead), false},
		{"empty pattern", newACL("alice", rtTopic, "t", "", opRead), false},
		{"prefix *", newACL("alice", rtTopic, "*", patPrefix, opRead), false},
		{"empty topic name", newACL("alice", rtTopic, "", patLiteral, opRead), false},
		{"empty prefix", newACL("alice", rtGroup, "", patPrefix, opRead), false},
		{"empty stream path", newACL("alice", rtStream, "", patLiteral, opRead), false},
		{"name too long", newACL("alice", rtStream, strings.Repeat("p", 1025), patLiteral, opRead), false},
		{"name with a newline", newACL("alice", rtTopic, "a\nb", patLiteral, opRead), false},
		{"name with a NUL", newACL("alice", rtTopic, "a\x00b", patLiteral, opRead), false},
		{"name with an escape", newACL("alice", rtTopic, "\x1b[31mred", patLiteral, opRead), false},
		{"name with DEL", newACL("alice", rtTopic, "a\x7f", patLiteral, opRead), false},
		{"name not UTF-8", newACL("alice", rtTopic, "a\xffb", patLiteral, opRead), false},
		{"empty principal", newACL("", rtTopic, "t", patLiteral, opRead), false},
		{"principal with a space", newACL("al ice", rtTopic, "t", patLiteral, opRead), false},
		{"principal with a comma", newACL("alice,bob", rtTopic, "t", patLiteral, opRead), false},
		{"principal with a tab", newACL("alice\t", rtTopic, "t", patLiteral, opRead), false},
		{"principal with a newline", newACL("alice\n", rtTopic, "t", patLiteral, opRead), false},
		{"principal too long", newACL(strings.Repeat("p", 257), rtTopic, "t", patLiteral, opRead), false},
		{"principal not UTF-8", newACL("\xff", rtTopic, "t", patLiteral, opRead), false},
		{"principal with a NUL", newACL("a\x00b", rtTopic, "t", patLiteral, opRead), false},
		{"principal with an escape", newACL("\x1b[31m", rtTopic, "t", patLiteral, opRead), false},
		{"principal with a no-break space", newACL("a\u00a0b", rtTopic, "t", patLiteral, opRead), false},
		{"principal beginning with #", newACL("#admin", rtTopic, "t", patLiteral, opRead), false},
		{"name with a C1 control", newACL("alice", rtTopic, "a\u009bb", patLiteral, opRead), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.acl.Validate()
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.Error(t, err)
			}
		})
	}
}

func TestAllows(t *testing.T) {
	acls := []metadata.ACL{
		newACL("alice", rtTopic, "orders", patLiteral, opWrite),
		newACL("alice", rtTopic, "logs.", patPrefix, opRead),
		newACL("bob", rtTopic, "*", patLiteral, opDescribe),
		newACL("*", rtGroup, "shared", patLiteral, opRead),
		newACL("*", rtStream, "public/", patPrefix, opRead),
		newACL("ops", rtCluster, "", patLiteral, opOperate),
		newACL("carol", rtStream, "chat/room-1", patLiteral, opCreate),
	}
	tests := []struct {
		principal string
		op        metadata.Operation
		rt        metadata.ResourceType
		name      string
		want      bool
	}{
		// patLiteral
		{"alice", opWrite, rtTopic, "orders", true},
		{"alice", opWrite, rtTopic, "orders2", false},
		{"alice", opWrite, rtTopic, "order", false},
		{"alice", opWrite, rtTopic, "Orders", false},
		{"alice", opWrite, rtTopic, "*", false},
		{"alice", opRead, rtTopic, "orders", false},
		{"alice", opCreate, rtTopic, "orders", false},
		{"bob", opWrite, rtTopic, "orders", false},
		// patPrefix
		{"alice", opRead, rtTopic, "logs.app", true},
		{"alice", opRead, rtTopic, "logs.", true},
		{"alice", opRead, rtTopic, "logs", false},
		{"alice", opRead, rtTopic, "app.logs.x", false},
		{"alice", opWrite, rtTopic, "logs.app", false},
		{"alice", opRead, rtGroup, "logs.app", false},
		// "*" name
		{"bob", opDescribe, rtTopic, "orders", true},
		{"bob", opDescribe, rtTopic, "anything at all", true},
		{"bob", opRead, rtTopic, "orders", false},
		{"bob", opDescribe, rtGroup, "orders", false},
		{"bob", opDescribe, rtCluster, "", false},
		// "*" principal
		{"alice", opRead, rtGroup, "shared", true},
		{"zed", opRead, rtGroup, "shared", true},
		{"zed", opDescribe, rtGroup, "shared", true},
		{"zed", opRead, rtGroup, "shared2", false},
		{"zed", opDelete, rtGroup, "shared", false},
		{"zed", opRead, rtStream, "public/news", true},
		{"zed", opRead, rtStream, "private/news", false},
		{"zed", opWrite, rtStream, "public/news", false},
		// the rtCluster: its ACLs name no resource
		{"ops", opOperate, rtCluster, "", true},
		{"ops", opDescribe, rtCluster, "", true},
		{"ops", opAlter, rtCluster, "", false},
		{"ops", opOperate, rtTopic, "orders", false},
		{"alice", opOperate, rtCluster, "", false},
		// implication
		{"alice", opDescribe, rtTopic, "orders", true},
		{"alice", opDescribe, rtTopic, "logs.app", true},
		{"alice", opDescribe, rtTopic, "orders2", false},
		{"carol", opDescribe, rtStream, "chat/room-1", true},
		{"carol", opRead, rtStream, "chat/room-1", false},
		{"carol", opWrite, rtStream, "chat/room-1", false},
		// a rtTopic ACL says nothing of a rtGroup or rtStream of the same name
		{"alice", opWrite, rtStream, "orders", false},
		{"alice", opDescribe, rtGroup, "orders", false},
		// nobody without an ACL
		{"mallory", opDescribe, rtTopic, "orders", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %s %s %q", tt.principal, tt.op, tt.rt, tt.name), func(t *testing.T) {
			assert.Equal(t, tt.want, metadata.Allows(acls, tt.principal, tt.op, tt.rt, tt.name))
		})
	}
	assert.False(t, metadata.Allows(nil, "alice", opDescribe, rtTopic, "orders"), "no ACLs: default deny")
}

// Every operation but opDescribe implies opDescribe on the same resource,
// and nothing else; opDescribe implies nothing.
func TestAllowsImplication(t *testing.T) {
	for rt, ops := range aclOperationsOf {
		for _, granted := range ops {
			t.Run(fmt.Sprintf("%s on a %s", granted, rt), func(t *testing.T) {
				acls := []metadata.ACL{newACL("alice", rt, aclNameOf(rt), patLiteral, granted)}
				require.NoError(t, acls[0].Validate())
				for _, op := range aclOperations {
					want := op == granted || op == opDescribe
					assert.Equal(t, want, metadata.Allows(acls, "alice", op, rt, aclNameOf(rt)), "%s", op)
					// Nothing on another resource of the type, nor on a
					// resource of another type of the same name.
					if rt != rtCluster {
						assert.False(t, metadata.Allows(acls, "alice", op, rt, "other"), "%s on another %s", op, rt)
					}
					for other := range aclOperationsOf {
						if other != rt {
							assert.False(t, metadata.Allows(acls, "alice", op, other, aclNameOf(rt)), "%s on a %s", op, other)
						}
					}
					assert.False(t, metadata.Allows(acls, "bob", op, rt, aclNameOf(rt)), "%s for another principal", op)
				}
			})
		}
	}
}

func TestAddRemoveACLs(t *testing.T) {
	a := newACL("alice", rtTopic, "orders", patLiteral, opWrite)
	b := newACL("alice", rtTopic, "orders", patLiteral, opRead)
	c := newACL("bob", rtGroup, "g", patLiteral, opRead)
	d := newACL("*", rtCluster, "", patLiteral, opDescribe)
	e := newACL("alice", rtGroup, "orders", patLiteral, opRead)

	cl := validCluster()
	assert.Equal(t, 4, cl.AddACLs([]metadata.ACL{c, a, b, a, d}), "a repeated ACL is added once")
	// Sorted by principal, resource type, name, pattern, operation.
	assert.Equal(t, []metadata.ACL{d, b, a, c}, cl.ACLs)
	require.NoError(t, cl.Validate())

	assert.Equal(t, 0, cl.AddACLs([]metadata.ACL{a, c}), "ACLs already there")
	assert.Equal(t, 1, cl.AddACLs([]metadata.ACL{e, a}))
	assert.Equal(t, []metadata.ACL{d, e, b, a, c}, cl.ACLs)
	require.NoError(t, cl.Validate())

	assert.Equal(t, 2, cl.RemoveACLs([]metadata.ACL{b, newACL("zed", rtTopic, "t", patLiteral, opRead), c, b}))
	assert.Equal(t, []metadata.ACL{d, e, a}, cl.ACLs)
	require.NoError(t, cl.Validate())

	assert.Equal(t, 0, cl.RemoveACLs([]metadata.ACL{b}))
	assert.Equal(t, 3, cl.RemoveACLs([]metadata.ACL{a, d, e}))
	assert.Nil(t, cl.ACLs, "no ACLs left is no ACLs, as a file without them loads")
	assert.Equal(t, validCluster(), cl)
}

func clusterWithACLs(t testing.TB) *metadata.Cluster {
	c := validCluster()
	require.Equal(t, 7, c.AddACLs([]metadata.ACL{
		newACL("node1", rtCluster, "", patLiteral, opOperate),
		newACL("alice", rtTopic, "orders", patLiteral, opWrite),
		newACL("alice", rtTopic, "logs.", patPrefix, opRead),
		newACL("*", rtGroup, "*", patLiteral, opDescribe),
		newACL("bob", rtStream, "chat/room-1", patLiteral, opCreate),
		newACL("élodie", rtTopic, "événements", patLiteral, opRead),
		newACL("carol", rtStream, "a \"quoted\" path <&>", patLiteral, opRead),
	}))
	return c
}

func TestACLsRoundTrip(t *testing.T) {
	c := clusterWithACLs(t)
	require.NoError(t, c.Validate())
	data, err := metadata.Marshal(c)
	require.NoError(t, err)
	got, err := metadata.Parse(data, "test")
	require.NoError(t, err)
	assert.Equal(t, c, got)
	assert.Equal(t, c, c.Clone())

	again, err := metadata.Marshal(got)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again))

	// A Clone's ACLs are its own.
	cl := c.Clone()
	cl.ACLs[0].Principal = "changed"
	assert.NotEqual(t, "changed", c.ACLs[0].Principal)

	// "acls": [] is the same as no ACLs.
	plain, err := metadata.Marshal(validCluster())
	require.NoError(t, err)
	require.NotContains(t, string(plain), "acls", "no ACLs, no field")
	withEmpty := strings.Replace(string(plain), `"epoch": 7,`, `"epoch": 7, "acls": [],`, 1)
	require.NotEqual(t, string(plain), withEmpty)
	got, err = metadata.Parse([]byte(withEmpty), "test")
	require.NoError(t, err)
	assert.Equal(t, validCluster(), got)
}

func TestParseRefusesBadACLs(t *testing.T) {
	good := clusterWithACLs(t)
	encode := func(acls []metadata.ACL) []byte {
		c := good.Clone()
		c.ACLs = acls
		data, err := metadata.Marshal(c)
		require.NoError(t, err)
		return data
	}
	acls := good.ACLs
	swapped := slices.Clone(acls)
	swapped[0], swapped[1] = swapped[1], swapped[0]
	reversed := slices.Clone(acls)
	slices.Reverse(reversed)
	duplicated := slices.Insert(slices.Clone(acls), 2, acls[2])
	invalid := slices.Clone(acls)
	invalid[len(invalid)-1].Operation = "operate" // on a rtTopic or rtStream
	tests := []struct {
		name string
		data []byte
	}{
		{"unsorted", encode(swapped)},
		{"reversed", encode(reversed)},
		{"duplicated", encode(duplicated)},
		{"operate on a topic", encode(invalid)},
		{"prefix *", encode(append(slices.Clone(acls), newACL("zz", rtTopic, "*", patPrefix, opRead)))},
		{"cluster with a name", encode(append(slices.Clone(acls), newACL("zz", rtCluster, "x", patLiteral, opOperate)))},
		{"empty name", encode(append(slices.Clone(acls), newACL("zz", rtTopic, "", patLiteral, opRead)))},
		{"control character", encode(append(slices.Clone(acls), newACL("zz", rtTopic, "a\x01", patLiteral, opRead)))},
		{"unknown field", []byte(strings.Replace(string(encode(acls)), `"principal": "node1",`, `"principal": "node1", "host": "*",`, 1))},
		{"not a list", []byte(strings.Replace(string(encode(nil)), `"epoch": 7,`, `"epoch": 7, "acls": {},`, 1))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := metadata.Parse(tt.data, "cluster.json")
			require.Error(t, err)
			assert.True(t, errors.Is(err, metadata.ErrCorrupt), "%v", err)
			assert.Contains(t, err.Error(), "cluster.json")
			assert.Nil(t, c)
		})
	}
	// Validate refuses the same metadata held in memory.
	for _, bad := range [][]metadata.ACL{swapped, duplicated, invalid} {
		c := good.Clone()
		c.ACLs = bad
		assert.ErrorIs(t, c.Validate(), metadata.ErrInvalid)
	}
}

// aclFuzzSeeds are the seed corpus of FuzzACLValidate: one ACL as JSON.
func aclFuzzSeeds(t testing.TB) map[string][]byte {
	enc := func(a metadata.ACL) []byte {
		b, err := json.Marshal(a)
		require.NoError(t, err)
		return b
	}
	return map[string][]byte{
		"cluster":          enc(newACL("admin", rtCluster, "", patLiteral, opOperate)),
		"topic-literal":    enc(newACL("alice", rtTopic, "orders", patLiteral, opWrite)),
		"topic-prefix":     enc(newACL("alice", rtTopic, "logs.", patPrefix, opRead)),
		"any":              enc(newACL("*", rtGroup, "*", patLiteral, opDescribe)),
		"stream":           enc(newACL("bob", rtStream, "chat/room-1", patLiteral, opCreate)),
		"operate-on-topic": enc(newACL("alice", rtTopic, "orders", patLiteral, opOperate)),
		"prefix-star":      enc(newACL("alice", rtTopic, "*", patPrefix, opRead)),
		"cluster-named":    enc(newACL("admin", rtCluster, "prod", patLiteral, opOperate)),
		"escaped":          []byte(`{"principal":"\u00e9","resource":"topic","name":"a\u0001\ud800","pattern":"literal","operation":"read"}`),
		"empty-object":     []byte(`{}`),
		"not-json":         []byte("\x00not json"),
	}
}

// TestACLFuzzSeedCorpus keeps testdata/fuzz/FuzzACLValidate in step with
// aclFuzzSeeds; run with -gen-fuzz-seeds to rewrite it.
func TestACLFuzzSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzACLValidate")
	for name, data := range aclFuzzSeeds(t) {
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		path := filepath.Join(dir, name)
		if *genFuzzSeeds {
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
			continue
		}
		got, err := os.ReadFile(path)
		require.NoError(t, err, "seed %s missing; run go test -run TestACLFuzzSeedCorpus -gen-fuzz-seeds", name)
		assert.Equal(t, want, string(got), "seed %s is stale; run go test -run TestACLFuzzSeedCorpus -gen-fuzz-seeds", name)
	}
}

// FuzzACLValidate decodes arbitrary bytes as an ACL in JSON: Validate and
// Allows never panic, and a valid ACL allows what it names (and opDescribe
// on it) to its principal, nothing on a resource of another type or to
// another principal, and survives the metadata file unchanged.
func FuzzACLValidate(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var a metadata.ACL
		if json.Unmarshal(data, &a) != nil {
			return
		}
		acls := []metadata.ACL{a}
		err := a.Validate()
		for _, op := range aclOperations {
			for rt := range aclOperationsOf {
				metadata.Allows(acls, a.Principal, op, rt, a.Name)
				metadata.Allows(acls, "someone", op, rt, "")
			}
		}
		if err != nil {
			return
		}
		principal := a.Principal
		if principal == metadata.AnyPrincipal {
			principal = "someone"
		}
		require.True(t, metadata.Allows(acls, principal, a.Operation, a.Resource, a.Name), "%+v does not allow what it names", a)
		require.True(t, metadata.Allows(acls, principal, opDescribe, a.Resource, a.Name), "%+v does not imply describe", a)
		for rt := range aclOperationsOf {
			if rt != a.Resource {
				require.False(t, metadata.Allows(acls, principal, a.Operation, rt, a.Name), "%+v allows on a %s", a, rt)
			}
		}
		if a.Principal != metadata.AnyPrincipal {
			require.False(t, metadata.Allows(acls, a.Principal+"x", a.Operation, a.Resource, a.Name), "%+v allows another principal", a)
		}
		if a.Resource != rtCluster && a.Name != metadata.AnyName {
			require.Equal(t, a.Pattern == patPrefix, metadata.Allows(acls, principal, a.Operation, a.Resource, a.Name+"x"), "%+v on a longer name", a)
		}

		c := validCluster()
		require.Equal(t, 1, c.AddACLs(acls))
		enc, err := metadata.Marshal(c)
		require.NoError(t, err)
		got, err := metadata.Parse(enc, "fuzz")
		require.NoError(t, err, "%+v", a)
		require.Equal(t, c, got)
	})
}

package testcluster

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka Connect's workers form a group of protocol type "connect", whose
// metadata and assignments are not the consumer protocol's: over the
// wire, two members of such a group join one generation (the protocol
// both prefer chosen), the leader gets each member's metadata byte for
// byte, and each member gets the leader's assignment for it byte for
// byte; DescribeGroups shows them as they were sent.
func TestKafkaConnectProtocolPassesThrough(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--group-initial-rebalance-delay", "300ms"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A client per worker: a client has one connection to a broker, and
	// answers on a connection come in the order of its requests, so one
	// client's two JoinGroups would not be waiting at once.
	clients := map[string]*kgo.Client{}
	for _, w := range []string{"w1", "w2"} {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka))
		require.NoError(t, err)
		defer cl.Close()
		clients[w] = cl
	}
	cl := clients["w1"]

	const group = "connect-cluster"
	meta := map[string][]byte{ // what each worker says of itself, per protocol
		"w1": []byte("\x00\x01{\"url\":\"http://w1:8083\",\"configOffset\":7}\x00\xff"),
		"w2": []byte("\x00\x01{\"url\":\"http://w2:8083\",\"configOffset\":7}\x7f"),
	}
	join := func(worker, memberID string) *kmsg.JoinGroupResponse {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Version, req.Group, req.MemberID, req.ProtocolType = 5, group, memberID, "connect"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 10_000, 10_000
		for _, name := range []string{"sessioned", "compatible", "default"} {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = name, append([]byte(name+":"), meta[worker]...)
			req.Protocols = append(req.Protocols, p)
		}
		resp, err := req.RequestWith(ctx, clients[worker])
		require.NoError(t, err)
		return resp
	}
	// Both join at once (each is told its id first, MEMBER_ID_REQUIRED),
	// so that one generation holds both.
	ids := map[string]string{}
	for _, w := range []string{"w1", "w2"} {
		resp := join(w, "")
		require.Equal(t, kerr.MemberIDRequired.Code, resp.ErrorCode)
		ids[w] = resp.MemberID
	}
	joined := map[string]*kmsg.JoinGroupResponse{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, w := range []string{"w1", "w2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := join(w, ids[w])
			mu.Lock()
			joined[w] = resp
			mu.Unlock()
		}()
	}
	wg.Wait()
	var leader string
	for w, resp := range joined {
		require.Equal(t, int16(0), resp.ErrorCode, "%s: %v", w, kerr.ErrorForCode(resp.ErrorCode))
		require.NotNil(t, resp.Protocol)
		assert.Equal(t, "sessioned", *resp.Protocol, "the protocol both prefer")
		assert.Equal(t, joined["w1"].Generation, resp.Generation, "one generation")
		if resp.LeaderID == resp.MemberID {
			leader = w
		}
	}
	require.NotEmpty(t, leader)
	got := map[string][]byte{}
	for _, m := range joined[leader].Members {
		got[m.MemberID] = m.ProtocolMetadata
	}
	for _, w := range []string{"w1", "w2"} {
		assert.Equal(t, append([]byte("sessioned:"), meta[w]...), got[ids[w]], "%s's metadata, byte for byte", w)
	}

	// The leader's assignments, opaque bytes (Connect's, not the
	// consumer protocol's), reach each worker as they were sent.
	assignment := map[string][]byte{
		"w1": []byte("\x00\x01\x00\x00\x00\x00leader=w1;connectors=[orders-sink];tasks=[orders-sink-0,orders-sink-2]\x00"),
		"w2": []byte("\x00\x01\x00\x00\x00\x00tasks=[orders-sink-1]\xff\xfe"),
	}
	synced := map[string][]byte{}
	for _, w := range []string{"w1", "w2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := kmsg.NewPtrSyncGroupRequest()
			req.Version, req.Group, req.MemberID, req.Generation = 5, group, ids[w], joined[w].Generation
			req.ProtocolType, req.Protocol = kmsg.StringPtr("connect"), kmsg.StringPtr("sessioned")
			if w == leader {
				for _, to := range []string{"w1", "w2"} {
					a := kmsg.NewSyncGroupRequestGroupAssignment()
					a.MemberID, a.MemberAssignment = ids[to], assignment[to]
					req.GroupAssignment = append(req.GroupAssignment, a)
				}
			}
			resp, err := req.RequestWith(ctx, clients[w])
			if !assert.NoError(t, err) || !assert.Equal(t, int16(0), resp.ErrorCode, "%s: %v", w, kerr.ErrorForCode(resp.ErrorCode)) {
				return
			}
			mu.Lock()
			synced[w] = resp.MemberAssignment
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, w := range []string{"w1", "w2"} {
		assert.Equal(t, assignment[w], synced[w], "%s's assignment, byte for byte", w)
	}

	// Heartbeats keep the generation; DescribeGroups shows it as sent.
	for _, w := range []string{"w1", "w2"} {
		hb := kmsg.NewPtrHeartbeatRequest()
		hb.Version, hb.Group, hb.MemberID, hb.Generation = 4, group, ids[w], joined[w].Generation
		resp, err := hb.RequestWith(ctx, cl)
		require.NoError(t, err)
		assert.Equal(t, int16(0), resp.ErrorCode, fmt.Sprintf("%s: %v", w, kerr.ErrorForCode(resp.ErrorCode)))
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	dresp, err := dg.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Len(t, dresp.Groups, 1)
	d := dresp.Groups[0]
	assert.Equal(t, "Stable", d.State)
	assert.Equal(t, "connect", d.ProtocolType)
	assert.Equal(t, "sessioned", d.Protocol)
	require.Len(t, d.Members, 2)
	for _, m := range d.Members {
		w := "w1"
		if m.MemberID == ids["w2"] {
			w = "w2"
		}
		assert.Equal(t, append([]byte("sessioned:"), meta[w]...), m.ProtocolMetadata)
		assert.Equal(t, assignment[w], m.MemberAssignment)
	}
}

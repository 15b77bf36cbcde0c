package testcluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaConn is a raw Kafka connection: each request at the version the
// test sets on it, framed by hand, so that a test can send what no
// client would, and keep a JoinGroup or SyncGroup waiting on its own
// connection while others go on.
type kafkaConn struct {
	c    net.Conn
	r    *bufio.Reader
	f    *kmsg.RequestFormatter
	corr int32
	// sent are the requests written and not yet read, in order.
	sent []kmsg.Request
}

func dialKafka(addr, clientID string) (*kafkaConn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &kafkaConn{c: c, r: bufio.NewReader(c), f: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}, nil
}

func mustDialKafka(t *testing.T, addr, clientID string) *kafkaConn {
	t.Helper()
	k, err := dialKafka(addr, clientID)
	require.NoError(t, err)
	t.Cleanup(func() { k.c.Close() })
	return k
}

// send writes req without waiting for its answer.
func (k *kafkaConn) send(req kmsg.Request) error {
	k.corr++
	k.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := k.c.Write(k.f.AppendRequest(nil, req, k.corr)); err != nil {
		return err
	}
	k.sent = append(k.sent, req)
	return nil
}

// recv reads the answer to the oldest request sent, waiting at most
// timeout.
func (k *kafkaConn) recv(timeout time.Duration) (kmsg.Response, error) {
	if len(k.sent) == 0 {
		return nil, errors.New("no request waits for an answer")
	}
	req := k.sent[0]
	k.sent = k.sent[1:]
	corr := k.corr - int32(len(k.sent))
	k.c.SetReadDeadline(time.Now().Add(timeout))
	body, err := readKafkaFrame(k.r)
	if err != nil {
		return nil, err
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != corr {
		return nil, fmt.Errorf("an answer of %d bytes, not for correlation id %d", len(body), corr)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		if len(body) == 0 || body[0] != 0 {
			return nil, errors.New("a response header with tags")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%s v%d answer: %w", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp, nil
}

// do sends req and reads its answer.
func (k *kafkaConn) do(req kmsg.Request) (kmsg.Response, error) {
	if err := k.send(req); err != nil {
		return nil, err
	}
	return k.recv(30 * time.Second)
}

func readKafkaFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return nil, fmt.Errorf("an answer of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

// kdo is k.do that requires an answer of the request's type.
func kdo[R kmsg.Response](t *testing.T, k *kafkaConn, req kmsg.Request) R {
	t.Helper()
	resp, err := k.do(req)
	require.NoError(t, err)
	return resp.(R)
}

// closedOrAnswered reports what came back on k after a bad frame: "closed"
// when the node closed the connection, else "answered" (and the bytes).
func closedOrAnswered(k *kafkaConn) (string, error) {
	k.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := readKafkaFrame(k.r)
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed):
		return "closed", nil
	case err != nil:
		var op *net.OpError
		if errors.As(err, &op) && !op.Timeout() {
			return "closed", nil // reset
		}
		return "", err
	}
	return fmt.Sprintf("answered (%d bytes)", len(b)), nil
}

// consumerMeta is the consumer protocol's subscription to topics, with
// user data of pad bytes (to make it as large as a test needs).
func consumerMeta(pad int, topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	m.UserData = make([]byte, pad)
	return m.AppendTo(nil)
}

// consumerAssignment is the consumer protocol's assignment of partitions
// (topic -> partitions).
func consumerAssignment(parts map[string][]int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	for _, topic := range slices.Sorted(func(yield func(string) bool) {
		for t := range parts {
			if !yield(t) {
				return
			}
		}
	}) {
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = topic, parts[topic]
		a.Topics = append(a.Topics, at)
	}
	return a.AppendTo(nil)
}

// joinRequest is a JoinGroup of version v for the consumer protocol
// "range" with metadata meta.
func joinRequest(v int16, group, member string, meta []byte, session, rebalance time.Duration) *kmsg.JoinGroupRequest {
	j := kmsg.NewPtrJoinGroupRequest()
	j.Version, j.Group, j.MemberID, j.ProtocolType = v, group, member, "consumer"
	j.SessionTimeoutMillis, j.RebalanceTimeoutMillis = int32(session.Milliseconds()), int32(rebalance.Milliseconds())
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", meta
	j.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return j
}

func syncRequest(group, member string, generation int32, assignments map[string][]byte) *kmsg.SyncGroupRequest {
	s := kmsg.NewPtrSyncGroupRequest()
	s.Version, s.Group, s.MemberID, s.Generation = 5, group, member, generation
	s.ProtocolType, s.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range assignments {
			if !yield(id) {
				return
			}
		}
	}) {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, assignments[id]
		s.GroupAssignment = append(s.GroupAssignment, a)
	}
	return s
}

func heartbeatRequest(group, member string, generation int32) *kmsg.HeartbeatRequest {
	h := kmsg.NewPtrHeartbeatRequest()
	h.Version, h.Group, h.MemberID, h.Generation = 4, group, member, generation
	return h
}

// commitRequest commits offset of topic's partition p for group's member
// at generation (v8).
func commitRequest(group, member string, generation int32, topic string, p int32, offset int64) *kmsg.OffsetCommitRequest {
	c := kmsg.NewPtrOffsetCommitRequest()
	c.Version, c.Group, c.MemberID, c.Generation = 8, group, member, generation
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = topic
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = p, offset
	ct.Partitions = append(ct.Partitions, cp)
	c.Topics = append(c.Topics, ct)
	return c
}

// commitCode is the code of the one partition of a commitRequest.
func commitCode(t *testing.T, k *kafkaConn, req *kmsg.OffsetCommitRequest) int16 {
	t.Helper()
	resp := kdo[*kmsg.OffsetCommitResponse](t, k, req)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// fetchCommitted is group's committed offsets ("topic/partition" ->
// offset), by OffsetFetch v8 for every partition committed.
func fetchCommitted(t *testing.T, k *kafkaConn, group string) map[string]int64 {
	t.Helper()
	f := kmsg.NewPtrOffsetFetchRequest()
	f.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	f.Groups = append(f.Groups, g)
	resp := kdo[*kmsg.OffsetFetchResponse](t, k, f)
	require.Len(t, resp.Groups, 1)
	require.Zero(t, resp.Groups[0].ErrorCode, "%v", kerr.ErrorForCode(resp.Groups[0].ErrorCode))
	out := map[string]int64{}
	for _, rt := range resp.Groups[0].Topics {
		for _, p := range rt.Partitions {
			out[fmt.Sprintf("%s/%d", rt.Topic, p.Partition)] = p.Offset
		}
	}
	return out
}

// kafkaDescribeGroup is the group as DescribeGroups v5 answers.
func kafkaDescribeGroup(t *testing.T, k *kafkaConn, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	d := kmsg.NewPtrDescribeGroupsRequest()
	d.Version, d.Groups = 5, []string{group}
	resp := kdo[*kmsg.DescribeGroupsResponse](t, k, d)
	require.Len(t, resp.Groups, 1)
	return resp.Groups[0]
}

// ctlGroupDescribe is gostream-ctl group describe -o json of a group: its exit
// status and, when 0, its output.
func ctlGroupDescribe(t *testing.T, c *Cluster, group string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.Ctl(ctx, "", "group", "describe", group, "-o", "json")
	require.NoError(t, err)
	if res.Exit != 0 {
		return res.Exit, nil
	}
	var out map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &out), res.Stdout)
	return 0, out
}

// waitCoordinator polls FindCoordinator until the group's coordinator
// serves.
func waitCoordinator(t *testing.T, k *kafkaConn, group string) {
	t.Helper()
	var code int16
	require.Eventually(t, func() bool {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.Version, fc.CoordinatorKey = 3, group
		resp := kdo[*kmsg.FindCoordinatorResponse](t, k, fc)
		if code = resp.ErrorCode; code != 0 {
			return false
		}
		// The coordinator answers (not loading) once a describe does.
		d := kafkaDescribeGroup(t, k, group)
		code = d.ErrorCode
		return code == 0
	}, 60*time.Second, 100*time.Millisecond, "the coordinator of %s never served: %v", group, kerr.ErrorForCode(code))
}

// kmember is one member of a classic group, on its own connection.
type kmember struct {
	k          *kafkaConn
	id         string
	generation int32
	leader     bool
	members    []kmsg.JoinGroupResponseMember // the leader's
}

// joinTogether has every connection's member join group (v5: a member id
// first, then the join with it) in one generation, and returns them with
// their answers.
func joinTogether(t *testing.T, group string, conns []*kafkaConn, meta []byte, session, rebalance time.Duration) []*kmember {
	t.Helper()
	var ms []*kmember
	for _, k := range conns {
		resp := kdo[*kmsg.JoinGroupResponse](t, k, joinRequest(5, group, "", meta, session, rebalance))
		require.Equal(t, kerr.MemberIDRequired.Code, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
		ms = append(ms, &kmember{k: k, id: resp.MemberID})
	}
	for _, m := range ms {
		require.NoError(t, m.k.send(joinRequest(5, group, m.id, meta, session, rebalance)))
	}
	for _, m := range ms {
		r, err := m.k.recv(30 * time.Second)
		require.NoError(t, err)
		resp := r.(*kmsg.JoinGroupResponse)
		require.Zero(t, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
		m.generation, m.leader, m.members = resp.Generation, resp.LeaderID == m.id, resp.Members
	}
	return ms
}

func leaderOf(t *testing.T, ms []*kmember) (*kmember, []*kmember) {
	t.Helper()
	var leader *kmember
	var others []*kmember
	for _, m := range ms {
		if m.leader {
			require.Nil(t, leader, "two leaders")
			leader = m
		} else {
			others = append(others, m)
		}
	}
	require.NotNil(t, leader, "no leader")
	return leader, others
}

// TestKafkaGroupBadInput sends a real node, over Kafka's protocol, what a
// broken or hostile group member sends: protocol metadata and
// assignments over --group-max-member-bytes, a leader's assignments of
// partitions that do not exist and for members that are not in the group,
// a leader that joins and never syncs, requests with another group's
// member id or a wrong generation, and malformed group frames. Each gets
// Kafka's error (or its connection closed), writes nothing it should not
// (OffsetFetch, DescribeGroups and gostream-ctl group describe show it),
// and the node serves on.
func TestKafkaGroupBadInput(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 1, Kafka: true, NodeArgs: []string{
		"--group-max-member-bytes", "1KiB", "--group-initial-rebalance-delay", "0s", "--offsets-partitions", "1"}})
	ctlOK(t, c, "topic", "create", "bi", "--partitions", "3", "--replication-factor", "1")
	produceValues(t, c, "bi", "v", 30)
	addr := c.Node(1).Kafka
	admin := mustDialKafka(t, addr, "admin")
	waitCoordinator(t, admin, "calm")
	meta := consumerMeta(0, "bi")
	const session = 2 * time.Minute

	// A group that keeps working through it all: one member, stable,
	// one commit.
	calm := joinTogether(t, "calm", []*kafkaConn{mustDialKafka(t, addr, "calm")}, meta, session, session)[0]
	sy := kdo[*kmsg.SyncGroupResponse](t, calm.k, syncRequest("calm", calm.id, calm.generation, map[string][]byte{calm.id: consumerAssignment(map[string][]int32{"bi": {0, 1, 2}})}))
	require.Zero(t, sy.ErrorCode)
	require.Zero(t, commitCode(t, calm.k, commitRequest("calm", calm.id, calm.generation, "bi", 0, 4)))
	calmServes := func(t *testing.T) {
		t.Helper()
		k := mustDialKafka(t, addr, "calm-check") // a new client: the node accepts and serves
		hb := kdo[*kmsg.HeartbeatResponse](t, k, heartbeatRequest("calm", calm.id, calm.generation))
		assert.Zero(t, hb.ErrorCode, "calm's member heartbeats: %v", kerr.ErrorForCode(hb.ErrorCode))
		assert.Equal(t, map[string]int64{"bi/0": 4}, fetchCommitted(t, k, "calm"))
		assert.True(t, c.Node(1).Healthy())
	}

	t.Run("metadata over the bound", func(t *testing.T) {
		k := mustDialKafka(t, addr, "big")
		// 1 KiB is the bound of a member's protocols, names included.
		for _, v := range []int16{0, 3, 4, 5, 7} {
			resp := kdo[*kmsg.JoinGroupResponse](t, k, joinRequest(v, "big", "", make([]byte, 1025-len("range")), session, session))
			assert.Equal(t, kerr.GroupMaxSizeReached.Code, resp.ErrorCode, "v%d: %v", v, kerr.ErrorForCode(resp.ErrorCode))
			assert.Empty(t, resp.MemberID, "v%d: no id is handed out", v)
		}
		// Several protocols together over it, each under it.
		j := joinRequest(5, "big", "", make([]byte, 400), session, session)
		for _, name := range []string{"roundrobin", "sticky"} {
			p := kmsg.NewJoinGroupRequestProtocol()
			p.Name, p.Metadata = name, make([]byte, 400)
			j.Protocols = append(j.Protocols, p)
		}
		resp := kdo[*kmsg.JoinGroupResponse](t, k, j)
		assert.Equal(t, kerr.GroupMaxSizeReached.Code, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
		assert.Equal(t, "Dead", kafkaDescribeGroup(t, k, "big").State, "no group was made")
		exit, _ := ctlGroupDescribe(t, c, "big")
		assert.Equal(t, 2, exit, "gostream-ctl knows no group big")
		// At the bound: a member id.
		resp = kdo[*kmsg.JoinGroupResponse](t, k, joinRequest(5, "big", "", make([]byte, 1024-len("range")), session, session))
		assert.Equal(t, kerr.MemberIDRequired.Code, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
	})

	// Two members, a leader and a follower, in group g.
	g := joinTogether(t, "g", []*kafkaConn{mustDialKafka(t, addr, "g1"), mustDialKafka(t, addr, "g2")}, meta, session, session)
	gLeader, gOthers := leaderOf(t, g)
	gFollower := gOthers[0]
	require.Len(t, gLeader.members, 2)

	t.Run("assignment over the bound", func(t *testing.T) {
		require.NoError(t, gFollower.k.send(syncRequest("g", gFollower.id, gFollower.generation, nil)))
		resp := kdo[*kmsg.SyncGroupResponse](t, gLeader.k, syncRequest("g", gLeader.id, gLeader.generation, map[string][]byte{
			gLeader.id: make([]byte, 1025), gFollower.id: consumerAssignment(map[string][]int32{"bi": {0}})}))
		assert.Equal(t, kerr.UnknownServerError.Code, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
		r, err := gFollower.k.recv(10 * time.Second)
		require.NoError(t, err)
		assert.Equal(t, kerr.RebalanceInProgress.Code, r.(*kmsg.SyncGroupResponse).ErrorCode, "the follower joins again")
		d := kafkaDescribeGroup(t, admin, "g")
		assert.Equal(t, "PreparingRebalance", d.State)
		for _, m := range d.Members {
			assert.Empty(t, m.MemberAssignment, "no assignment was set")
		}
		code, _ := ctlGroupDescribe(t, c, "g")
		assert.Zero(t, code)
		assert.Empty(t, fetchCommitted(t, admin, "g"))
	})

	t.Run("assignments of partitions that do not exist and of members not in the group", func(t *testing.T) {
		// The two join again (the leader's failed sync rebalanced).
		for _, m := range g {
			require.NoError(t, m.k.send(joinRequest(5, "g", m.id, meta, session, session)))
		}
		for _, m := range g {
			r, err := m.k.recv(30 * time.Second)
			require.NoError(t, err)
			resp := r.(*kmsg.JoinGroupResponse)
			require.Zero(t, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
			m.generation, m.leader = resp.Generation, resp.LeaderID == m.id
		}
		gLeader, gOthers = leaderOf(t, g)
		gFollower = gOthers[0]
		leaderGets := consumerAssignment(map[string][]int32{"nosuch": {0, 7}, "bi": {99}})
		followerGets := []byte("not the consumer protocol at all")
		require.NoError(t, gFollower.k.send(syncRequest("g", gFollower.id, gFollower.generation, nil)))
		resp := kdo[*kmsg.SyncGroupResponse](t, gLeader.k, syncRequest("g", gLeader.id, gLeader.generation, map[string][]byte{
			gLeader.id: leaderGets, gFollower.id: followerGets, "ghost": consumerAssignment(map[string][]int32{"bi": {1}}), calm.id: []byte("x")}))
		require.Zero(t, resp.ErrorCode, "%v", kerr.ErrorForCode(resp.ErrorCode))
		assert.Equal(t, leaderGets, resp.MemberAssignment, "the leader's bytes, as it sent them")
		r, err := gFollower.k.recv(10 * time.Second)
		require.NoError(t, err)
		fr := r.(*kmsg.SyncGroupResponse)
		require.Zero(t, fr.ErrorCode)
		assert.Equal(t, followerGets, fr.MemberAssignment, "the follower's bytes, as the leader sent them")

		d := kafkaDescribeGroup(t, admin, "g")
		assert.Equal(t, "Stable", d.State)
		got := map[string]string{}
		for _, m := range d.Members {
			got[m.MemberID] = string(m.MemberAssignment)
		}
		assert.Equal(t, map[string]string{gLeader.id: string(leaderGets), gFollower.id: string(followerGets)}, got,
			"the members' assignments; ghost's and calm's member's dropped")
		cd := kafkaDescribeGroup(t, admin, "calm")
		require.Len(t, cd.Members, 1)
		assert.Equal(t, consumerAssignment(map[string][]int32{"bi": {0, 1, 2}}), cd.Members[0].MemberAssignment, "calm's member keeps its own")

		// gostream-ctl shows the group, the partitions as the leader
		// assigned them (decoded from the consumer protocol's bytes; the
		// follower's do not decode).
		code, out := ctlGroupDescribe(t, c, "g")
		require.Zero(t, code)
		assigned := map[string]string{}
		for _, m := range out["members"].([]any) {
			m := m.(map[string]any)
			b, err := json.Marshal(m["assigned"])
			require.NoError(t, err)
			assigned[m["member_id"].(string)] = string(b)
		}
		assert.Equal(t, map[string]string{gLeader.id: `[{"partitions":[99],"topic":"bi"},{"partitions":[0,7],"topic":"nosuch"}]`, gFollower.id: `[]`}, assigned)

		// An assignment gives no right: commits of partitions that do
		// not exist are refused, one that does is written.
		assert.Equal(t, kerr.UnknownTopicOrPartition.Code, commitCode(t, gLeader.k, commitRequest("g", gLeader.id, gLeader.generation, "bi", 99, 1)))
		assert.Equal(t, kerr.UnknownTopicOrPartition.Code, commitCode(t, gLeader.k, commitRequest("g", gLeader.id, gLeader.generation, "nosuch", 0, 1)))
		assert.Zero(t, commitCode(t, gFollower.k, commitRequest("g", gFollower.id, gFollower.generation, "bi", 2, 7)))
		assert.Equal(t, map[string]int64{"bi/2": 7}, fetchCommitted(t, admin, "g"))
		for _, m := range g {
			hb := kdo[*kmsg.HeartbeatResponse](t, m.k, heartbeatRequest("g", m.id, m.generation))
			assert.Zero(t, hb.ErrorCode)
		}
	})

	t.Run("another group's member and a wrong generation", func(t *testing.T) {
		k := mustDialKafka(t, addr, "intruder")
		before := kafkaDescribeGroup(t, admin, "g")
		// calm's member in group g, g's leader in group calm.
		for _, tc := range []struct{ group, member string }{{"g", calm.id}, {"calm", gLeader.id}} {
			hb := kdo[*kmsg.HeartbeatResponse](t, k, heartbeatRequest(tc.group, tc.member, gLeader.generation))
			assert.Equal(t, kerr.UnknownMemberID.Code, hb.ErrorCode, "heartbeat %+v: %v", tc, kerr.ErrorForCode(hb.ErrorCode))
			sy := kdo[*kmsg.SyncGroupResponse](t, k, syncRequest(tc.group, tc.member, gLeader.generation, map[string][]byte{tc.member: []byte("mine")}))
			assert.Equal(t, kerr.UnknownMemberID.Code, sy.ErrorCode, "sync %+v: %v", tc, kerr.ErrorForCode(sy.ErrorCode))
			assert.Equal(t, kerr.UnknownMemberID.Code, commitCode(t, k, commitRequest(tc.group, tc.member, gLeader.generation, "bi", 1, 9)), "commit %+v", tc)
			jn := kdo[*kmsg.JoinGroupResponse](t, k, joinRequest(5, tc.group, tc.member, meta, session, session))
			assert.Equal(t, kerr.UnknownMemberID.Code, jn.ErrorCode, "join %+v: %v", tc, kerr.ErrorForCode(jn.ErrorCode))
			lv := kmsg.NewPtrLeaveGroupRequest()
			lv.Version, lv.Group = 4, tc.group
			lm := kmsg.NewLeaveGroupRequestMember()
			lm.MemberID = tc.member
			lv.Members = append(lv.Members, lm)
			lr := kdo[*kmsg.LeaveGroupResponse](t, k, lv)
			require.Len(t, lr.Members, 1)
			assert.Equal(t, kerr.UnknownMemberID.Code, lr.Members[0].ErrorCode, "leave %+v", tc)
		}
		// g's own member, a generation that is not g's.
		for _, gen := range []int32{gLeader.generation - 1, gLeader.generation + 1, -1} {
			hb := kdo[*kmsg.HeartbeatResponse](t, k, heartbeatRequest("g", gLeader.id, gen))
			assert.Equal(t, kerr.IllegalGeneration.Code, hb.ErrorCode, "heartbeat at %d: %v", gen, kerr.ErrorForCode(hb.ErrorCode))
			sy := kdo[*kmsg.SyncGroupResponse](t, k, syncRequest("g", gLeader.id, gen, map[string][]byte{gLeader.id: []byte("mine")}))
			assert.Equal(t, kerr.IllegalGeneration.Code, sy.ErrorCode, "sync at %d: %v", gen, kerr.ErrorForCode(sy.ErrorCode))
			assert.Equal(t, kerr.IllegalGeneration.Code, commitCode(t, k, commitRequest("g", gLeader.id, gen, "bi", 1, 9)), "commit at %d", gen)
		}
		// A commit from outside (generation -1, no member) while g has members.
		assert.Equal(t, kerr.UnknownMemberID.Code, commitCode(t, k, commitRequest("g", "", -1, "bi", 1, 9)))

		assert.Equal(t, map[string]int64{"bi/2": 7}, fetchCommitted(t, admin, "g"), "nothing was committed")
		after := kafkaDescribeGroup(t, admin, "g")
		assert.Equal(t, before, after, "g is as it was")
		for _, m := range g {
			hb := kdo[*kmsg.HeartbeatResponse](t, m.k, heartbeatRequest("g", m.id, m.generation))
			assert.Zero(t, hb.ErrorCode, "g's members heartbeat on, no rebalance: %v", kerr.ErrorForCode(hb.ErrorCode))
		}
		calmServes(t)
	})

	t.Run("a leader that joins and never syncs", func(t *testing.T) {
		const rebalance = 2 * time.Second
		ns := joinTogether(t, "nosync", []*kafkaConn{mustDialKafka(t, addr, "ns1"), mustDialKafka(t, addr, "ns2")}, meta, session, rebalance)
		leader, others := leaderOf(t, ns)
		follower := others[0]
		joined := time.Now()
		require.NoError(t, follower.k.send(syncRequest("nosync", follower.id, follower.generation, nil)))
		// The leader never syncs: at the rebalance timeout it is removed,
		// and the follower is told to join again.
		r, err := follower.k.recv(30 * time.Second)
		require.NoError(t, err)
		took := time.Since(joined)
		assert.Equal(t, kerr.RebalanceInProgress.Code, r.(*kmsg.SyncGroupResponse).ErrorCode)
		assert.GreaterOrEqual(t, took, rebalance-200*time.Millisecond, "not before the rebalance timeout")
		assert.Less(t, took, session, "at the rebalance timeout, not the session's")
		t.Logf("the follower's SyncGroup was answered REBALANCE_IN_PROGRESS %s after the join", took.Round(time.Millisecond))
		d := kafkaDescribeGroup(t, admin, "nosync")
		require.Len(t, d.Members, 1)
		assert.Equal(t, follower.id, d.Members[0].MemberID, "the leader was removed")
		hb := kdo[*kmsg.HeartbeatResponse](t, leader.k, heartbeatRequest("nosync", leader.id, leader.generation))
		assert.Equal(t, kerr.UnknownMemberID.Code, hb.ErrorCode, "%v", kerr.ErrorForCode(hb.ErrorCode))
		assert.Equal(t, kerr.UnknownMemberID.Code, commitCode(t, leader.k, commitRequest("nosync", leader.id, leader.generation, "bi", 0, 3)))

		// The follower goes on alone: it leads the next generation.
		jn := kdo[*kmsg.JoinGroupResponse](t, follower.k, joinRequest(5, "nosync", follower.id, meta, session, rebalance))
		require.Zero(t, jn.ErrorCode, "%v", kerr.ErrorForCode(jn.ErrorCode))
		assert.Equal(t, follower.id, jn.LeaderID)
		assert.Equal(t, leader.generation+1, jn.Generation)
		mine := consumerAssignment(map[string][]int32{"bi": {0, 1, 2}})
		sy := kdo[*kmsg.SyncGroupResponse](t, follower.k, syncRequest("nosync", follower.id, jn.Generation, map[string][]byte{follower.id: mine}))
		require.Zero(t, sy.ErrorCode)
		assert.Equal(t, mine, sy.MemberAssignment)
		assert.Zero(t, commitCode(t, follower.k, commitRequest("nosync", follower.id, jn.Generation, "bi", 0, 3)))
		assert.Equal(t, map[string]int64{"bi/0": 3}, fetchCommitted(t, admin, "nosync"))
	})

	t.Run("malformed group frames", func(t *testing.T) {
		reqs := []kmsg.Request{
			joinRequest(0, "g", "", meta, session, session),
			syncRequest("g", gLeader.id, gLeader.generation, map[string][]byte{gLeader.id: []byte("x")}),
			heartbeatRequest("g", gLeader.id, gLeader.generation),
			commitRequest("g", gLeader.id, gLeader.generation, "bi", 0, 9),
		}
		lv := kmsg.NewPtrLeaveGroupRequest()
		lv.Group, lv.MemberID = "g", gLeader.id
		of := kmsg.NewPtrOffsetFetchRequest()
		of.Group = "g"
		dg := kmsg.NewPtrDescribeGroupsRequest()
		dg.Groups = []string{"g"}
		lg := kmsg.NewPtrListGroupsRequest()
		del := kmsg.NewPtrDeleteGroupsRequest()
		del.Groups = []string{"g"}
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = "g"
		reqs = append(reqs, lv, of, dg, lg, del, fc)
		// The versions the node serves, as it says.
		av := kmsg.NewPtrApiVersionsRequest()
		av.Version = 3
		served := map[int16][2]int16{}
		for _, k := range kdo[*kmsg.ApiVersionsResponse](t, admin, av).ApiKeys {
			served[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("bad"))
		outcomes := map[string]int{}
		// sendBad sends frame on a new connection: a version the node
		// serves that does not decode closes it (want "closed"); one it
		// does not serve is not decoded: it is answered UNSUPPORTED_VERSION,
		// or closed when its response has no error code for it (want "").
		sendBad := func(t *testing.T, what string, frame []byte, want string) {
			t.Helper()
			k := mustDialKafka(t, addr, "bad")
			_, err := k.c.Write(frame)
			require.NoError(t, err)
			got, err := closedOrAnswered(k)
			require.NoError(t, err, "%s: neither answered nor closed", what)
			got = strings.SplitN(got, " ", 2)[0]
			outcomes[got]++
			if want != "" {
				assert.Equal(t, want, got, what)
			}
			k.c.Close()
		}
		for _, req := range reqs {
			for v := int16(0); v <= req.MaxVersion(); v++ {
				req.SetVersion(v)
				frame := f.AppendRequest(nil, req, 1)
				name := fmt.Sprintf("%s v%d", kmsg.NameForKey(req.Key()), v)
				want := ""
				if r, ok := served[req.Key()]; ok && v >= r[0] && v <= r[1] {
					want = "closed"
				}
				// The body cut short, the frame's size saying so.
				for _, cut := range []int{1, len(frame) / 3} {
					if len(frame)-cut < 14 {
						continue
					}
					short := slices.Clone(frame[:len(frame)-cut])
					binary.BigEndian.PutUint32(short, uint32(len(short)-4))
					sendBad(t, name+" cut short", short, want)
				}
				// The first string of the body (the group) claims more
				// bytes than the frame has.
				bad := slices.Clone(frame)
				at := 4 + 8 + 2 + len("bad")
				if req.IsFlexible() {
					at++ // the header's tags
				}
				switch {
				case at+1 >= len(bad):
					continue // no body
				case req.Key() == kmsg.FindCoordinator.Int16() && v >= 4:
					continue // the body begins with the key type
				case req.IsFlexible():
					bad[at] = 0x7f
				default:
					bad[at], bad[at+1] = 0x7f, 0xff
				}
				sendBad(t, name+" a string past the end", bad, want)
			}
		}
		// Frames whose size is wrong: too small, too large, and one that
		// promises more than comes before the client gives up.
		sendBad(t, "a size of 4", []byte{0, 0, 0, 4, 0, 11, 0, 5}, "closed")
		sendBad(t, "a size of 2 GiB", []byte{0x7f, 0xff, 0xff, 0xff, 0, 11, 0, 5}, "closed")
		k := mustDialKafka(t, addr, "bad")
		frame := f.AppendRequest(nil, heartbeatRequest("g", gLeader.id, gLeader.generation), 1)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)+100))
		_, err := k.c.Write(frame)
		require.NoError(t, err)
		k.c.Close()
		t.Logf("malformed group frames: %v", outcomes)

		// Nothing was written, nothing changed; the node serves.
		assert.Equal(t, map[string]int64{"bi/2": 7}, fetchCommitted(t, admin, "g"))
		d := kafkaDescribeGroup(t, admin, "g")
		assert.Equal(t, "Stable", d.State)
		assert.Len(t, d.Members, 2)
		for _, m := range g {
			hb := kdo[*kmsg.HeartbeatResponse](t, m.k, heartbeatRequest("g", m.id, m.generation))
			assert.Zero(t, hb.ErrorCode, "%v", kerr.ErrorForCode(hb.ErrorCode))
		}
		calmServes(t)
	})

	// What gostream-ctl shows at the end: every group as left.
	for _, group := range []string{"calm", "g", "nosync"} {
		code, out := ctlGroupDescribe(t, c, group)
		assert.Zero(t, code, group)
		assert.NotEmpty(t, out, group)
	}
}

// probeSamples are round trips of a probe, and what went wrong.
type probeSamples struct {
	mu   sync.Mutex
	rtts []time.Duration
	errs []string
}

func (p *probeSamples) add(d time.Duration, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.errs = append(p.errs, err.Error())
		return
	}
	p.rtts = append(p.rtts, d)
}

// quantile is the q-quantile of the round trips, and how many there are.
func (p *probeSamples) quantile(q float64) (time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rtts) == 0 {
		return 0, 0
	}
	s := slices.Clone(p.rtts)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))], len(s)
}

// TestKafkaGroupOfThousands floods one group of a real node's coordinator
// with members over Kafka's protocol: 2,000 JoinGroup v4 without a member
// id get 1,000 ids (the group's bound) and 1,000 GROUP_MAX_SIZE_REACHED;
// 1,000 members, each on its own connection, join with the ids in one
// generation, get their assignments from the leader and leave in one
// LeaveGroup; then 1,000 members whose protocols are each at
// --group-max-member-bytes join another group, more than one generation
// record can hold: those that fit join, the rest get
// GROUP_MAX_SIZE_REACHED. Meanwhile a member of a third group on the same
// coordinator heartbeats and commits, its round trips not much slower
// than before; the node's memory stays within what its connections and
// members' bounds allow.
func TestKafkaGroupOfThousands(t *testing.T) {
	const maxMemberBytes, maxBatchBytes, flood = 1 << 10, 512 << 10, 1000
	c := startClusterWith(t, Config{Nodes: 1, Kafka: true, NodeArgs: []string{
		"--group-max-member-bytes", fmt.Sprint(maxMemberBytes), "--max-batch-bytes", fmt.Sprint(maxBatchBytes),
		"--group-initial-rebalance-delay", "0s", "--offsets-partitions", "1", "--max-conns-per-ip", "2048"}})
	n := c.Node(1)
	ctlOK(t, c, "topic", "create", "fl", "--partitions", "3", "--replication-factor", "1")
	produceValues(t, c, "fl", "v", 30)
	addr := n.Kafka
	admin := mustDialKafka(t, addr, "admin")
	waitCoordinator(t, admin, "calm")
	const session = 2 * time.Minute
	meta := consumerMeta(0, "fl")

	// calm: one member, stable, probed (a heartbeat and a commit) all
	// along on its own connection.
	calm := joinTogether(t, "calm", []*kafkaConn{mustDialKafka(t, addr, "calm")}, meta, session, session)[0]
	sy := kdo[*kmsg.SyncGroupResponse](t, calm.k, syncRequest("calm", calm.id, calm.generation, map[string][]byte{calm.id: consumerAssignment(map[string][]int32{"fl": {0, 1, 2}})}))
	require.Zero(t, sy.ErrorCode)
	probe := func() (time.Duration, error) {
		start := time.Now()
		r, err := calm.k.do(heartbeatRequest("calm", calm.id, calm.generation))
		if err != nil {
			return 0, err
		}
		if code := r.(*kmsg.HeartbeatResponse).ErrorCode; code != 0 {
			return 0, fmt.Errorf("heartbeat: %v", kerr.ErrorForCode(code))
		}
		r, err = calm.k.do(commitRequest("calm", calm.id, calm.generation, "fl", 0, 5))
		if err != nil {
			return 0, err
		}
		if code := r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			return 0, fmt.Errorf("commit: %v", kerr.ErrorForCode(code))
		}
		return time.Since(start), nil
	}
	var before probeSamples
	for range 50 {
		before.add(probe())
	}
	require.Empty(t, before.errs)
	idle := idleRSS(t, n)

	var during probeSamples
	var peak struct {
		sync.Mutex
		rss int64
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			during.add(probe())
		}
	}()
	go func() {
		defer wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if b, err := n.RSS(); err == nil {
				peak.Lock()
				peak.rss = max(peak.rss, b)
				peak.Unlock()
			}
		}
	}()
	stopProbes := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopProbes()
	started := time.Now()

	// 2,000 JoinGroup v4 without a member id, from eight clients.
	var mu sync.Mutex
	var ids []string
	refused := 0
	var idErrs []error
	var idWG sync.WaitGroup
	for w := range 8 {
		idWG.Add(1)
		go func() {
			defer idWG.Done()
			k, err := dialKafka(addr, fmt.Sprintf("flood%d", w))
			if err != nil {
				mu.Lock()
				idErrs = append(idErrs, err)
				mu.Unlock()
				return
			}
			defer k.c.Close()
			for range 2 * flood / 8 {
				r, err := k.do(joinRequest(4, "flood", "", meta, session, session))
				mu.Lock()
				switch {
				case err != nil:
					idErrs = append(idErrs, err)
				case r.(*kmsg.JoinGroupResponse).ErrorCode == kerr.MemberIDRequired.Code:
					ids = append(ids, r.(*kmsg.JoinGroupResponse).MemberID)
				case r.(*kmsg.JoinGroupResponse).ErrorCode == kerr.GroupMaxSizeReached.Code:
					refused++
				default:
					idErrs = append(idErrs, kerr.ErrorForCode(r.(*kmsg.JoinGroupResponse).ErrorCode))
				}
				mu.Unlock()
			}
		}()
	}
	idWG.Wait()
	require.Empty(t, idErrs)
	require.Len(t, ids, flood, "a group hands out at most 1,000 member ids")
	require.Equal(t, flood, refused, "the others get GROUP_MAX_SIZE_REACHED")

	// 1,000 members, each on its own connection, join with them.
	conns := make([]*kafkaConn, flood)
	errs := make([]error, flood)
	parallel := func(f func(i int) error) {
		var wg sync.WaitGroup
		for i := range flood {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f(i)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "member %d", i)
		}
	}
	parallel(func(i int) error {
		k, err := dialKafka(addr, fmt.Sprintf("flood%d", i%8))
		conns[i] = k
		return err
	})
	t.Cleanup(func() {
		for _, k := range conns {
			if k != nil {
				k.c.Close()
			}
		}
	})
	joined := make([]*kmsg.JoinGroupResponse, flood)
	parallel(func(i int) error {
		r, err := conns[i].do(joinRequest(4, "flood", ids[i], meta, session, session))
		if err != nil {
			return err
		}
		joined[i] = r.(*kmsg.JoinGroupResponse)
		if joined[i].ErrorCode != 0 {
			return kerr.ErrorForCode(joined[i].ErrorCode)
		}
		return nil
	})
	leader := -1
	for i, j := range joined {
		assert.Equal(t, joined[0].Generation, j.Generation, "one generation")
		if j.LeaderID == ids[i] {
			leader = i
		}
	}
	require.GreaterOrEqual(t, leader, 0)
	require.Len(t, joined[leader].Members, flood, "the leader is told of every member")
	t.Logf("1,000 members joined generation %d, %s after the first JoinGroup", joined[0].Generation, time.Since(started).Round(time.Millisecond))

	// The leader assigns each member a partition; each gets its own.
	assignments := map[string][]byte{}
	for i, id := range ids {
		assignments[id] = consumerAssignment(map[string][]int32{"fl": {int32(i % 3)}})
	}
	parallel(func(i int) error {
		var a map[string][]byte
		if i == leader {
			a = assignments
		}
		r, err := conns[i].do(syncRequest("flood", ids[i], joined[i].Generation, a))
		if err != nil {
			return err
		}
		s := r.(*kmsg.SyncGroupResponse)
		if s.ErrorCode != 0 {
			return kerr.ErrorForCode(s.ErrorCode)
		}
		if string(s.MemberAssignment) != string(assignments[ids[i]]) {
			return fmt.Errorf("member %d got an assignment of %d bytes, not its own", i, len(s.MemberAssignment))
		}
		return nil
	})
	d := kafkaDescribeGroup(t, admin, "flood")
	assert.Equal(t, "Stable", d.State)
	assert.Len(t, d.Members, flood)
	// They leave, in one LeaveGroup.
	lv := kmsg.NewPtrLeaveGroupRequest()
	lv.Version, lv.Group = 4, "flood"
	for _, id := range ids {
		m := kmsg.NewLeaveGroupRequestMember()
		m.MemberID = id
		lv.Members = append(lv.Members, m)
	}
	lr := kdo[*kmsg.LeaveGroupResponse](t, admin, lv)
	require.Zero(t, lr.ErrorCode)
	for _, m := range lr.Members {
		require.Zero(t, m.ErrorCode, "%s: %v", m.MemberID, kerr.ErrorForCode(m.ErrorCode))
	}
	require.Eventually(t, func() bool { return kafkaDescribeGroup(t, admin, "flood").State == "Empty" }, 30*time.Second, 50*time.Millisecond)

	// 1,000 members whose protocols are each at the bound join group
	// heavy: not all fit in one generation record.
	var heavyIDs []string
	for len(heavyIDs) < flood {
		r := kdo[*kmsg.JoinGroupResponse](t, admin, joinRequest(4, "heavy", "", nil, session, session))
		require.Equal(t, kerr.MemberIDRequired.Code, r.ErrorCode, "%v", kerr.ErrorForCode(r.ErrorCode))
		heavyIDs = append(heavyIDs, r.MemberID)
	}
	big := consumerMeta(0, "fl")
	big = consumerMeta(maxMemberBytes-len("range")-len(big), "fl")
	require.Len(t, big, maxMemberBytes-len("range"))
	heavy := make([]*kmsg.JoinGroupResponse, flood)
	parallel(func(i int) error {
		r, err := conns[i].do(joinRequest(4, "heavy", heavyIDs[i], big, session, session))
		if err != nil {
			return err
		}
		heavy[i] = r.(*kmsg.JoinGroupResponse)
		return nil
	})
	codes := map[string]int{}
	var in []int
	for i, r := range heavy {
		if r.ErrorCode == 0 {
			codes["joined"]++
			in = append(in, i)
			continue
		}
		codes[kerr.ErrorForCode(r.ErrorCode).(*kerr.Error).Message]++
	}
	t.Logf("heavy: %v", codes)
	require.NotEmpty(t, in, "members joined")
	assert.Equal(t, flood, len(in)+codes[kerr.GroupMaxSizeReached.Message], "the others are refused GROUP_MAX_SIZE_REACHED")
	var heavyLeader *kmsg.JoinGroupResponse
	for _, i := range in {
		assert.Equal(t, heavy[in[0]].Generation, heavy[i].Generation)
		if heavy[i].LeaderID == heavyIDs[i] {
			heavyLeader = heavy[i]
		}
	}
	require.NotNil(t, heavyLeader)
	assert.Len(t, heavyLeader.Members, len(in))
	for _, m := range heavyLeader.Members {
		assert.Equal(t, big, m.ProtocolMetadata)
	}
	d = kafkaDescribeGroup(t, admin, "heavy")
	assert.Len(t, d.Members, len(in), "the refused are not members")
	t.Logf("the flood took %s", time.Since(started).Round(time.Millisecond))
	code, out := ctlGroupDescribe(t, c, "heavy")
	require.Zero(t, code)
	assert.Len(t, out["members"], len(in), "gostream-ctl shows the members that joined")
	assert.Empty(t, fetchCommitted(t, admin, "flood"))
	assert.Empty(t, fetchCommitted(t, admin, "heavy"))

	stopProbes()
	base50, _ := before.quantile(0.5)
	base99, _ := before.quantile(0.99)
	q50, samples := during.quantile(0.5)
	q99, _ := during.quantile(0.99)
	worst, _ := during.quantile(1)
	t.Logf("calm's heartbeat+commit: before p50 %s p99 %s; during the flood (%d) p50 %s p99 %s max %s",
		base50, base99, samples, q50, q99, worst)
	assert.Empty(t, during.errs, "calm's member was refused")
	assert.GreaterOrEqual(t, samples, 10)
	// Generous: the flood's clients and the node share the machine's
	// cores, and it is shared.
	assert.Less(t, q50, 10*base50+50*time.Millisecond, "calm's median round trip during the flood")
	q90, _ := during.quantile(0.9)
	assert.Less(t, q90, time.Second, "calm's 90th percentile round trip during the flood")
	assert.Less(t, worst, 5*time.Second, "calm's slowest round trip during the flood")

	// The node's memory: what its thousand connections hold (a read
	// buffer of 64 KiB each, their goroutines, their answers), 128 KiB
	// each at most, and the groups' members, at most half a batch of
	// protocols and half of assignments each, times the allocator's
	// overhead (overheadFactor), and 64 MiB for the rest. Measured here:
	// about 35 MiB over idle, 400 MiB with the race detector.
	peak.Lock()
	grown := peak.rss - idle
	peak.Unlock()
	bound := overheadFactor()*(flood*128<<10+2*maxBatchBytes) + 64<<20
	t.Logf("RSS idle %s, %s more at its peak, bound %s", mib(idle), mib(grown), mib(bound))
	assert.Less(t, grown, bound)
}

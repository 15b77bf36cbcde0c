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

package kafkaapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/groups"
	"gostream/metadata"
	"gostream/replication"
	"gostream/storage"
	"gostream/transport"
)

// groupCore is the core of a one-node broker that leads
// __consumer_offsets (one partition) and topic t (three), with a running
// coordinator: what the group requests of a Kafka connection reach.
func groupCore(tb testing.TB) *broker.Broker {
	tb.Helper()
	root, err := storage.OpenRoot(tb.TempDir(), 1, "", hclog.NewNullLogger())
	require.NoError(tb, err)
	r := broker.NewReplicas(broker.ReplicasConfig{Broker: 1, Root: root})
	tb.Cleanup(func() { r.Close() })
	meta := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: "0123456789abcdef", ControllerID: 1, Epoch: 1}
	meta.PutBroker(metadata.Broker{ID: 1, Addr: "127.0.0.1:1"})
	for i, tp := range []struct {
		name       string
		partitions int
	}{{transport.OffsetsTopic, 1}, {"t", 3}} {
		topic := metadata.Topic{Name: tp.name, ID: fmt.Sprintf("%032x", i+1), ReplicationFactor: 1}
		for range tp.partitions {
			topic.Partitions = append(topic.Partitions, metadata.Partition{Replicas: []int32{1}, Active: []int32{1}, Leader: 1, LeaderEpoch: 1})
		}
		meta.Topics = append(meta.Topics, topic)
	}
	require.NoError(tb, r.ApplyMetadata(meta))
	host := groups.NewHost(groups.HostConfig{
		Broker:   1,
		Metadata: r.Metadata,
		Lookup: func(topic, id string, partition int32) (*metadata.Topic, *replication.Partition, error) {
			t, rep, err := r.Lookup(topic, id, partition)
			if rep == nil {
				return t, nil, err
			}
			return t, rep.Part, err
		},
		ListOffsets: func(context.Context, string, *transport.ListOffsetsRequest) (*transport.ListOffsetsResponse, error) {
			return nil, errors.New("no other broker")
		},
		MaxBatchBytes: 1 << 20, InitialDelay: -1, MaxMemberBytes: 4 << 10, LagPartitions: 10,
	})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- host.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		<-ran
	})
	require.Eventually(tb, func() bool {
		_, err := host.ForGroup("g")
		return err == nil
	}, 10*time.Second, 5*time.Millisecond, "the coordinator never served")
	return broker.New(broker.Config{Broker: 1, Replicas: r, MaxBatchBytes: 1 << 20, Groups: host, OffsetsPartitions: 1})
}

// groupAPIs are the group requests, each as a client would send it.
func groupAPIs() []kmsg.Request {
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g", "consumer", 6000, 6000
	join.InstanceID = kmsg.StringPtr("static-1")
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Topics = []string{"t"}
	jp := kmsg.NewJoinGroupRequestProtocol()
	jp.Name, jp.Metadata = "range", meta.AppendTo(nil)
	join.Protocols = append(join.Protocols, jp)

	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "g", "m-1", 1
	sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	asg := kmsg.NewConsumerMemberAssignment()
	at := kmsg.NewConsumerMemberAssignmentTopic()
	at.Topic, at.Partitions = "t", []int32{0, 1, 2}
	asg.Topics = append(asg.Topics, at)
	sa := kmsg.NewSyncGroupRequestGroupAssignment()
	sa.MemberID, sa.MemberAssignment = "m-1", asg.AppendTo(nil)
	sync.GroupAssignment = append(sync.GroupAssignment, sa)

	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Group, hb.MemberID, hb.Generation = "g", "m-1", 1

	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group, leave.MemberID = "g", "m-1"
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = "m-1", kmsg.StringPtr("static-1")
	leave.Members = append(leave.Members, lm)

	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.MemberID, commit.Generation = "c", "", -1 // a group without members
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = "t"
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Offset, cp.Metadata = 0, kmsg.StringPtr("m")
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)

	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Group = "c"
	ft := kmsg.NewOffsetFetchRequestTopic()
	ft.Topic, ft.Partitions = "t", []int32{0, 1}
	fetch.Topics = append(fetch.Topics, ft)
	fg := kmsg.NewOffsetFetchRequestGroup()
	fg.Group = "c"
	fetch.Groups = append(fetch.Groups, fg)

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey, find.CoordinatorKeys = "g", []string{"g", "h"}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{"g", "h"}
	list := kmsg.NewPtrListGroupsRequest()
	list.StatesFilter = []string{"Stable"}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"h"}
	odel := kmsg.NewPtrOffsetDeleteRequest()
	odel.Group = "h"
	ot := kmsg.NewOffsetDeleteRequestTopic()
	ot.Topic = "bi"
	op := kmsg.NewOffsetDeleteRequestTopicPartition()
	ot.Partitions = append(ot.Partitions, op)
	odel.Topics = append(odel.Topics, ot)
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberID, cgh.RebalanceTimeoutMillis = "n", "kafka-1", 10_000
	cgh.SubscribedTopicNames = []string{"bi"}
	cgh.ServerAssignor = kmsg.StringPtr("uniform")
	cgh.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return []kmsg.Request{join, sync, hb, leave, commit, fetch, find, describe, list, del, odel, cgh}
}

// FuzzKafkaGroupRequest: any bytes as the body of a group request
// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
// FindCoordinator, DescribeGroups, ListGroups, DeleteGroups, OffsetDelete,
// ConsumerGroupHeartbeat) at any
// version, through the whole path of a Kafka connection's request to a
// running coordinator, are refused (the connection closed) or answered,
// without a panic, with an answer a client decodes at the request's
// version. A JoinGroup or SyncGroup that waits for its group is given up
// after a moment, as by a client that goes away.
func FuzzKafkaGroupRequest(f *testing.F) { fuzzThroughCore(f, groupAPIs()) }

// fuzzThroughCore fuzzes the bodies of apis, each seeded at every version
// served, through the whole path of a Kafka connection's request to
// groupCore's broker: refused or answered, without a panic, with an
// answer a client decodes at the request's version.
func fuzzThroughCore(f *testing.F, apis []kmsg.Request) {
	for i, req := range apis {
		r := versions[req.Key()]
		for v := r.min; v <= r.max; v++ {
			req.SetVersion(v)
			f.Add(uint8(i), v, req.AppendTo(nil))
		}
	}
	s := New(Config{Broker: 1, Core: groupCore(f)})
	f.Fuzz(func(t *testing.T, which uint8, version int16, body []byte) {
		key := apis[int(which)%len(apis)].Key()
		frame := []byte{byte(key >> 8), byte(key), byte(version >> 8), byte(version), 0, 0, 0, 7, 0, 1, 'c'}
		if kreq := kmsg.RequestForKey(key); version >= 0 && version <= kreq.MaxVersion() {
			kreq.SetVersion(version)
			if kreq.IsFlexible() {
				frame = append(frame, 0)
			}
		}
		req, err := parseRequest(append(frame, body...))
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		rep, err := s.handle(ctx, req)
		if err != nil {
			return
		}
		resp, err := rep(ctx)
		if err != nil || resp == nil {
			return
		}
		var buf bytes.Buffer
		var scratch []byte
		if err := writeResponse(&buf, req, resp, &scratch); err != nil {
			t.Fatalf("writing the answer: %v", err)
		}
		answer := buf.Bytes()[8:]
		kresp := kmsg.ResponseForKey(key)
		kresp.SetVersion(version)
		if req.kreq == nil {
			kresp.SetVersion(0) // not served: answered in the lowest version kmsg knows
			if version >= 0 && version <= kresp.MaxVersion() {
				kresp.SetVersion(version)
			}
		}
		if kresp.IsFlexible() {
			answer = answer[1:] // the header's tags
		}
		if err := kresp.ReadFrom(answer); err != nil {
			t.Fatalf("%s v%d: the answer does not decode: %v", kmsg.NameForKey(key), version, err)
		}
	})
}

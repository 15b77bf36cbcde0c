package transport

import "testing"

// groupMessages are the messages of the group APIs, indexed by the first
// byte of a FuzzGroupMessage input (one target for them all, as for the
// cluster messages).
var groupMessages = []func() Message{
	func() Message { return &FindCoordinatorRequest{} },
	func() Message { return &FindCoordinatorResponse{} },
	func() Message { return &OffsetCommitRequest{} },
	func() Message { return &OffsetFetchRequest{} },
	func() Message { return &OffsetFetchResponse{} },
	func() Message { return &GroupHeartbeatRequest{} },
	func() Message { return &GroupHeartbeatResponse{} },
	func() Message { return &ListGroupsRequest{} },
	func() Message { return &ListGroupsResponse{} },
	func() Message { return &GroupRequest{} },
	func() Message { return &DescribeGroupResponse{} },
	func() Message { return &OffsetDeleteRequest{} },
	func() Message { return &OffsetDeleteResponse{} },
}

// groupSeeds are full values of every group message.
func groupSeeds() []Message {
	tps := []TopicPartitions{{Topic: "t", Partitions: []int32{0, 2}}, {Topic: "u", Partitions: []int32{1}}}
	off := CommittedOffset{Topic: "t", Partition: 1, Offset: 42, Metadata: "m", MemberID: "m1", MemberEpoch: 3, TimeMs: 1700000000000}
	return []Message{
		&FindCoordinatorRequest{Group: "g"},
		&FindCoordinatorResponse{Partition: 3, Leader: 2, LeaderEpoch: 5, Addr: "n2:9400"},
		&OffsetCommitRequest{Group: "g", MemberID: "m1", MemberEpoch: 3, Reset: true, Requester: "ctl",
			Offsets: []CommitOffset{{Topic: "t", Partition: 1, Offset: 42, Metadata: "m"}}},
		&OffsetFetchRequest{Group: "g", Topics: []string{"t", "u"}},
		&OffsetFetchResponse{Offsets: []CommittedOffset{off}},
		&GroupHeartbeatRequest{Group: "g", MemberID: "m1", InstanceID: "i1", MemberEpoch: 3, Topics: []string{"t"},
			SessionTimeoutMs: 10000, Owned: tps, Host: "h", Leave: LeaveHeld},
		&GroupHeartbeatResponse{MemberID: "m1", MemberEpoch: 3, GroupEpoch: 4, HeartbeatIntervalMs: 1000, Assigned: tps},
		&ListGroupsRequest{Partition: 7},
		&ListGroupsResponse{Groups: []GroupSummary{{Name: "g", State: "stable", Members: 3, GroupEpoch: 4}}},
		&GroupRequest{Group: "g"},
		&DescribeGroupResponse{Group: "k", State: "stable", GroupEpoch: 7, Assignor: "cooperative-sticky", Coordinator: 1,
			Members: []MemberDescription{{MemberID: "rdkafka-1", Host: "/10.0.0.1", MemberEpoch: 7, Topics: []string{"t"},
				SessionTimeoutMs: 45000, Owned: tps, Target: tps, SinceHeartbeatMs: 3, ClientID: "rdkafka"}},
			Offsets: []CommittedOffset{off}, ProtocolType: "consumer"},
		&OffsetDeleteRequest{Group: "g", Topic: "t", Partitions: []int32{0, 3}, Requester: "ops@host"},
		&OffsetDeleteResponse{Deleted: []CommittedOffset{off}},
	}
}

// FuzzGroupMessage decodes arbitrary bytes as the group message its first
// byte picks (see fuzzPicked).
func FuzzGroupMessage(f *testing.F) { fuzzPicked(f, groupMessages, groupSeeds()) }

// Every group message round-trips, with every field set.
func TestGroupMessagesRoundTrip(t *testing.T) { roundTripAll(t, groupMessages, groupSeeds()) }

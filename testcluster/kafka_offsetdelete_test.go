package testcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Kafka's OffsetDelete (key 47) through franz-go's kmsg requests, which
// kgo sends to the group's coordinator.

// kafkaCommit commits offsets ("topic/partition" -> offset) to group from
// outside any membership (generation -1), as an admin tool does.
func kafkaCommit(ctx context.Context, t *testing.T, cl *kgo.Client, group string, offsets map[string]map[int32]int64) {
	t.Helper()
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = group, -1
	for topic, parts := range offsets {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, o := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, o
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			require.Zero(t, rp.ErrorCode, "commit %s/%d: %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
		}
	}
}

// kafkaOffsetDelete sends OffsetDelete for group's partitions and returns
// the group's error code and each partition's ("topic/partition").
func kafkaOffsetDelete(ctx context.Context, cl *kgo.Client, group string, parts map[string][]int32) (int16, map[string]int16, error) {
	req := kmsg.NewPtrOffsetDeleteRequest()
	req.Group = group
	for topic, ps := range parts {
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = topic
		for _, p := range ps {
			rp := kmsg.NewOffsetDeleteRequestTopicPartition()
			rp.Partition = p
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, nil, err
	}
	codes := map[string]int16{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			codes[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
		}
	}
	return resp.ErrorCode, codes, nil
}

// kafkaFetchOffsets is group's committed offset of each partition named
// ("topic/partition" -> offset, -1 for none), as OffsetFetch answers.
func kafkaFetchOffsets(ctx context.Context, cl *kgo.Client, group string, parts map[string][]int32) (map[string]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	for topic, ps := range parts {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, ps
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.Offset
		}
	}
	return out, nil
}

// describedOffsets is gostream-ctl group describe's committed offsets
// ("topic/partition" -> offset; never committed partitions left out), and
// its exit status.
func describedOffsets(t *testing.T, c *Cluster, group string) (map[string]int64, int) {
	t.Helper()
	res, err := c.Ctl(context.Background(), "", "group", "describe", group, "-o", "json")
	require.NoError(t, err)
	out := map[string]int64{}
	if res.Exit != 0 {
		return out, res.Exit
	}
	var d struct {
		Offsets []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed *int64 `json:"committed"`
		} `json:"offsets"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &d))
	for _, o := range d.Offsets {
		if o.Committed != nil {
			out[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = *o.Committed
		}
	}
	return out, 0
}

// TestKafkaOffsetDelete: franz-go's OffsetDelete of a committed offset of
// an empty group deletes it (OffsetFetch gives -1, gostream-ctl group
// describe no longer shows it) and leaves the others; a topic or
// partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION. With a
// franz-go member in the group, its topic is GROUP_SUBSCRIBED_TO_TOPIC
// and keeps its offset, another topic's goes. The coordinator killed
// with kill -9 and its node failed over: the deleted offsets stay
// deleted on the new coordinator, which still refuses the member's topic;
// once the member has left, its offset goes, and the group, left with
// nothing, with it (GROUP_ID_NOT_FOUND).
func TestKafkaOffsetDelete(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 3, Kafka: true, NodeArgs: []string{"--group-initial-rebalance-delay", "0s"}})
	ctlOK(t, c, "topic", "create", "od", "--partitions", "3", "--replication-factor", "3")
	ctlOK(t, c, "topic", "create", "sub", "--partitions", "1", "--replication-factor", "3")
	produceValues(t, c, "od", "v", 60)
	produceValues(t, c, "sub", "s", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var seeds []string
	for _, n := range c.Nodes {
		seeds = append(seeds, n.Kafka)
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	require.NoError(t, err)
	defer admin.Close()
	// A group whose coordinator is not node 1, the controller's node,
	// which must live to fail the other over.
	group, victim, err := GroupNotCoordinatedBy(ctx, c, "odgroup", 1)
	require.NoError(t, err)

	kafkaCommit(ctx, t, admin, group, map[string]map[int32]int64{"od": {0: 3, 1: 4, 2: 5}, "sub": {0: 2}})
	all := map[string][]int32{"od": {0, 1, 2}, "sub": {0}}
	got, err := kafkaFetchOffsets(ctx, admin, group, all)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"od/0": 3, "od/1": 4, "od/2": 5, "sub/0": 2}, got)

	code, codes, err := kafkaOffsetDelete(ctx, admin, group, map[string][]int32{"od": {0, 7}, "nosuch": {0}})
	require.NoError(t, err)
	require.Zero(t, code, "%v", kerr.ErrorForCode(code))
	assert.Equal(t, map[string]int16{"od/0": 0, "od/7": kerr.UnknownTopicOrPartition.Code, "nosuch/0": kerr.UnknownTopicOrPartition.Code}, codes)
	got, err = kafkaFetchOffsets(ctx, admin, group, all)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"od/0": -1, "od/1": 4, "od/2": 5, "sub/0": 2}, got, "od/0 is deleted, the others kept")
	described, exit := describedOffsets(t, c, group)
	require.Zero(t, exit)
	assert.Equal(t, map[string]int64{"od/1": 4, "od/2": 5, "sub/0": 2}, described)

	// A franz-go member subscribed to sub joins.
	member, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("sub"),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond), kgo.DisableAutoCommit())
	require.NoError(t, err)
	defer member.Close()
	go func() {
		for ctx.Err() == nil {
			if fs := member.PollFetches(ctx); fs.IsClientClosed() {
				return
			}
		}
	}()
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{group}
	require.Eventually(t, func() bool {
		resp, err := dg.RequestWith(ctx, admin)
		return err == nil && len(resp.Groups) == 1 && resp.Groups[0].State == "Stable" && len(resp.Groups[0].Members) == 1
	}, 60*time.Second, 100*time.Millisecond, "the member joins")
	code, codes, err = kafkaOffsetDelete(ctx, admin, group, map[string][]int32{"sub": {0}, "od": {1}})
	require.NoError(t, err)
	require.Zero(t, code, "%v", kerr.ErrorForCode(code))
	assert.Equal(t, map[string]int16{"sub/0": kerr.GroupSubscribedToTopic.Code, "od/1": 0}, codes)
	got, err = kafkaFetchOffsets(ctx, admin, group, all)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"od/0": -1, "od/1": -1, "od/2": 5, "sub/0": 2}, got)

	// The coordinator dies; its node is failed over.
	require.NoError(t, c.Node(victim).Kill())
	ctlOK(t, c, "failover", "--broker", fmt.Sprint(victim))
	// A new client: kgo keeps asking the coordinator it knows while it
	// cannot dial it.
	admin.Close()
	admin, err = kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka))
	require.NoError(t, err)
	defer admin.Close()
	require.Eventually(t, func() bool {
		got, err = kafkaFetchOffsets(ctx, admin, group, all)
		return err == nil
	}, 60*time.Second, 200*time.Millisecond, "the new coordinator answers")
	assert.Equal(t, map[string]int64{"od/0": -1, "od/1": -1, "od/2": 5, "sub/0": 2}, got, "no deleted offset comes back")
	described, exit = describedOffsets(t, c, group)
	require.Zero(t, exit)
	assert.Equal(t, map[string]int64{"od/2": 5, "sub/0": 2}, described)
	code, codes, err = kafkaOffsetDelete(ctx, admin, group, map[string][]int32{"sub": {0}})
	require.NoError(t, err)
	require.Zero(t, code, "%v", kerr.ErrorForCode(code))
	assert.Equal(t, map[string]int16{"sub/0": kerr.GroupSubscribedToTopic.Code}, codes, "the new coordinator knows the member's subscription")

	// The member leaves: its topic's offset goes, and the rest.
	member.Close()
	require.Eventually(t, func() bool {
		code, codes, err = kafkaOffsetDelete(ctx, admin, group, map[string][]int32{"sub": {0}, "od": {2}})
		return err == nil && code == 0 && codes["sub/0"] == 0
	}, 30*time.Second, 200*time.Millisecond, "deleted once the member left: %d %v %v", code, codes, err)
	assert.Equal(t, map[string]int16{"sub/0": 0, "od/2": 0}, codes)
	got, err = kafkaFetchOffsets(ctx, admin, group, all)
	require.NoError(t, err)
	assert.Equal(t, map[string]int64{"od/0": -1, "od/1": -1, "od/2": -1, "sub/0": -1}, got)
	_, exit = describedOffsets(t, c, group)
	assert.Equal(t, 2, exit, "a group left with nothing is gone")
	code, _, err = kafkaOffsetDelete(ctx, admin, group, map[string][]int32{"od": {0}})
	require.NoError(t, err)
	assert.Equal(t, kerr.GroupIDNotFound.Code, code)
}

// TestKafkaOffsetDeleteACLs: OffsetDelete needs delete on the group
// (GROUP_AUTHORIZATION_FAILED, nothing deleted, without it) and read on
// each topic (TOPIC_AUTHORIZATION_FAILED for that topic's partitions; the
// others are deleted).
func TestKafkaOffsetDeleteACLs(t *testing.T) {
	c := startClusterWith(t, Config{Nodes: 1, Candidates: 1, Kafka: true, Secure: true})
	ctlOK(t, c, "topic", "create", "mine", "--partitions", "1", "--replication-factor", "1")
	ctlOK(t, c, "topic", "create", "theirs", "--partitions", "1", "--replication-factor", "1")
	ctlOKIn(t, c, "a\nb\n", "produce", "mine")
	ctlOKIn(t, c, "a\nb\n", "produce", "theirs")
	for _, topic := range []string{"mine", "theirs"} {
		ctlOK(t, c, "consume", topic, "--partition", "0", "--group", "og", "--max", "1")
	}
	token, err := os.ReadFile(addToken(t, c, "carol"))
	require.NoError(t, err)
	ctlOK(t, c, "acl", "add", "--principal", "carol", "--topic", "mine", "--operation", "read", "--operation", "describe")
	ctlOK(t, c, "acl", "add", "--principal", "carol", "--group", "og", "--operation", "describe")
	pem, err := os.ReadFile(c.Secure.CAFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pem))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Node(1).Kafka), kgo.DialTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}),
		kgo.SASL(plain.Auth{User: "carol", Pass: string(token)}.AsMechanism()))
	require.NoError(t, err)
	defer cl.Close()
	both := map[string][]int32{"mine": {0}, "theirs": {0}}

	code, _, err := kafkaOffsetDelete(ctx, cl, "og", both)
	require.NoError(t, err)
	assert.Equal(t, kerr.GroupAuthorizationFailed.Code, code)
	described, exit := describedOffsets(t, c, "og")
	require.Zero(t, exit)
	assert.Equal(t, map[string]int64{"mine/0": 1, "theirs/0": 1}, described, "nothing deleted")

	ctlOK(t, c, "acl", "add", "--principal", "carol", "--group", "og", "--operation", "delete")
	var codes map[string]int16
	require.Eventually(t, func() bool {
		code, codes, err = kafkaOffsetDelete(ctx, cl, "og", both)
		return err == nil && code == 0
	}, 30*time.Second, 100*time.Millisecond, "with delete on the group (once the node has the entry)")
	assert.Equal(t, map[string]int16{"mine/0": 0, "theirs/0": kerr.TopicAuthorizationFailed.Code}, codes)
	described, exit = describedOffsets(t, c, "og")
	require.Zero(t, exit)
	assert.Equal(t, map[string]int64{"theirs/0": 1}, described)
}

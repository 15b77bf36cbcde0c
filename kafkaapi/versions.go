package kafkaapi

import (
	"reflect"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// versionRange is the versions of one API this server serves.
type versionRange struct{ min, max int16 }

// versions are the APIs served and their versions (docs/kafka.md, "APIs
// and versions"). Produce advertises 0 (kcat turns gzip, snappy and lz4
// on only when the range holds it) and refuses what is not a record
// batch of magic 2, which versions below 3 cannot carry.
var versions = map[int16]versionRange{
	kmsg.Produce.Int16():                 {0, 9},
	kmsg.Fetch.Int16():                   {4, 12},
	kmsg.ListOffsets.Int16():             {1, 7},
	kmsg.Metadata.Int16():                {1, 12},
	kmsg.ApiVersions.Int16():             {0, 3},
	kmsg.CreateTopics.Int16():            {0, 5},
	kmsg.DeleteTopics.Int16():            {0, 4},
	kmsg.CreatePartitions.Int16():        {0, 3},
	kmsg.DescribeConfigs.Int16():         {0, 4},
	kmsg.IncrementalAlterConfigs.Int16(): {0, 1},
	kmsg.DescribeCluster.Int16():         {0, 0},
	// Moves (docs/reassignment.md).
	kmsg.AlterPartitionAssignments.Int16():  {0, 1},
	kmsg.ListPartitionReassignments.Int16(): {0, 0},
	kmsg.InitProducerID.Int16():             {0, 4},
	kmsg.SASLHandshake.Int16():              {0, 1},
	kmsg.SASLAuthenticate.Int16():           {0, 2},
	// Groups (docs/kafka-groups.md): librdkafka turns its balanced
	// consumer on only when each of these holds version 0 (OffsetFetch 1).
	kmsg.OffsetCommit.Int16():    {0, 8},
	kmsg.OffsetFetch.Int16():     {1, 8},
	kmsg.FindCoordinator.Int16(): {0, 4},
	kmsg.JoinGroup.Int16():       {0, 7},
	kmsg.Heartbeat.Int16():       {0, 4},
	kmsg.LeaveGroup.Int16():      {0, 4},
	kmsg.SyncGroup.Int16():       {0, 5},
	kmsg.DescribeGroups.Int16():  {0, 5},
	kmsg.ListGroups.Int16():      {0, 4},
	kmsg.DeleteGroups.Int16():    {0, 2},
	kmsg.OffsetDelete.Int16():    {0, 0},
	// Kafka's new group protocol (KIP-848), on gostream's own: v1 is
	// what franz-go and the Java client ask for.
	kmsg.ConsumerGroupHeartbeat.Int16(): {0, 1},
}

// apiKeys is the ApiVersions answer's list, by key.
var apiKeys = func() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k, v := range versions {
		out = append(out, kmsg.ApiVersionsResponseApiKey{ApiKey: k, MinVersion: v.min, MaxVersion: v.max})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ApiKey < out[j].ApiKey })
	return out
}()

// apiVersions answers ApiVersions: a version above ours gets a v0 answer
// with UNSUPPORTED_VERSION and the list, so the client asks again at a
// version both know; the body of such a request is never read.
func (s *Server) apiVersions(req *request) kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	v := versions[kmsg.ApiVersions.Int16()]
	if req.version < v.min || req.version > v.max {
		resp.Version = 0
		resp.ErrorCode = kerr.UnsupportedVersion.Code
	} else {
		resp.Version = req.version
	}
	resp.ApiKeys = append([]kmsg.ApiVersionsResponseApiKey(nil), apiKeys...)
	return resp
}

// setErrorCode sets the top-level ErrorCode field of resp, if it has one.
func setErrorCode(resp kmsg.Response, code int16) bool {
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 || !f.CanSet() {
		return false
	}
	f.SetInt(int64(code))
	return true
}

package kafkaapi

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// adminAPIs are topic admin requests that reach the core, each as a
// client would send it: CreatePartitions with replica lists, named twice,
// and as a dry run.
func adminAPIs() []kmsg.Request {
	grow := kmsg.NewPtrCreatePartitionsRequest()
	grow.TimeoutMillis = 50
	gt := kmsg.NewCreatePartitionsRequestTopic()
	gt.Topic, gt.Count = "t", 5
	for _, r := range [][]int32{{1}, {1}} {
		a := kmsg.NewCreatePartitionsRequestTopicAssignment()
		a.Replicas = r
		gt.Assignment = append(gt.Assignment, a)
	}
	dup := kmsg.NewCreatePartitionsRequestTopic()
	dup.Topic, dup.Count = "u", 2
	grow.Topics = append(grow.Topics, gt, dup, dup)
	dry := kmsg.NewPtrCreatePartitionsRequest()
	dry.ValidateOnly = true
	dt := kmsg.NewCreatePartitionsRequestTopic()
	dt.Topic, dt.Count = "t", 4
	dry.Topics = append(dry.Topics, dt)
	return []kmsg.Request{grow, dry}
}

// FuzzKafkaAdminRequest: any bytes as the body of a CreatePartitions
// request at any version, through the whole path of a Kafka connection's
// request to a broker's core (whose node is not the controller), are
// refused (the connection closed) or answered, without a panic, with an
// answer a client decodes at the request's version.
func FuzzKafkaAdminRequest(f *testing.F) { fuzzThroughCore(f, adminAPIs()) }

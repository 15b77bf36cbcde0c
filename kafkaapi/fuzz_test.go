package kafkaapi

import (
	"bytes"
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzKafkaRequest: any bytes as a request frame are refused, or parse
// into a request that is answered or refused without a panic. The
// requests that reach the core are left out (no core here): ApiVersions
// and the keys and versions not served are answered in full and written.
func FuzzKafkaRequest(f *testing.F) {
	add := func(key, version int16, body []byte) {
		h := []byte{byte(key >> 8), byte(key), byte(version >> 8), byte(version), 0, 0, 0, 9, 0, 1, 'c'}
		req := kmsg.RequestForKey(key)
		if req != nil {
			req.SetVersion(version)
			if req.IsFlexible() {
				h = append(h, 0)
			}
		}
		f.Add(append(h, body...))
	}
	for _, v := range []int16{0, 3, 4, 99} {
		r := kmsg.NewPtrApiVersionsRequest()
		r.Version = min(v, 3)
		r.ClientSoftwareName, r.ClientSoftwareVersion = "fuzz", "1"
		add(18, v, r.AppendTo(nil))
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = "g"
	add(10, 0, fc.AppendTo(nil))
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	add(3, 9, md.AppendTo(nil))
	ap := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	apt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
	apt.Topic = "t"
	apt.Partitions = []kmsg.AlterPartitionAssignmentsRequestTopicPartition{{Partition: 0, Replicas: []int32{2, 3}}, {Partition: 1}}
	ap.Topics = append(ap.Topics, apt)
	add(45, 0, ap.AppendTo(nil))
	lp := kmsg.NewPtrListPartitionReassignmentsRequest()
	add(46, 0, lp.AppendTo(nil))
	add(1000, 0, []byte{1, 2, 3})
	s := New(Config{Broker: 1})
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := parseRequest(frame)
		if err != nil {
			return
		}
		if req.kreq != nil && req.key != kmsg.ApiVersions.Int16() {
			if _, served := versions[req.key]; served {
				return // would call the core
			}
		}
		rep, err := s.handle(context.Background(), req)
		if err != nil {
			return
		}
		resp, err := rep(context.Background())
		if err != nil || resp == nil {
			return
		}
		var buf bytes.Buffer
		var scratch []byte
		if err := writeResponse(&buf, req, resp, &scratch); err != nil {
			t.Fatalf("writing the answer: %v", err)
		}
	})
}

package groups

import (
	"encoding/binary"
	"errors"
	"slices"
)

// Kafka's consumer protocol (protocol type "consumer"): what its members
// put in their JoinGroup metadata (a subscription) and what the leader
// hands each member (an assignment). The coordinator passes both through
// as bytes; it reads them only to describe a group (which topics a member
// subscribes to, which partitions it was given). Both start with an int16
// version and keep the fields of version 0 first (fields are only ever
// appended), so these read the version-0 prefix of any version and
// ignore the rest.

// errConsumerProto: bytes that are not the consumer protocol's.
var errConsumerProto = errors.New("groups: not a consumer protocol message")

type protoReader struct {
	b   []byte
	bad bool
}

func (r *protoReader) int16() int16 {
	if len(r.b) < 2 {
		r.bad = true
		return 0
	}
	v := int16(binary.BigEndian.Uint16(r.b))
	r.b = r.b[2:]
	return v
}

func (r *protoReader) int32() int32 {
	if len(r.b) < 4 {
		r.bad = true
		return 0
	}
	v := int32(binary.BigEndian.Uint32(r.b))
	r.b = r.b[4:]
	return v
}

func (r *protoReader) string() string {
	n := int(r.int16())
	if n < 0 || n > len(r.b) {
		r.bad = true
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads an array's length, each element at least min bytes.
func (r *protoReader) count(min int) int {
	n := int(r.int32())
	if n < 0 || n*min > len(r.b) {
		r.bad = true
		return 0
	}
	return n
}

// ConsumerSubscription returns the topics of a consumer protocol
// subscription.
func ConsumerSubscription(b []byte) ([]string, error) {
	r := &protoReader{b: b}
	if r.int16() < 0 {
		return nil, errConsumerProto
	}
	n := r.count(2)
	var topics []string
	for i := 0; i < n && !r.bad; i++ {
		topics = append(topics, r.string())
	}
	if r.bad {
		return nil, errConsumerProto
	}
	slices.Sort(topics)
	return slices.Compact(topics), nil
}

// ConsumerAssignment returns the partitions of a consumer protocol
// assignment; no bytes are no partitions.
func ConsumerAssignment(b []byte) ([]TopicPartition, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r := &protoReader{b: b}
	if r.int16() < 0 {
		return nil, errConsumerProto
	}
	n := r.count(2 + 4)
	var out []TopicPartition
	for i := 0; i < n && !r.bad; i++ {
		t := r.string()
		np := r.count(4)
		for j := 0; j < np && !r.bad; j++ {
			out = append(out, TopicPartition{t, r.int32()})
		}
	}
	if r.bad {
		return nil, errConsumerProto
	}
	return out, nil
}

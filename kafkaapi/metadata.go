package kafkaapi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/broker"
	"gostream/metadata"
	"gostream/transport"
)

// metadata answers Metadata with the brokers' endpoints on this server's
// listener and the topics asked for (all it may describe when none are
// named), each topic's error on its own.
func (s *Server) metadata(ctx context.Context, req *kmsg.MetadataRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	meta, views, err := s.cfg.Core.Metadata(principalOf(ctx), nil)
	if err != nil {
		// No metadata yet: no brokers, and every topic asked for not
		// available yet (retriable).
		for _, t := range req.Topics {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, s.code(err)
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	resp.ClusterID = kmsg.StringPtr(meta.ClusterID)
	resp.ControllerID = meta.ControllerID
	for _, e := range s.cfg.Endpoints(meta, s.cfg.Listener) {
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = e.Broker, e.Host, e.Port, rackOf(meta, e.Broker)
		resp.Brokers = append(resp.Brokers, b)
	}
	if req.Topics == nil {
		for _, v := range views {
			resp.Topics = append(resp.Topics, topicMetadata(v))
		}
		return resp, nil
	}
	for _, t := range req.Topics {
		if t.Topic == nil {
			rt := kmsg.NewMetadataResponseTopic()
			rt.TopicID, rt.ErrorCode = t.TopicID, s.code(errUnknownTopicID)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		_, views, err := s.cfg.Core.Metadata(principalOf(ctx), []string{*t.Topic})
		if errors.Is(err, transport.ErrUnknownTopic) && s.cfg.AutoCreate != nil && (req.AllowAutoTopicCreation || req.Version < 4) {
			err = s.autoCreate(ctx, *t.Topic)
		}
		if err != nil {
			rt := kmsg.NewMetadataResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, s.code(err)
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		resp.Topics = append(resp.Topics, topicMetadata(views[0]))
	}
	return resp, nil
}

// topicMetadata is a topic as Metadata describes it. Leader epochs are
// -1: without OffsetForLeaderEpoch clients must not use them to check
// for truncation (KIP-320).
func topicMetadata(v broker.TopicView) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = kmsg.StringPtr(v.Name)
	rt.TopicID = topicID(v.ID)
	rt.IsInternal = strings.HasPrefix(v.Name, metadata.InternalPrefix)
	for i, p := range v.Partitions {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition = int32(i)
		rp.Leader = p.Leader
		rp.LeaderEpoch = -1
		rp.Replicas = append([]int32(nil), p.Replicas...)
		rp.ISR = append([]int32(nil), p.Active...)
		for _, r := range p.Replicas {
			if !contains(p.Active, r) {
				rp.OfflineReplicas = append(rp.OfflineReplicas, r)
			}
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// topicID is a topic's id as Kafka's 16 bytes (ours is 32 hex digits).
func topicID(id string) [16]byte {
	var out [16]byte
	if b, err := hex.DecodeString(id); err == nil && len(b) == 16 {
		copy(out[:], b)
	}
	return out
}

func contains(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// MetadataEndpoints are the brokers' addresses on a Kafka listener, as the
// cluster's metadata has them (what each node advertised for it when it
// registered); a broker without that listener is left out.
func MetadataEndpoints(meta *metadata.Cluster, listener string) []Endpoint {
	var out []Endpoint
	for _, b := range meta.Brokers {
		addr, ok := b.KafkaEndpoint(listener)
		if !ok {
			continue
		}
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			continue
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			continue
		}
		out = append(out, Endpoint{Broker: b.ID, Host: host, Port: int32(p)})
	}
	return out
}

// autoCreateWait bounds the creation of a topic a Metadata request names.
const autoCreateWait = 10 * time.Second

// autoCreate creates topic with the AutoCreate settings. A topic created
// (or found created) is answered LEADER_NOT_AVAILABLE, as Kafka does:
// the client asks again, and finds its leaders once the metadata reached
// this node.
func (s *Server) autoCreate(ctx context.Context, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, autoCreateWait)
	defer cancel()
	partitions := s.cfg.AutoCreate.Partitions
	if partitions <= 0 {
		partitions = 1
	}
	if err := s.cfg.Core.AutoCreateTopic(ctx, principalOf(ctx), topic, partitions, s.cfg.AutoCreate.ReplicationFactor); err != nil {
		s.log.Debug("auto-creation failed", "topic", topic, "err", err)
		return err
	}
	s.log.Info("topic auto-created", "topic", topic, "partitions", partitions)
	return errLeaderNotAvailable
}

// errLeaderNotAvailable answers a topic just created.
var errLeaderNotAvailable = fmt.Errorf("%w: the topic was just created; ask again", transport.ErrNotReady)

// rackOf is broker id's rack as Kafka's Metadata and DescribeCluster
// carry it: nil when it names none.
func rackOf(meta *metadata.Cluster, id int32) *string {
	if b, ok := meta.Broker(id); ok && b.Rack != "" {
		return kmsg.StringPtr(b.Rack)
	}
	return nil
}

package kafkaapi

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"gostream/transport"
)

// Kafka's config resource types and sources.
const (
	resourceTopic  = 2
	resourceBroker = 4

	sourceTopic   = 1 // DYNAMIC_TOPIC_CONFIG
	sourceDefault = 5 // DEFAULT_CONFIG
)

// readOnlyConfigs are what gostream's topics are, said in Kafka's words,
// for clients that check them (Kafka Connect reads cleanup.policy): they
// cannot be changed.
var readOnlyConfigs = []struct{ name, value string }{
	{"cleanup.policy", "delete"},
	{"compression.type", "producer"},
	{"message.timestamp.type", "CreateTime"},
	{"min.insync.replicas", "1"},
}

// describeConfigs answers a topic's configs (the ones gostream has, with
// their values and whether the topic sets them, and the read-only ones
// above); a broker's configs are answered empty.
func (s *Server) describeConfigs(ctx context.Context, req *kmsg.DescribeConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		want := func(name string) bool { return r.ConfigNames == nil || slices.Contains(r.ConfigNames, name) }
		switch r.ResourceType {
		case resourceBroker:
		case resourceTopic:
			_, views, err := s.cfg.Core.Metadata(principalOf(ctx), []string{r.ResourceName})
			if err != nil {
				rr.ErrorCode, rr.ErrorMessage = s.code(err), kmsg.StringPtr(err.Error())
				break
			}
			for _, c := range views[0].Config {
				if !want(c.Key) {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name, rc.Value = c.Key, kmsg.StringPtr(strconv.FormatInt(c.Value, 10))
				rc.IsDefault, rc.Source = c.Default, sourceTopic
				if c.Default {
					rc.Source = sourceDefault
				}
				rc.ConfigType = kmsg.ConfigTypeLong
				rr.Configs = append(rr.Configs, rc)
			}
			for _, c := range readOnlyConfigs {
				if !want(c.name) {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name, rc.Value, rc.ReadOnly, rc.IsDefault, rc.Source = c.name, kmsg.StringPtr(c.value), true, true, sourceDefault
				rr.Configs = append(rr.Configs, rc)
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("config resource type %d: gostream has topic configs only", r.ResourceType))
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// incrementalAlterConfigs sets and deletes topic configs through the core,
// which forwards them to the active controller from any node (Kafka
// clients send them to any broker). APPEND and SUBTRACT (for list configs,
// which gostream has none of), ValidateOnly and other resource types are
// refused.
func (s *Server) incrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, r := range req.Resources {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		fail := func(code int16, msg string) { rr.ErrorCode, rr.ErrorMessage = code, kmsg.StringPtr(msg) }
		ar := &transport.AlterTopicConfigRequest{Name: r.ResourceName}
		bad := ""
		for _, c := range r.Configs {
			switch c.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				if c.Value == nil {
					bad = fmt.Sprintf("config %s: SET without a value", c.Name)
					break
				}
				v, err := strconv.ParseInt(*c.Value, 10, 64)
				if err != nil {
					bad = fmt.Sprintf("config %s=%q: gostream's topic configs are numbers", c.Name, *c.Value)
					break
				}
				ar.Set = append(ar.Set, transport.ConfigEntry{Key: c.Name, Value: v})
			case kmsg.IncrementalAlterConfigOpDelete:
				ar.Delete = append(ar.Delete, c.Name)
			default:
				bad = fmt.Sprintf("config %s: operation %d; gostream has no list configs to append to or subtract from", c.Name, c.Op)
			}
			if bad != "" {
				break
			}
		}
		switch {
		case r.ResourceType != resourceTopic:
			fail(kerr.InvalidRequest.Code, fmt.Sprintf("config resource type %d: gostream has topic configs only", r.ResourceType))
		case req.ValidateOnly:
			fail(kerr.InvalidRequest.Code, "validate-only config changes are not supported")
		case bad != "":
			fail(kerr.InvalidConfig.Code, bad)
		default:
			if err := s.cfg.Core.ChangeTopicConfig(ctx, principalOf(ctx), ar); err != nil {
				fail(s.code(err), err.Error())
			}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp, nil
}

// describeCluster answers the cluster's id, its controller, and the
// brokers at their endpoints on this listener.
func (s *Server) describeCluster(ctx context.Context, req *kmsg.DescribeClusterRequest) (kmsg.Response, error) {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	meta, _, err := s.cfg.Core.Metadata(principalOf(ctx), nil)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.code(err), kmsg.StringPtr(err.Error())
		return resp, nil
	}
	resp.ClusterID, resp.ControllerID = meta.ClusterID, meta.ControllerID
	for _, e := range s.cfg.Endpoints(meta, s.cfg.Listener) {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port, b.Rack = e.Broker, e.Host, e.Port, rackOf(meta, e.Broker)
		resp.Brokers = append(resp.Brokers, b)
	}
	return resp, nil
}

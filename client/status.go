package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"gostream/metadata"
	"gostream/transport"
)

// Cluster health as typed reports: what every broker answers, judged the
// way `gostream-ctl cluster status` and `broker list` show it. The
// computation is here so that any Go program (the CLI, the chaos harness,
// an operator's own tooling) gets the same verdict and the same advice.

// maxProbeTimeout bounds each request of a survey to one broker (and
// Config.RequestTimeout bounds it further): a broker that has not answered
// by then is reported as not answering.
const maxProbeTimeout = 2 * time.Second

// maxConcurrentProbes bounds the requests a survey or a verification has in
// flight at once.
const maxConcurrentProbes = 16

// maxStatusBytes bounds the status document read from one node.
const maxStatusBytes = 64 << 20

// BrokersReport is every broker as the survey found it: the registered
// ones, then the gossip members that are not registered.
type BrokersReport struct {
	ClusterID string
	// Controller is the controller's broker id; ControllerAnswers whether
	// it answered the survey.
	Controller        int32
	ControllerAnswers bool
	// ControllerRefusal, from the controller, says why it refuses every
	// change (its metadata is missing or older than a broker's); empty when
	// it accepts them.
	ControllerRefusal string
	// MetadataEpoch is the epoch of the metadata the report was judged
	// from: the controller's when it answered, else the newest a broker
	// holds. MetadataFrom is the broker it came from, -1 for the metadata
	// the client bootstrapped with.
	MetadataEpoch int64
	MetadataFrom  int32
	// GossipFrom says whose view the brokers' Gossip states are.
	GossipFrom GossipSource
	// Autopilot is the autopilot that holds the lease to act, as the
	// metadata of the report names it; nil when none does, or when no
	// broker's metadata was read (only the client's own).
	Autopilot *metadata.AutopilotLease
	// Brokers, by id.
	Brokers []BrokerReport
}

// Broker returns the report on broker id, if there is one.
func (r BrokersReport) Broker(id int32) (BrokerReport, bool) {
	for _, b := range r.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return BrokerReport{}, false
}

// GossipSource says whose gossip view decided the brokers' gossip states:
// the controller's when it answered, else the majority of the answering
// brokers (Voters of them).
type GossipSource struct {
	Controller   bool
	ControllerID int32
	Voters       int
}

// String says it for people: "the controller, broker 1", or "the majority
// of the 2 answering brokers (the controller, broker 1, does not answer)".
func (g GossipSource) String() string {
	if g.Controller {
		return fmt.Sprintf("the controller, broker %d", g.ControllerID)
	}
	return fmt.Sprintf("the majority of the %d answering brokers (the controller, broker %d, does not answer)", g.Voters, g.ControllerID)
}

// BrokerReport is one broker as the survey found it.
type BrokerReport struct {
	ID int32
	// Address is the broker's RPC address, HTTP its HTTP surface; both
	// empty for a member that is only in gossip.
	Address string
	HTTP    string
	// Rack is the broker's rack (--rack), empty when it names none or
	// is only in gossip.
	Rack string
	// Listeners are the broker's named listeners of the native protocol
	// and Kafka its Kafka listeners, NAME://HOST:PORT,... as clients dial
	// them (metadata.Broker); empty when it has none, when it is only in
	// gossip, or when no broker's metadata was read.
	Listeners string
	Kafka     string
	// Registered is whether the broker is in the cluster's metadata, as
	// opposed to a gossip member only.
	Registered bool
	// Answers is whether the broker answered the survey as itself; Err says
	// why not. A member that is only in gossip is not asked.
	Answers bool
	Err     error
	// Gossip is the broker's gossip state as GossipFrom judged it;
	// GossipDisputed is set when the controller did not answer and no
	// majority of the answering brokers agreed (Gossip is then unknown).
	Gossip         transport.GossipState
	GossipDisputed bool
	// MetadataEpoch is the metadata epoch the broker holds, -1 when it did
	// not answer or holds none.
	MetadataEpoch int64
	// View is the broker's own gossip view, by broker id: the member it
	// counts as each broker (the one with the registered storage root when
	// several claim an id). Nil when it did not answer.
	View map[int32]Member
	// Impostors are the other members of its view that claim a broker id
	// another member has: processes started with a used --id.
	Impostors []Member
	// Status is the broker's own status document (GET /api/status); nil
	// when it was not asked (DescribeBrokers), or it failed (StatusErr).
	Status    *transport.NodeStatus
	StatusErr error
}

// ClusterReport is the cluster's health: every broker, every partition,
// and the warnings an operator should act on, each with its advice.
type ClusterReport struct {
	BrokersReport
	// Partitions, by topic and then partition.
	Partitions []PartitionReport
	// Counts are the partitions in all, under-replicated and offline.
	Counts PartitionCounts
	// Group is the controller group, nil for a single controller (or
	// when no candidate said).
	Group *ControllerGroupReport
	// Warnings, in the order an operator should read them: the controller
	// group and the brokers first, then partitions, then replicas outside
	// their active sets.
	Warnings []Warning
}

// PartitionCounts counts the partitions of a report.
type PartitionCounts struct {
	Total           int
	UnderReplicated int
	Offline         int
}

// PartitionReport is one partition's health.
type PartitionReport struct {
	Topic       string
	Partition   int32
	Leader      int32 // -1 when none
	LeaderEpoch int32
	Replicas    []int32
	Active      []int32
	// Inactive are the replicas outside the active set: writes do not wait
	// for them, and recovery brings them back.
	Inactive []int32
	// Offline is set when the partition has no leader that can serve:
	// none, not registered, not answering, gone by gossip, or its replica
	// cannot lead. OfflineReason says which.
	Offline       bool
	OfflineReason string
	// UnderReplicated is set when a replica is inactive or an active
	// follower is not in sync (offline, lagging or diverged).
	UnderReplicated bool
	// OffPreferred is set when an online partition is led by another
	// replica than its preferred one (the first), which is active and
	// answers: elect-leaders moves it back.
	OffPreferred bool
	// Followers are the active followers, by broker id, with how each
	// stands; empty when the partition is offline, since nobody can say.
	Followers []FollowerReport
}

// FollowerReport is one active follower of a partition.
type FollowerReport struct {
	Broker int32
	// State is the leader's word (in sync, lagging, diverged) when it gave
	// it, else judged by comparing the log ends: in sync when equal,
	// lagging behind, diverged ahead, unknown when either did not answer.
	// Offline when the follower does not answer or gossip says it is gone.
	State transport.FollowerState
	// Lag is the leader's log end minus the follower's, asked of both
	// after the survey for a follower not confirmed in sync; nil when not
	// measured or when either did not answer (LagError says why).
	Lag      *int64
	LagError string
	// LeaderError is the leader's last error replicating to the follower.
	LeaderError string
	// Unusable is its own node's word on why its replica cannot serve
	// (damaged, a full disk), whatever the leader says; empty when none.
	Unusable string
}

// NoCommandReason says why a Warning gives no command to run now.
type NoCommandReason string

// Reasons for a Warning without a command.
const (
	// NoCommandManual: the fix is no gostream-ctl command (a process, a
	// flag, the network); Advice says what.
	NoCommandManual NoCommandReason = "manual"
	// NoCommandBrokerDown: a broker must be started (or replaced) first;
	// Pending is the command to run then.
	NoCommandBrokerDown NoCommandReason = "broker-down"
	// NoCommandControllerDown: the fix is an admin command, which the
	// controller carries out, and it does not answer; Pending is the
	// command to run once it is back.
	NoCommandControllerDown NoCommandReason = "controller-down"
	// NoCommandCovered: an earlier warning's command, Pending, fixes this
	// one too; it is given once.
	NoCommandCovered NoCommandReason = "covered"
	// NoCommandResumes: a full disk; once space is freed, the replica
	// goes on by itself.
	NoCommandResumes NoCommandReason = "resumes"
)

// Warning is one problem an operator should act on, and the advice: the
// command that fixes it, or none and why.
type Warning struct {
	// Problem says what is wrong; Advice, what to do about it, in words
	// (empty when the command says it all).
	Problem string
	Advice  string
	// Command is the gostream-ctl command line that fixes the problem,
	// meant to be run as it is, now; it works when it is. Empty when there
	// is none: then NoCommand says why, and Pending is the command to run
	// once that no longer holds, if there is one.
	Command   string
	NoCommand NoCommandReason
	Pending   string
	// Message is the whole warning for people: the problem, the advice,
	// and why there is no command to run now.
	Message string
}

// NodeStatus asks the node whose HTTP surface is at addr (HOST:PORT) for
// its status document, GET /api/status. It is one request, not retried,
// bounded by ctx.
func (c *Client) NodeStatus(ctx context.Context, addr string) (transport.NodeStatus, error) {
	url := c.HTTPURL(addr, transport.StatusPath)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return transport.NodeStatus{}, fmt.Errorf("GET %s: %w", url, err)
	}
	resp, err := c.HTTPDo(req)
	if err != nil {
		return transport.NodeStatus{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return transport.NodeStatus{}, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var st transport.NodeStatus
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxStatusBytes)).Decode(&st); err != nil {
		return transport.NodeStatus{}, fmt.Errorf("GET %s: %w", url, err)
	}
	return st, nil
}

// DescribeBrokers asks every broker in the metadata, in parallel and each
// under a short deadline (2s, or Config.RequestTimeout when shorter), for
// its view of the cluster (DescribeCluster), and reports every broker:
// whether it answers, its gossip state as the controller sees it (or as
// the majority of the answering brokers do when the controller does not
// answer), the metadata epoch it holds. A broker's metadata may name
// brokers the bootstrap answer did not: those are asked too, once. It
// fails, with an error matching transport.ErrBrokerNotAvailable, only when
// no broker answers.
func (c *Client) DescribeBrokers(ctx context.Context) (BrokersReport, error) {
	s, err := c.survey(ctx, false)
	if err != nil {
		return BrokersReport{}, err
	}
	return s.brokersReport(), nil
}

// ClusterStatus surveys the cluster as DescribeBrokers does, asking every
// broker for its status document too, and judges it. Brokers come first:
// one that does not answer, or that gossip says is gone, gets a warning.
// Then every partition:
//
//   - offline: it has no leader, or its leader is not registered, does not
//     answer, is dead or gone by gossip, or says its replica cannot lead;
//   - under-replicated: a replica is outside the active set, or an active
//     follower is not in sync: it does not answer or is gone by gossip,
//     or its leader reports it lagging or diverged (from the leader's
//     status; when that is not available, by comparing the replicas' log
//     ends).
//
// A follower not confirmed in sync is measured after the survey: its log
// end, then its leader's, asked with ReplicaState (observing only; it
// never fences). Each warning carries its advice (Warning). Every command
// is given once, by the first warning it fixes; while the controller does
// not answer, no command is given to run now, since every fix is an admin
// command. It fails as DescribeBrokers does.
func (c *Client) ClusterStatus(ctx context.Context) (ClusterReport, error) {
	s, err := c.survey(ctx, true)
	if err != nil {
		return ClusterReport{}, err
	}
	return s.judge(ctx, c.NewProber(0)), nil
}

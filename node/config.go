package node

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"gostream/controller"
	"gostream/groups"
	"gostream/listeners"
	"gostream/metadata"
	"gostream/storage"
	"gostream/transport"
)

// The addresses a node uses when its Config leaves them empty. They are the
// ones of node 1 in docs/cli.md, so that gostream-ctl with no flags reaches a
// node started with no flags.
const (
	// DefaultListen is the RPC address.
	DefaultListen = "127.0.0.1:9400"
	// DefaultGossip is the memberlist address.
	DefaultGossip = "127.0.0.1:9401"
	// DefaultHTTP is the address of the HTTP surface.
	DefaultHTTP = "127.0.0.1:9402"
)

// The node's defaults for the topic configuration (Config.RetentionBytes
// and the rest): keep records for seven days, of any size, in segments of
// 128 MiB that roll at least weekly. Segments stay at 128 MiB rather than
// Kafka's 1 GiB because a node scans its newest segment whole when it
// starts, and retention deletes whole segments.
const (
	DefaultRetentionBytes = -1
	DefaultRetentionMs    = 7 * 24 * 60 * 60 * 1000
	DefaultSegmentBytes   = storage.DefaultSegmentBytes
	DefaultSegmentMs      = 7 * 24 * 60 * 60 * 1000
)

// The partitions of __consumer_offsets (Config.OffsetsPartitions): 16 by
// default, as many groups as a cluster of this size serves spread over
// its brokers; at most 1,000.
const (
	DefaultOffsetsPartitions = 16
	MaxOffsetsPartitions     = 1000
)

// ErrInvalidConfig is matched by every error that Config.Validate and
// ParseControllers return; the concrete error is a *FieldError.
var ErrInvalidConfig = errors.New("node: invalid config")

// FieldError reports one invalid Config field. Field is the Go name of the
// field ("DataDir", "Controllers"), Value the offending value as text, and
// Reason says what a valid value looks like, for example "want HOST:PORT".
type FieldError struct {
	// Field is the Go name of the Config field.
	Field string
	// Value is the offending value, as text.
	Value string
	// Reason says what a valid value looks like.
	Reason string
}

// Error returns a one-line description naming the field.
func (e *FieldError) Error() string {
	return fmt.Sprintf("node: config %s %q: %s", e.Field, e.Value, e.Reason)
}

// Unwrap returns ErrInvalidConfig.
func (e *FieldError) Unwrap() error { return ErrInvalidConfig }

// ControllerAddr names a controller (today the one controller, later one
// candidate among several): the broker id of the node that runs it and that
// node's RPC address.
type ControllerAddr struct {
	// ID is the broker id of the node that runs the controller.
	ID int32
	// Addr is that node's RPC address, HOST:PORT.
	Addr string
}

// String returns the address in the form ParseControllers reads, ID@HOST:PORT.
func (c ControllerAddr) String() string {
	return strconv.FormatInt(int64(c.ID), 10) + "@" + c.Addr
}

// ParseControllers reads a comma-separated list of ID@HOST:PORT entries, the
// syntax of the --controller flag. Spaces around entries are ignored. An
// empty string gives an empty list. Any malformed entry, and an id listed
// twice, gives a *FieldError (matching ErrInvalidConfig) whose Value is the
// entry at fault.
func ParseControllers(s string) ([]ControllerAddr, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []ControllerAddr
	for _, entry := range strings.Split(s, ",") {
		c, err := parseControllerAddr(strings.TrimSpace(entry))
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := checkControllers(out); err != nil {
		return nil, err
	}
	return out, nil
}

func parseControllerAddr(s string) (ControllerAddr, error) {
	bad := func(reason string) (ControllerAddr, error) {
		return ControllerAddr{}, &FieldError{Field: "Controllers", Value: s, Reason: reason}
	}
	idText, addr, ok := strings.Cut(s, "@")
	if !ok {
		return bad("want ID@HOST:PORT")
	}
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil || id <= 0 {
		return bad("want ID@HOST:PORT with ID a positive integer")
	}
	if reason := listeners.CheckHostPort(addr); reason != "" {
		return bad(controllerReason(reason))
	}
	return ControllerAddr{ID: int32(id), Addr: addr}, nil
}

func checkControllers(cs []ControllerAddr) error {
	seen := make(map[int32]bool, len(cs))
	for _, c := range cs {
		if c.ID <= 0 {
			return &FieldError{Field: "Controllers", Value: c.String(), Reason: "want ID@HOST:PORT with ID a positive integer"}
		}
		if reason := listeners.CheckHostPort(c.Addr); reason != "" {
			return &FieldError{Field: "Controllers", Value: c.String(), Reason: controllerReason(reason)}
		}
		if seen[c.ID] {
			return &FieldError{Field: "Controllers", Value: c.String(), Reason: "controller id listed twice"}
		}
		seen[c.ID] = true
	}
	return nil
}

// controllerReason turns a reason of checkHostPort into one about an
// ID@HOST:PORT entry.
func controllerReason(hostPortReason string) string {
	return strings.Replace(hostPortReason, "want HOST:PORT", "want ID@HOST:PORT", 1)
}

// AutoCreateConfig is how Kafka clients create topics by asking for their
// metadata (docs/kafka.md, "Topic auto-creation").
type AutoCreateConfig struct {
	Enabled bool
	// Partitions of an auto-created topic; zero means one.
	Partitions int
	// ReplicationFactor of an auto-created topic, capped at the brokers;
	// zero means min(3, brokers).
	ReplicationFactor int
}

// Config is everything one node needs to run. The command line (cmd/node)
// builds it from flags; tests build it directly.
type Config struct {
	// ID is this node's broker id, a positive integer. Required.
	ID int32
	// DataDir is the storage root this node alone owns. Required.
	DataDir string
	// Listen is the RPC address to bind (clients and peers). Empty means
	// DefaultListen. Named listeners, NAME://HOST:PORT,..., give the
	// native protocol several (docs/cluster.md, "Listeners"): the first
	// is the one the nodes use among themselves, and each is advertised
	// as Advertise names it.
	Listen string
	// Advertise is the RPC address given to others. Empty means Listen.
	// With named listeners: NAME://HOST:PORT,... (package listeners).
	Advertise string
	// KafkaListen are the Kafka protocol's listeners, NAME://HOST:PORT,...
	// (a bare HOST:PORT is the listener named default); empty: none.
	// KafkaAdvertise are the addresses clients dial for each, by name
	// (docs/kafka.md, "Listeners"; package listeners).
	KafkaListen    string
	KafkaAdvertise string
	// AutoCreate configures Kafka's topic auto-creation (--auto-create-topics):
	// off unless Enabled.
	AutoCreate AutoCreateConfig
	// Gossip is the memberlist address (TCP and UDP). Empty means
	// DefaultGossip.
	Gossip string
	// Join lists gossip seeds, HOST:PORT each. Empty means none.
	Join []string
	// DialSource is the IP address this node's connections to its peers
	// (RPC and gossip streams) come from. Empty lets the operating system
	// choose, which is right for almost every deployment; it is for hosts
	// with several addresses where the peers or the firewall tell nodes
	// apart by source address (the chaos harness gives node k 127.0.0.k).
	DialSource string
	// HTTP is the address of the HTTP surface (health, metrics and
	// status). Empty means DefaultHTTP.
	HTTP string
	// Version is the release of the binary, shown by the web console.
	Version string
	// UIDisabled turns the web console off (--ui=false): /ui/ answers
	// 404 (docs/console.md). The zero value serves it.
	UIDisabled bool
	// UISeriesInterval is how often the console samples this node's
	// counters for its charts (docs/console.md, "Charts"). Zero means
	// 10 s.
	UISeriesInterval time.Duration
	// Rack is the node's failure domain (a rack, a room, a zone), carried
	// in its registration: new topics place a partition's replicas in
	// distinct racks first (docs/cluster.md, "Placement"). Empty: none.
	Rack string
	// Controllers names the controller: one, or the candidates of a
	// replicated controller (docs/controller-raft.md), whose Raft leader is
	// the active controller. Empty means this node, at its Advertise
	// address: a cluster of one.
	Controllers []ControllerAddr
	// Logger is the root logger of the process; nil discards logs.
	Logger hclog.Logger
	// MaxBatchBytes is the batch limit: the largest batch a partition's
	// log takes (it sets Log.MaxBatchBytes) and, plus
	// transport.FrameAllowance, the largest RPC frame. Zero means
	// storage.DefaultMaxBatchBytes; at most
	// transport.MaxBatchBytesCeiling. Every node of a cluster should have
	// the same: a follower refuses a batch over its own limit.
	MaxBatchBytes int
	// RequestMemory bounds the memory of the requests and responses of all
	// RPC connections (see transport.ServerConfig); past it requests are
	// refused with Busy. Zero means transport.DefaultMemoryBytes, or
	// ConnRequestMemory if that is more.
	RequestMemory int64
	// ConnRequestMemory bounds the request memory of one RPC connection;
	// past it the node stops reading that connection. Zero means two
	// frames; at least one frame.
	ConnRequestMemory int64
	// MaxConns bounds the open connections of each listener (RPC, HTTP)
	// in all, MaxConnsPerAddr those from one IP address. Zero means
	// transport.DefaultMaxConns and transport.DefaultMaxConnsPerAddr.
	MaxConns        int
	MaxConnsPerAddr int
	// IdleTimeout closes an RPC connection or an HTTP keep-alive
	// connection that carried nothing for this long. Zero means
	// transport.DefaultIdleTimeout. Keep it above the clients' pool idle
	// timeout (transport.DefaultClientIdleTimeout).
	IdleTimeout time.Duration
	// Log configures every partition replica's log. Its MaxBatchBytes is
	// MaxBatchBytes; its segment and retention fields are replaced by
	// each topic's configuration (the topic's own keys over the defaults
	// below).
	Log storage.Options
	// RetentionBytes, RetentionMs, SegmentBytes and SegmentMs are the
	// node's defaults for the topic configuration keys of the same names
	// (retention.bytes, ...: see metadata.CheckConfig for what each
	// takes), used for every topic that does not set its own. Zero means
	// DefaultRetentionBytes, DefaultRetentionMs, DefaultSegmentBytes and
	// DefaultSegmentMs. Every node of a cluster should have the same: each
	// replica applies its own node's defaults.
	RetentionBytes int64
	RetentionMs    int64
	SegmentBytes   int64
	SegmentMs      int64
	// RetentionInterval is how often retention runs. Zero means a minute.
	RetentionInterval time.Duration
	// OffsetsPartitions is the partition count the controller gives
	// __consumer_offsets when it creates it, at the first use of a group;
	// fixed from then on. Zero means DefaultOffsetsPartitions.
	OffsetsPartitions int
	// GroupInitialDelay is how long a Kafka-protocol group's first join
	// phase waits for more members (docs/kafka-groups.md); zero means
	// groups.DefaultInitialRebalanceDelay, negative none.
	GroupInitialDelay time.Duration
	// GroupMaxMemberBytes bounds a Kafka-protocol group member's protocol
	// metadata, and its assignment; zero means
	// groups.DefaultMaxMemberBytes, at most groups.MaxClassicMemberBytes.
	GroupMaxMemberBytes int
	// GroupConsumerSession is the session timeout of the members of
	// Kafka's new group protocol (ConsumerGroupHeartbeat), which the
	// server sets; zero means groups.DefaultConsumerSession.
	GroupConsumerSession time.Duration
	// GroupSnapshotEvery is how many records a group coordinator appends
	// between two snapshots of its state (groups.CoordinatorConfig's
	// SnapshotEvery). Zero means groups.DefaultSnapshotEvery; it is not a
	// flag, and tests set it low.
	GroupSnapshotEvery int
	// DS configures the Durable Streams protocol the HTTP address serves
	// (docs/durable-streams.md); zero fields take the defaults documented
	// on DSConfig.
	DS DSConfig
	// HWCheckpointInterval is how often the replicas' high watermarks are
	// checkpointed (when they moved). Zero means a second: a restarted
	// leader serves at once every record acknowledged up to about this
	// long before it stopped.
	HWCheckpointInterval time.Duration
	// Security configures TLS, gossip encryption, authentication and
	// authorization (docs/security.md); the zero value is none of them.
	Security SecurityConfig

	// rpcNamed are the named RPC listeners withDefaults read (none for
	// one bare HOST:PORT).
	rpcNamed []listeners.Listener
}

// DSConfig is the configuration of a node's Durable Streams.
type DSConfig struct {
	// ReplicationFactor of new streams; zero means min(3, brokers).
	ReplicationFactor int
	// MaxBody is the largest request body (413 above); zero means the
	// batch limit less 64 KiB. At most the batch limit less 4 KiB: an
	// append is one batch.
	MaxBody int
	// ReadChunk bounds the data of one GET response; zero means 1 MiB.
	ReadChunk int
	// LongPoll is how long a live read waits for data; zero means 20 s.
	LongPoll time.Duration
	// SSEReconnect is how long an SSE connection lives; zero means 60 s.
	SSEReconnect time.Duration
	// MaxLiveReaders bounds the long-polls and SSE connections open at
	// once; zero means 1000.
	MaxLiveReaders int
	// ForwardTimeout bounds a request forwarded to a stream's leader,
	// besides its long-poll wait; zero means 10 s.
	ForwardTimeout time.Duration
}

// Defaults of DSConfig.
const (
	DefaultDSReadChunk      = 1 << 20
	DefaultDSLongPoll       = 20 * time.Second
	DefaultDSSSEReconnect   = 60 * time.Second
	DefaultDSMaxLiveReaders = 1000
	DefaultDSForwardTimeout = 10 * time.Second
	// dsBatchSlack is what an append's batch needs besides its body.
	dsBatchSlack = 4 << 10
)

// Validate reports the first invalid field as a *FieldError, which matches
// ErrInvalidConfig, or nil. Empty optional fields are valid: they stand for
// the defaults documented on each field.
func (c Config) Validate() error {
	if c.ID <= 0 {
		return &FieldError{Field: "ID", Value: strconv.FormatInt(int64(c.ID), 10), Reason: "want a positive integer"}
	}
	if strings.TrimSpace(c.DataDir) == "" {
		return &FieldError{Field: "DataDir", Value: c.DataDir, Reason: "want a directory path"}
	}
	if namedListeners(c) {
		if _, err := parseRPCListeners(c); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, value string }{
		{"Listen", c.Listen},
		{"Advertise", c.Advertise},
		{"Gossip", c.Gossip},
		{"HTTP", c.HTTP},
	} {
		if f.value == "" || (f.name == "Listen" || f.name == "Advertise") && namedListeners(c) {
			continue
		}
		if reason := listeners.CheckHostPort(f.value); reason != "" {
			return &FieldError{Field: f.name, Value: f.value, Reason: reason}
		}
	}
	if _, err := parseKafkaListeners(c); err != nil {
		return err
	}
	if c.DialSource != "" {
		if ip := net.ParseIP(c.DialSource); ip == nil || ip.IsUnspecified() {
			return &FieldError{Field: "DialSource", Value: c.DialSource, Reason: "want one IP address of this host"}
		}
	}
	for _, seed := range c.Join {
		if reason := listeners.CheckHostPort(seed); reason != "" {
			return &FieldError{Field: "Join", Value: seed, Reason: reason}
		}
	}
	if c.Rack != "" {
		if err := metadata.ValidateRack(c.Rack); err != nil {
			return &FieldError{Field: "Rack", Value: c.Rack, Reason: fmt.Sprintf("want 1 to %d letters, digits and . _ - : /", metadata.MaxRackLen)}
		}
	}
	if err := c.validateLimits(); err != nil {
		return err
	}
	if err := checkControllers(c.Controllers); err != nil {
		return err
	}
	return securityFieldError(c.Security.Validate())
}

// checkControllerAddr refuses a node that --controller names as a
// controller candidate but that advertises another address: it would run
// a second controller for the cluster (or a Raft member nobody reaches),
// while every other node follows the one at the named address. It runs on
// a config with its defaults filled in.
func (c Config) checkControllerAddr() error {
	ctrl, ok := c.selfCandidate()
	if !ok || controller.SameAddr(ctrl.Addr, c.Advertise) {
		return nil
	}
	return &FieldError{Field: "Controllers", Value: ctrl.String(), Reason: fmt.Sprintf(
		"names broker %d, this node, as a controller candidate at %s, but this node advertises %s: a second controller for one cluster is refused. "+
			"If this node is the candidate, advertise %s (--advertise); if another node is, give this one its own --id", ctrl.ID, ctrl.Addr, c.Advertise, ctrl.Addr)}
}

// selfCandidate is this node's entry in the --controller list, if it is
// one of the candidates.
func (c Config) selfCandidate() (ControllerAddr, bool) {
	for _, ctrl := range c.Controllers {
		if ctrl.ID == c.ID {
			return ctrl, true
		}
	}
	return ControllerAddr{}, false
}

// minMaxBatchBytes is the smallest batch limit: a few small records.
const minMaxBatchBytes = 1 << 10

// validateLimits checks the limits that are set; zero ones take defaults.
func (c Config) validateLimits() error {
	itoa := func(n int64) string { return strconv.FormatInt(n, 10) }
	if c.MaxBatchBytes != 0 && (c.MaxBatchBytes < minMaxBatchBytes || c.MaxBatchBytes > transport.MaxBatchBytesCeiling) {
		return &FieldError{Field: "MaxBatchBytes", Value: itoa(int64(c.MaxBatchBytes)),
			Reason: fmt.Sprintf("want a number of bytes from %d to %d", minMaxBatchBytes, transport.MaxBatchBytesCeiling)}
	}
	d := c.withDefaults()
	frame := int64(transport.FrameLimit(d.MaxBatchBytes))
	switch {
	case c.ConnRequestMemory < 0 || c.ConnRequestMemory > 0 && c.ConnRequestMemory < frame:
		return &FieldError{Field: "ConnRequestMemory", Value: itoa(c.ConnRequestMemory),
			Reason: fmt.Sprintf("want at least one frame, %d bytes (the batch limit plus %d)", frame, transport.FrameAllowance)}
	case c.RequestMemory < 0 || c.RequestMemory > 0 && c.RequestMemory < d.ConnRequestMemory:
		return &FieldError{Field: "RequestMemory", Value: itoa(c.RequestMemory),
			Reason: fmt.Sprintf("want at least the request memory of one connection, %d bytes", d.ConnRequestMemory)}
	case c.MaxConns < 0:
		return &FieldError{Field: "MaxConns", Value: itoa(int64(c.MaxConns)), Reason: "want a positive number of connections"}
	case c.MaxConnsPerAddr < 0 || c.MaxConnsPerAddr > d.MaxConns:
		return &FieldError{Field: "MaxConnsPerAddr", Value: itoa(int64(c.MaxConnsPerAddr)),
			Reason: fmt.Sprintf("want a positive number of connections, at most the total limit of %d", d.MaxConns)}
	case c.IdleTimeout < 0:
		return &FieldError{Field: "IdleTimeout", Value: c.IdleTimeout.String(), Reason: "want a positive duration"}
	case c.RetentionInterval < 0:
		return &FieldError{Field: "RetentionInterval", Value: c.RetentionInterval.String(), Reason: "want a positive duration"}
	case c.UISeriesInterval < 0:
		return &FieldError{Field: "UISeriesInterval", Value: c.UISeriesInterval.String(), Reason: "want a positive duration"}
	case c.AutoCreate.Partitions < 0 || c.AutoCreate.Partitions > metadata.MaxPartitions:
		return &FieldError{Field: "AutoCreate.Partitions", Value: itoa(int64(c.AutoCreate.Partitions)), Reason: fmt.Sprintf("want a number of partitions from 1 to %d", metadata.MaxPartitions)}
	case c.AutoCreate.ReplicationFactor < 0 || c.AutoCreate.ReplicationFactor > math.MaxInt16:
		return &FieldError{Field: "AutoCreate.ReplicationFactor", Value: itoa(int64(c.AutoCreate.ReplicationFactor)), Reason: "want a positive replication factor"}
	case c.GroupConsumerSession != 0 && (c.GroupConsumerSession < groups.MinSessionTimeout || c.GroupConsumerSession > groups.MaxSessionTimeout):
		return &FieldError{Field: "GroupConsumerSession", Value: c.GroupConsumerSession.String(), Reason: fmt.Sprintf("want a duration from %v to %v", groups.MinSessionTimeout, groups.MaxSessionTimeout)}
	case c.GroupMaxMemberBytes < 0 || c.GroupMaxMemberBytes > groups.MaxClassicMemberBytes:
		return &FieldError{Field: "GroupMaxMemberBytes", Value: itoa(int64(c.GroupMaxMemberBytes)), Reason: fmt.Sprintf("want a number of bytes from 1 to %d (1MiB)", groups.MaxClassicMemberBytes)}
	case c.OffsetsPartitions < 0 || c.OffsetsPartitions > MaxOffsetsPartitions:
		return &FieldError{Field: "OffsetsPartitions", Value: itoa(int64(c.OffsetsPartitions)), Reason: fmt.Sprintf("want a number of partitions from 1 to %d", MaxOffsetsPartitions)}
	case c.DS.ReplicationFactor < 0:
		return &FieldError{Field: "DS.ReplicationFactor", Value: itoa(int64(c.DS.ReplicationFactor)), Reason: "want a positive replication factor"}
	case c.DS.MaxBody < 0 || c.DS.MaxBody > d.MaxBatchBytes-dsBatchSlack:
		return &FieldError{Field: "DS.MaxBody", Value: itoa(int64(c.DS.MaxBody)),
			Reason: fmt.Sprintf("want a positive number of bytes, at most the batch limit less 4 KiB (%d)", d.MaxBatchBytes-dsBatchSlack)}
	case c.DS.ReadChunk < 0:
		return &FieldError{Field: "DS.ReadChunk", Value: itoa(int64(c.DS.ReadChunk)), Reason: "want a positive number of bytes"}
	case c.DS.LongPoll < 0:
		return &FieldError{Field: "DS.LongPoll", Value: c.DS.LongPoll.String(), Reason: "want a positive duration"}
	case c.DS.SSEReconnect < 0:
		return &FieldError{Field: "DS.SSEReconnect", Value: c.DS.SSEReconnect.String(), Reason: "want a positive duration"}
	case c.DS.ForwardTimeout < 0:
		return &FieldError{Field: "DS.ForwardTimeout", Value: c.DS.ForwardTimeout.String(), Reason: "want a positive duration"}
	case c.DS.MaxLiveReaders < 0:
		return &FieldError{Field: "DS.MaxLiveReaders", Value: itoa(int64(c.DS.MaxLiveReaders)), Reason: "want a positive number of readers"}
	}
	for _, f := range []struct {
		field, key string
		value      int64
	}{
		{"RetentionBytes", metadata.ConfigRetentionBytes, c.RetentionBytes},
		{"RetentionMs", metadata.ConfigRetentionMs, c.RetentionMs},
		{"SegmentBytes", metadata.ConfigSegmentBytes, c.SegmentBytes},
		{"SegmentMs", metadata.ConfigSegmentMs, c.SegmentMs},
	} {
		if f.value != 0 && metadata.CheckConfig(f.key, f.value) != nil {
			return &FieldError{Field: f.field, Value: itoa(f.value), Reason: metadata.ConfigWant(f.key)}
		}
	}
	return nil
}

// topicDefaults is the node's default topic configuration, on a config
// with its defaults filled in.
func (c Config) topicDefaults() metadata.LogConfig {
	return metadata.LogConfig{RetentionBytes: c.RetentionBytes, RetentionMs: c.RetentionMs, SegmentBytes: c.SegmentBytes, SegmentMs: c.SegmentMs}
}

// withDefaults returns c with its empty optional fields filled in. With
// named RPC listeners, Listen and Advertise become the first one's
// addresses, and the others go to rpcExtra.
func (c Config) withDefaults() Config {
	if namedListeners(c) {
		ls, _ := parseRPCListeners(c) // validated
		c.Listen, c.Advertise, c.rpcNamed = ls[0].Listen, ls[0].Advertise, ls
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Advertise == "" {
		c.Advertise = c.Listen
	}
	if c.Gossip == "" {
		c.Gossip = DefaultGossip
	}
	if c.HTTP == "" {
		c.HTTP = DefaultHTTP
	}
	if len(c.Controllers) == 0 {
		c.Controllers = []ControllerAddr{{ID: c.ID, Addr: c.Advertise}}
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	if c.MaxBatchBytes <= 0 {
		c.MaxBatchBytes = storage.DefaultMaxBatchBytes
	}
	c.Log.MaxBatchBytes = c.MaxBatchBytes
	if c.DS.MaxBody == 0 {
		c.DS.MaxBody = max(c.MaxBatchBytes-64<<10, c.MaxBatchBytes/2)
	}
	if c.DS.ReadChunk == 0 {
		c.DS.ReadChunk = DefaultDSReadChunk
	}
	if c.DS.LongPoll == 0 {
		c.DS.LongPoll = DefaultDSLongPoll
	}
	if c.DS.SSEReconnect == 0 {
		c.DS.SSEReconnect = DefaultDSSSEReconnect
	}
	if c.DS.MaxLiveReaders == 0 {
		c.DS.MaxLiveReaders = DefaultDSMaxLiveReaders
	}
	if c.DS.ForwardTimeout == 0 {
		c.DS.ForwardTimeout = DefaultDSForwardTimeout
	}
	if c.ConnRequestMemory <= 0 {
		c.ConnRequestMemory = 2 * int64(transport.FrameLimit(c.MaxBatchBytes))
	}
	if c.RequestMemory <= 0 {
		c.RequestMemory = max(transport.DefaultMemoryBytes, c.ConnRequestMemory)
	}
	if c.MaxConns <= 0 {
		c.MaxConns = transport.DefaultMaxConns
	}
	if c.MaxConnsPerAddr <= 0 {
		c.MaxConnsPerAddr = min(transport.DefaultMaxConnsPerAddr, c.MaxConns)
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = transport.DefaultIdleTimeout
	}
	if c.OffsetsPartitions == 0 {
		c.OffsetsPartitions = DefaultOffsetsPartitions
	}
	if c.RetentionInterval <= 0 {
		c.RetentionInterval = time.Minute
	}
	if c.RetentionBytes == 0 {
		c.RetentionBytes = DefaultRetentionBytes
	}
	if c.RetentionMs == 0 {
		c.RetentionMs = DefaultRetentionMs
	}
	if c.SegmentBytes == 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentMs == 0 {
		c.SegmentMs = DefaultSegmentMs
	}
	if c.HWCheckpointInterval <= 0 {
		c.HWCheckpointInterval = time.Second
	}
	return c
}

// parseKafkaListeners reads the Kafka listeners of c; its error is a
// *FieldError naming KafkaListen or KafkaAdvertise.
func parseKafkaListeners(c Config) ([]listeners.Listener, error) {
	return parseListenerFields(c.KafkaListen, c.KafkaAdvertise, "KafkaListen", "KafkaAdvertise")
}

// parseListenerFields reads listeners from the values of two Config
// fields; its error is a *FieldError naming the one at fault.
func parseListenerFields(listen, advertise, listenField, advertiseField string) ([]listeners.Listener, error) {
	ls, err := listeners.Parse(listen, advertise)
	var le *listeners.Error
	if errors.As(err, &le) {
		field := listenField
		if le.Which == listeners.InAdvertise {
			field = advertiseField
		}
		return nil, &FieldError{Field: field, Value: le.Value, Reason: le.Reason}
	}
	return ls, err
}

// namedListeners reports whether c gives the native protocol named
// listeners (NAME://HOST:PORT in Listen or Advertise).
func namedListeners(c Config) bool {
	return strings.Contains(c.Listen, "://") || strings.Contains(c.Advertise, "://")
}

// parseRPCListeners reads c's named RPC listeners; its error is a
// *FieldError naming Listen or Advertise.
func parseRPCListeners(c Config) ([]listeners.Listener, error) {
	return parseListenerFields(c.Listen, c.Advertise, "Listen", "Advertise")
}

package metadata

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Sentinel errors of package metadata.
var (
	// ErrInvalid means metadata that breaks an invariant.
	ErrInvalid = errors.New("metadata: invalid")
	// ErrCorrupt means a metadata file that cannot be loaded.
	ErrCorrupt = errors.New("metadata: corrupt")
	// ErrUnknownTopic means a topic that does not exist.
	ErrUnknownTopic = errors.New("metadata: unknown topic")
	// ErrTopicExists means creating a topic that exists.
	ErrTopicExists = errors.New("metadata: topic exists")
	// ErrNotEnoughBrokers means a replication factor above the broker count.
	ErrNotEnoughBrokers = errors.New("metadata: not enough brokers")
)

// FormatVersion is the version of the metadata file format.
const FormatVersion = 1

// MaxPartitions bounds the partition count of one topic.
const MaxPartitions = 10000

// Cluster is the whole cluster metadata.
type Cluster struct {
	Version      int      `json:"version"`
	ClusterID    string   `json:"cluster_id"`
	Epoch        int64    `json:"epoch"` // bumped by every change
	ControllerID int32    `json:"controller_id"`
	Brokers      []Broker `json:"brokers"` // sorted by id
	Topics       []Topic  `json:"topics"`  // sorted by name
	// ACLs are the access control entries, sorted (AddACLs keeps them
	// so); absent until the first is added.
	ACLs []ACL `json:"acls,omitempty"`
	// NextProducerID is the first producer id the controller has not yet
	// allocated to a broker (idempotent producers: docs/kafka.md); ids
	// below it were handed out, in blocks, and are never handed out again.
	NextProducerID int64 `json:"next_producer_id,omitempty"`
	// Autopilot is the autopilot that holds the lease to act
	// (docs/autopilot.md), nil when none does.
	Autopilot *AutopilotLease `json:"autopilot,omitempty"`
}

// Broker is a registered broker and its addresses.
type Broker struct {
	ID     int32  `json:"id"`
	Addr   string `json:"addr"`
	HTTP   string `json:"http,omitempty"`
	Gossip string `json:"gossip,omitempty"`
	// Kafka are the broker's Kafka listeners as clients dial them,
	// NAME://HOST:PORT,... sorted by name (FormatEndpoints); empty when it
	// has none.
	Kafka string `json:"kafka,omitempty"`
	// Listeners are the broker's named listeners of the native protocol
	// as clients dial them, NAME://HOST:PORT,... sorted by name; empty
	// when it has one listener, at Addr. Addr is always its first
	// listener's, the one the nodes use among themselves.
	Listeners string `json:"listeners,omitempty"`
	// RootID is the unique id stamped in the broker's storage root: a
	// broker id belongs to one storage root. Empty until the broker's first
	// registration binds it, and again after the operator replaced a broker
	// whose disk was lost.
	RootID string `json:"root_id,omitempty"`
	// Rack is the failure domain the broker's node says it is in
	// (--rack): placement spreads a partition's replicas over racks
	// before brokers. Empty when the node names none.
	Rack string `json:"rack,omitempty"`
}

// Topic is one topic.
type Topic struct {
	Name string `json:"name"`
	// ID tells incarnations of a name apart: a topic deleted and created
	// again gets a new one, and requests carry the id of the topic they
	// mean. Empty only in metadata written before topics had ids.
	ID                string      `json:"id,omitempty"`
	ReplicationFactor int         `json:"replication_factor"`
	Sealed            bool        `json:"sealed,omitempty"`
	Partitions        []Partition `json:"partitions"`
	// Config is the topic's own configuration (retention, segments); the
	// keys it does not set take each node's default. Absent from
	// metadata written before topics had a configuration.
	Config TopicConfig `json:"config,omitempty"`
	// Stream is set on the topic of a Durable Streams stream.
	Stream *Stream `json:"stream,omitempty"`
}

// Partition is one partition's assignment and leadership.
type Partition struct {
	Replicas    []int32 `json:"replicas"` // assigned, leader first at creation; never recomputed
	Active      []int32 `json:"active"`   // the replicas a write must reach
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	// ReservedEpoch is the highest leader epoch the controller has handed
	// out or reserved for a failover in progress. A new epoch is always
	// above it, so a failover that died part way and is run again never
	// reuses an epoch it may have fenced replicas with.
	ReservedEpoch int32 `json:"reserved_epoch,omitempty"`
	// Move is the reassignment under way (docs/reassignment.md), nil when
	// none. While it is set, Replicas is Move.Target followed by the
	// brokers of Move.From that Target leaves out.
	Move *Move `json:"move,omitempty"`
}

// Move is a partition's reassignment from one replica list to another.
type Move struct {
	Target []int32 `json:"target"` // the replicas asked for, preferred leader first
	From   []int32 `json:"from"`   // the replicas when the move started, leader first
	// Throttle bounds the bytes per second each source broker sends to
	// copy replicas.
	Throttle int64 `json:"throttle"`
	// Started is when the move started, in Unix milliseconds.
	Started int64 `json:"started"`
}

// Clone returns a deep copy of m (nil for nil).
func (m *Move) Clone() *Move {
	if m == nil {
		return nil
	}
	return &Move{Target: slices.Clone(m.Target), From: slices.Clone(m.From), Throttle: m.Throttle, Started: m.Started}
}

// Adding are the replicas a move adds: in its target, not in where it
// came from; none without a move.
func (p Partition) Adding() []int32 {
	if p.Move == nil {
		return nil
	}
	return Without(p.Move.Target, p.Move.From)
}

// Removing are the replicas a move takes out: where it came from, not in
// its target; none without a move.
func (p Partition) Removing() []int32 {
	if p.Move == nil {
		return nil
	}
	return Without(p.Move.From, p.Move.Target)
}

// MoveReplicas is the replica list of a partition moving from from to
// target: target, then the brokers of from that target leaves out.
func MoveReplicas(from, target []int32) []int32 {
	return append(slices.Clone(target), Without(from, target)...)
}

// Without is the brokers of a not in b, in a's order.
func Without(a, b []int32) []int32 {
	var out []int32
	for _, id := range a {
		if !slices.Contains(b, id) {
			out = append(out, id)
		}
	}
	return out
}

// Clone returns a deep copy of c.
func (c *Cluster) Clone() *Cluster {
	n := *c
	n.Brokers = slices.Clone(c.Brokers)
	// slices.Clone keeps nil as nil, so the copy is equal to c, also in JSON.
	n.Topics = slices.Clone(c.Topics)
	n.ACLs = slices.Clone(c.ACLs)
	n.Autopilot = c.Autopilot.Clone()
	for i, t := range n.Topics {
		n.Topics[i].Config = t.Config.Clone()
		n.Topics[i].Stream = t.Stream.Clone()
		n.Topics[i].Partitions = slices.Clone(t.Partitions)
		for j, p := range t.Partitions {
			n.Topics[i].Partitions[j] = Partition{
				Replicas: slices.Clone(p.Replicas), Active: slices.Clone(p.Active),
				Leader: p.Leader, LeaderEpoch: p.LeaderEpoch, ReservedEpoch: p.ReservedEpoch,
				Move: p.Move.Clone(),
			}
		}
	}
	return &n
}

// Broker returns the broker with id, if registered.
func (c *Cluster) Broker(id int32) (Broker, bool) {
	i, ok := slices.BinarySearchFunc(c.Brokers, id, func(b Broker, id int32) int { return int(b.ID - id) })
	if !ok {
		return Broker{}, false
	}
	return c.Brokers[i], true
}

// Topic returns the named topic, or nil.
func (c *Cluster) Topic(name string) *Topic {
	i, ok := slices.BinarySearchFunc(c.Topics, name, func(t Topic, n string) int {
		switch {
		case t.Name < n:
			return -1
		case t.Name > n:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return &c.Topics[i]
}

// BrokerIDs returns the registered broker ids, ascending.
func (c *Cluster) BrokerIDs() []int32 {
	ids := make([]int32, len(c.Brokers))
	for i, b := range c.Brokers {
		ids[i] = b.ID
	}
	return ids
}

// PutBroker registers b or updates its addresses. It does not bump the
// epoch; callers that persist a change do.
func (c *Cluster) PutBroker(b Broker) {
	i, ok := slices.BinarySearchFunc(c.Brokers, b.ID, func(x Broker, id int32) int { return int(x.ID - id) })
	if ok {
		c.Brokers[i] = b
		return
	}
	c.Brokers = slices.Insert(c.Brokers, i, b)
}

// AddTopic adds a topic with replicas placed by PlaceOn over the
// registered brokers. Leader epochs start at 0 and every assigned replica is active.
func (c *Cluster) AddTopic(name string, partitions, replicationFactor int) (*Topic, error) {
	return c.AddTopicOn(name, partitions, replicationFactor, c.BrokerIDs())
}

// AddTopicOn is AddTopic with the replicas placed over brokers only (the
// controller gives those that answer), each of them registered.
func (c *Cluster) AddTopicOn(name string, partitions, replicationFactor int, brokers []int32) (*Topic, error) {
	if err := ValidateTopicName(name); err != nil {
		return nil, err
	}
	if c.Topic(name) != nil {
		return nil, fmt.Errorf("%w: %q", ErrTopicExists, name)
	}
	for _, b := range brokers {
		if _, ok := c.Broker(b); !ok {
			return nil, fmt.Errorf("%w: broker %d is not registered", ErrInvalid, b)
		}
	}
	placement, err := c.PlaceOn(brokers, partitions, replicationFactor)
	if err != nil {
		return nil, err
	}
	t := Topic{Name: name, ID: NewID(), ReplicationFactor: replicationFactor, Partitions: make([]Partition, partitions)}
	for p, replicas := range placement {
		t.Partitions[p] = Partition{Replicas: replicas, Active: slices.Clone(replicas), Leader: replicas[0]}
	}
	c.Topics = append(c.Topics, t)
	sort.Slice(c.Topics, func(i, j int) bool { return c.Topics[i].Name < c.Topics[j].Name })
	return c.Topic(name), nil
}

// NewID returns a new random 128-bit id in hex, for a topic or a storage
// root.
func NewID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("metadata: no randomness: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// AssignTopicIDs gives an id to every topic that has none (metadata
// written before topics had ids). It reports whether it changed anything.
func (c *Cluster) AssignTopicIDs() bool {
	changed := false
	for i := range c.Topics {
		if c.Topics[i].ID == "" {
			c.Topics[i].ID = NewID()
			changed = true
		}
	}
	return changed
}

// RemoveTopic removes the named topic.
func (c *Cluster) RemoveTopic(name string) error {
	for i := range c.Topics {
		if c.Topics[i].Name == name {
			c.Topics = slices.Delete(c.Topics, i, i+1)
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrUnknownTopic, name)
}

// Place assigns replicas to partitions deterministically over brokers
// that name no rack and hold nothing: PlaceOver's round robin, partition
// p led by the (p mod n)-th broker in ascending id order, followed by the
// next ones. A topic's placement is computed once, at its creation (by
// Cluster.PlaceOn, which weighs racks and what the brokers hold), and
// changes only by reassignment.
func Place(brokers []int32, partitions, replicationFactor int) ([][]int32, error) {
	plain := make([]PlacementBroker, len(brokers))
	for i, id := range brokers {
		plain[i].ID = id
	}
	return PlaceOver(plain, partitions, replicationFactor)
}

// Validate checks every invariant of the package documentation.
func (c *Cluster) Validate() error {
	if c.Version != FormatVersion {
		return fmt.Errorf("%w: format version %d, want %d", ErrInvalid, c.Version, FormatVersion)
	}
	if c.ClusterID == "" {
		return fmt.Errorf("%w: empty cluster id", ErrInvalid)
	}
	if c.Epoch < 0 {
		return fmt.Errorf("%w: negative epoch %d", ErrInvalid, c.Epoch)
	}
	if c.ControllerID <= 0 {
		return fmt.Errorf("%w: controller id %d", ErrInvalid, c.ControllerID)
	}
	if c.NextProducerID < 0 {
		return fmt.Errorf("%w: negative next producer id %d", ErrInvalid, c.NextProducerID)
	}
	if err := validateACLs(c.ACLs); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := c.Autopilot.validate(); err != nil {
		return err
	}
	for i, b := range c.Brokers {
		if b.ID <= 0 {
			return fmt.Errorf("%w: broker id %d", ErrInvalid, b.ID)
		}
		if i > 0 && c.Brokers[i-1].ID >= b.ID {
			return fmt.Errorf("%w: brokers not sorted by unique id at %d", ErrInvalid, b.ID)
		}
		if b.Addr == "" {
			return fmt.Errorf("%w: broker %d has no address", ErrInvalid, b.ID)
		}
		if b.RootID != "" && !ValidID(b.RootID) {
			return fmt.Errorf("%w: broker %d has root id %q, want 32 hex digits", ErrInvalid, b.ID, b.RootID)
		}
	}
	ids := make(map[string]bool, len(c.Topics))
	for i, t := range c.Topics {
		if err := ValidateTopicName(t.Name); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalid, err)
		}
		if t.ID != "" {
			if !ValidID(t.ID) {
				return fmt.Errorf("%w: topic %q has id %q, want 32 hex digits", ErrInvalid, t.Name, t.ID)
			}
			if ids[t.ID] {
				return fmt.Errorf("%w: topic %q has the id of another topic", ErrInvalid, t.Name)
			}
			ids[t.ID] = true
		}
		if i > 0 && c.Topics[i-1].Name >= t.Name {
			return fmt.Errorf("%w: topics not sorted by unique name at %q", ErrInvalid, t.Name)
		}
		if err := c.validateTopic(&t); err != nil {
			return err
		}
		if err := t.Config.Validate(); err != nil {
			return fmt.Errorf("%w: topic %q: %v", ErrInvalid, t.Name, err)
		}
	}
	return nil
}

// NoSuchPartition says, for an error, that topic (of n partitions) has no
// partition p: "topic "orders" has 3 partitions (0 to 2); there is no
// partition 5".
func NoSuchPartition(topic string, n int, p int32) string {
	switch n {
	case 1:
		return fmt.Sprintf("topic %q has one partition (0); there is no partition %d", topic, p)
	default:
		return fmt.Sprintf("topic %q has %d partitions (0 to %d); there is no partition %d", topic, n, n-1, p)
	}
}

// ValidID reports whether id looks like one NewID made.
func ValidID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, r := range id {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

func (c *Cluster) validateTopic(t *Topic) error {
	if len(t.Partitions) < 1 || len(t.Partitions) > MaxPartitions {
		return fmt.Errorf("%w: topic %q has %d partitions", ErrInvalid, t.Name, len(t.Partitions))
	}
	if t.ReplicationFactor < 1 {
		return fmt.Errorf("%w: topic %q has replication factor %d", ErrInvalid, t.Name, t.ReplicationFactor)
	}
	for p, part := range t.Partitions {
		where := fmt.Sprintf("partition %s/%d", t.Name, p)
		if len(part.Replicas) == 0 {
			return fmt.Errorf("%w: %s has no replicas", ErrInvalid, where)
		}
		seen, err := c.brokerSet(part.Replicas, where, "replicas")
		if err != nil {
			return err
		}
		if m := part.Move; m != nil {
			if len(m.Target) == 0 || len(m.From) == 0 {
				return fmt.Errorf("%w: %s moves from %v to %v: both need a replica", ErrInvalid, where, m.From, m.Target)
			}
			if _, err := c.brokerSet(m.Target, where, "move target"); err != nil {
				return err
			}
			if _, err := c.brokerSet(m.From, where, "move origin"); err != nil {
				return err
			}
			if want := MoveReplicas(m.From, m.Target); !slices.Equal(part.Replicas, want) {
				return fmt.Errorf("%w: %s moves from %v to %v, so its replicas are %v, not %v", ErrInvalid, where, m.From, m.Target, want, part.Replicas)
			}
			if m.Throttle <= 0 {
				return fmt.Errorf("%w: %s moves at a throttle of %d bytes/s", ErrInvalid, where, m.Throttle)
			}
		}
		activeSeen := map[int32]bool{}
		for _, a := range part.Active {
			if !seen[a] || activeSeen[a] {
				return fmt.Errorf("%w: %s has active replica %d that is not assigned or repeated", ErrInvalid, where, a)
			}
			activeSeen[a] = true
		}
		if !activeSeen[part.Leader] {
			return fmt.Errorf("%w: %s leader %d is not in the active set %v", ErrInvalid, where, part.Leader, part.Active)
		}
		if part.LeaderEpoch < 0 {
			return fmt.Errorf("%w: %s has leader epoch %d", ErrInvalid, where, part.LeaderEpoch)
		}
		if part.ReservedEpoch != 0 && part.ReservedEpoch < part.LeaderEpoch {
			return fmt.Errorf("%w: %s has reserved epoch %d below its leader epoch %d", ErrInvalid, where, part.ReservedEpoch, part.LeaderEpoch)
		}
	}
	return nil
}

// brokerSet checks that ids are distinct registered brokers and returns
// them as a set; what names the list in an error.
func (c *Cluster) brokerSet(ids []int32, where, what string) (map[int32]bool, error) {
	seen := make(map[int32]bool, len(ids))
	for _, r := range ids {
		if seen[r] {
			return nil, fmt.Errorf("%w: %s lists broker %d twice in its %s", ErrInvalid, where, r, what)
		}
		seen[r] = true
		if _, ok := c.Broker(r); !ok {
			return nil, fmt.Errorf("%w: %s names unregistered broker %d in its %s", ErrInvalid, where, r, what)
		}
	}
	return seen, nil
}

// FormatEndpoints is the one text of a broker's endpoints by listener
// name: NAME://HOST:PORT,... sorted by name, "" for none.
func FormatEndpoints(byName map[string]string) string {
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = n + "://" + byName[n]
	}
	return strings.Join(parts, ",")
}

// KafkaEndpoint is the address clients dial for the broker's Kafka
// listener of that name.
func (b Broker) KafkaEndpoint(listener string) (string, bool) {
	return endpoint(b.Kafka, listener)
}

// RPCEndpoint is the address clients dial for the broker's native
// listener of that name: Addr for "" (a node's first listener, the one
// the nodes use among themselves), else the one of that name in
// Listeners, if it has one.
func (b Broker) RPCEndpoint(listener string) (string, bool) {
	if listener == "" {
		return b.Addr, true
	}
	return endpoint(b.Listeners, listener)
}

func endpoint(list, listener string) (string, bool) {
	for _, part := range strings.Split(list, ",") {
		if name, addr, ok := strings.Cut(part, "://"); ok && name == listener {
			return addr, true
		}
	}
	return "", false
}

package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"gostream/transport"
)

// Verification compares every active replica of a partition with its
// leader, by content, over the offsets both hold below the high watermark:
// [the later of their log starts, the leader's high watermark). The range
// ends on a batch boundary of both: every batch is acknowledged whole, so
// the high watermark is a boundary on the leader and on every replica that
// holds it. Each replica's broker reads every batch of the range whole and
// checks it (so a bit flipped where no batch identity shows it is found),
// then digests their identities (offsets, epoch, CRC), and the digests are
// compared. The types mirror the JSON of `gostream-ctl verify -o json`.

// VerifyState is the verdict on one replica.
type VerifyState string

// Verdicts of a VerifiedReplica.
const (
	// VerifyLeader is the partition's leader, whose log checked out.
	VerifyLeader VerifyState = "leader"
	// VerifyIdentical holds what its leader holds below the high
	// watermark, on every offset both hold.
	VerifyIdentical VerifyState = "identical"
	// VerifyDiffers holds other content than its leader, or ends short of
	// the high watermark (it lacks acknowledged records).
	VerifyDiffers VerifyState = "differs"
	// VerifyDamaged is a replica whose broker found a batch that does not
	// check out when it read the range.
	VerifyDamaged VerifyState = "damaged"
	// VerifyUnknown could not be compared: it, or its leader, did not
	// answer.
	VerifyUnknown VerifyState = "unknown"
)

// VerifyReport is the verdict on every partition verified.
type VerifyReport struct {
	Partitions []VerifiedPartition `json:"partitions"`
	// OK is set when every replica is the leader or identical to it.
	OK bool `json:"ok"`
}

// VerifiedPartition is the verdict on one partition's active replicas.
type VerifiedPartition struct {
	Topic         string            `json:"topic"`
	Partition     int32             `json:"partition"`
	Leader        int32             `json:"leader"`
	HighWatermark *int64            `json:"high_watermark"` // nil when the leader did not answer
	Replicas      []VerifiedReplica `json:"replicas"`       // by broker id
}

// VerifiedReplica is the verdict on one active replica. Error says why it
// differs, is damaged or is unknown.
type VerifiedReplica struct {
	Broker int32       `json:"broker"`
	State  VerifyState `json:"state"`
	Error  string      `json:"error,omitempty"`
	// Command fixes a damaged replica: it leaves the active set, then it
	// is rebuilt from the leader.
	Command string `json:"command,omitempty"`
}

// Verify verifies every partition of topics (of every topic when none is
// named), several at once: each active replica's broker reads its log
// whole up to the high watermark and checks every batch, and each
// follower's digest is compared with its leader's over the offsets both
// hold. A replica state is asked under a short deadline (2s, or
// Config.RequestTimeout when shorter), and a broker that once did not
// answer is not asked again: it costs one deadline, not one per
// partition. Digests are bounded by ctx and Config.RequestTimeout alone,
// since a broker reads the whole range for one.
//
// What a replica or its leader answered, or that it did not, is in the
// report. The error is for the topics alone: one that does not exist
// gives an error matching transport.ErrUnknownTopic, and a cluster that
// does not answer its metadata request the error of Metadata.
func (c *Client) Verify(ctx context.Context, topics ...string) (VerifyReport, error) {
	var metas []TopicMetadata
	if len(topics) == 0 {
		var err error
		if metas, err = c.ListTopics(ctx); err != nil {
			return VerifyReport{}, err
		}
	}
	for _, name := range topics {
		t, err := c.DescribeTopic(ctx, name)
		if err != nil {
			return VerifyReport{}, err
		}
		metas = append(metas, t)
	}
	return verifyTopics(ctx, clientChecker{c.NewProber(0)}, metas), nil
}

// replicaChecker asks the cluster what verification needs.
type replicaChecker interface {
	replicaStater
	offsets(ctx context.Context, leader int32, topic string, partition int32) (PartitionOffsets, error)
	digest(ctx context.Context, broker int32, topic string, partition int32, from, to int64) (ReplicaDigest, error)
}

// clientChecker is the replicaChecker of a Client: replica states through
// a prober, so that a dead broker costs one short deadline.
type clientChecker struct {
	*Prober
}

func (cc clientChecker) offsets(ctx context.Context, leader int32, topic string, partition int32) (PartitionOffsets, error) {
	return cc.LeaderOffsets(ctx, leader, topic, partition)
}

func (cc clientChecker) digest(ctx context.Context, broker int32, topic string, partition int32, from, to int64) (ReplicaDigest, error) {
	if err := cc.Down(broker); err != nil {
		return ReplicaDigest{}, err
	}
	return cc.c.VerifiedReplicaDigest(ctx, broker, topic, partition, from, to)
}

// verifyTopics verifies every partition of topics, several at once.
func verifyTopics(ctx context.Context, rc replicaChecker, topics []TopicMetadata) VerifyReport {
	var parts []*VerifiedPartition
	var metas []PartitionMetadata
	for _, t := range topics {
		for _, p := range t.Partitions {
			parts = append(parts, &VerifiedPartition{Topic: t.Name, Partition: p.Partition, Leader: p.Leader})
			metas = append(metas, p)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, maxConcurrentProbes)
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			verifyPartition(ctx, rc, parts[i], metas[i])
		}()
	}
	wg.Wait()
	rep := VerifyReport{Partitions: make([]VerifiedPartition, 0, len(parts)), OK: true}
	for _, vp := range parts {
		for _, r := range vp.Replicas {
			rep.OK = rep.OK && (r.State == VerifyLeader || r.State == VerifyIdentical)
		}
		rep.Partitions = append(rep.Partitions, *vp)
	}
	return rep
}

// damaged is the verdict on a replica whose check failed for its files.
func damaged(b int32, topic string, partition int32, err error) (VerifiedReplica, bool) {
	if !errors.Is(err, transport.ErrStorageFailed) {
		return VerifiedReplica{}, false
	}
	return VerifiedReplica{Broker: b, State: VerifyDamaged, Error: err.Error(), Command: rebuildCommand(topic, partition, b)}, true
}

// verifyPartition fills vp with the verdict on every active replica of p.
func verifyPartition(ctx context.Context, rc replicaChecker, vp *VerifiedPartition, p PartitionMetadata) {
	active := slices.Clone(p.Active)
	if p.Leader >= 0 && !slices.Contains(active, p.Leader) {
		active = append(active, p.Leader) // not expected; check it all the same
	}
	slices.Sort(active)
	vp.Replicas = make([]VerifiedReplica, 0, len(active))
	unknownAll := func(why string) {
		vp.Replicas = vp.Replicas[:0]
		for _, b := range active {
			vp.Replicas = append(vp.Replicas, VerifiedReplica{Broker: b, State: VerifyUnknown, Error: why})
		}
	}
	if p.Leader < 0 {
		unknownAll("the partition has no leader")
		return
	}
	offs, err := rc.offsets(ctx, p.Leader, vp.Topic, vp.Partition)
	if err != nil {
		unknownAll(fmt.Sprintf("leader broker %d: %v", p.Leader, err))
		return
	}
	hw := offs.HighWatermark
	vp.HighWatermark = &hw
	// The leader's digests, one per range start (the followers' log starts
	// may differ), computed once each.
	leaderDigests := map[int64]ReplicaDigest{}
	leaderErrs := map[int64]error{}
	leaderDigest := func(from int64) (ReplicaDigest, error) {
		if err, ok := leaderErrs[from]; ok {
			return ReplicaDigest{}, err
		}
		if d, ok := leaderDigests[from]; ok {
			return d, nil
		}
		d, err := rc.digest(ctx, p.Leader, vp.Topic, vp.Partition, from, hw)
		if err != nil {
			leaderErrs[from] = err
		} else {
			leaderDigests[from] = d
		}
		return d, err
	}
	for _, b := range active {
		if b == p.Leader {
			// The leader is checked whole too, from its own log start.
			leader := VerifiedReplica{Broker: b, State: VerifyLeader}
			if offs.LogStartOffset < hw {
				if _, err := leaderDigest(offs.LogStartOffset); err != nil {
					if d, ok := damaged(b, vp.Topic, vp.Partition, err); ok {
						leader = d
					} else {
						leader = VerifiedReplica{Broker: b, State: VerifyUnknown, Error: err.Error()}
					}
				}
			}
			vp.Replicas = append(vp.Replicas, leader)
			continue
		}
		vp.Replicas = append(vp.Replicas, verifyReplica(ctx, rc, vp, p.Leader, b, offs, leaderDigest))
	}
}

// verifyReplica compares one active follower with the leader.
func verifyReplica(ctx context.Context, rc replicaChecker, vp *VerifiedPartition, leader, b int32, offs PartitionOffsets,
	leaderDigest func(from int64) (ReplicaDigest, error)) VerifiedReplica {
	hw := offs.HighWatermark
	st, err := rc.state(ctx, b, vp.Topic, vp.Partition)
	if err != nil {
		return VerifiedReplica{Broker: b, State: VerifyUnknown, Error: err.Error()}
	}
	from := max(offs.LogStartOffset, st.LogStartOffset)
	if st.LogEndOffset < hw {
		return VerifiedReplica{Broker: b, State: VerifyDiffers, Error: fmt.Sprintf(
			"ends at offset %d, short of the high watermark %d: it lacks acknowledged records", st.LogEndOffset, hw)}
	}
	if from >= hw {
		return VerifiedReplica{Broker: b, State: VerifyIdentical} // no offsets in common below the high watermark
	}
	ld, err := leaderDigest(from)
	if err != nil {
		return VerifiedReplica{Broker: b, State: VerifyUnknown, Error: fmt.Sprintf("leader broker %d: %v", leader, err)}
	}
	fd, err := rc.digest(ctx, b, vp.Topic, vp.Partition, from, hw)
	if d, ok := damaged(b, vp.Topic, vp.Partition, err); ok {
		return d
	}
	if err != nil {
		return VerifiedReplica{Broker: b, State: VerifyUnknown, Error: err.Error()}
	}
	if !bytes.Equal(ld.Digest, fd.Digest) || ld.Batches != fd.Batches {
		return VerifiedReplica{Broker: b, State: VerifyDiffers, Error: fmt.Sprintf(
			"differs from leader %d in [%d, %d): %s against the leader's %d, digests differ", leader, from, hw, pluralOf(int(fd.Batches), "batch", "batches"), ld.Batches)}
	}
	return VerifiedReplica{Broker: b, State: VerifyIdentical}
}

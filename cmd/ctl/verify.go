package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"gostream/client"
	"gostream/cmd/internal/exitcode"
	"gostream/transport"
)

// verify compares every active replica of a partition with its leader,
// by content, over the offsets both hold below the high watermark:
// [the later of their log starts, the leader's high watermark). The range
// ends on a batch boundary of both: every batch is acknowledged whole, so
// the high watermark is a boundary on the leader and on every replica that
// holds it. Each replica's broker reads every batch of the range whole and
// checks it (so a bit flipped where no batch identity shows it is found),
// then digests their identities (offsets, epoch, CRC), and the digests are
// compared.

func verifyCommand() *cli.Command {
	return leaf("verify", "read every active replica up to the high watermark, check every batch, and compare it with its leader",
		"", args(0, 0), verifyAction,
		&cli.StringFlag{Name: "topic", Usage: "topic `T` (default every topic)"},
	)
}

// Replica states of verify -o json.
const (
	verifyLeader    = "leader"
	verifyIdentical = "identical"
	verifyDiffers   = "differs"
	verifyUnknown   = "unknown"
	// verifyDamaged is a replica whose broker found a batch that does not
	// check out when it read the range.
	verifyDamaged = "damaged"
)

// verifiedPartition is one partition of verify -o json.
type verifiedPartition struct {
	Topic         string            `json:"topic"`
	Partition     int32             `json:"partition"`
	Leader        int32             `json:"leader"`
	HighWatermark *int64            `json:"high_watermark"` // null when the leader did not answer
	Replicas      []verifiedReplica `json:"replicas"`
}

// verifiedReplica is one active replica of a partition: the leader,
// identical to it, different from it, or unknown (it, or the leader, did
// not answer). Error says why a replica differs or is unknown.
type verifiedReplica struct {
	Broker int32  `json:"broker"`
	State  string `json:"state"`
	Error  string `json:"error,omitempty"`
	// Command fixes a damaged replica: it leaves the active set, then it
	// is rebuilt from the leader.
	Command string `json:"command,omitempty"`
}

// damaged is the verdict on a replica whose check failed for its files.
func damaged(b int32, topic string, partition int32, err error) (verifiedReplica, bool) {
	if !errors.Is(err, transport.ErrStorageFailed) {
		return verifiedReplica{}, false
	}
	return verifiedReplica{Broker: b, State: verifyDamaged, Error: err.Error(), Command: rebuildCommand(topic, partition, b)}, true
}

// verifyReport is what verify -o json prints.
type verifyReport struct {
	Partitions []verifiedPartition `json:"partitions"`
	OK         bool                `json:"ok"`
}

// replicaChecker asks the cluster what verify needs.
type replicaChecker interface {
	replicaStater
	offsets(ctx context.Context, leader int32, topic string, partition int32) (client.PartitionOffsets, error)
	digest(ctx context.Context, broker int32, topic string, partition int32, from, to int64) (client.ReplicaDigest, error)
}

// clientChecker is the replicaChecker of a Client: replica states through
// a replicaProber, so that a dead broker costs one short deadline.
type clientChecker struct {
	*replicaProber
}

func (cc clientChecker) offsets(ctx context.Context, leader int32, topic string, partition int32) (client.PartitionOffsets, error) {
	return cc.leaderOffsets(ctx, leader, topic, partition)
}

func (cc clientChecker) digest(ctx context.Context, broker int32, topic string, partition int32, from, to int64) (client.ReplicaDigest, error) {
	cc.mu.Lock()
	err := cc.mu.down[broker]
	cc.mu.Unlock()
	if err != nil {
		return client.ReplicaDigest{}, err
	}
	return cc.cl.VerifiedReplicaDigest(ctx, broker, topic, partition, from, to)
}

func verifyAction(c *cli.Context) error {
	topic := c.String("topic")
	if c.IsSet("topic") && topic == "" {
		return exitcode.Usagef("InvalidFlag", "--topic: want a topic name")
	}
	return withClient(c, func(ctx context.Context, cl *client.Client, g globals) error {
		var topics []client.TopicMetadata
		if topic != "" {
			t, err := describeTopic(ctx, cl, topic)
			if err != nil {
				return err
			}
			topics = []client.TopicMetadata{t}
		} else {
			var err error
			if topics, err = cl.ListTopics(ctx); err != nil {
				return err
			}
		}
		rep := verifyTopics(ctx, clientChecker{newReplicaProber(cl, g)}, topics)
		w := c.App.Writer
		var err error
		if g.output == outputJSON {
			err = writeJSON(w, rep)
		} else {
			err = printVerify(w, rep)
		}
		if err != nil {
			return err
		}
		return verifyFailed(rep)
	})
}

// verifyTopics verifies every partition of topics, several at once.
func verifyTopics(ctx context.Context, rc replicaChecker, topics []client.TopicMetadata) verifyReport {
	var parts []*verifiedPartition
	var metas []client.PartitionMetadata
	for _, t := range topics {
		for _, p := range t.Partitions {
			parts = append(parts, &verifiedPartition{Topic: t.Name, Partition: p.Partition, Leader: p.Leader})
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
	rep := verifyReport{Partitions: make([]verifiedPartition, 0, len(parts)), OK: true}
	for _, vp := range parts {
		for _, r := range vp.Replicas {
			rep.OK = rep.OK && (r.State == verifyLeader || r.State == verifyIdentical)
		}
		rep.Partitions = append(rep.Partitions, *vp)
	}
	return rep
}

// verifyPartition fills vp with the verdict on every active replica of p.
func verifyPartition(ctx context.Context, rc replicaChecker, vp *verifiedPartition, p client.PartitionMetadata) {
	active := slices.Clone(p.Active)
	if !slices.Contains(active, p.Leader) {
		active = append(active, p.Leader) // not expected; check it all the same
	}
	slices.Sort(active)
	vp.Replicas = make([]verifiedReplica, 0, len(active))
	unknownAll := func(why string) {
		vp.Replicas = vp.Replicas[:0]
		for _, b := range active {
			vp.Replicas = append(vp.Replicas, verifiedReplica{Broker: b, State: verifyUnknown, Error: why})
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
	leaderDigests := map[int64]client.ReplicaDigest{}
	leaderErrs := map[int64]error{}
	leaderDigest := func(from int64) (client.ReplicaDigest, error) {
		if err, ok := leaderErrs[from]; ok {
			return client.ReplicaDigest{}, err
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
			leader := verifiedReplica{Broker: b, State: verifyLeader}
			if offs.LogStartOffset < hw {
				if _, err := leaderDigest(offs.LogStartOffset); err != nil {
					if d, ok := damaged(b, vp.Topic, vp.Partition, err); ok {
						leader = d
					} else {
						leader = verifiedReplica{Broker: b, State: verifyUnknown, Error: err.Error()}
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
func verifyReplica(ctx context.Context, rc replicaChecker, vp *verifiedPartition, leader, b int32, offs client.PartitionOffsets,
	leaderDigest func(from int64) (client.ReplicaDigest, error)) verifiedReplica {
	hw := offs.HighWatermark
	st, err := rc.state(ctx, b, vp.Topic, vp.Partition)
	if err != nil {
		return verifiedReplica{Broker: b, State: verifyUnknown, Error: err.Error()}
	}
	from := max(offs.LogStartOffset, st.LogStartOffset)
	if st.LogEndOffset < hw {
		return verifiedReplica{Broker: b, State: verifyDiffers, Error: fmt.Sprintf(
			"ends at offset %d, short of the high watermark %d: it lacks acknowledged records", st.LogEndOffset, hw)}
	}
	if from >= hw {
		return verifiedReplica{Broker: b, State: verifyIdentical} // no offsets in common below the high watermark
	}
	ld, err := leaderDigest(from)
	if err != nil {
		return verifiedReplica{Broker: b, State: verifyUnknown, Error: fmt.Sprintf("leader broker %d: %v", leader, err)}
	}
	fd, err := rc.digest(ctx, b, vp.Topic, vp.Partition, from, hw)
	if d, ok := damaged(b, vp.Topic, vp.Partition, err); ok {
		return d
	}
	if err != nil {
		return verifiedReplica{Broker: b, State: verifyUnknown, Error: err.Error()}
	}
	if !bytes.Equal(ld.Digest, fd.Digest) || ld.Batches != fd.Batches {
		return verifiedReplica{Broker: b, State: verifyDiffers, Error: fmt.Sprintf(
			"differs from leader %d in [%d, %d): %s against the leader's %d, digests differ", leader, from, hw, pluralOf(fd.Batches, "batch", "batches"), ld.Batches)}
	}
	return verifiedReplica{Broker: b, State: verifyIdentical}
}

// problems lists, for people, what is wrong with a partition's replicas.
func (vp *verifiedPartition) problems() []string {
	var out []string
	for _, r := range vp.Replicas {
		switch r.State {
		case verifyDiffers:
			out = append(out, fmt.Sprintf("broker %d %s", r.Broker, r.Error))
		case verifyUnknown:
			out = append(out, fmt.Sprintf("broker %d unknown: %s", r.Broker, r.Error))
		case verifyDamaged:
			out = append(out, fmt.Sprintf("broker %d damaged: %s; fix: %s", r.Broker, r.Error, r.Command))
		}
	}
	return out
}

func printVerify(w io.Writer, rep verifyReport) error {
	if len(rep.Partitions) == 0 {
		_, err := fmt.Fprintln(w, "No partitions to verify.")
		return err
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "PARTITION\tLEADER\tHIGH-WATERMARK\tFOLLOWERS\tRESULT")
	for _, vp := range rep.Partitions {
		var followers []int32
		for _, r := range vp.Replicas {
			if r.State != verifyLeader {
				followers = append(followers, r.Broker)
			}
		}
		result := "OK"
		if ps := vp.problems(); len(ps) > 0 {
			result = strings.Join(ps, "; ")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", partitionName(vp.Topic, vp.Partition), vp.Leader,
			optional(vp.HighWatermark), joinIDs(followers), result)
	}
	return tw.Flush()
}

// verifyFailed is the error verify exits with: ReplicaDivergence when a
// replica differs from its leader, Unverified when none differs but some
// could not be compared.
func verifyFailed(rep verifyReport) error {
	var differs, unknown, damage []string
	for _, vp := range rep.Partitions {
		for _, r := range vp.Replicas {
			where := fmt.Sprintf("%s broker %d", partitionName(vp.Topic, vp.Partition), r.Broker)
			switch r.State {
			case verifyDiffers:
				differs = append(differs, where)
			case verifyUnknown:
				unknown = append(unknown, where)
			case verifyDamaged:
				damage = append(damage, where+" (fix: "+r.Command+")")
			}
		}
	}
	switch {
	case len(damage) > 0:
		return exitcode.Fail("StorageFailed", fmt.Errorf("%s %s damaged: %s", plural(len(damage), "replica"), agree(len(damage), "is", "are"), strings.Join(damage, ", ")))
	case len(differs) > 0:
		msg := fmt.Sprintf("%s %s: %s", plural(len(differs), "replica"), agree(len(differs), "differs from its leader", "differ from their leader"), strings.Join(differs, ", "))
		if len(unknown) > 0 {
			msg += fmt.Sprintf("; %d could not be compared: %s", len(unknown), strings.Join(unknown, ", "))
		}
		return exitcode.Fail("ReplicaDivergence", errors.New(msg))
	case len(unknown) > 0:
		return exitcode.Fail("Unverified", fmt.Errorf("%s could not be compared with %s: %s", plural(len(unknown), "replica"), agree(len(unknown), "its leader", "their leader"), strings.Join(unknown, ", ")))
	}
	return nil
}

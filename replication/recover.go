package replication

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gostream/record"
	"gostream/storage"
	"gostream/transport"
)

// RecoveryPeer is what recovery needs of a returning replica beyond
// replication: walking its log backward, digests of ranges, and
// truncation.
type RecoveryPeer interface {
	Peer
	ReplicaBatches(ctx context.Context, req *transport.ReplicaBatchesRequest) ([]transport.BatchID, error)
	ReplicaDigest(ctx context.Context, req *transport.ReplicaDigestRequest) ([]byte, error)
	TruncateReplica(ctx context.Context, req *transport.TruncateReplicaRequest) error
	// ResetReplica has a replica whose files are damaged moved whole into
	// its quarantine/ and replaced by an empty log starting at req.Offset.
	ResetReplica(ctx context.Context, req *transport.TruncateReplicaRequest) error
}

// RecoverResult says what recovery did to a returning replica.
type RecoverResult struct {
	PreviousEnd  int64 // the replica's log end before
	CommonPrefix int64 // where its log and the leader's part; it was cut here
	CopiedTo     int64 // the leader's log end it was filled and verified up to
}

// RecoverFollower brings a replica that is not in the active set back to an
// exact copy of this leader's log: it fences the replica at the current
// epoch, finds the longest common prefix of the two logs (walking the
// replica's batches backward and comparing their identities, then checking
// the whole prefix by digest), has the replica cut everything after it
// (kept in its quarantine/), copies the leader's batches from there, and
// verifies the two logs are identical by digest; then it copies what was
// appended meanwhile and counts the replica in every acknowledgement until
// the metadata lists it active (join). The leader's log is never
// truncated. Adding the replica back to the active set is the controller's
// job, once this returns.
//
// A replica that cannot go on from a common prefix is rebuilt instead: its
// files move whole into its quarantine/ and it is filled from this
// leader's log start. So is one that is damaged, one that starts after
// this leader's log start (retention deleted more of it), and one whose
// log reaches below this leader's log start (retention deleted that part
// here) without a batch at or after the start that matches.
func (p *Partition) RecoverFollower(ctx context.Context, broker int32) (RecoverResult, error) {
	return p.recoverFollower(ctx, broker, nil)
}

// recoverFollower is RecoverFollower, its bulk copy sent through pace
// (nil: unpaced, uncounted).
func (p *Partition) recoverFollower(ctx context.Context, broker int32, pace *copyPace) (RecoverResult, error) {
	end, err := p.beginRecovery(broker)
	if err != nil {
		return RecoverResult{}, err
	}
	defer end()
	defer p.trackCopy(broker, pace)()
	p.mu.Lock()
	st, stepped := p.mu.state, p.mu.steppedDn
	p.mu.Unlock()
	if st.Leader != p.brokerID || stepped {
		return RecoverResult{}, fmt.Errorf("%w: broker %d does not lead %s/%d", ErrNotLeader, p.brokerID, p.Topic, p.Index)
	}
	if broker == p.brokerID {
		return RecoverResult{}, fmt.Errorf("%w: the leader is never recovered", ErrNotLeader)
	}
	// An earlier recovery's replica that the metadata never listed active
	// (its commit failed): its sender stops before this recovery cuts and
	// copies.
	if p.leaveJoining(broker, "it is recovered again") {
		p.recomputeHW()
	}
	if slices.Contains(st.Active, broker) {
		// The controller asks to recover only a replica its metadata has
		// out of the active set: this leader has not applied that
		// metadata yet (a change just made, its push on the way).
		return RecoverResult{}, fmt.Errorf("%w: broker %d is still active for %s/%d as this leader (broker %d, epoch %d) knows it; "+
			"if it was just left out, try again once the leader has the new metadata, else use catch-up", ErrNotReady, broker, p.Topic, p.Index, p.brokerID, st.LeaderEpoch)
	}
	peer, err := p.opts.Peers(broker)
	if err != nil {
		return RecoverResult{}, err
	}
	rp, ok := peer.(RecoveryPeer)
	if !ok {
		return RecoverResult{}, fmt.Errorf("broker %d cannot be recovered through this peer", broker)
	}
	epoch := st.LeaderEpoch
	rs, err := rp.ReplicaState(ctx, &transport.ReplicaStateRequest{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, LeaderEpoch: epoch})
	switch {
	case err != nil || rs.Problem == "":
	case strings.Contains(rs.Problem, diskFull(broker)):
		// Its last append found its disk full, and it may not know yet that
		// it was dropped (a full disk keeps a node from caching new
		// metadata). Its log is whole: it is recovered as usual, and the
		// copy's appends find out whether space is back.
		p.logger.Info("recovering a replica whose disk was full", "peer", broker, "problem", rs.Problem)
	default:
		// Open, but damaged (a check found a bad batch), behind, or its
		// storage failed: its batch identities cannot be trusted to find a
		// common prefix. Rebuilt whole, like one that could not be opened.
		err = fmt.Errorf("%w: %s", transport.ErrStorageFailed, rs.Problem)
	}
	// rebuild has the replica's files moved whole into its quarantine/ and
	// an empty log starting at this leader's log start put in their place,
	// to be filled from here.
	rebuild := func(why string, cause error) (*transport.ReplicaStateResponse, error) {
		p.logger.Warn("rebuilding a returning replica from the leader: "+why, "peer", broker, "log_start_offset", p.log.LogStartOffset(), "err", cause)
		reset := &transport.TruncateReplicaRequest{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, LeaderEpoch: epoch, Offset: p.log.LogStartOffset()}
		if err := rp.ResetReplica(ctx, reset); err != nil {
			return nil, fmt.Errorf("rebuild broker %d: %w", broker, err)
		}
		rs, err := rp.ReplicaState(ctx, &transport.ReplicaStateRequest{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, LeaderEpoch: epoch})
		if err != nil {
			return nil, fmt.Errorf("broker %d: %w", broker, err)
		}
		return rs, nil
	}
	if errors.Is(err, transport.ErrStorageFailed) {
		// Its files are damaged: rebuild it whole from this leader.
		if rs, err = rebuild("it is damaged", err); err != nil {
			return RecoverResult{}, err
		}
	}
	if err != nil {
		return RecoverResult{}, fmt.Errorf("broker %d: %w", broker, err)
	}
	if rs.FencedEpoch > epoch {
		p.stepDown(rs.FencedEpoch)
		return RecoverResult{}, fmt.Errorf("%w: broker %d has seen epoch %d", ErrNotLeader, broker, rs.FencedEpoch)
	}
	res := RecoverResult{PreviousEnd: rs.LogEndOffset}
	start := p.log.LogStartOffset()
	if rs.LogStartOffset > start {
		// Retention deleted more of it than of this leader (it ran there
		// earlier, or on other segment boundaries): it lacks offsets this
		// leader holds, and is rebuilt to hold them all.
		if rs, err = rebuild(fmt.Sprintf("its log starts at %d, after the leader's", rs.LogStartOffset), nil); err != nil {
			return res, err
		}
	}

	// The common prefix: the last batch of the replica that the leader
	// holds identically (same offsets, epoch and CRC).
	prefix := start
	before := rs.LogEndOffset
search:
	for before > start {
		page, err := rp.ReplicaBatches(ctx, &transport.ReplicaBatchesRequest{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, Before: before, Max: 256})
		if err != nil {
			return res, fmt.Errorf("broker %d: %w", broker, err)
		}
		if len(page) == 0 {
			break
		}
		for i := len(page) - 1; i >= 0; i-- {
			b := page[i]
			if b.NextOffset <= start {
				break search
			}
			mine, ok, err := p.log.BatchAt(b.BaseOffset)
			if err != nil {
				return res, err
			}
			if ok && mine == (storage.BatchInfo{BaseOffset: b.BaseOffset, NextOffset: b.NextOffset, LeaderEpoch: b.LeaderEpoch, CRC: b.CRC}) {
				prefix = b.NextOffset
				break search
			}
		}
		before = page[0].BaseOffset
	}
	if prefix > start {
		same, err := p.sameRange(ctx, rp, start, prefix)
		if err != nil {
			return res, err
		}
		if !same {
			p.logger.Warn("replica differs inside what looked like a common prefix; rebuilding it whole", "peer", broker, "prefix", prefix)
			prefix = start
		}
	}
	if prefix == start && rs.LogStartOffset < start {
		// Nothing it holds at or after this leader's log start is known to
		// match, and what it holds below the start cannot be compared
		// (retention deleted it here): it ends before the start, or its
		// batches from there differ, or it ends exactly at the start with
		// a last batch nothing can check, or it is an empty log that
		// begins before the start (a rebuild whose copy retention here
		// overtook). It is rebuilt from the start.
		if rs, err = rebuild(fmt.Sprintf("it holds offsets from %d to %d, none of them known to match the leader's log, which starts at %d", rs.LogStartOffset, rs.LogEndOffset, start), nil); err != nil {
			return res, err
		}
	}
	res.CommonPrefix = prefix
	if prefix < rs.LogEndOffset {
		if err := rp.TruncateReplica(ctx, &transport.TruncateReplicaRequest{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, LeaderEpoch: epoch, Offset: prefix}); err != nil {
			return res, fmt.Errorf("truncate broker %d to %d: %w", broker, prefix, err)
		}
		p.logger.Info("cut a returning replica back to its common prefix with the leader", "peer", broker, "from", rs.LogEndOffset, "to", prefix)
	}
	target := p.log.DurableEndOffset()
	if pace != nil && pace.track != nil {
		pace.track.total.Store(p.estimateBytes(prefix, target))
	}
	copied, err := copyBatches(ctx, p, peer, epoch, prefix, target, pace)
	for try := 0; err != nil && try < maxRebuildsOvertaken && p.log.LogStartOffset() > copied; try++ {
		// Retention here deleted what the copy was to send next: the
		// replica is rebuilt from the new log start and copied again.
		start = p.log.LogStartOffset()
		if rs, err = rebuild(fmt.Sprintf("retention on the leader moved its log start to %d, past the copy at %d", start, copied), err); err != nil {
			return res, err
		}
		res.CommonPrefix = start
		if pace != nil && pace.track != nil {
			pace.track.copied.Store(0)
			pace.track.total.Store(p.estimateBytes(start, p.log.DurableEndOffset()))
		}
		copied, err = copyBatches(ctx, p, peer, epoch, start, p.log.DurableEndOffset(), pace)
	}
	res.CopiedTo = copied
	if err != nil {
		return res, fmt.Errorf("copy to broker %d: %w", broker, err)
	}
	same, err := p.sameRange(ctx, rp, start, copied)
	if err != nil {
		return res, err
	}
	if !same {
		return res, fmt.Errorf("%w: broker %d still differs from the leader after recovery", ErrReplicaDivergence, broker)
	}
	res.CopiedTo, err = p.join(ctx, peer, broker, epoch, copied)
	return res, err
}

// joiner is a replica recovered here that the metadata does not list
// active yet.
type joiner struct {
	epoch int32
	f     *follower
}

// join brings broker, which recovery filled and verified up to from, to
// this leader's log end, and from then on counts it in every
// acknowledgement, before the controller's metadata lists it active. The
// records appended while recovery verified the copy were acknowledged
// without it, so a replica made active at the copy's end would lack
// acknowledged records until this leader's sender filled them in, and a
// failover that found only it would lose them. Appends wait while the
// tail is copied (produceMu): at the end the replica holds every record
// of the log, so every record acknowledged before or after is on it. It
// is counted until the metadata lists it active, the leadership moves on,
// it is recovered again, or Options.JoinHold passes (the controller
// commits a recovery within half of it, or not at all). It returns the
// offset the replica was filled up to.
func (p *Partition) join(ctx context.Context, peer Peer, broker, epoch int32, from int64) (int64, error) {
	// Appends wait at most one replication round for the tail.
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReplicationTimeout)
	defer cancel()
	p.produceMu.Lock()
	defer p.produceMu.Unlock()
	to, err := copyBatches(ctx, p, peer, epoch, from, p.log.LogEndOffset(), nil)
	if err != nil {
		return to, fmt.Errorf("copy to broker %d what was appended during its recovery: %w", broker, err)
	}
	p.mu.Lock()
	st := p.mu.state
	// A leadership passed before the metadata says so acknowledges
	// nothing more: counting the replica in it would be for nothing.
	if st.Leader != p.brokerID || st.LeaderEpoch != epoch || p.passedLocked(epoch) || p.mu.closed {
		p.mu.Unlock()
		return to, fmt.Errorf("%w: broker %d no longer leads %s/%d at epoch %d", ErrNotLeader, p.brokerID, p.Topic, p.Index, epoch)
	}
	if _, ok := p.mu.followers[broker]; ok {
		p.mu.Unlock()
		return to, nil // active already: the metadata came first
	}
	f := newFollower(p, broker, epoch)
	if p.mu.followers == nil {
		p.mu.followers = map[int32]*follower{}
	}
	if p.mu.joining == nil {
		p.mu.joining = map[int32]joiner{}
	}
	p.mu.followers[broker] = f
	p.mu.joining[broker] = joiner{epoch: epoch, f: f}
	p.mu.Unlock()
	f.start()
	time.AfterFunc(p.opts.JoinHold, func() {
		if p.leaveJoiningIf(broker, f, "the metadata did not list it active in time") {
			p.recomputeHW()
		}
	})
	return to, nil
}

// leaveJoining stops counting broker, a replica recovered here that the
// metadata does not list active, in acknowledgements. It reports whether
// broker was one.
func (p *Partition) leaveJoining(broker int32, why string) bool {
	return p.leaveJoiningIf(broker, nil, why)
}

// leaveJoiningIf is leaveJoining, only for the sender f when f is not nil.
func (p *Partition) leaveJoiningIf(broker int32, f *follower, why string) bool {
	p.mu.Lock()
	j, ok := p.mu.joining[broker]
	if !ok || f != nil && j.f != f {
		p.mu.Unlock()
		return false
	}
	delete(p.mu.joining, broker)
	if p.mu.followers[broker] == j.f {
		delete(p.mu.followers, broker)
	}
	p.mu.Unlock()
	p.logger.Warn("a recovered replica is no longer counted in acknowledgements: "+why, "peer", broker)
	j.f.stop()
	return true
}

// maxRebuildsOvertaken bounds how many times one recovery rebuilds a
// replica whose copy retention on the leader overtook.
const maxRebuildsOvertaken = 3

// sameRange compares the digests of [from, to) on this replica and a peer.
func (p *Partition) sameRange(ctx context.Context, rp RecoveryPeer, from, to int64) (bool, error) {
	if to <= from {
		return true, nil
	}
	mine, _, err := p.log.Digest(ctx, from, to)
	if err != nil {
		return false, err
	}
	theirs, err := rp.ReplicaDigest(ctx, &transport.ReplicaDigestRequest{Topic: p.Topic, TopicID: p.TopicID, Partition: p.Index, From: from, To: to})
	if err != nil {
		return false, nil // not a boundary there, or not that long: not the same
	}
	return bytes.Equal(mine[:], theirs), nil
}

// Batches is the replica side of ReplicaBatches.
func (p *Partition) Batches(req *transport.ReplicaBatchesRequest) ([]transport.BatchID, error) {
	infos, err := p.log.BatchesBefore(req.Before, int(min(max(req.Max, 1), 1024)))
	if err != nil {
		return nil, p.noteLogErr(err)
	}
	out := make([]transport.BatchID, len(infos))
	for i, b := range infos {
		out[i] = transport.BatchID{BaseOffset: b.BaseOffset, NextOffset: b.NextOffset, LeaderEpoch: b.LeaderEpoch, CRC: b.CRC}
	}
	return out, nil
}

// Digest is the replica side of ReplicaDigest. With verify, every batch
// in the range is read whole and checked first (see Verify).
func (p *Partition) Digest(ctx context.Context, from, to int64, verify bool) ([]byte, int, error) {
	if verify {
		if err := p.Verify(ctx, from, to); err != nil {
			return nil, 0, err
		}
	}
	sum, n, err := p.log.Digest(ctx, from, to)
	return sum[:], n, p.noteLogErr(err)
}

// verifyChunk is how much of the log Verify reads at a time.
const verifyChunk = 1 << 20

// Verify reads every batch that starts in [from, to) whole and checks its
// checksum, its records and that offsets run on without a gap: the deep
// check that catches damage a batch's identity (offsets, epoch, CRC field)
// does not show, such as a bit flipped in an older segment, which nothing
// reads until a consumer or a follower does. A replica found damaged is
// marked so (see Problem). It reads the whole range: it costs what
// reading it costs.
func (p *Partition) Verify(ctx context.Context, from, to int64) error {
	off := from
	for off < to {
		if err := ctx.Err(); err != nil {
			return err
		}
		data, err := p.log.Read(ctx, off, verifyChunk, to, nil)
		if err != nil {
			if start := p.log.LogStartOffset(); errors.Is(err, storage.ErrOffsetOutOfRange) && start > off {
				// Retention deleted the rest of the range during the
				// check: nothing is damaged; there is less to check.
				return fmt.Errorf("%w: %s/%d: retention deleted offset %d during the check (the log now starts at %d); check again",
					storage.ErrOffsetOutOfRange, p.Topic, p.Index, off, start)
			}
			return p.noteLogErr(damageError(err))
		}
		if len(data) == 0 {
			return p.noteLogErr(fmt.Errorf("%w: %s/%d: nothing can be read at offset %d, below %d", storage.ErrCorrupt, p.Topic, p.Index, off, to))
		}
		next := off
		berr := record.Batches(data, func(b record.Batch) bool {
			switch {
			case b.NextOffset() <= next && next > off:
				err = fmt.Errorf("batch at offset %d after offset %d", b.BaseOffset(), next)
			case b.BaseOffset() > next:
				err = fmt.Errorf("offsets %d to %d are missing", next, b.BaseOffset())
			default:
				err = b.Validate()
			}
			next = b.NextOffset()
			return err == nil
		})
		if berr != nil || err != nil {
			return p.noteLogErr(fmt.Errorf("%w: %s/%d near offset %d: %v", storage.ErrCorrupt, p.Topic, p.Index, off, errors.Join(berr, err)))
		}
		off = next
	}
	return nil
}

// damageError marks a read error as damage: reading a range the log
// claims to hold can only fail for its files.
func damageError(err error) error {
	if errors.Is(err, storage.ErrCorrupt) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, storage.ErrClosed) {
		return err
	}
	return fmt.Errorf("%w: %w", storage.ErrCorrupt, err)
}

// Truncate is the replica side of TruncateReplica: from the leader of the
// request's epoch (older: ErrStaleEpoch), and never while this replica
// leads.
func (p *Partition) Truncate(ctx context.Context, req *transport.TruncateReplicaRequest) error {
	if err := p.fenceTo(req.LeaderEpoch); err != nil {
		return err
	}
	p.mu.Lock()
	st := p.mu.state
	p.mu.Unlock()
	if st.Leader == p.brokerID && st.LeaderEpoch >= req.LeaderEpoch {
		return fmt.Errorf("%w: broker %d leads %s/%d and is never truncated", ErrStaleEpoch, p.brokerID, p.Topic, p.Index)
	}
	if err := p.log.TruncateTo(ctx, req.Offset); err != nil {
		return err
	}
	p.mu.Lock()
	if p.mu.hw > req.Offset {
		// Records below the HW were acknowledged; a recovery that cuts them
		// rebuilds a replica whose content was wrong (its digest differed),
		// and the leader's copy is the one that counts.
		p.logger.Warn("truncated below the high watermark this replica knew", "offset", req.Offset, "hw", p.mu.hw)
		p.mu.hw = req.Offset
	}
	p.mu.Unlock()
	return nil
}

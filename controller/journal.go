package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/go-hclog"

	"gostream/controller/quorum"
	"gostream/metadata"
	"gostream/transport"
)

// journal makes the controller's state durable: its metadata, each change
// computed from the metadata of epoch base, and its audit trail. A single
// controller's journal is its two files (fileJournal); the candidates'
// will be their Raft group, which commits a change only if base is the
// epoch committed (docs/controller-raft.md).
type journal interface {
	// commit makes next the durable metadata, and evs, the audit events
	// of the change, part of the trail with it: both or neither, also
	// across a crash. It returns once they are durable.
	commit(ctx context.Context, base int64, next *metadata.Cluster, evs []transport.HistoryEvent) error
	// record appends events to the audit trail.
	record(ctx context.Context, evs []transport.HistoryEvent) error
	// history returns the audit trail, oldest first.
	history() ([]transport.HistoryEvent, error)
}

// fileJournal is the metadata file (written whole, atomically, with an
// fsync) and the audit trail file beside it. Changes are serialized by
// the controller, so base needs no check here. A change's events are
// made durable in the trail's pending file first, then the metadata
// file, then they are appended to the trail (history.resolvePending
// finishes or drops them after a crash).
type fileJournal struct {
	store  *metadata.Store
	hist   *history
	logger hclog.Logger
}

func (j *fileJournal) commit(_ context.Context, base int64, next *metadata.Cluster, evs []transport.HistoryEvent) error {
	if err := os.MkdirAll(filepath.Dir(j.store.Path()), 0o755); err != nil {
		return err
	}
	// The events of an earlier change whose append failed go first.
	if err := j.settle(base); err != nil {
		return err
	}
	if len(evs) > 0 {
		if err := j.hist.prepare(next.Epoch, evs); err != nil {
			return err
		}
	}
	if err := j.store.Save(next); err != nil {
		if aerr := j.hist.abandon(); aerr != nil {
			// Left pending at epoch next.Epoch, above what is persisted:
			// the next change or open drops it.
			j.logger.Warn("remove the audit events of a change not persisted", "err", aerr)
		}
		return err
	}
	if len(evs) > 0 {
		if err := j.settle(next.Epoch); err != nil {
			// The change is made; its events stay pending until the
			// next change or the next open appends them.
			j.logger.Error("append the audit events of a persisted change; they are kept and appended with the next change", "metadata_epoch", next.Epoch, "err", err)
		}
	}
	return nil
}

// settle resolves pending events against epoch, the metadata persisted.
func (j *fileJournal) settle(epoch int64) error {
	appended, dropped, err := j.hist.resolvePending(epoch)
	if err != nil {
		return fmt.Errorf("audit trail: %w", err)
	}
	if dropped > 0 {
		j.logger.Warn("dropped the audit events of a change that was never persisted", "events", dropped, "metadata_epoch", epoch)
	}
	if appended > 0 {
		j.logger.Info("appended the audit events of a change persisted before the trail", "events", appended, "metadata_epoch", epoch)
	}
	return nil
}

func (j *fileJournal) record(_ context.Context, evs []transport.HistoryEvent) error {
	return j.hist.append(evs...)
}

func (j *fileJournal) history() ([]transport.HistoryEvent, error) { return j.hist.read() }

// raftJournal is the candidates' Raft group: a change is committed only
// if base is the epoch the group has committed (quorum.ErrConflict
// otherwise), and only by the group's leader.
type raftJournal struct{ g *quorum.Group }

func (j raftJournal) commit(ctx context.Context, base int64, next *metadata.Cluster, evs []transport.HistoryEvent) error {
	return notActive(j.g.Propose(ctx, base, next, evs))
}

func (j raftJournal) record(ctx context.Context, evs []transport.HistoryEvent) error {
	return notActive(j.g.Record(ctx, evs))
}

// notActive gives the group's refusals of a candidate that is no longer
// its leader, or whose view is no longer the committed one, the
// controller's NotController.
func notActive(err error) error {
	if errors.Is(err, quorum.ErrNotLeader) || errors.Is(err, quorum.ErrConflict) {
		return fmt.Errorf("%w: %v", ErrNotController, err)
	}
	return err
}

func (j raftJournal) history() ([]transport.HistoryEvent, error) { return j.g.History(), nil }

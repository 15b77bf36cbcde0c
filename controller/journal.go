package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	// commit makes next the durable metadata; it returns once it is.
	commit(ctx context.Context, base int64, next *metadata.Cluster) error
	// record appends events to the audit trail.
	record(ctx context.Context, evs []transport.HistoryEvent) error
	// history returns the audit trail, oldest first.
	history() ([]transport.HistoryEvent, error)
}

// fileJournal is the metadata file (written whole, atomically, with an
// fsync) and the audit trail file beside it. Changes are serialized by
// the controller, so base needs no check here.
type fileJournal struct {
	store *metadata.Store
	hist  *history
}

func (j *fileJournal) commit(_ context.Context, _ int64, next *metadata.Cluster) error {
	if err := os.MkdirAll(filepath.Dir(j.store.Path()), 0o755); err != nil {
		return err
	}
	return j.store.Save(next)
}

func (j *fileJournal) record(_ context.Context, evs []transport.HistoryEvent) error {
	return j.hist.append(evs...)
}

func (j *fileJournal) history() ([]transport.HistoryEvent, error) { return j.hist.read() }

// raftJournal is the candidates' Raft group: a change is committed only
// if base is the epoch the group has committed (quorum.ErrConflict
// otherwise), and only by the group's leader.
type raftJournal struct{ g *quorum.Group }

func (j raftJournal) commit(ctx context.Context, base int64, next *metadata.Cluster) error {
	return notActive(j.g.Propose(ctx, base, next, nil))
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

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

// A candidate of a replicated controller (docs/controller-raft.md) keeps
// its state in the candidates' Raft group. Every candidate has a
// Controller; it follows the group's changes (Adopt) and refuses every
// change (NotController) until it wins the group's leadership and takes
// over (TakeOver): then it is the active controller, and its metadata
// names it so. When it loses the leadership it steps down (StepDown).

// OpenCandidate opens the controller of a candidate whose state is g.
func OpenCandidate(cfg Config, g *quorum.Group) *Controller {
	cfg = cfg.withDefaults()
	c := &Controller{cfg: cfg, logger: cfg.Logger, journal: raftJournal{g}, group: g}
	c.mu.seen = map[int32]string{}
	c.mu.meta = g.Metadata()
	if c.mu.meta == nil {
		c.mu.meta = &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: cfg.RootCluster, Epoch: quorum.NoMetadata}
	}
	c.mu.inactive = true
	return c
}

// notActive is the refusal of a candidate that is not the active
// controller, naming the one that is when it is known.
func (c *Controller) notActive() error {
	if l, ok := c.group.Leader(); ok && l.ID != c.cfg.Self.ID {
		return fmt.Errorf("%w: candidate %d is not the active controller; candidate %s is", ErrNotController, c.cfg.Self.ID, l)
	}
	return fmt.Errorf("%w: candidate %d is not the active controller, and no active controller is known yet", ErrNotController, c.cfg.Self.ID)
}

// Adopt makes meta, a change the group applied, this candidate's
// metadata, unless it holds newer. The group calls it on every
// candidate, in log order.
func (c *Controller) Adopt(meta *metadata.Cluster) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.meta == nil || meta.Epoch > c.mu.meta.Epoch {
		c.mu.meta = meta
	}
}

// TakeOver makes this candidate, the group's leader, the active
// controller: it waits until every committed change is applied here,
// commits the first metadata if the group has none (seed gives it; a
// candidate without seed waits for the one that has), then commits the
// change that names it the controller, and pushes it.
func (c *Controller) TakeOver(ctx context.Context, seed func() (*metadata.Cluster, []transport.HistoryEvent, error)) error {
	if err := c.group.Barrier(ctx); err != nil {
		return err
	}
	meta := c.group.Metadata()
	if meta == nil {
		if seed == nil {
			return fmt.Errorf("%w: the controller group holds no metadata yet, and candidate %d does not seed it", ErrNotController, c.cfg.Self.ID)
		}
		first, hist, err := seed()
		if err != nil {
			return err
		}
		if err := c.group.Propose(ctx, quorum.NoMetadata, first, hist); err != nil {
			return fmt.Errorf("commit the first metadata: %w", err)
		}
		meta = c.group.Metadata()
	}
	// The lease of the autopilot the metadata names counts from now.
	c.lease.forget()
	c.mu.Lock()
	c.mu.meta, c.mu.inactive = meta, false
	c.mu.Unlock()
	self := c.cfg.Self
	err := c.change(ctx, fmt.Sprintf("candidate %d takes over as the active controller", self.ID), func(m *metadata.Cluster) error {
		if old, ok := m.Broker(self.ID); m.ControllerID == self.ID && ok && old == self {
			return errNoChange
		}
		m.ControllerID = self.ID
		m.PutBroker(self)
		return nil
	})
	if err != nil {
		c.StepDown()
		return err
	}
	c.logger.Info("active controller", "candidate", self.ID, "metadata_epoch", c.Metadata().Epoch)
	return nil
}

// StepDown makes this candidate refuse every change again: it lost the
// group's leadership.
func (c *Controller) StepDown() {
	c.mu.Lock()
	c.mu.inactive = true
	c.mu.Unlock()
}

// NewClusterMetadata is the first metadata of a new cluster whose first
// controller is self.
func NewClusterMetadata(self metadata.Broker) (*metadata.Cluster, error) {
	id, err := newClusterID()
	if err != nil {
		return nil, err
	}
	m := &metadata.Cluster{Version: metadata.FormatVersion, ClusterID: id, ControllerID: self.ID, Epoch: 1}
	m.PutBroker(self)
	return m, nil
}

// Active reports whether this controller makes changes: a single
// controller always does, a candidate while it is the active one.
func (c *Controller) Active() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.mu.inactive
}

// SingleState reads what a single controller left in dir (its metadata
// file and its audit trail), for the candidate that seeds a group with
// it when the cluster is upgraded to a replicated controller. It is
// metadata.ErrNotFound when dir holds no metadata file.
func SingleState(dir string) (*metadata.Cluster, []transport.HistoryEvent, error) {
	meta, err := metadata.NewStore(filepath.Join(dir, metadataFile)).Load()
	if err != nil {
		return nil, nil, err
	}
	h := &history{path: filepath.Join(dir, historyFile)}
	if _, _, err := h.resolvePending(meta.Epoch); err != nil {
		return nil, nil, err
	}
	evs, err := h.read()
	if err != nil {
		return nil, nil, err
	}
	return meta, evs, nil
}

// RetireSingleState renames a single controller's metadata file once the
// group holds what it said, so that it seeds no group again: it becomes
// metadata.json.seeded. No file is not an error.
func RetireSingleState(dir string) error {
	path := filepath.Join(dir, metadataFile)
	err := os.Rename(path, path+".seeded")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

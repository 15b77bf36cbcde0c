package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The layout of a storage root beyond one log's directory: where a deleted
// topic's or replica's files go on their way out, and where a damaged
// replica's files are kept.
//
//	<root>/topics/<topic>/partition-<n>/   one replica (ReplicaDir)
//	<root>/topics/<topic>/partition-<n>/quarantine/damaged-<ns>/
//	                                       a damaged replica's files, kept whole
//	<root>/deleted/<name>-<random>/        a directory being removed

// deletedDir is where directories go to be removed: renamed there first,
// so that a crash never leaves a half-deleted one under its own name.
const deletedDir = "deleted"

// TopicDir returns the directory of a topic's replicas under the root.
func (r *Root) TopicDir(topic string) (string, error) {
	if err := checkDirName(topic); err != nil {
		return "", err
	}
	return filepath.Join(r.dir, "topics", topic), nil
}

// RemoveTopic deletes every replica of topic this root holds; see
// removeDir. A topic it holds nothing of is no error.
func (r *Root) RemoveTopic(topic string) error {
	dir, err := r.TopicDir(topic)
	if err != nil {
		return err
	}
	return r.removeDir(dir, topic)
}

// RemoveReplica deletes the directory of one replica; see removeDir.
func (r *Root) RemoveReplica(topic string, partition int32) error {
	dir, err := r.ReplicaDir(topic, partition)
	if err != nil {
		return err
	}
	return r.removeDir(dir, topic)
}

// maxTrashPrefix bounds the part of a directory's name that its place
// under deleted/ keeps: a topic's name may take 249 of the 255 bytes a
// file name may have.
const maxTrashPrefix = 200

// removeDir deletes a directory under the root: it is renamed under
// deleted/ first, then removed, so a crash never leaves a half-deleted
// one under its name. A directory that is not there is no error.
func (r *Root) removeDir(dir, name string) error {
	trash := filepath.Join(r.dir, deletedDir)
	if err := os.MkdirAll(trash, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", trash, err)
	}
	// The name is only for whoever looks in deleted/; cut, it leaves room
	// for MkdirTemp's random suffix in a file name's 255 bytes.
	tmp, err := os.MkdirTemp(trash, name[:min(len(name), maxTrashPrefix)]+"-")
	if err != nil {
		return err
	}
	if err := os.Rename(dir, filepath.Join(tmp, filepath.Base(dir))); err != nil {
		if os.IsNotExist(err) {
			return os.Remove(tmp)
		}
		return fmt.Errorf("delete %s: %w", dir, err)
	}
	return os.RemoveAll(tmp)
}

// QuarantineReplica moves every entry of a replica's directory but its
// quarantine/ into quarantine/damaged-<time>/, and syncs the directory:
// the files of a damaged replica are kept whole, never rewritten, while an
// empty log takes their place. The replica's log must be closed. It
// returns where the files went.
func (r *Root) QuarantineReplica(topic string, partition int32) (string, error) {
	dir, err := r.ReplicaDir(topic, partition)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	dest := filepath.Join(dir, QuarantineDir, fmt.Sprintf("damaged-%d", time.Now().UnixNano()))
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Name() == QuarantineDir {
			continue
		}
		if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(dest, e.Name())); err != nil {
			return "", err
		}
	}
	d, err := os.Open(dir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	return dest, d.Sync()
}

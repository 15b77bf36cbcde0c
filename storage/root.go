package storage

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// StampFile is the name of the file in a storage root that names the broker
// and the cluster the root belongs to.
const StampFile = "gostream.stamp"

const stampVersion = 1

// checkDirName refuses a topic name that is not one directory name (empty,
// . or .., or holding a path separator or a NUL), so that no path made of
// it leaves the root. It is storage's own safety check, not the cluster's
// naming rule (metadata.ValidateTopicName, which is narrower and which
// every name passes before it reaches storage).
func checkDirName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		return fmt.Errorf("%w: %q is not one directory name", ErrInvalidName, name)
	}
	return nil
}

// Stamp identifies the owner of a storage root.
type Stamp struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"broker_id"`
	ClusterID string `json:"cluster_id,omitempty"`
	// RootID is unique to this root, random, stamped at its first start:
	// a broker is its storage root, not its number. The controller binds
	// the broker id to it and refuses the id from any other root.
	RootID string `json:"root_id,omitempty"`
}

// LockFile is the file of a storage root that one process at a time holds
// locked while it uses the root.
const LockFile = ".lock"

// Root is one node's storage root: a directory stamped with the broker id
// (and, once known, the cluster id) that owns it, under which every replica
// of that broker lives. A Root never creates anything outside its directory.
type Root struct {
	dir    string
	fs     FS
	logger hclog.Logger
	lock   io.Closer // the root's lock, held until Close; nil on an FS that cannot lock
	// mu guards stamp: the cluster id is learned from the controller's
	// metadata while other goroutines read the stamp.
	mu    sync.Mutex
	stamp Stamp
}

// RootOptions configures OpenRootWith.
type RootOptions struct {
	// BrokerID is the broker that owns the root; it must be positive.
	BrokerID int32
	// ClusterID is the cluster the broker belongs to, or "" while unknown.
	ClusterID string
	// Logger receives lifecycle messages; none by default.
	Logger hclog.Logger
	// FS is the file system of the root and, unless their options name
	// another, of the logs opened from it; DefaultFS() by default.
	FS FS
}

// OpenRoot opens or creates the storage root dir for broker brokerID on
// the default FS; see OpenRootWith.
func OpenRoot(dir string, brokerID int32, clusterID string, logger hclog.Logger) (*Root, error) {
	return OpenRootWith(dir, RootOptions{BrokerID: brokerID, ClusterID: clusterID, Logger: logger})
}

// OpenRootWith opens or creates the storage root dir for broker
// opts.BrokerID.
//
// A new root is stamped with the broker id and cluster id. An existing root
// must carry the same broker id, and the same cluster id when both are
// known; otherwise OpenRootWith returns an error wrapping ErrStampMismatch
// and changes nothing. A stamp that cannot be parsed is reported with
// ErrCorrupt and is never rewritten. An error caused by a full disk
// matches ErrNoSpace.
func OpenRootWith(dir string, opts RootOptions) (*Root, error) {
	r, err := openRoot(dir, opts)
	return r, markNoSpace(err)
}

func openRoot(dir string, opts RootOptions) (*Root, error) {
	brokerID, clusterID, logger, fsys := opts.BrokerID, opts.ClusterID, opts.Logger, opts.FS
	if brokerID <= 0 {
		return nil, fmt.Errorf("storage: broker id must be positive, got %d", brokerID)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	if fsys == nil {
		fsys = defaultFS
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("storage root %q: %w", dir, err)
	}
	if err := fsys.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("create storage root: %w", err)
	}
	lock, err := lockRoot(fsys, abs)
	if err != nil {
		return nil, err
	}
	r := &Root{dir: abs, fs: fsys, logger: logger, lock: lock}
	if err := r.readStamp(brokerID, clusterID); err != nil {
		if lock != nil {
			lock.Close()
		}
		return nil, err
	}
	return r, nil
}

// readStamp loads the stamp of the root, or stamps a new root; see OpenRoot.
func (r *Root) readStamp(brokerID int32, clusterID string) error {
	abs, logger, fsys := r.dir, r.logger, r.fs
	path := filepath.Join(abs, StampFile)
	data, err := readFile(fsys, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.stamp = Stamp{Version: stampVersion, BrokerID: brokerID, ClusterID: clusterID, RootID: newRootID()}
		if err := r.writeStamp(); err != nil {
			return err
		}
		logger.Info("stamped new storage root", "dir", abs, "broker_id", brokerID, "cluster", clusterID, "root_id", r.stamp.RootID)
		return nil
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	}
	var st Stamp
	if err := json.Unmarshal(data, &st); err != nil {
		return markCorrupt(fmt.Errorf("stamp %s: %v", path, err))
	}
	if st.Version != stampVersion || st.BrokerID <= 0 {
		return markCorrupt(fmt.Errorf("stamp %s: unsupported version %d or broker id %d", path, st.Version, st.BrokerID))
	}
	if st.RootID != "" && !validRootID(st.RootID) {
		return markCorrupt(fmt.Errorf("stamp %s: root id %q is not 32 hex digits", path, st.RootID))
	}
	if st.BrokerID != brokerID {
		return fmt.Errorf("%w: %s belongs to broker %d, not broker %d", ErrStampMismatch, abs, st.BrokerID, brokerID)
	}
	if st.ClusterID != "" && clusterID != "" && st.ClusterID != clusterID {
		return fmt.Errorf("%w: %s belongs to cluster %q, not %q", ErrStampMismatch, abs, st.ClusterID, clusterID)
	}
	r.stamp = st
	if st.RootID == "" {
		// A root stamped before roots had ids gets one now, once.
		r.stamp.RootID = newRootID()
		if err := r.writeStamp(); err != nil {
			return err
		}
		logger.Info("stamped the storage root with a root id", "dir", abs, "root_id", r.stamp.RootID)
	}
	if st.ClusterID == "" && clusterID != "" {
		if err := r.SetClusterID(clusterID); err != nil {
			return err
		}
	}
	return nil
}

// newRootID returns a random 128-bit root id in hex.
func newRootID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("storage: no randomness: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

func validRootID(id string) bool {
	if len(id) != 32 {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil && strings.ToLower(id) == id
}

// lockRoot takes the root's lock file through fsys, when it can lock
// (see Locker), so that two processes never use one root at once (a second
// gostream-node started on the same --data-dir).
func lockRoot(fsys FS, dir string) (io.Closer, error) {
	l, ok := fsys.(Locker)
	if !ok {
		return nil, nil
	}
	c, err := l.Lock(filepath.Join(dir, LockFile))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRootInUse, dir, err)
	}
	return c, nil
}

// Dir returns the absolute path of the root.
func (r *Root) Dir() string { return r.dir }

// Stamp returns the root's stamp.
func (r *Root) Stamp() Stamp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stamp
}

// SetClusterID records the cluster id in a root that did not know it yet. It
// returns ErrStampMismatch if the root already names another cluster, and
// an error matching ErrNoSpace if the disk is full.
func (r *Root) SetClusterID(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stamp.ClusterID == id {
		return nil
	}
	if r.stamp.ClusterID != "" {
		return fmt.Errorf("%w: %s belongs to cluster %q, not %q", ErrStampMismatch, r.dir, r.stamp.ClusterID, id)
	}
	r.stamp.ClusterID = id
	if err := r.writeStamp(); err != nil {
		r.stamp.ClusterID = ""
		return markNoSpace(err)
	}
	return nil
}

// writeStamp persists the stamp; the caller holds mu or owns r alone.
func (r *Root) writeStamp() error {
	data, err := json.MarshalIndent(r.stamp, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(r.fs, filepath.Join(r.dir, StampFile), append(data, '\n'))
}

// ReplicaDir returns the directory of one partition replica under the root.
// The topic name is checked first (checkDirName), so the path never leaves
// the root.
func (r *Root) ReplicaDir(topic string, partition int32) (string, error) {
	if err := checkDirName(topic); err != nil {
		return "", err
	}
	if partition < 0 {
		return "", fmt.Errorf("%w: partition %d", ErrInvalidPartition, partition)
	}
	return filepath.Join(r.dir, "topics", topic, "partition-"+strconv.Itoa(int(partition))), nil
}

// OpenLog opens (creating if needed) the log of one partition replica, on
// the root's FS unless opts names another.
func (r *Root) OpenLog(topic string, partition int32, opts Options) (*Log, error) {
	dir, err := r.ReplicaDir(topic, partition)
	if err != nil {
		return nil, err
	}
	if opts.FS == nil {
		opts.FS = r.fs
	}
	if opts.Logger == nil {
		opts.Logger = r.logger.Named("log").With("topic", topic, "partition", partition)
	}
	return Open(dir, opts)
}

// Close releases the root's lock. Logs opened from it are closed by their
// owners. It is idempotent.
func (r *Root) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lock == nil {
		return nil
	}
	err := r.lock.Close() // releases the flock
	r.lock = nil
	return err
}

// WriteFileAtomic replaces path with data, on the default FS, so that a
// crash leaves either the old or the new content: it writes a temporary
// file, fsyncs it, renames it over path and fsyncs the directory. An error
// caused by a full disk matches ErrNoSpace, and leaves the old content.
func WriteFileAtomic(path string, data []byte) error {
	return markNoSpace(writeFileAtomic(defaultFS, path, data))
}

func writeFileAtomic(fsys FS, path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, name, err := createTemp(fsys, dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer fsys.Remove(name) // fails harmlessly after a successful rename
	if _, err := tmp.WriteAt(data, 0); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	if err := fsys.Rename(name, path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return syncDir(fsys, dir)
}

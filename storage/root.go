package storage

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// StampFile is the name of the file in a storage root that names the broker
// and the cluster the root belongs to.
const StampFile = "gostream.stamp"

const stampVersion = 1

// topicNameRE is the set of topic names that may become directory names.
var topicNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,249}$`)

// ValidateTopicName reports whether name may be used as a topic name, and so
// as a directory under the storage root. It returns an error wrapping
// ErrInvalidTopicName when it may not.
func ValidateTopicName(name string) error {
	if name == "." || name == ".." || !topicNameRE.MatchString(name) {
		return fmt.Errorf("%w: %q (want 1 to 249 of [A-Za-z0-9._-], not . or ..)", ErrInvalidTopicName, name)
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
	logger hclog.Logger
	lock   *os.File // held with flock until Close
	// mu guards stamp: the cluster id is learned from the controller's
	// metadata while other goroutines read the stamp.
	mu    sync.Mutex
	stamp Stamp
}

// OpenRoot opens or creates the storage root dir for broker brokerID.
//
// A new root is stamped with brokerID and clusterID. An existing root must
// carry the same broker id, and the same cluster id when both are known;
// otherwise OpenRoot returns an error wrapping ErrStampMismatch and changes
// nothing. A stamp that cannot be parsed is reported with ErrCorrupt and is
// never rewritten.
func OpenRoot(dir string, brokerID int32, clusterID string, logger hclog.Logger) (*Root, error) {
	if brokerID <= 0 {
		return nil, fmt.Errorf("storage: broker id must be positive, got %d", brokerID)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("storage root %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("create storage root: %w", err)
	}
	lock, err := lockRoot(abs)
	if err != nil {
		return nil, err
	}
	r := &Root{dir: abs, logger: logger, lock: lock}
	if err := r.readStamp(brokerID, clusterID); err != nil {
		lock.Close()
		return nil, err
	}
	return r, nil
}

// readStamp loads the stamp of the root, or stamps a new root; see OpenRoot.
func (r *Root) readStamp(brokerID int32, clusterID string) error {
	abs, logger := r.dir, r.logger
	path := filepath.Join(abs, StampFile)
	data, err := os.ReadFile(path)
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

// lockRoot takes the root's lock file, so that two processes never use
// one root at once (a second gostream-node started on the same
// --data-dir). The lock goes with the process, also on kill -9.
func lockRoot(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := flock(f); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		who := ""
		if pid := strings.TrimSpace(string(holder)); pid != "" {
			who = " (pid " + pid + ")"
		}
		return nil, fmt.Errorf("%w: %s is in use by another process%s: %v", ErrRootInUse, dir, who, err)
	}
	// The pid is for the error above only; the lock is what counts.
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
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
// returns ErrStampMismatch if the root already names another cluster.
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
	return r.writeStamp()
}

// writeStamp persists the stamp; the caller holds mu or owns r alone.
func (r *Root) writeStamp() error {
	data, err := json.MarshalIndent(r.stamp, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(filepath.Join(r.dir, StampFile), append(data, '\n'))
}

// ReplicaDir returns the directory of one partition replica under the root.
// The topic name is validated first, so the path never leaves the root.
func (r *Root) ReplicaDir(topic string, partition int32) (string, error) {
	if err := ValidateTopicName(topic); err != nil {
		return "", err
	}
	if partition < 0 {
		return "", fmt.Errorf("%w: partition %d", ErrInvalidPartition, partition)
	}
	return filepath.Join(r.dir, "topics", topic, "partition-"+strconv.Itoa(int(partition))), nil
}

// OpenLog opens (creating if needed) the log of one partition replica.
func (r *Root) OpenLog(topic string, partition int32, opts Options) (*Log, error) {
	dir, err := r.ReplicaDir(topic, partition)
	if err != nil {
		return nil, err
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

// WriteFileAtomic replaces path with data so that a crash leaves either the
// old or the new content: it writes a temporary file, fsyncs it, renames it
// over path and fsyncs the directory.
func WriteFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(data); err != nil {
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
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	return nil
}

package metadata

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"gostream/storage"
)

// ErrNotFound means there is no metadata file yet.
var ErrNotFound = errors.New("metadata: no metadata file")

// Store keeps the cluster metadata in one JSON file.
type Store struct {
	path string
}

// NewStore returns a store for the file at path.
func NewStore(path string) *Store { return &Store{path: path} }

// Path is the file the store keeps.
func (s *Store) Path() string { return s.path }

// Load reads and fully validates the metadata. It returns ErrNotFound when
// there is no file, and an error matching ErrCorrupt, naming the file and
// the reason, when the file does not parse or breaks an invariant. It never
// writes.
func (s *Store) Load() (*Cluster, error) {
	data, err := os.ReadFile(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read metadata %s: %w", s.path, err)
	}
	return Parse(data, s.path)
}

// Save validates c and replaces the file atomically. A change is done only
// once Save returns nil.
func (s *Store) Save(c *Cluster) error {
	if err := c.Validate(); err != nil {
		return err
	}
	data, err := Marshal(c)
	if err != nil {
		return err
	}
	return storage.WriteFileAtomic(s.path, data)
}

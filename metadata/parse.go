package metadata

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Parse decodes and fully validates metadata in the file format (JSON),
// from a file or the wire. source names where the bytes came from, for the
// error, which matches ErrCorrupt.
func Parse(data []byte, source string) (*Cluster, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Cluster
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, source, err)
	}
	// Only whitespace may follow. dec.More is not enough: it reports false
	// for a trailing '}' or ']'.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: %s: data after the metadata object", ErrCorrupt, source)
	}
	if err := c.Canonicalize(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorrupt, source, err)
	}
	return &c, nil
}

// Canonicalize validates c and gives it the form Parse gives what it
// decodes, so that metadata kept in memory equals the same metadata
// encoded and parsed again.
func (c *Cluster) Canonicalize() error {
	if err := c.Validate(); err != nil {
		return err
	}
	// "config": {} sets nothing, as no config does: one value for both, so
	// that what is loaded is what is saved again.
	for i := range c.Topics {
		if len(c.Topics[i].Config) == 0 {
			c.Topics[i].Config = nil
		}
	}
	if len(c.ACLs) == 0 {
		c.ACLs = nil
	}
	return nil
}

// Marshal encodes c in the file format.
func Marshal(c *Cluster) ([]byte, error) {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

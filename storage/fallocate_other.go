//go:build !linux

package storage

import (
	"errors"
	"os"
)

// fallocate is not available here: preallocation writes zeros instead.
func fallocate(*os.File, int64, int64) error { return errors.ErrUnsupported }

package storage

import (
	"errors"
	"os"
	"syscall"
)

// fallocate extends f to hold [off, off+n) with blocks that read as zeros
// and are allocated now, without writing them ("unwritten" extents). It
// returns errors.ErrUnsupported where the filesystem cannot do that.
func fallocate(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Fallocate(int(fd), 0, off, n)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errors.Is(ferr, syscall.EOPNOTSUPP) || errors.Is(ferr, syscall.ENOSYS) {
		return errors.ErrUnsupported
	}
	if ferr != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: ferr}
	}
	return nil
}

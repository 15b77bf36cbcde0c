//go:build !linux

package transport

import (
	"syscall"
	"time"
)

// setUserTimeout is a no-op where TCP_USER_TIMEOUT does not exist.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }

func userTimeout(syscall.RawConn) (time.Duration, error) { return 0, nil }

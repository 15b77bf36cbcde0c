package controller

import (
	"os"
	"syscall"
)

// crashpointEnv names a point at which the process kills itself with
// SIGKILL, exactly as kill -9 would, so that tests and the chaos harness can
// stop a controller between two steps of a change. It is read at each
// point; unset means never.
const crashpointEnv = "GOSTREAM_CRASHPOINT"

// crashpoint kills the process if the environment names this point.
func crashpoint(name string) {
	if os.Getenv(crashpointEnv) == name {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

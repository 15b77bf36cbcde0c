//go:build race

package main

import "os"

// raceEnabled makes TestMain build the binary under test with -race too.
const raceEnabled = true

// raceEnv is added to the environment of the binary under test. A race-built
// binary otherwise sleeps a second at exit; a race it finds still turns exit
// status 0 into 66, which the tests see.
func raceEnv() []string {
	if _, ok := os.LookupEnv("GORACE"); ok {
		return nil
	}
	return []string{"GORACE=atexit_sleep_ms=0"}
}

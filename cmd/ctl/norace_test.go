//go:build !race

package main

// raceEnabled makes TestMain build the binary under test with -race too.
const raceEnabled = false

func raceEnv() []string { return nil }

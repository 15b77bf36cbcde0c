//go:build race

package transport

// raceEnabled is set under the race detector, whose sync.Pool drops a
// share of what it is given on purpose: reuse cannot be counted there.
const raceEnabled = true

// Command fsyncbench measures the latency of the plainest durable append a
// disk allows: write 1 KiB at the end of a file, then fsync it, one at a
// time. It is the baseline that scripts/bench-compare.sh sets a
// synchronous producer's latency against, measured in the same run on the
// same filesystem as the nodes' data.
//
//	fsyncbench -dir DIR [-ops N] [-size BYTES]
//
// It prints one JSON object:
//
//	{"ops","size","p50_ms","p99_ms","mean_ms","ops_per_sec"}
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"
)

type result struct {
	Ops       int     `json:"ops"`
	Size      int     `json:"size"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
	MeanMs    float64 `json:"mean_ms"`
	OpsPerSec float64 `json:"ops_per_sec"`
}

func main() {
	dir := flag.String("dir", "", "directory on the filesystem to measure (required)")
	ops := flag.Int("ops", 2000, "number of write+fsync operations")
	size := flag.Int("size", 1024, "bytes written per operation")
	flag.Parse()
	if *dir == "" || *ops < 1 || *size < 1 {
		fmt.Fprintln(os.Stderr, "usage: fsyncbench -dir DIR [-ops N] [-size BYTES]")
		os.Exit(1)
	}
	r, err := run(*dir, *ops, *size)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fsyncbench:", err)
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "fsyncbench:", err)
		os.Exit(2)
	}
}

// run appends size bytes and fsyncs, ops times, to a new file in dir, and
// removes the file afterwards.
func run(dir string, ops, size int) (result, error) {
	f, err := os.CreateTemp(dir, "fsyncbench-*.log")
	if err != nil {
		return result{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = 'b'
	}
	lat := make([]time.Duration, ops)
	start := time.Now()
	for i := range lat {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return result{}, fmt.Errorf("write: %w", err)
		}
		if err := f.Sync(); err != nil {
			return result{}, fmt.Errorf("fsync: %w", err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed := time.Since(start)
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	return result{
		Ops:       ops,
		Size:      size,
		P50Ms:     ms(lat[(ops-1)/2]),
		P99Ms:     ms(lat[(ops*99-1)/100]),
		MeanMs:    ms(elapsed / time.Duration(ops)),
		OpsPerSec: float64(ops) / elapsed.Seconds(),
	}, nil
}

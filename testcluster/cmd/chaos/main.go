// Command chaos runs the chaos scenarios of package testcluster against real
// gostream-node processes and checks the invariants of DESIGN.md section 10
// from the history of the workload and from the replicas. It prints one
// row per scenario and exits 1 if any found a violation (2 if the harness
// could not run one). Run it from the module root: `make chaos`.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"gostream/testcluster"
)

func main() {
	// The network faults need a namespace of our own: run again inside one.
	if code, done := testcluster.ReexecInNetns(); done {
		os.Exit(code)
	}
	duration := flag.Duration("duration", 100*time.Second, "how long each scenario injects faults (healing and checking come on top)")
	seed := flag.Int64("seed", 0, "seed of the fault choices and timings (default: the time); scenario i uses seed+i")
	scenarios := flag.String("scenarios", strings.Join(testcluster.Scenarios, ","), "comma-separated scenarios: "+strings.Join(testcluster.Scenarios, ", "))
	race := flag.Bool("race", false, "build the node and ctl with the race detector")
	repeat := flag.Int("runs", 1, "run every scenario this many times, each with its own seed")
	keep := flag.Bool("keep", false, "save every run's history, logs and data, not only those that found a violation")
	runs := flag.String("runs-dir", "", "where a failing run's history, logs and data go (default testcluster/runs)")
	flag.Parse()
	if *seed == 0 {
		*seed = time.Now().UnixNano() % 1_000_000_000
	}
	names := strings.Split(*scenarios, ",")
	for _, n := range names {
		if !known(n) {
			fmt.Fprintf(os.Stderr, "chaos: unknown scenario %q (have %s)\n", n, strings.Join(testcluster.Scenarios, ", "))
			os.Exit(2)
		}
	}
	fmt.Printf("chaos: scenarios %s, %s each, seed %d\n", strings.Join(names, ","), *duration, *seed)
	if err := testcluster.Netns(); err != nil {
		fmt.Printf("chaos: no network faults on this machine: %v\n", err)
	}
	var results []testcluster.Result
	for r := 0; r < *repeat; r++ {
		for i, n := range names {
			s := *seed + int64(r*len(names)+i)
			replay := fmt.Sprintf("go run ./testcluster/cmd/chaos --scenarios %s --seed %d --duration %s", n, s, *duration)
			results = append(results, testcluster.RunScenario(testcluster.ScenarioConfig{
				Name: n, Seed: s, Duration: *duration, RunsDir: *runs, Race: *race, Replay: replay, Keep: *keep,
			}))
		}
	}
	exit := 0
	// One row per scenario, its runs added up.
	type row struct {
		seeds                                             []string
		runs, faults, leader, ops, produces, acked, reads int
		violations, harness                               int
	}
	rows := map[string]*row{}
	for _, r := range results {
		w := rows[r.Scenario]
		if w == nil {
			w = &row{}
			rows[r.Scenario] = w
		}
		w.seeds = append(w.seeds, fmt.Sprint(r.Seed))
		w.runs++
		w.faults += r.Faults
		w.leader += r.LeaderFaults
		w.ops += r.Stats.Ops
		w.produces += r.Stats.Produces
		w.acked += r.Stats.Acked
		w.reads += r.Stats.Reads
		w.violations += len(r.Violations)
		if r.Err != nil {
			w.harness++
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tseeds\truns\tfaults\tleader faults\toperations\tproduces\tacknowledged\treads\tviolations\t")
	for _, n := range names {
		w := rows[n]
		v := fmt.Sprint(w.violations)
		if w.harness > 0 {
			v += fmt.Sprintf(" (%d harness errors)", w.harness)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", n, strings.Join(w.seeds, ","), w.runs, w.faults, w.leader, w.ops, w.produces, w.acked, w.reads, v)
	}
	tw.Flush()
	for _, r := range results {
		if r.Err != nil {
			fmt.Printf("\n%s seed %d: harness error: %v\n", r.Scenario, r.Seed, r.Err)
			if exit == 0 {
				exit = 2
			}
		}
		if len(r.Violations) > 0 {
			exit = 1
			fmt.Printf("\n%s seed %d: %d violations:\n", r.Scenario, r.Seed, len(r.Violations))
			for _, v := range r.Violations {
				fmt.Printf("  %s\n", v)
			}
		}
		if len(r.Notes) > 0 {
			fmt.Printf("\n%s seed %d: %d notes (no invariant broken):\n", r.Scenario, r.Seed, len(r.Notes))
			for i, n := range r.Notes {
				if i == 5 {
					fmt.Printf("  ... %d more\n", len(r.Notes)-5)
					break
				}
				fmt.Printf("  %s\n", n)
			}
		}
		if r.SavedTo != "" {
			fmt.Printf("  saved to %s\n  replay: go run ./testcluster/cmd/chaos --scenarios %s --seed %d --duration %s\n", r.SavedTo, r.Scenario, r.Seed, *duration)
		}
	}
	os.Exit(exit)
}

func known(name string) bool {
	for _, s := range testcluster.Scenarios {
		if s == name {
			return true
		}
	}
	return false
}

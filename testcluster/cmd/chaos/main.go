// Command chaos runs the chaos scenarios of package testcluster against real
// gostream-node processes and checks the invariants of docs/design.md section 10
// from the history of the workload and from the replicas. It prints one
// row per scenario and exits 1 if any found a violation (2 if the harness
// could not run one). Run it from the module root: `make chaos`. With
// --check-history it checks a saved history instead.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"gostream/testcluster"
)

func main() {
	duration := flag.Duration("duration", 100*time.Second, "how long each scenario injects faults (healing and checking come on top)")
	seed := flag.Int64("seed", 0, "seed of the fault choices and timings (default: the time); scenario i uses seed+i")
	scenarios := flag.String("scenarios", strings.Join(testcluster.Scenarios, ","), "comma-separated scenarios: "+strings.Join(testcluster.Scenarios, ", "))
	race := flag.Bool("race", false, "build the node and ctl with the race detector")
	repeat := flag.Int("runs", 1, "run every scenario this many times, each with its own seed")
	keep := flag.Bool("keep", false, "save every run's history, logs and data, not only those that found a violation")
	runs := flag.String("runs-dir", "", "where a failing run's history, logs and data go (default testcluster/runs)")
	porcupineTimeout := flag.Duration("porcupine-timeout", testcluster.DefaultPorcupineTimeout, "how long porcupine may check a history before its verdict is inconclusive")
	check := flag.String("check-history", "", "check a saved history.jsonl with both checkers instead of running scenarios")
	secure := flag.Bool("secure", false, "run the clusters with TLS, mutual TLS, gossip encryption and authentication (docs/security.md)")
	flag.Parse()
	if *check != "" {
		os.Exit(checkHistory(*check, *porcupineTimeout))
	}
	// The network faults need a namespace of our own: run again inside one.
	if code, done := testcluster.ReexecInNetns(); done {
		os.Exit(code)
	}
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
	mode := ""
	if *secure {
		mode = ", with TLS, mutual TLS, gossip encryption and authentication"
	}
	fmt.Printf("chaos: scenarios %s, %s each, seed %d%s\n", strings.Join(names, ","), *duration, *seed, mode)
	if err := testcluster.Netns(); err != nil {
		fmt.Printf("chaos: no network faults on this machine: %v\n", err)
	}
	var results []testcluster.Result
	for r := 0; r < *repeat; r++ {
		for i, n := range names {
			s := *seed + int64(r*len(names)+i)
			replay := fmt.Sprintf("go run ./testcluster/cmd/chaos --scenarios %s --seed %d --duration %s", n, s, *duration)
			if *secure {
				replay += " --secure"
			}
			results = append(results, testcluster.RunScenario(testcluster.ScenarioConfig{
				Name: n, Seed: s, Duration: *duration, RunsDir: *runs, Race: *race, Replay: replay, Keep: *keep,
				PorcupineTimeout: *porcupineTimeout, Secure: *secure,
			}))
		}
	}
	exit := 0
	// One row per scenario, its runs added up.
	type row struct {
		seeds                                             []string
		runs, faults, leader, ops, produces, acked, reads int
		violations, harness                               int
		porcupine                                         map[string]int // runs per verdict
	}
	rows := map[string]*row{}
	for _, r := range results {
		w := rows[r.Scenario]
		if w == nil {
			w = &row{porcupine: map[string]int{}}
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
		if r.Porcupine.Verdict != "" {
			w.porcupine[r.Porcupine.Verdict]++
		}
		if r.Err != nil {
			w.harness++
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tseeds\truns\tfaults\tleader faults\toperations\tproduces\tacknowledged\treads\tporcupine\tviolations\t")
	for _, n := range names {
		w := rows[n]
		v := fmt.Sprint(w.violations)
		if w.harness > 0 {
			v += fmt.Sprintf(" (%d harness errors)", w.harness)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", n, strings.Join(w.seeds, ","), w.runs, w.faults, w.leader, w.ops, w.produces, w.acked, w.reads,
			verdicts(w.porcupine, w.runs), v)
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

// verdicts sums up porcupine's verdicts on a scenario's runs: the one
// verdict if they all had it, else how many had each; "-" if no run got
// as far as the check (a harness error).
func verdicts(n map[string]int, runs int) string {
	var parts []string
	checked := 0
	for _, v := range []string{testcluster.PorcupineViolation, testcluster.PorcupineInconclusive, testcluster.PorcupineOK} {
		checked += n[v]
		if n[v] == runs {
			return v
		}
		if n[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[v], v))
		}
	}
	switch {
	case checked == 0:
		return "-"
	case checked < runs:
		parts = append(parts, fmt.Sprintf("%d not checked", runs-checked))
	}
	return strings.Join(parts, ", ")
}

// checkHistory checks a saved history with CheckHistory and porcupine,
// prints what they found and, for a porcupine violation, writes the
// visualization next to the history. It returns the exit code: 1 for a
// violation, 2 if the history cannot be read.
func checkHistory(path string, timeout time.Duration) int {
	h, err := testcluster.LoadHistory(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		return 2
	}
	ops := h.Ops()
	start := time.Now()
	v, st := testcluster.CheckHistory(ops)
	fmt.Printf("CheckHistory: %d operations, %d produces, %d acknowledged, %d records read (%d different, found at their offsets by the final read of %d records): %d violations in %s\n",
		st.Ops, st.Produces, st.Acked, st.Reads, st.Kept, st.Final, len(v), time.Since(start).Round(time.Millisecond))
	for _, s := range v {
		fmt.Printf("  %s\n", s)
	}
	pr := testcluster.CheckPorcupine(ops, timeout)
	fmt.Printf("porcupine: %s\n", pr.Summary())
	for _, s := range pr.Violations {
		fmt.Printf("  %s\n", s)
	}
	if pr.Verdict == testcluster.PorcupineViolation {
		html := filepath.Join(filepath.Dir(path), "porcupine.html")
		if err := pr.SaveVisualization(html); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: porcupine visualization: %v\n", err)
		} else {
			fmt.Printf("  visualization: %s\n", html)
		}
	}
	if len(v) > 0 || pr.Verdict == testcluster.PorcupineViolation {
		return 1
	}
	return 0
}

func known(name string) bool {
	for _, s := range testcluster.Scenarios {
		if s == name {
			return true
		}
	}
	return false
}

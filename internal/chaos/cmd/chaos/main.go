// Command chaos runs Sluice's fault harness (make chaos): every scenario of
// docs/RELIABILITY.md's "Faults on a real network" on Linux network
// namespaces it creates, under load, and prints the table of measured
// over-admission against each stated bound. It needs root. It exits 1 when
// a scenario cannot run or breaks a bound.
//
//	chaos [-scenarios kill,split] [-dir DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/chaos"
)

func main() {
	if chaos.IsRole() {
		os.Exit(chaos.RunRole())
	}
	os.Exit(run())
}

func run() int {
	var names, dir string
	var short bool
	flag.StringVar(&names, "scenarios", "", "comma list of scenarios to run (default: all): "+strings.Join(scenarioNames(chaos.Scenarios()), ","))
	flag.StringVar(&dir, "dir", "", "where logs and histories go (default: a new directory under $TMPDIR, kept)")
	flag.BoolVar(&short, "short", false, "run only the short run's scenarios (those of make test)")
	flag.Parse()
	scenarios := chaos.Scenarios()
	if short {
		scenarios = chaos.ShortScenarios()
	}
	if names != "" {
		var picked []chaos.Scenario
		for n := range strings.SplitSeq(names, ",") {
			i := slices.IndexFunc(scenarios, func(s chaos.Scenario) bool { return s.Name == strings.TrimSpace(n) })
			if i < 0 {
				fmt.Fprintf(os.Stderr, "chaos: no scenario %q; there are %s\n", n, strings.Join(scenarioNames(scenarios), ", "))
				return 2
			}
			picked = append(picked, scenarios[i])
		}
		scenarios = picked
	}
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "sluice-chaos-"+time.Now().Format("20060102-150405")+"-"); err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			return 1
		}
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), chaos.Stop...)
	defer stop()
	start := time.Now()
	results, err := chaos.Run(ctx, chaos.Options{Dir: dir, Self: self, Scenarios: scenarios, Log: os.Stderr})
	fmt.Printf("\n%d scenarios in %v; logs and histories in %s\n\n", len(results), time.Since(start).Round(time.Second), dir)
	chaos.WriteTable(os.Stdout, results)
	code := 0
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		code = 1
	}
	for _, r := range results {
		for _, p := range r.Problems {
			fmt.Fprintf(os.Stderr, "chaos: %s: bound broken: %s\n", r.Scenario, p)
			code = 1
		}
	}
	return code
}

func scenarioNames(ss []chaos.Scenario) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

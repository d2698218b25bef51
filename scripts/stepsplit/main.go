// Command stepsplit prints the median RL step time of training runs and
// its split into rollout, verify and learning, from each run's
// metrics.jsonl: one markdown row per run directory given. The first step
// of a run (warm-up: buffers growing, caches filling) is left out, and so
// are steps that trained nothing.
//
//	go run ./scripts/stepsplit runs/step-split/*
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"rlvr/rundir"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: stepsplit RUN_DIR...")
		os.Exit(2)
	}
	fmt.Println("| run | steps | step s | rollout s | verify s | learn s |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: |")
	for _, dir := range os.Args[1:] {
		if err := row(dir); err != nil {
			fmt.Fprintln(os.Stderr, "stepsplit:", err)
			os.Exit(1)
		}
	}
}

func row(dir string) error {
	r, err := rundir.Load(dir)
	if err != nil {
		return err
	}
	keys := []string{rundir.MetricStepSeconds, rundir.MetricRolloutSeconds, rundir.MetricVerifySeconds, rundir.MetricLearnSeconds}
	cols := make([][]float64, len(keys))
	for _, st := range r.Steps {
		if st.Step <= 1 || st.Values[rundir.MetricSkippedUpdate] == 1 {
			continue
		}
		for i, k := range keys {
			cols[i] = append(cols[i], st.Values[k])
		}
	}
	if len(cols[0]) == 0 {
		return fmt.Errorf("%s: no step after the first trained anything", filepath.Join(dir, rundir.MetricsFile))
	}
	fmt.Printf("| %s | %d |", filepath.Base(dir), len(cols[0]))
	for _, c := range cols {
		slices.Sort(c)
		fmt.Printf(" %.3f |", c[len(c)/2])
	}
	fmt.Println()
	return nil
}

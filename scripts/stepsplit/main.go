// Command stepsplit prints the median RL step time of training runs and
// its split into rollout, verify and learning, from each run's
// metrics.jsonl: one markdown row per run directory given. The first step
// of a run (warm-up: buffers growing, caches filling) is left out, and so
// are steps that trained nothing.
//
//	go run ./scripts/stepsplit runs/step-split/*
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	path := filepath.Join(dir, "metrics.jsonl")
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	keys := []string{"step_s", "time_rollout_s", "time_verify_s", "time_learn_s"}
	cols := make([][]float64, len(keys))
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for line := 1; sc.Scan(); line++ {
		var m map[string]float64
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if m["step"] <= 1 || m["skipped_update"] == 1 {
			continue
		}
		for i, k := range keys {
			cols[i] = append(cols[i], m[k])
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(cols[0]) == 0 {
		return fmt.Errorf("%s: no step after the first trained anything", path)
	}
	fmt.Printf("| %s | %d |", filepath.Base(dir), len(cols[0]))
	for _, c := range cols {
		slices.Sort(c)
		fmt.Printf(" %.3f |", c[len(c)/2])
	}
	fmt.Println()
	return nil
}

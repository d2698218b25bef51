// Command cookbook writes the table of a tinker-cookbook RL run against
// rlvr serve --tinker (scripts/peers.sh cookbook) into docs/peers.md: per
// step, the mean reward and its parts, the share of groups with mixed
// rewards, the gap between the sampler's and the learner's logprobs the
// cookbook measures, and its timings.
//
//	cookbook -metrics runs/peers/cookbook/log/metrics.jsonl -doc docs/peers.md
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"rlvr/scripts/peers/docblock"
)

func main() {
	metrics := flag.String("metrics", "", "the cookbook run's metrics.jsonl")
	doc := flag.String("doc", "docs/peers.md", "the page whose cookbook-table block is rewritten")
	flag.Parse()
	if *metrics == "" {
		fmt.Fprintln(os.Stderr, "usage: cookbook -metrics FILE [-doc FILE]")
		os.Exit(2)
	}
	steps, err := readSteps(*metrics)
	if err == nil {
		err = docblock.Replace(*doc, map[string]string{"cookbook-table": table(steps)})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cookbook:", err)
		os.Exit(1)
	}
}

// columns are the cookbook's metric keys the table shows, with headings.
var columns = []struct{ key, heading, format string }{
	{"env/all/reward/total", "reward", "%.3f"},
	{"env/all/correct", "correct", "%.3f"},
	{"env/all/format", "format", "%.3f"},
	{"env/all/by_group/frac_mixed", "mixed groups", "%.2f"},
	{"optim/kl_sample_train_v1", "KL(sampler ‖ learner)", "%.1e"},
	{"grad_norm", "grad norm", "%.1f"},
	{"time/sampling", "sampling s", "%.1f"},
	{"time/train_step", "train s", "%.1f"},
	{"time/total", "step s", "%.1f"},
}

// readSteps reads the run's metrics, one JSON object a line; a line
// without "step" (the cookbook writes a few such) is skipped.
func readSteps(path string) ([]map[string]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var steps []map[string]float64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for line := 1; sc.Scan(); line++ {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if _, ok := raw["step"]; !ok {
			continue
		}
		m := map[string]float64{}
		for k, v := range raw {
			if x, ok := v.(float64); ok {
				m[k] = x
			}
		}
		steps = append(steps, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("%s: no step", path)
	}
	return steps, nil
}

func table(steps []map[string]float64) string {
	var b strings.Builder
	b.WriteString("| step |")
	for _, c := range columns {
		b.WriteString(" " + c.heading + " |")
	}
	b.WriteString("\n| ---: |" + strings.Repeat(" ---: |", len(columns)) + "\n")
	for _, m := range steps {
		fmt.Fprintf(&b, "| %.0f |", m["step"])
		for _, c := range columns {
			if v, ok := m[c.key]; ok {
				fmt.Fprintf(&b, " "+c.format+" |", v)
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

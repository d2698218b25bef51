package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"rlvr/internal/flagcheck"
	"rlvr/report"
	"rlvr/rundir"
)

func reportCmd() *cobra.Command {
	var out, baseline, expert string
	var table bool
	var blocks int
	var metrics, columns []string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR [RUN_DIR...]",
		Short: "Render training runs as an HTML page of charts and tables",
		Long: `report reads training run directories (config.yaml, metrics.jsonl, and
eval.jsonl and samples.jsonl when present) and writes report.html
with one PNG per chart: reward, accuracy, evaluation accuracy with its 95%
interval, clipping, KL and entropy, response length, gradient norm, throughput
and the split of a step's time, then a panel for every other metric logged,
grouped by the prefix of its name (loss/…, expert/…). Several runs overlay in
each chart, to compare algorithms and seeds; a summary table gives each run's
steps, final and best evaluation, accuracy before and after training, and
step time, and the last samples of each run follow the charts. It prints the
page's path.

With --table it writes no page but prints a markdown table for write-ups,
one row per configuration across seeds: runs whose directory names differ
only in a seed suffix (-seed3, _seed3, -s3) form a row. Each row gives the
final test accuracy (the best expert's, or greedy without experts) as the
mean over seeds with a 95% t-interval, every seed's test problems pooled
with a Wilson interval, the experts' accuracies, their majority vote and
its difference from the best expert, each seed's best expert, the validation
accuracy before training and at the end (what a row is chosen on), the
zero-variance fraction, rollout accuracy over the first
and last 10 steps, and seconds per step. A run without a test evaluation
contributes its last validation one, marked †. --baseline ROW adds each
row's difference from that row, paired by seed (config.yaml's seed).
--column keeps only the columns named, in the order named (a header, or
the start of one: "Δ vs"), as a write-up prints its table. --expert E1
reports every row under that expert prompt instead of the one best on
validation, as MEML-GRPO's Table 4 sets MEML-GRPO (Expert1) beside
Expert1-SFT-GRPO.

With --blocks N it prints, instead of a page (and after the table with
--table), each of --metrics per block of N training steps: one line per
row, each cell the mean over seeds of every seed's mean over the block,
with a 95% t-interval over the seeds; with --baseline, each other row's
difference from that row per block, paired by seed. It is how a write-up
shows how fast a row learned, or how often it consulted, in each stage of
its runs.`,
		Example: `  rlvr report runs/grpo-s1
  rlvr report runs/grpo-s1 runs/grpo-s2 runs/dapo-s1 runs/dapo-s2 --out reports/grpo-vs-dapo
  rlvr report --table --baseline grpo runs/grpo-s{1,2,3} runs/dapo-s{1,2,3} >> docs/dapo.md
  rlvr report --blocks 50 --metrics accuracy,grad_norm --baseline grpo runs/grpo-s{1,2,3} runs/dapo-s{1,2,3}`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagcheck.Check
			for _, dir := range args {
				if st, err := os.Stat(dir); err != nil {
					c.Problem("run directory %s: %v", dir, flagcheck.StatProblem(err))
				} else if !st.IsDir() {
					c.Problem("run directory %s is a file, not a directory", dir)
				}
			}
			if out != "" && !table {
				c.OutDir("out", out, true)
			}
			if cmd.Flags().Changed("blocks") && blocks < 1 {
				c.Add("blocks", "%d: a block is at least one step", blocks)
			}
			if len(columns) > 0 && !table {
				c.Add("column", "needs --table")
			}
			if cmd.Flags().Changed("expert") && !table {
				c.Add("expert", "needs --table")
			} else {
				c.NonEmpty("expert", expert, cmd.Flags().Changed("expert"))
			}
			if cmd.Flags().Changed("metrics") && blocks == 0 {
				c.Add("metrics", "needs --blocks")
			}
			for _, m := range metrics {
				if strings.TrimSpace(m) == "" {
					c.Add("metrics", "an empty metric name")
					break
				}
			}
			if !table && blocks == 0 && cmd.Flags().Changed("baseline") {
				c.Add("baseline", "needs --table or --blocks")
			} else {
				c.NonEmpty("baseline", baseline, cmd.Flags().Changed("baseline"))
			}
			if err := c.Err(); err != nil {
				return err
			}
			runs := make([]*rundir.Run, len(args))
			for i, dir := range args {
				r, err := report.Load(dir)
				if err != nil {
					return err
				}
				runs[i] = r
			}
			if expert != "" {
				var err error
				if runs, err = report.UnderExpert(runs, expert); err != nil {
					return fmt.Errorf("--expert: %w", err)
				}
			}
			if table || blocks > 0 {
				return printTables(cmd, runs, table, baseline, columns, blocks, metrics)
			}
			if out == "" {
				out = args[0]
			}
			if err := report.Render(out, runs...); err != nil {
				return err
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), filepath.Join(out, report.HTMLFile))
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "out", "o", "", "directory to write report.html and its charts into (default: the first run directory)")
	cmd.Flags().BoolVar(&table, "table", false, "print a markdown table of rows across seeds instead of writing the page")
	cmd.Flags().StringVar(&baseline, "baseline", "", "with --table or --blocks, the row that every other row is compared with, paired by seed")
	cmd.Flags().StringVar(&expert, "expert", "", "with --table, the expert prompt (E0, E1, …) every row is reported under, rather than the one best on validation")
	cmd.Flags().StringArrayVar(&columns, "column", nil, "with --table, a column to keep (a header or its start; repeatable, in order)")
	cmd.Flags().IntVar(&blocks, "blocks", 0, "print --metrics per block of this many training steps, across seeds, instead of a page")
	cmd.Flags().StringSliceVar(&metrics, "metrics", []string{"accuracy"}, "with --blocks, the metrics.jsonl fields to table, comma-separated; A-B is field A less field B at each step that logs both")
	cmd.MarkFlagsMutuallyExclusive("table", "out") // --table prints to standard output
	cmd.MarkFlagsMutuallyExclusive("blocks", "out")
	pathFlags(cmd, "out")
	return cmd
}

// printTables prints, with table, the markdown table of the runs' rows,
// then, with blocks > 0, the per-block tables of the metrics. report.Table
// and report.Blocks say which rows, columns or metrics there are when one
// named is not there.
func printTables(cmd *cobra.Command, runs []*rundir.Run, table bool, baseline string, columns []string, blocks int, metrics []string) error {
	var parts []string
	if table {
		t, err := report.Table(runs, baseline, columns...)
		if err != nil {
			return fmt.Errorf("--baseline or --column: %w", err)
		}
		parts = append(parts, t)
	}
	if blocks > 0 {
		t, err := report.Blocks(runs, metrics, blocks, baseline)
		if err != nil {
			return err
		}
		parts = append(parts, t)
	}
	_, err := fmt.Fprint(cmd.OutOrStdout(), strings.Join(parts, "\n"))
	return err
}

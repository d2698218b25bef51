package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/report"
)

func reportCmd() *cobra.Command {
	var o report.Options
	cmd := &cobra.Command{
		Use:     "report RUN_DIR [RUN_DIR...]",
		Short:   "Render training runs as an HTML page of charts and tables",
		Long:    reportLong,
		Example: reportExample,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Runs, o.Given = args, cmd.Flags().Changed
			res, err := o.Run()
			if err != nil {
				return err
			}
			if res.Page != "" {
				_, err = fmt.Fprintln(cmd.OutOrStdout(), res.Page)
			} else {
				_, err = fmt.Fprint(cmd.OutOrStdout(), res.Tables)
			}
			return err
		},
	}
	bindReportFlags(cmd.Flags(), &o)
	cmd.MarkFlagsMutuallyExclusive("table", "out") // --table prints to standard output
	cmd.MarkFlagsMutuallyExclusive("blocks", "out")
	cmd.MarkFlagsMutuallyExclusive("compute", "out")
	pathFlags(cmd, "out")
	return cmd
}

// reportLong is rlvr report's help.
const reportLong = `report reads training run directories (config.yaml, metrics.jsonl, and
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
its runs.

With --compute it prints, last, each run's recorded wall time, split into
its training steps, its evaluations and its cold start, with core-hours
from the threads machine.jsonl names, and their total over the runs: the
budget an experiment spent, as a write-up states it.`

// reportExample is rlvr report's examples.
const reportExample = `  rlvr report runs/grpo-s1
  rlvr report runs/grpo-s1 runs/grpo-s2 runs/dapo-s1 runs/dapo-s2 --out reports/grpo-vs-dapo
  rlvr report --table --baseline grpo runs/grpo-s{1,2,3} runs/dapo-s{1,2,3} >> docs/dapo.md
  rlvr report --blocks 50 --metrics accuracy,grad_norm --baseline grpo runs/grpo-s{1,2,3} runs/dapo-s{1,2,3}
  rlvr report --compute results/smollm2/*-seed*/`

// bindReportFlags binds rlvr report's flags to o.
func bindReportFlags(f *pflag.FlagSet, o *report.Options) {
	f.StringVarP(&o.Out, "out", "o", "", "directory to write report.html and its charts into (default: the first run directory)")
	f.BoolVar(&o.Table, "table", false, "print a markdown table of rows across seeds instead of writing the page")
	f.StringVar(&o.Baseline, "baseline", "", "with --table or --blocks, the row that every other row is compared with, paired by seed")
	f.StringVar(&o.Expert, "expert", "", "with --table, the expert prompt (E0, E1, …) every row is reported under, rather than the one best on validation")
	f.StringArrayVar(&o.Columns, "column", nil, "with --table, a column to keep (a header or its start; repeatable, in order)")
	f.IntVar(&o.Blocks, "blocks", 0, "print --metrics per block of this many training steps, across seeds, instead of a page")
	f.BoolVar(&o.Compute, "compute", false, "print each run's recorded wall time (steps, evaluations, cold start) and core-hours, and their total, instead of a page")
	f.StringSliceVar(&o.Metrics, "metrics", []string{"accuracy"}, "with --blocks, the metrics.jsonl fields to table, comma-separated; A-B is field A less field B at each step that logs both")
}

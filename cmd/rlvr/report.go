package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"rlvr/report"
)

func reportCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "report RUN_DIR [RUN_DIR...]",
		Short: "Render training runs as an HTML page of charts and tables",
		Long: `report reads training run directories (config.yaml, metrics.jsonl, and
eval.jsonl, result.json and samples.jsonl when present) and writes report.html
with one PNG per chart: reward, accuracy, evaluation accuracy with its 95%
interval, clipping, KL and entropy, response length, gradient norm, throughput
and the split of a step's time, then a panel for every other metric logged,
grouped by the prefix of its name (loss/…, expert/…). Several runs overlay in
each chart, to compare algorithms and seeds; a summary table gives each run's
steps, final and best evaluation, accuracy before and after training, and
step time, and the last samples of each run follow the charts. It prints the
page's path.`,
		Example: `  rlvr report runs/grpo-s1
  rlvr report runs/grpo-s1 runs/grpo-s2 runs/dapo-s1 runs/dapo-s2 --out reports/grpo-vs-dapo`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			for _, dir := range args {
				if st, err := os.Stat(dir); err != nil {
					c.problems = append(c.problems, fmt.Sprintf("run directory %s: %v", dir, statProblem(err)))
				} else if !st.IsDir() {
					c.problems = append(c.problems, fmt.Sprintf("run directory %s is a file, not a directory", dir))
				}
			}
			if out != "" {
				c.outDir("out", out, true)
			}
			if err := c.err(); err != nil {
				return err
			}
			runs := make([]*report.Run, len(args))
			for i, dir := range args {
				r, err := report.Load(dir)
				if err != nil {
					return err
				}
				runs[i] = r
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
	return cmd
}

package main

import (
	"encoding/json"
	"os"

	"github.com/spf13/cobra"

	"rlvr/method/probe"
	"rlvr/task/world"
)

func probeCmd() *cobra.Command {
	var (
		modelPath, consultPath, out string
		worldVersion, problems, k   int
		maxTokens                   int
		levels                      []int
		temperature                 float64
		seed                        uint64
	)
	cmd := &cobra.Command{
		Use:   "probe",
		Short: "Measure, before any training, whether the world lets MEL's and EAPO's guidance pay",
		Long: `probe measures a world model at step 0 on problems of --levels (default the
sparse levels 5 and 6), the preconditions docs/world.md states for a test bed in
which MEL and EAPO can work:

- the policy alone: greedy accuracy, and the share of groups of --k samples at
  --temperature that are all right or all wrong (no signal for GRPO);
- MEL's replay: from each group with right and wrong answers, one pair; the
  policy writes a meta-experience on it, one replay with it validates it, and
  --k fresh answers with it are compared with --k fresh answers without it, on
  the same question (the gain, paired by question);
- EAPO's consultation as at the first step of the --consult config, every
  reply accepted: the share of queries the experts could read, and the
  accuracy of episodes whose accepted replies were all right against episodes
  that did not consult (paired by problem).`,
		Example: `  rlvr probe --world 2
  rlvr probe --world 1 --problems 1000 --out runs/probe-v1.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			if cmd.Flags().Changed("model") {
				c.model("model", modelPath)
			} else if modelPath = worldModelPath(worldVersion); modelPath == "" {
				c.add("world", "%d: no such world version (%v)", worldVersion, world.Versions)
			}
			c.file("consult", consultPath)
			if err := c.err(); err != nil {
				return err
			}
			cfg := probe.Config{Levels: levels, Problems: problems, K: k, Temperature: temperature, MaxTokens: maxTokens, Seed: seed}
			if err := cfg.Validate(); err != nil {
				return err
			}
			l, err := openModel(modelPath, "")
			if err != nil {
				return err
			}
			w, stop, err := newConsultWorkflow(consultPath, modelPath, l, false, nil, nil)
			if err != nil {
				return err
			}
			defer stop()
			rep, err := probe.Run(cmd.Context(), cmd.ErrOrStderr(), modelPath, l, w, cfg)
			if err != nil {
				return err
			}
			rep.Print(cmd.OutOrStdout())
			if out != "" {
				b, _ := json.MarshalIndent(rep, "", "  ")
				if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&worldVersion, "world", 1, "the world version whose pretrained model to probe, instead of --model")
	f.StringVar(&modelPath, "model", "", "a world model directory (default: --world's)")
	f.IntSliceVar(&levels, "levels", []int{5, 6}, "world levels to draw problems from")
	f.IntVar(&problems, "problems", 500, "problems")
	f.IntVar(&k, "k", 8, "samples per problem (the group size)")
	f.Float64Var(&temperature, "temperature", 1, "sampling temperature (the rollouts')")
	f.IntVar(&maxTokens, "max-tokens", 256, "new tokens per answer")
	f.Uint64Var(&seed, "seed", 1, "problem and sampling seed")
	f.StringVar(&consultPath, "consult", "configs/world-eapo.yaml", "training config whose consultation part to probe")
	f.StringVar(&out, "out", "", "also write the report as JSON to this file")
	cmd.MarkFlagsMutuallyExclusive("world", "model")
	return cmd
}

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/checkpoint"
)

// initModelCmd is `rlvr init-model`: a randomly initialised Hugging Face
// checkpoint of a named shape around a tokenizer.
func initModelCmd() *cobra.Command {
	var o checkpoint.InitModelOptions
	cmd := &cobra.Command{
		Use:     "init-model",
		Short:   "Write a randomly initialised model of a named shape around a tokenizer",
		Long:    initModelLong + shapesHelp(),
		Example: initModelExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Given = cmd.Flags().Changed
			res, err := o.Run()
			if err != nil {
				return err
			}
			c := res.Config
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %.2fM parameters (d_model %d, %d layers, %d heads / %d KV of %d, SwiGLU %d, vocab %d), seed %d\n",
				o.Out, c.Architecture, float64(res.Params)/1e6, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads,
				c.NumKeyValueHeads, c.HeadDim, c.IntermediateSize, c.VocabSize, o.Seed)
			fmt.Fprintf(cmd.OutOrStdout(), "bos_token_id %s, eos_token_id %s; copied %s\n", tokenIDs(c.BOSTokenIDs), tokenIDs(c.EOSTokenIDs), strings.Join(res.Copied, ", "))
			return nil
		},
	}
	bindInitModelFlags(cmd.Flags(), &o)
	pathFlags(cmd, "tokenizer", "out")
	return cmd
}

// initModelLong is rlvr init-model's help, before the list of shapes
// (shapesHelp).
const initModelLong = `init-model writes a complete Hugging Face model directory with random weights:
config.json, model.safetensors (float32) and a copy of the tokenizer's files.
The vocabulary is the tokenizer's (added tokens included) and bos_token_id and
eos_token_id come from its tokenizer_config.json, so the model opens, renders
chats and samples like a downloaded one of the same shape. The flags below
--shape override single dimensions of the shape.

Shapes:
`

// initModelExample is rlvr init-model's examples.
const initModelExample = `  rlvr init-model --tokenizer ../shared/data/tokenizers/qwen3 --shape qwen3-tiny --out /tmp/qwen3-tiny
  rlvr init-model --tokenizer ../shared/data/tokenizers/qwen3 --shape qwen3-0.6b --layers 4 --out /tmp/qwen3-4l`

// shapesHelp lists the named shapes, one a line, for the help.
func shapesHelp() string {
	var b strings.Builder
	for _, s := range checkpoint.Shapes() {
		fmt.Fprintf(&b, "  %-14s %s\n", s.Name, s.Description)
	}
	return b.String()
}

// bindInitModelFlags binds rlvr init-model's flags to o.
func bindInitModelFlags(f *pflag.FlagSet, o *checkpoint.InitModelOptions) {
	f.StringVar(&o.Tokenizer, "tokenizer", "", "directory holding tokenizer.json and tokenizer_config.json")
	f.StringVar(&o.Shape, "shape", "qwen3-tiny", "named shape (see above)")
	f.StringVar(&o.Out, "out", "", "directory to write; must not exist or be empty, unless --force")
	f.Uint64Var(&o.Seed, "seed", 1, "initialization seed")
	f.BoolVar(&o.Force, "force", false, "write into a non-empty directory, replacing its model files")
	f.IntVar(&o.Over.Dim, "dim", 0, "override the shape's d_model (hidden_size)")
	f.IntVar(&o.Over.Layers, "layers", 0, "override the number of layers")
	f.IntVar(&o.Over.Heads, "heads", 0, "override the number of attention heads")
	f.IntVar(&o.Over.KVHeads, "kv-heads", 0, "override the number of key/value heads")
	f.IntVar(&o.Over.HeadDim, "head-dim", 0, "override the head size (0: dim/heads)")
	f.IntVar(&o.Over.Hidden, "hidden", 0, "override the SwiGLU width (intermediate_size)")
	f.IntVar(&o.Over.MaxSeq, "max-seq", 0, "override the context length (max_position_embeddings)")
}

// tokenIDs writes token ids as config.json does: null, a number or a list.
func tokenIDs(ids []int32) string {
	switch len(ids) {
	case 0:
		return "null"
	case 1:
		return fmt.Sprint(ids[0])
	}
	return fmt.Sprint(ids)
}

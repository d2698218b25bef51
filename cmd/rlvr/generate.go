package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/backend/local"
)

func generateCmd() *cobra.Command {
	o := local.GenerateOptions{Models: localModels}
	cmd := &cobra.Command{
		Use:     "generate",
		Short:   "Generate text from a model",
		Long:    generateLong,
		Example: generateExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			res, err := o.Run(cmd.Context(), out)
			if err != nil {
				return err
			}
			for i, g := range res {
				if o.Streams() {
					fmt.Fprintln(out)
				} else {
					fmt.Fprintf(out, "--- sample %d (%s, %d tokens)\n%s%s\n", i, g.Finish, g.Tokens, o.Prompt, g.Text)
				}
			}
			return nil
		},
	}
	bindGenerateFlags(cmd.Flags(), &o)
	pathFlags(cmd, "model", "tokenizer")
	return cmd
}

// generateLong is rlvr generate's help.
const generateLong = `generate continues a prompt with a local model: a Hugging Face directory
(config.json, model.safetensors, tokenizer.json), a llama2.c .bin checkpoint,
or a model rlvr trained (default: the one rlvr pretrain saved). With --chat the
prompt is a user message rendered with the model's chat template.`

// generateExample is rlvr generate's examples.
const generateExample = `  rlvr generate --prompt 'Q:12+7
'
  rlvr generate --model ../shared/data/stories260K/stories260K.bin --prompt 'Once upon a time' --temperature 0`

// bindGenerateFlags binds rlvr generate's flags to o.
func bindGenerateFlags(f *pflag.FlagSet, o *local.GenerateOptions) {
	p := &o.Params
	f.StringVar(&o.Model, "model", defaultModel(), "model: Hugging Face directory, .gguf file or llama2.c .bin file")
	f.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&o.Prompt, "prompt", "", "text to continue")
	f.BoolVar(&o.Chat, "chat", false, "treat --prompt as a user message and apply the chat template")
	f.IntVar(&p.MaxTokens, "max-tokens", 256, "new tokens at most")
	f.Float32Var(&p.Temperature, "temperature", 0.8, "sampling temperature (0: greedy)")
	f.Float32Var(&p.TopP, "top-p", 1, "nucleus sampling mass, in (0, 1]")
	f.IntVar(&p.TopK, "top-k", 0, "sample among the k most likely tokens (0: all)")
	f.IntVar(&p.N, "n", 1, "samples")
	f.Uint64Var(&p.Seed, "seed", 0, "sampling seed")
	f.StringArrayVar(&p.Stop, "stop", nil, "stop string (repeatable)")
}

package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"rlvr/checkpoint"
)

func importCmd() *cobra.Command {
	var o checkpoint.ImportOptions
	cmd := &cobra.Command{
		Use:     "import MODEL.gguf",
		Short:   "Convert a GGUF model (llama.cpp, ollama) into a Hugging Face directory",
		Long:    importLong,
		Example: importExample,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.GGUF = args[0]
			res, err := o.Run()
			if err != nil {
				return err
			}
			if res.Kept {
				fmt.Fprintf(cmd.OutOrStdout(), "%s already holds this import; kept it\n", o.Out)
				return nil
			}
			c := res.Config
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %.1fM parameters (d_model %d, %d layers, %d heads / %d KV of %d, vocab %d) in %s\n",
				o.Out, c.Architecture, float64(res.Params)/1e6, c.HiddenSize, c.NumHiddenLayers,
				c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.VocabSize, res.Elapsed.Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Out, "out", "", "the Hugging Face directory to write")
	f.StringVar(&o.DType, "dtype", "f32", "weights in model.safetensors: f32 or bf16")
	f.BoolVar(&o.Force, "force", false, "replace --out when it exists")
	pathFlags(cmd, "out")
	return cmd
}

// importLong is rlvr import's help.
const importLong = `import reads a GGUF file of the llama or gemma3 architecture, dequantizes every
tensor to float32, undoes llama.cpp's conversions (its Q/K row order, Gemma's
1 + w norm weights), and writes a complete Hugging Face model directory:
config.json, model.safetensors, tokenizer.json, tokenizer_config.json (with
the chat template) and generation_config.json. transformers loads the result;
so does every rlvr command, which also takes the .gguf file itself.`

// importExample is rlvr import's examples.
const importExample = `  rlvr import ~/.cache/rlvr/models/SmolLM2-135M-Instruct.Q4_1.gguf --out runs/smollm2
  rlvr import gemma-3-270m-q4_k_m.gguf --out runs/gemma3 --dtype bf16`

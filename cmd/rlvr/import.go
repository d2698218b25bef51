package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"rlvr/checkpoint"
	"rlvr/format/hf"
	"rlvr/format/safetensors"
	"rlvr/internal/atomicfile"
	"rlvr/internal/flagcheck"
)

func importCmd() *cobra.Command {
	var (
		out, dtype string
		force      bool
	)
	cmd := &cobra.Command{
		Use:   "import MODEL.gguf",
		Short: "Convert a GGUF model (llama.cpp, ollama) into a Hugging Face directory",
		Long: `import reads a GGUF file of the llama or gemma3 architecture, dequantizes every
tensor to float32, undoes llama.cpp's conversions (its Q/K row order, Gemma's
1 + w norm weights), and writes a complete Hugging Face model directory:
config.json, model.safetensors, tokenizer.json, tokenizer_config.json (with
the chat template) and generation_config.json. transformers loads the result;
so does every rlvr command, which also takes the .gguf file itself.`,
		Example: `  rlvr import ~/.cache/rlvr/models/SmolLM2-135M-Instruct.Q4_1.gguf --out runs/smollm2
  rlvr import gemma-3-270m-q4_k_m.gguf --out runs/gemma3 --dtype bf16`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var fc flagcheck.Check
			fc.File("MODEL.gguf", args[0])
			if out == "" {
				fc.Add("out", "is required")
			} else {
				fc.OutDir("out", out, force)
			}
			dt := map[string]safetensors.DType{"f32": safetensors.F32, "bf16": safetensors.BF16}[dtype]
			if dt == "" {
				fc.Add("dtype", "%q: want f32 or bf16", dtype)
			}
			if err := fc.Err(); err != nil {
				return err
			}
			start := time.Now()
			l, err := checkpoint.Open(args[0], "")
			if err != nil {
				return err
			}
			files, err := checkpoint.ReadTokenizerFiles(args[0])
			if err != nil {
				return err
			}
			// Written beside out, in a directory of this process's own,
			// and renamed into place: a failure leaves no half directory,
			// and imports running at once never touch each other's files.
			tmp, err := atomicfile.StageDir(out)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			defer os.RemoveAll(tmp)
			if err := hf.Save(tmp, l.Model, l.HFConfig, dt); err != nil {
				return err
			}
			for name, b := range files {
				if err := atomicfile.WriteBytes(filepath.Join(tmp, name), b); err != nil {
					return err
				}
			}
			// out exists with contents when --force replaces it or when
			// another import finished first: the same files are kept.
			kept, err := atomicfile.PublishDir(tmp, out, func(dir string) (bool, error) {
				same, err := atomicfile.SameTree(tmp, dir)
				if errors.Is(err, fs.ErrNotExist) {
					return false, nil // replaced meanwhile: publish again
				} else if err != nil || same {
					return same, err
				}
				if !force {
					return false, fmt.Errorf("--out: %s was filled by another process during the import; replace it with --force", out)
				}
				return false, nil
			})
			if err != nil {
				return err
			}
			if kept {
				fmt.Fprintf(cmd.OutOrStdout(), "%s already holds this import; kept it\n", out)
				return nil
			}
			c := l.HFConfig
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s: %s, %.1fM parameters (d_model %d, %d layers, %d heads / %d KV of %d, vocab %d) in %s\n",
				out, c.Architecture, float64(l.Model.NumParams())/1e6, c.HiddenSize, c.NumHiddenLayers,
				c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.VocabSize, time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "the Hugging Face directory to write")
	f.StringVar(&dtype, "dtype", "f32", "weights in model.safetensors: f32 or bf16")
	f.BoolVar(&force, "force", false, "replace --out when it exists")
	pathFlags(cmd, "out")
	return cmd
}

package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"rlvr/backend/local"
	"rlvr/format/tokenizer"
	"rlvr/internal/flagcheck"
	"rlvr/sample"
)

func generateCmd() *cobra.Command {
	var (
		modelPath, tokPath, prompt string
		chat                       bool
		p                          sample.Params
	)
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Generate text from a model",
		Long: `generate continues a prompt with a local model: a Hugging Face directory
(config.json, model.safetensors, tokenizer.json), a llama2.c .bin checkpoint,
or a model rlvr trained (default: the one rlvr pretrain saved). With --chat the
prompt is a user message rendered with the model's chat template.`,
		Example: `  rlvr generate --prompt 'Q:12+7
'
  rlvr generate --model ../shared/data/stories260K/stories260K.bin --prompt 'Once upon a time' --temperature 0`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagcheck.Check
			c.Error("model", localModels.Check(modelPath))
			if tokPath != "" {
				c.File("tokenizer", tokPath)
			}
			c.Sampling(p.Temperature, p.TopP, p.TopK, p.Stop, "")
			c.IntIn("max-tokens", p.MaxTokens, 1, flagcheck.MaxNewTokens)
			c.IntIn("n", p.N, 1, flagcheck.MaxSamples)
			if err := c.Err(); err != nil {
				return err
			}
			l, err := localModels.Open(modelPath, tokPath)
			if err != nil {
				return err
			}
			text := prompt
			if chat {
				if l.Chat == nil {
					return fmt.Errorf("%s has no chat template", l.Name)
				}
				if text, err = l.Chat([]tokenizer.Message{{Role: "user", Content: prompt}}); err != nil {
					return err
				}
			}
			p.StopTokens = l.StopTokens
			req := sample.Request{Prompt: l.Encode(text), Params: p}
			switch n := len(req.Prompt); {
			case n == 0:
				return fmt.Errorf("--prompt is empty, and %s does not start prompts with a BOS token: give a prompt", l.Name)
			case n >= l.Model.Config.MaxSeq:
				return fmt.Errorf("--prompt is %d tokens, leaving no room in the context of %d", n, l.Model.Config.MaxSeq)
			}
			out := cmd.OutOrStdout()
			streaming := max(p.N, 1) == 1 && len(p.Stop) == 0
			if streaming {
				// Print each token's text as it comes: decode everything so
				// far and write what is new.
				var toks []int32
				printed := 0
				fmt.Fprint(out, prompt)
				req.OnToken = func(_ int, tok int32, _ float32) {
					toks = append(toks, tok)
					s := l.Decode(toks)
					if len(s) > printed && !strings.HasSuffix(s, "\uFFFD") {
						fmt.Fprint(out, s[printed:])
						printed = len(s)
					}
				}
			}
			res, err := local.NewSampler(l.Model, l.Tokenizer).Sample(cmd.Context(), []sample.Request{req})
			if err != nil {
				return err
			}
			for i, c := range res[0] {
				if streaming {
					fmt.Fprintln(out)
				} else {
					fmt.Fprintf(out, "--- sample %d (%s, %d tokens)\n%s%s\n", i, c.Finish, len(c.Tokens), prompt, l.Decode(c.Tokens))
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", defaultModel(), "model: Hugging Face directory, .gguf file or llama2.c .bin file")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&prompt, "prompt", "", "text to continue")
	f.BoolVar(&chat, "chat", false, "treat --prompt as a user message and apply the chat template")
	f.IntVar(&p.MaxTokens, "max-tokens", 256, "new tokens at most")
	f.Float32Var(&p.Temperature, "temperature", 0.8, "sampling temperature (0: greedy)")
	f.Float32Var(&p.TopP, "top-p", 1, "nucleus sampling mass, in (0, 1]")
	f.IntVar(&p.TopK, "top-k", 0, "sample among the k most likely tokens (0: all)")
	f.IntVar(&p.N, "n", 1, "samples")
	f.Uint64Var(&p.Seed, "seed", 0, "sampling seed")
	f.StringArrayVar(&p.Stop, "stop", nil, "stop string (repeatable)")
	pathFlags(cmd, "model", "tokenizer")
	return cmd
}

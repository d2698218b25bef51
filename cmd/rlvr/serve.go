package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	api "rlvr/api/openai"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/serve"
	"rlvr/serve/tinkerserver"
)

func serveCmd() *cobra.Command {
	o := serve.Options{Models: localModels, Experts: expert.WorldModels, Under: underExpert}
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Serve a local model over the OpenAI API, or the Tinker API with --tinker",
		Long:    serveLong,
		Example: serveExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Given = cmd.Flags().Changed
			return o.Run(cmd.Context(), cmd.ErrOrStderr())
		},
	}
	bindServeFlags(cmd.Flags(), &o)
	cmd.MarkFlagsMutuallyExclusive("expert", "prompt-suffix")
	// --tinker serves --model for training: no scripted experts, and no
	// prompt, since Tinker calls carry their own tokens; the tokenizer is
	// the one beside the model.
	for _, f := range []string{"world-experts", "expert", "system", "prompt-suffix", "tokenizer"} {
		cmd.MarkFlagsMutuallyExclusive("tinker", f)
	}
	pathFlags(cmd, "model", "tokenizer", "state")
	return cmd
}

// serveLong is rlvr serve's help.
const serveLong = `serve answers /v1/models, /v1/chat/completions and /v1/completions (with
streaming) from a local model, batching concurrent requests into one forward
pass. It listens on loopback unless --addr says otherwise, and refuses an
--addr that other machines reach unless an API key is set (or --insecure
says to serve anyone who reaches the port). With a key, requests must carry
"Authorization: Bearer <key>"; others get 401. The key comes from --api-key,
or else from the environment variable ` + serve.TokenEnv + `, which keeps it out of
the process list.

With --tinker it answers the Tinker training API instead (/api/v1/...,
the calls of SkyRL tx and hosted Tinker): clients create models of --model
(served under --name), train every parameter on rlvr's engine and sample
from them. The key then travels in X-API-Key, as the Tinker SDK sends it,
or as the bearer token; weights saved by save_weights go under --state.
--max-models, --max-saved-states and --max-saved-gib bound what clients
may hold: the models in memory and the saves on disk.`

// serveExample is rlvr serve's examples.
const serveExample = `  rlvr serve --model ../shared/data/stories260K/stories260K.bin
  rlvr serve --model runs/meml-grpo-model --expert 1        # under the expert best on validation
  curl -s localhost:8000/v1/completions -d '{"model":"stories260K","prompt":"Once upon a time","max_tokens":40}'
  rlvr serve --tinker --model runs/sft-model --state runs/tinker-state   # the Tinker API`

// bindServeFlags binds rlvr serve's flags to o.
func bindServeFlags(f *pflag.FlagSet, o *serve.Options) {
	f.StringVar(&o.Model, "model", defaultModel(), "model: Hugging Face directory, .gguf file or llama2.c .bin file")
	f.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&o.Name, "name", "", "model id clients ask for (default: the model's directory or file name)")
	f.StringVar(&o.Config.Addr, "addr", "127.0.0.1:8000", "listen address")
	f.StringVar(&o.Precision, "precision", "fp32", precisionUsage)
	f.StringVar(&o.Config.Token, "api-key", "", "key every request must carry, as a bearer token (with --tinker also in X-API-Key); needed with an --addr beyond loopback (default: $"+serve.TokenEnv+"; the flag wins)")
	f.StringVar(&o.Config.Token, "token", "", "the old name of --api-key")
	f.MarkDeprecated("token", "use --api-key")
	f.BoolVar(&o.Config.Insecure, "insecure", false, "serve an --addr beyond loopback without an API key: anyone who reaches the port may use the server")
	f.IntVar(&o.Config.MaxTokens, "max-tokens", 0, "largest max_tokens a request may ask for (0: 4096)")
	f.IntVar(&o.Config.MaxN, "max-n", 0, fmt.Sprintf("largest n (with --tinker: num_samples) a request may ask for (0: %d, at most %d; with --tinker 128)", serve.DefaultMaxN, api.MaxN))
	f.IntVar(&o.Config.MaxBatch, "max-batch", 0, "sequences sampled together at most (0: 64)")
	f.DurationVar(&o.Config.BatchWindow, "batch-window", 0, "how long an idle server waits for more requests to batch (0: 2ms)")
	f.BoolVar(&o.Config.WholeBatches, "whole-batches", false, "sample each batch to completion before the next starts, instead of admitting requests into the running batch")
	f.Int64Var(&o.Config.KVCacheBytes, "kv-cache-bytes", 0, "memory of the decoding loop's KV cache, --max-batch samples; beyond it the context served shrinks, and with --tinker a call longer than a slot runs alone in the same memory once the batch drains (0: 2 GiB)")
	f.BoolVar(&o.Verbose, "verbose", false, "log every request")
	f.BoolVar(&o.WorldExperts, "world-experts", false, "serve the built-in world's scripted experts as models E0 (reference) to E3")
	f.StringVar(&o.System, "system", "", "system prompt put before every chat that has none (e.g. the expert prompt a model was trained under)")
	f.StringVar(&o.Suffix, "prompt-suffix", "", `text appended to every completion prompt (e.g. a world expert's "@E2\n")`)
	f.IntVar(&o.Expert, "expert", 0, "serve under expert I's prompt, the one a model trained by MEML-GRPO is used under: the paper's persona after --system for a chat model, @E<I> after a world prompt")
	f.BoolVar(&o.Tinker, "tinker", false, "answer the Tinker training API (/api/v1) over --model instead of the OpenAI API")
	f.StringVar(&o.State, "state", "", "with --tinker: the directory save_weights writes to (default: a new directory under the system's temporary directory)")
	f.DurationVar(&o.PollTimeout, "poll-timeout", 0, "with --tinker: how long retrieve_future waits for a result before answering 408 (0: 30s)")
	f.IntVar(&o.MaxModels, "max-models", 0, fmt.Sprintf("with --tinker: models alive at once, each a copy of --model's weights with its optimizer state (0: %d)", tinkerserver.DefaultMaxModels))
	f.IntVar(&o.MaxSavedStates, "max-saved-states", 0, fmt.Sprintf("with --tinker: saved states and exports kept under --state (0: %d)", tinkerserver.DefaultMaxSavedStates))
	f.IntVar(&o.MaxSavedGiB, "max-saved-gib", 0, fmt.Sprintf("with --tinker: GiB the saved states and exports under --state may take together (0: %d)", tinkerserver.DefaultMaxSavedBytes>>30))
}

// underExpert is the system prompt and suffix a model is served under
// with --expert I: eval's, as a model is evaluated under expert I.
func underExpert(chat bool, system, suffix string, i int) (string, string) {
	return eval.Prompting{System: system, Suffix: suffix, Expert: i}.Under(chat)
}

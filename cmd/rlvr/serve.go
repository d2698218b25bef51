package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	api "rlvr/api/openai"
	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/format/tokenizer"
	"rlvr/serve"
	"rlvr/serve/tinkerserver"
)

// underPrompt serves m under a fixed expert prompt: system goes first in
// every chat without a system message, and suffix after every prompt of a
// model without a chat template.
func underPrompt(m serve.Model, system, suffix string) serve.Model {
	if chat := m.Chat; chat != nil && system != "" {
		m.Chat = func(msgs []tokenizer.Message) (string, error) {
			if len(msgs) == 0 || msgs[0].Role != "system" {
				msgs = append([]tokenizer.Message{{Role: "system", Content: system}}, msgs...)
			}
			return chat(msgs)
		}
	}
	if suffix != "" {
		encode := m.Encode
		m.Encode = func(text string) []int32 { return encode(text + suffix) }
	}
	return m
}

func serveCmd() *cobra.Command {
	var (
		modelPath, tokPath, name string
		precisionName            string
		system, suffix           string
		cfg                      serve.Config
		verbose, worldExperts    bool
		expertIndex              int
		tinkerMode               bool
		stateDir                 string
		pollTimeout              time.Duration
		limits                   tinkerLimits
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a local model over the OpenAI API, or the Tinker API with --tinker",
		Long: `serve answers /v1/models, /v1/chat/completions and /v1/completions (with
streaming) from a local model, batching concurrent requests into one forward
pass. It listens on loopback unless --addr says otherwise, and refuses an
--addr that other machines reach unless an API key is set (or --insecure
says to serve anyone who reaches the port). With a key, requests must carry
"Authorization: Bearer <key>"; others get 401. The key comes from --api-key,
or else from the environment variable ` + tokenEnv + `, which keeps it out of
the process list.

With --tinker it answers the Tinker training API instead (/api/v1/...,
the calls of SkyRL tx and hosted Tinker): clients create models of --model
(served under --name), train every parameter on rlvr's engine and sample
from them. The key then travels in X-API-Key, as the Tinker SDK sends it,
or as the bearer token; weights saved by save_weights go under --state.
--max-models, --max-saved-states and --max-saved-gib bound what clients
may hold: the models in memory and the saves on disk.`,
		Example: `  rlvr serve --model ../shared/data/stories260K/stories260K.bin
  rlvr serve --model runs/meml-grpo-model --expert 1        # under the expert best on validation
  curl -s localhost:8000/v1/completions -d '{"model":"stories260K","prompt":"Once upon a time","max_tokens":40}'
  rlvr serve --tinker --model runs/sft-model --state runs/tinker-state   # the Tinker API`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			if tinkerMode {
				if cmd.Flags().Changed("state") {
					c.outDir("state", stateDir, true)
				}
				if pollTimeout < 0 || pollTimeout > maxPollTimeout {
					c.add("poll-timeout", "%v: must be in [0, %v]", pollTimeout, maxPollTimeout)
				}
				c.intIn("max-models", limits.models, 0, maxTinkerModels)
				c.intIn("max-saved-states", limits.savedStates, 0, maxSavedStates)
				c.intIn("max-saved-gib", limits.savedGiB, 0, maxSavedGiB)
			} else {
				for _, f := range []string{"state", "poll-timeout", "max-models", "max-saved-states", "max-saved-gib"} {
					if cmd.Flags().Changed(f) {
						c.add(f, "is read only with --tinker")
					}
				}
			}
			if !worldExperts || cmd.Flags().Changed("model") {
				c.model("model", modelPath)
				if tokPath != "" {
					c.file("tokenizer", tokPath)
				}
			}
			c.nonEmptyIfSet(cmd, "name", name)
			c.addr("addr", cfg.Addr)
			checkAPIKey(&c, cmd, &cfg)
			c.intIn("max-tokens", cfg.MaxTokens, 0, maxNewTokens)
			if tinkerMode {
				c.intIn("max-n", cfg.MaxN, 0, maxSamples)
			} else {
				c.intIn("max-n", cfg.MaxN, 0, api.MaxN)
			}
			c.intIn("max-batch", cfg.MaxBatch, 0, maxServeBatch)
			if w := cfg.BatchWindow; w < 0 || w > maxBatchWindow {
				c.add("batch-window", "%v: must be in [0, %v]", w, maxBatchWindow)
			}
			expertIndex = checkExpert(&c, cmd, expertIndex)
			prec := c.precision("precision", precisionName)
			if tinkerMode && prec != model.FP32 {
				// The Tinker server builds its models itself and offers no
				// precision yet.
				c.add("precision", "%s: the Tinker server's models compute in fp32", precisionName)
			}
			if err := c.err(); err != nil {
				return err
			}
			system, suffix = withNewlines(system), withNewlines(suffix)
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			if tinkerMode {
				return serveTinker(cmd, modelPath, name, cfg, stateDir, pollTimeout, limits)
			}
			var models []serve.Model
			if worldExperts {
				models = expert.WorldModels()
			}
			if !worldExperts || cmd.Flags().Changed("model") {
				l, err := openModel(modelPath, tokPath)
				if err != nil {
					return err
				}
				l.Model.Precision = prec
				if name == "" {
					name = l.Name
				}
				system, suffix := eval.Prompting{System: system, Suffix: suffix, Expert: expertIndex,
					Persona: expertPersona}.Under(l.Chat != nil)
				if l.Chat != nil && suffix != "" {
					return fmt.Errorf("--prompt-suffix: model %s has a chat template; give its expert prompt with --system", l.Name)
				}
				if l.Chat == nil && system != "" {
					return fmt.Errorf("--system: model %s has no chat template; give its expert prompt with --prompt-suffix", l.Name)
				}
				models = append(models, underPrompt(serve.Checkpoint(name, l), system, suffix))
			}
			srv, err := serve.New(cfg, models...)
			if err != nil {
				return err
			}
			addr := cfg.Addr
			if addr == "" {
				addr = "127.0.0.1:8000"
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return err
			}
			for _, m := range models {
				fmt.Fprintf(cmd.ErrOrStderr(), "serving %s on http://%s/v1\n", m.Name, ln.Addr())
			}
			printTokenSource(cmd, cfg, "the bearer token")
			return serveUntilDone(cmd, ln, srv.Serve, nil, srv.Shutdown)
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", defaultModel(), "model: Hugging Face directory, .gguf file or llama2.c .bin file")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&name, "name", "", "model id clients ask for (default: the model's directory or file name)")
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:8000", "listen address")
	f.StringVar(&precisionName, "precision", "fp32", precisionUsage)
	f.StringVar(&cfg.Token, "api-key", "", "key every request must carry, as a bearer token (with --tinker also in X-API-Key); needed with an --addr beyond loopback (default: $"+tokenEnv+"; the flag wins)")
	f.StringVar(&cfg.Token, "token", "", "the old name of --api-key")
	f.MarkDeprecated("token", "use --api-key")
	f.BoolVar(&cfg.Insecure, "insecure", false, "serve an --addr beyond loopback without an API key: anyone who reaches the port may use the server")
	f.IntVar(&cfg.MaxTokens, "max-tokens", 0, "largest max_tokens a request may ask for (0: 4096)")
	f.IntVar(&cfg.MaxN, "max-n", 0, fmt.Sprintf("largest n (with --tinker: num_samples) a request may ask for (0: %d, at most %d; with --tinker 128)", serve.DefaultMaxN, api.MaxN))
	f.IntVar(&cfg.MaxBatch, "max-batch", 0, "sequences sampled together at most (0: 64)")
	f.DurationVar(&cfg.BatchWindow, "batch-window", 0, "how long an idle server waits for more requests to batch (0: 2ms)")
	f.BoolVar(&cfg.WholeBatches, "whole-batches", false, "sample each batch to completion before the next starts, instead of admitting requests into the running batch")
	f.Int64Var(&cfg.KVCacheBytes, "kv-cache-bytes", 0, "memory of the decoding loop's KV cache, --max-batch samples; beyond it the context served shrinks (0: 2 GiB)")
	f.BoolVar(&verbose, "verbose", false, "log every request")
	f.BoolVar(&worldExperts, "world-experts", false, "serve the built-in world's scripted experts as models E0 (reference) to E3")
	f.StringVar(&system, "system", "", "system prompt put before every chat that has none (e.g. the expert prompt a model was trained under)")
	f.StringVar(&suffix, "prompt-suffix", "", `text appended to every completion prompt (e.g. a world expert's "@E2\n")`)
	f.IntVar(&expertIndex, "expert", 0, "serve under expert I's prompt, the one a model trained by MEML-GRPO is used under: the paper's persona after --system for a chat model, @E<I> after a world prompt")
	f.BoolVar(&tinkerMode, "tinker", false, "answer the Tinker training API (/api/v1) over --model instead of the OpenAI API")
	f.StringVar(&stateDir, "state", "", "with --tinker: the directory save_weights writes to (default: a new directory under the system's temporary directory)")
	f.DurationVar(&pollTimeout, "poll-timeout", 0, "with --tinker: how long retrieve_future waits for a result before answering 408 (0: 30s)")
	f.IntVar(&limits.models, "max-models", 0, fmt.Sprintf("with --tinker: models alive at once, each a copy of --model's weights with its optimizer state (0: %d)", tinkerserver.DefaultMaxModels))
	f.IntVar(&limits.savedStates, "max-saved-states", 0, fmt.Sprintf("with --tinker: saved states and exports kept under --state (0: %d)", tinkerserver.DefaultMaxSavedStates))
	f.IntVar(&limits.savedGiB, "max-saved-gib", 0, fmt.Sprintf("with --tinker: GiB the saved states and exports under --state may take together (0: %d)", tinkerserver.DefaultMaxSavedBytes>>30))
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

// checkAPIKey checks the API key flags and fills cfg.Token from the
// environment when no flag gives it; an --addr beyond loopback needs a key
// or --insecure.
func checkAPIKey(c *flagCheck, cmd *cobra.Command, cfg *serve.Config) {
	var given []string
	for _, f := range []string{"api-key", "token"} {
		if cmd.Flags().Changed(f) {
			given = append(given, f)
			c.nonEmptyIfSet(cmd, f, cfg.Token)
		}
	}
	switch {
	case len(given) > 1:
		c.add("token", "is the old name of --api-key; give one of them")
	case len(given) == 0:
		cfg.Token = os.Getenv(tokenEnv)
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err == nil && !serve.IsLoopback(cfg.Addr) && cfg.Token == "" && !cfg.Insecure {
		c.add("addr", "%q accepts connections from other machines: give --api-key (or $%s) so that requests must carry it, or --insecure to serve anyone who reaches the port",
			cfg.Addr, tokenEnv)
	}
}

// printTokenSource says where the key requests need comes from, or that
// none is needed.
func printTokenSource(cmd *cobra.Command, cfg serve.Config, what string) {
	switch {
	case cmd.Flags().Changed("api-key"), cmd.Flags().Changed("token"):
		fmt.Fprintf(cmd.ErrOrStderr(), "requests need %s given by --api-key\n", what)
	case cfg.Token != "":
		fmt.Fprintf(cmd.ErrOrStderr(), "requests need %s in $%s\n", what, tokenEnv)
	case !serve.IsLoopback(cfg.Addr):
		fmt.Fprintf(cmd.ErrOrStderr(), "serving anyone who reaches %s, without %s (--insecure)\n", cfg.Addr, what)
	}
}

// tinkerLimits are the flags bounding what Tinker clients hold; 0 means
// the server's default.
type tinkerLimits struct {
	models, savedStates, savedGiB int
}

// serveTinker serves the model at modelPath over the Tinker API until the
// command's context ends.
func serveTinker(cmd *cobra.Command, modelPath, name string, cfg serve.Config, stateDir string, pollTimeout time.Duration, limits tinkerLimits) error {
	out := cmd.ErrOrStderr()
	if err := ensureWorldModel(cmd.Context(), modelPath); err != nil {
		return err
	}
	if name == "" {
		name = checkpoint.Name(modelPath)
	}
	made := ""
	if stateDir == "" {
		dir, err := os.MkdirTemp("", "rlvr-tinker-state-")
		if err != nil {
			return err
		}
		stateDir, made = dir, dir
	}
	srv, err := tinkerserver.New(tinkerserver.Config{
		Models:       map[string]string{name: modelPath},
		StateDir:     stateDir,
		APIKey:       cfg.Token,
		MaxSamples:   cfg.MaxN,
		MaxNewTokens: cfg.MaxTokens,
		MaxBatch:     cfg.MaxBatch,
		BatchWindow:  cfg.BatchWindow,
		PollTimeout:  pollTimeout,
		Logger:       cfg.Logger,
		WholeBatches: cfg.WholeBatches,
		KVCacheBytes: cfg.KVCacheBytes,

		MaxModels:      limits.models,
		MaxSavedStates: limits.savedStates,
		MaxSavedBytes:  int64(limits.savedGiB) << 30,
	})
	if err != nil {
		if made != "" {
			os.Remove(made)
		}
		return err
	}
	defer srv.Close()
	if pollTimeout == 0 {
		pollTimeout = tinkerserver.DefaultPollTimeout
	}
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // bodies of up to 64 MiB
		// A retrieve_future answers after up to the poll timeout.
		WriteTimeout: pollTimeout + time.Minute,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "serving %s over the Tinker API on http://%s\n", name, ln.Addr())
	fmt.Fprintf(out, "saving weights under %s\n", stateDir)
	printTokenSource(cmd, cfg, "the API key")
	// Stop the workers first: every call then settles (the running ones
	// finish, the queued ones fail), so long-polls in flight answer and
	// the HTTP server can shut down.
	return serveUntilDone(cmd, ln, hs.Serve, func() { srv.Close() }, hs.Shutdown)
}

// serveUntilDone serves on ln until the server fails or the command's
// context ends; then it runs stop, if any, and shuts the server down,
// letting in-flight requests finish for up to 30 s.
func serveUntilDone(cmd *cobra.Command, ln net.Listener, serve func(net.Listener) error, stop func(), shutdown func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case <-cmd.Context().Done():
	}
	if stop != nil {
		stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return shutdown(ctx)
}

// tokenEnv is the environment variable serve reads its API key from when
// --api-key is not given.
const tokenEnv = "RLVR_SERVE_TOKEN"

// Bounds on serve's flags.
const (
	maxServeBatch   = 4096
	maxBatchWindow  = time.Second
	maxPollTimeout  = time.Hour
	maxTinkerModels = 1024
	maxSavedStates  = 1 << 20
	maxSavedGiB     = 1 << 30
)

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

	"rlvr/expert"
	"rlvr/format/tokenizer"
	"rlvr/serve"
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
		system, suffix           string
		cfg                      serve.Config
		verbose, worldExperts    bool
		expertIndex              int
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve a local model over the OpenAI API",
		Long: `serve answers /v1/models, /v1/chat/completions and /v1/completions (with
streaming) from a local model, batching concurrent requests into one forward
pass. It listens on loopback unless --addr says otherwise; set a token when
it does not. Requests must then carry "Authorization: Bearer <token>". The
token comes from --token, or else from the environment variable
` + tokenEnv + `, which keeps it out of the process list.`,
		Example: `  rlvr serve --model ../shared/data/stories260K/stories260K.bin
  rlvr serve --model runs/meml-grpo-model --expert 1        # under the expert best on validation
  curl -s localhost:8000/v1/completions -d '{"model":"stories260K","prompt":"Once upon a time","max_tokens":40}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			if !worldExperts || cmd.Flags().Changed("model") {
				c.model("model", modelPath)
				if tokPath != "" {
					c.file("tokenizer", tokPath)
				}
			}
			c.nonEmptyIfSet(cmd, "name", name)
			c.addr("addr", cfg.Addr)
			c.nonEmptyIfSet(cmd, "token", cfg.Token)
			c.intIn("max-tokens", cfg.MaxTokens, 0, maxNewTokens)
			c.intIn("max-n", cfg.MaxN, 0, maxSamples)
			c.intIn("max-batch", cfg.MaxBatch, 0, maxServeBatch)
			if w := cfg.BatchWindow; w < 0 || w > maxBatchWindow {
				c.add("batch-window", "%v: must be in [0, %v]", w, maxBatchWindow)
			}
			expertIndex = checkExpert(&c, cmd, expertIndex, "system", "prompt-suffix")
			if err := c.err(); err != nil {
				return err
			}
			system, suffix = withNewlines(system), withNewlines(suffix)
			if !cmd.Flags().Changed("token") {
				cfg.Token = os.Getenv(tokenEnv)
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
				if name == "" {
					name = l.Name
				}
				system, suffix := expertPrompt(expertIndex, l.Chat != nil, system, suffix)
				if l.Chat != nil && suffix != "" {
					return fmt.Errorf("--prompt-suffix: model %s has a chat template; give its expert prompt with --system", l.Name)
				}
				if l.Chat == nil && system != "" {
					return fmt.Errorf("--system: model %s has no chat template; give its expert prompt with --prompt-suffix", l.Name)
				}
				models = append(models, underPrompt(serve.Checkpoint(name, l), system, suffix))
			}
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
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
			switch {
			case cmd.Flags().Changed("token"):
				fmt.Fprintln(cmd.ErrOrStderr(), "requests need the bearer token given by --token")
			case cfg.Token != "":
				fmt.Fprintf(cmd.ErrOrStderr(), "requests need the bearer token in $%s\n", tokenEnv)
			}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			select {
			case err := <-done:
				if !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				return nil
			case <-cmd.Context().Done():
			}
			// Let in-flight requests finish.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			return srv.Shutdown(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", defaultModel(), "model: Hugging Face directory or llama2.c .bin file")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&name, "name", "", "model id clients ask for (default: the model's directory or file name)")
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:8000", "listen address")
	f.StringVar(&cfg.Token, "token", "", "bearer token required on /v1 requests (default: $"+tokenEnv+"; the flag wins)")
	f.IntVar(&cfg.MaxTokens, "max-tokens", 0, "largest max_tokens a request may ask for (0: 4096)")
	f.IntVar(&cfg.MaxN, "max-n", 0, "largest n a request may ask for (0: 16)")
	f.IntVar(&cfg.MaxBatch, "max-batch", 0, "sequences sampled together at most (0: 64)")
	f.DurationVar(&cfg.BatchWindow, "batch-window", 0, "how long an idle server waits for more requests to batch (0: 2ms)")
	f.BoolVar(&verbose, "verbose", false, "log every request")
	f.BoolVar(&worldExperts, "world-experts", false, "serve the built-in world's scripted experts as models E0 (reference) to E3")
	f.StringVar(&system, "system", "", "system prompt put before every chat that has none (e.g. the expert prompt a model was trained under)")
	f.StringVar(&suffix, "prompt-suffix", "", `text appended to every completion prompt (e.g. a world expert's "@E2\n")`)
	f.IntVar(&expertIndex, "expert", 0, "serve under expert I's prompt, the one a model trained by MEML-GRPO is used under: the paper's system prompt for a chat model, @E<I> after a world prompt")
	return cmd
}

// tokenEnv is the environment variable serve reads its bearer token from
// when --token is not given.
const tokenEnv = "RLVR_SERVE_TOKEN"

// Bounds on serve's flags.
const (
	maxServeBatch  = 4096
	maxBatchWindow = time.Second
)

package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	api "rlvr/api/openai"
	"rlvr/checkpoint"
	engine "rlvr/engine/model"
	"rlvr/format/tokenizer"
	"rlvr/internal/flagcheck"
	"rlvr/serve/tinkerserver"
)

// TokenEnv is the environment variable rlvr serve reads its API key from
// when no flag gives it.
const TokenEnv = "RLVR_SERVE_TOKEN"

// Bounds on rlvr serve's flags.
const (
	MaxBatchLimit     = 4096 // --max-batch
	maxBatchWindow    = time.Second
	maxPollTimeout    = time.Hour
	maxTinkerModels   = 1024
	maxSavedStates    = 1 << 20
	maxSavedGiB       = 1 << 30
	defaultListenAddr = "127.0.0.1:8000"
)

// Options are rlvr serve's settings, a field for each of its flags (the
// command binds them): a local model, and the built-in world's scripted
// experts, served over the OpenAI API, or the model served over the
// Tinker training API. Validate reports every problem with them at once,
// naming the flags; Run validates and serves until its context ends.
// The options are read, never written.
//
// The hooks at the end are what serving needs of the layers above serve
// (the world's models and experts, expert prompts): the command fills
// them.
type Options struct {
	Model, Tokenizer string // --model, --tokenizer
	Name             string // --name: the model's id (default: its directory or file name)
	Precision        string // --precision
	// Config is the server's: --addr, --api-key (or --token), --insecure,
	// --max-tokens, --max-n, --max-batch, --batch-window,
	// --whole-batches and --kv-cache-bytes. With no key given, the key is
	// TokenEnv's. Its Logger is Run's.
	Config  Config
	Verbose bool // --verbose: log every request
	// WorldExperts serves the world's scripted experts (Experts), beside
	// the model only when Model is given.
	WorldExperts bool
	// System goes first in every chat without a system message, Suffix
	// after every plain-text prompt; \n in them is a newline.
	System, Suffix string
	Expert         int // --expert I, read only when given: see Under
	// Tinker serves the Tinker API instead, saving weights under State
	// (default: a new temporary directory); PollTimeout, MaxModels,
	// MaxSavedStates and MaxSavedGiB are tinkerserver.Config's (0: its
	// defaults).
	Tinker                                 bool
	State                                  string
	PollTimeout                            time.Duration
	MaxModels, MaxSavedStates, MaxSavedGiB int

	// Given reports whether the command line gave the flag named; nil
	// means none was given.
	Given flagcheck.Given
	// Models opens the model, and installs it first when it is one of
	// the world's.
	Models checkpoint.Models
	// Experts are the world's scripted experts as models (WorldExperts).
	Experts func() []Model
	// Under gives the system prompt and suffix a model is served under,
	// from System and Suffix, by whether the model has a chat template,
	// under expert I's prompt (-1 for none); nil serves System and
	// Suffix as they are.
	Under func(chat bool, system, suffix string, expert int) (string, string)
}

// servesModel reports whether Model is served: always, but beside the
// world's experts only when it is given.
func (o *Options) servesModel() bool { return !o.WorldExperts || o.Given.Has("model") }

// settings are the options as check resolves them.
type settings struct {
	cfg       Config // with the key from TokenEnv when no flag gives one
	expert    int    // -1 when not given
	precision engine.Precision
}

// Validate reports every problem with the options at once, each naming
// its flag.
func (o *Options) Validate() error {
	_, err := o.check()
	return err
}

// check checks the options and resolves them.
func (o *Options) check() (settings, error) {
	var c flagcheck.Check
	cfg := o.Config
	if o.Tinker {
		if o.Given.Has("state") {
			c.OutDir("state", o.State, true)
		}
		if o.PollTimeout < 0 || o.PollTimeout > maxPollTimeout {
			c.Add("poll-timeout", "%v: must be in [0, %v]", o.PollTimeout, maxPollTimeout)
		}
		c.IntIn("max-models", o.MaxModels, 0, maxTinkerModels)
		c.IntIn("max-saved-states", o.MaxSavedStates, 0, maxSavedStates)
		c.IntIn("max-saved-gib", o.MaxSavedGiB, 0, maxSavedGiB)
	} else {
		for _, f := range []string{"state", "poll-timeout", "max-models", "max-saved-states", "max-saved-gib"} {
			if o.Given.Has(f) {
				c.Add(f, "is read only with --tinker")
			}
		}
	}
	if o.servesModel() {
		c.Error("model", o.Models.Check(o.Model))
		if o.Tokenizer != "" {
			c.File("tokenizer", o.Tokenizer)
		}
	}
	c.NonEmpty("name", o.Name, o.Given.Has("name"))
	c.Addr("addr", cfg.Addr)
	o.checkAPIKey(&c, &cfg)
	c.IntIn("max-tokens", cfg.MaxTokens, 0, flagcheck.MaxNewTokens)
	if o.Tinker {
		c.IntIn("max-n", cfg.MaxN, 0, flagcheck.MaxSamples)
	} else {
		c.IntIn("max-n", cfg.MaxN, 0, api.MaxN)
	}
	c.IntIn("max-batch", cfg.MaxBatch, 0, MaxBatchLimit)
	if w := cfg.BatchWindow; w < 0 || w > maxBatchWindow {
		c.Add("batch-window", "%v: must be in [0, %v]", w, maxBatchWindow)
	}
	expert := -1
	if o.Given.Has("expert") {
		expert = o.Expert
		c.IntIn("expert", expert, 0, math.MaxInt)
	}
	prec, err := engine.ParsePrecision(o.Precision)
	if err != nil {
		c.Add("precision", "%s", strings.TrimPrefix(err.Error(), "precision "))
	}
	if o.Tinker && prec != engine.FP32 {
		// The Tinker server builds its models itself and offers no
		// precision yet.
		c.Add("precision", "%s: the Tinker server's models compute in fp32", o.Precision)
	}
	return settings{cfg: cfg, expert: expert, precision: prec}, c.Err()
}

// checkAPIKey checks the API key flags and fills cfg.Token from the
// environment when no flag gives it; an --addr beyond loopback needs a key
// or --insecure.
func (o *Options) checkAPIKey(c *flagcheck.Check, cfg *Config) {
	var given []string
	for _, f := range []string{"api-key", "token"} {
		if o.Given.Has(f) {
			given = append(given, f)
			c.NonEmpty(f, cfg.Token, true)
		}
	}
	switch {
	case len(given) > 1:
		c.Add("token", "is the old name of --api-key; give one of them")
	case len(given) == 0:
		cfg.Token = os.Getenv(TokenEnv)
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err == nil && !IsLoopback(cfg.Addr) && cfg.Token == "" && !cfg.Insecure {
		c.Add("addr", "%q accepts connections from other machines: give --api-key (or $%s) so that requests must carry it, or --insecure to serve anyone who reaches the port",
			cfg.Addr, TokenEnv)
	}
}

// Run validates the options and serves until ctx ends, saying on w what
// it serves where, and logging there.
func (o *Options) Run(ctx context.Context, w io.Writer) error {
	s, err := o.check()
	if err != nil {
		return err
	}
	cfg := s.cfg
	level := slog.LevelInfo
	if o.Verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	if o.Tinker {
		return o.runTinker(ctx, w, cfg)
	}
	var models []Model
	if o.WorldExperts {
		models = o.Experts()
	}
	if o.servesModel() {
		m, err := o.model(s)
		if err != nil {
			return err
		}
		models = append(models, m)
	}
	srv, err := New(cfg, models...)
	if err != nil {
		return err
	}
	addr := cfg.Addr
	if addr == "" {
		addr = defaultListenAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	for _, m := range models {
		fmt.Fprintf(w, "serving %s on http://%s/v1\n", m.Name, ln.Addr())
	}
	o.printTokenSource(w, cfg, "the bearer token")
	return serveUntilDone(ctx, ln, srv.Serve, nil, srv.Shutdown)
}

// model opens Model and serves it under its prompt.
func (o *Options) model(s settings) (Model, error) {
	l, err := o.Models.Open(o.Model, o.Tokenizer)
	if err != nil {
		return Model{}, err
	}
	l.Model.Precision = s.precision
	name := o.Name
	if name == "" {
		name = l.Name
	}
	system, suffix := flagcheck.Newlines(o.System), flagcheck.Newlines(o.Suffix)
	if o.Under != nil {
		system, suffix = o.Under(l.Chat != nil, system, suffix, s.expert)
	}
	if l.Chat != nil && suffix != "" {
		return Model{}, fmt.Errorf("--prompt-suffix: model %s has a chat template; give its expert prompt with --system", l.Name)
	}
	if l.Chat == nil && system != "" {
		return Model{}, fmt.Errorf("--system: model %s has no chat template; give its expert prompt with --prompt-suffix", l.Name)
	}
	return Checkpoint(name, l).Under(system, suffix), nil
}

// Under serves m under a fixed prompt: system goes first in every chat
// without a system message, and suffix after every prompt of a model
// without a chat template.
func (m Model) Under(system, suffix string) Model {
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

// printTokenSource says where the key requests need comes from, or that
// none is needed.
func (o *Options) printTokenSource(w io.Writer, cfg Config, what string) {
	switch {
	case o.Given.Has("api-key"), o.Given.Has("token"):
		fmt.Fprintf(w, "requests need %s given by --api-key\n", what)
	case cfg.Token != "":
		fmt.Fprintf(w, "requests need %s in $%s\n", what, TokenEnv)
	case !IsLoopback(cfg.Addr):
		fmt.Fprintf(w, "serving anyone who reaches %s, without %s (--insecure)\n", cfg.Addr, what)
	}
}

// runTinker serves Model over the Tinker API until ctx ends.
func (o *Options) runTinker(ctx context.Context, w io.Writer, cfg Config) error {
	if err := o.Models.Ensure(ctx, o.Model); err != nil {
		return err
	}
	name := o.Name
	if name == "" {
		name = checkpoint.Name(o.Model)
	}
	stateDir, made := o.State, ""
	if stateDir == "" {
		dir, err := os.MkdirTemp("", "rlvr-tinker-state-")
		if err != nil {
			return err
		}
		stateDir, made = dir, dir
	}
	srv, err := tinkerserver.New(tinkerserver.Config{
		Models:       map[string]string{name: o.Model},
		StateDir:     stateDir,
		APIKey:       cfg.Token,
		MaxSamples:   cfg.MaxN,
		MaxNewTokens: cfg.MaxTokens,
		MaxBatch:     cfg.MaxBatch,
		BatchWindow:  cfg.BatchWindow,
		PollTimeout:  o.PollTimeout,
		Logger:       cfg.Logger,
		WholeBatches: cfg.WholeBatches,
		KVCacheBytes: cfg.KVCacheBytes,

		MaxModels:      o.MaxModels,
		MaxSavedStates: o.MaxSavedStates,
		MaxSavedBytes:  int64(o.MaxSavedGiB) << 30,
	})
	if err != nil {
		if made != "" {
			os.Remove(made)
		}
		return err
	}
	defer srv.Close()
	pollTimeout := o.PollTimeout
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
	fmt.Fprintf(w, "serving %s over the Tinker API on http://%s\n", name, ln.Addr())
	fmt.Fprintf(w, "saving weights under %s\n", stateDir)
	o.printTokenSource(w, cfg, "the API key")
	// Stop the workers first: every call then settles (the running ones
	// finish, the queued ones fail), so long-polls in flight answer and
	// the HTTP server can shut down.
	return serveUntilDone(ctx, ln, hs.Serve, func() { srv.Close() }, hs.Shutdown)
}

// serveUntilDone serves on ln until the server fails or ctx ends; then it
// runs stop, if any, and shuts the server down, letting in-flight
// requests finish for up to 30 s.
func serveUntilDone(ctx context.Context, ln net.Listener, serve func(net.Listener) error, stop func(), shutdown func(context.Context) error) error {
	done := make(chan error, 1)
	go func() { done <- serve(ln) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	case <-ctx.Done():
	}
	if stop != nil {
		stop()
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return shutdown(shutdownCtx)
}

// Package serve serves models over the OpenAI HTTP API: GET /v1/models,
// POST /v1/chat/completions and POST /v1/completions, streaming or not, so
// that rlvr's own models answer the same HTTP calls as vLLM, SGLang,
// llama.cpp, Ollama or OpenAI. It is what `rlvr serve` runs, and how the
// built-in world's experts are served.
//
// A Server holds one scheduler goroutine per Generator. A model served by
// rlvr's own sampler (Checkpoint) runs one long-lived decoding loop: a
// request joins the running batch between two decoding steps, as soon as
// the KV cache has slots for its samples, and returns (or ends its
// stream) when its own samples end (continuous batching). Other
// Generators, and every one under Config.WholeBatches, sample in whole
// batches: requests that arrive while a batch samples, or within
// Config.BatchWindow of an idle scheduler, are sampled together in one
// Generator.Sample call. Either way the Generator is never called
// concurrently. Each HTTP handler waits
// for its own results, or streams its tokens from a buffer the sampling
// goroutine fills without ever blocking on a client. A client that goes
// away cancels only its own request: in a decoding loop its samples stop
// at the next step and free their slots; in a whole batch its results are
// discarded, and the batch is cancelled only when every request in it is
// gone.
//
// The server binds 127.0.0.1 unless told otherwise, can require a bearer
// token, and bounds request bodies, n, max_tokens and the queue. Errors are
// OpenAI error envelopes. A Server's methods are safe for concurrent use.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	api "rlvr/api/openai"
	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/engine/sampler"
	"rlvr/format/tokenizer"
	"rlvr/sample"
)

// Generator samples continuations of token prompts, one slice of
// completions per request, each with the request's N completions, as
// backend/local's Sampler does. Implementations need not be safe for
// concurrent use: the server calls each Generator from one goroutine. If
// ctx is cancelled, Sample should return soon with an error.
type Generator interface {
	Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error)
}

// Model is one model the server serves.
type Model struct {
	// Name is the model's id in requests and in /v1/models.
	Name string
	// Generator samples for this model. Models that share a Generator
	// (equal as interface values) share one scheduler: their requests are
	// batched together and the Generator is never called concurrently.
	Generator Generator
	// Tokenizer encodes prompts and decodes the tokens streamed to
	// clients and shown in logprobs.
	Tokenizer tokenizer.Encoder
	// Chat renders a conversation as a prompt ending with the generation
	// prompt (see ChatFunc). Nil means the model serves only
	// /v1/completions.
	Chat func(msgs []tokenizer.Message) (string, error)
	// Encode turns a text prompt into tokens, adding what the model
	// expects in front (a BOS token for llama2.c and Llama-2 models). Nil
	// means Tokenizer.Encode.
	Encode func(text string) []int32
	// StopTokens end every sample (an end-of-sequence token, <|im_end|>,
	// <|eot_id|>...). Empty means the tokenizer's EOS token, if it has one.
	StopTokens []int32
	// ContextLength bounds prompt plus generated tokens; 0 means no bound.
	ContextLength int
}

// Checkpoint serves a loaded checkpoint as the model name: rlvr's sampler
// over its weights, with its tokenizer, chat template, stop tokens and
// context. The server only samples from it: the model is frozen in its
// precision (model.Model.Freeze), its float32 matrices released once
// packed, so it can no longer be trained or saved.
func Checkpoint(name string, l *checkpoint.Loaded) Model {
	return Model{Name: name, Generator: local.NewFrozenSampler(l.Model, l.Tokenizer), Tokenizer: l.Tokenizer, Chat: l.Chat,
		Encode: l.Encode, StopTokens: l.StopTokens, ContextLength: l.Model.Config.MaxSeq}
}

// ChatFunc returns a Model.Chat that renders conversations with template
// t and ends them with the generation prompt.
func ChatFunc(t tokenizer.ChatTemplate) func([]tokenizer.Message) (string, error) {
	return func(msgs []tokenizer.Message) (string, error) {
		return tokenizer.RenderChat(t, msgs, true)
	}
}

// Config configures a Server. Every field's zero value means what its
// comment says, so the zero Config is ready to use.
type Config struct {
	// Addr is the address ListenAndServe listens on. Empty means
	// "127.0.0.1:8000": loopback only. Use ":8000" or "0.0.0.0:8000" to
	// accept other machines, and then set Token (or Insecure).
	Addr string
	// Token, if set, is the bearer token every /v1 request must carry
	// ("Authorization: Bearer <Token>"); others get 401. Empty means no
	// authentication. /health never needs it.
	Token string
	// Insecure lets ListenAndServe listen beyond loopback without a
	// Token. False means it refuses to: anyone who reaches the port
	// could sample.
	Insecure bool
	// MaxBodyBytes bounds a request body; larger ones get 413. 0 means
	// 4 MiB.
	MaxBodyBytes int64
	// MaxTokens bounds max_tokens and max_completion_tokens (400 naming
	// the field beyond it), and is the bound of a chat request that sets
	// none. 0 means 4096.
	MaxTokens int
	// MaxN bounds n, the choices per prompt (400 beyond it), up to
	// api.MaxN, OpenAI's own bound. 0 means DefaultMaxN.
	MaxN int
	// MaxBatch bounds the sequences (prompts × n) of one Generator.Sample
	// call; a request with more is rejected (400), requests that would
	// overflow a batch wait for the next. 0 means 64.
	MaxBatch int
	// MaxQueue bounds the requests waiting for each scheduler; beyond it
	// requests get 503 with Retry-After. 0 means 256.
	MaxQueue int
	// WholeBatches runs every batch to completion before the next one
	// starts, as a Generator without a decoding loop must. False means a
	// model served by rlvr's own sampler (Checkpoint) runs one
	// long-lived decoding loop: a request joins the running batch between
	// two decoding steps and returns when its own samples end.
	WholeBatches bool
	// KVCacheBytes bounds the memory of a decoding loop's KV cache, which
	// holds MaxBatch samples of the model's context each: beyond it the
	// context served (max_model_len) shrinks to fit. 0 means 2 GiB.
	KVCacheBytes int64
	// BatchWindow is how long an idle scheduler waits, after a request
	// arrives, for others to join its batch. Requests that arrive while a
	// batch samples always join the next one without it. 0 means 2 ms;
	// negative means no wait.
	BatchWindow time.Duration
	// ReadHeaderTimeout bounds reading a request's headers. 0 means 10 s;
	// negative means no limit.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. 0 means
	// 60 s; negative means no limit.
	ReadTimeout time.Duration
	// WriteTimeout bounds each write to a client: a response body, or one
	// chunk of a stream. A client that does not take the data in time is
	// dropped. It does not limit generation time. 0 means 60 s; negative
	// means no limit.
	WriteTimeout time.Duration
	// IdleTimeout bounds how long a keep-alive connection waits for its
	// next request. 0 means 120 s; negative means no limit.
	IdleTimeout time.Duration
	// Logger receives the server's logs: startup and shutdown at Info,
	// each request at Debug, failures at Warn. Nil means slog.Default().
	Logger *slog.Logger
}

// DefaultMaxN is Config.MaxN's default.
const DefaultMaxN = 16

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:8000"
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 4 << 20
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = 4096
	}
	if c.MaxN <= 0 {
		c.MaxN = DefaultMaxN
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = 64
	}
	if c.MaxQueue <= 0 {
		c.MaxQueue = 256
	}
	if c.KVCacheBytes <= 0 {
		c.KVCacheBytes = 2 << 30
	}
	def(&c.BatchWindow, 2*time.Millisecond)
	def(&c.ReadHeaderTimeout, 10*time.Second)
	def(&c.ReadTimeout, 60*time.Second)
	def(&c.WriteTimeout, 60*time.Second)
	def(&c.IdleTimeout, 120*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Server serves models over the OpenAI API. Build one with New; release
// its schedulers with Shutdown.
type Server struct {
	cfg     Config
	log     *slog.Logger
	models  map[string]*model
	names   []string // in the order given to New
	created int64
	handler http.Handler
	http    *http.Server

	base       context.Context // parent of every batch's context
	cancelBase context.CancelFunc
	scheds     []*scheduler
	wg         sync.WaitGroup // scheduler goroutines
	closing    atomic.Bool
	stopOnce   sync.Once
}

// model is a Model with its scheduler and resolved stop tokens.
type model struct {
	Model
	stop  []int32
	sched *scheduler
}

// New returns a Server for models and starts their schedulers. It reports
// a model without a name, Generator or Tokenizer, a duplicate name, or no
// models at all.
func New(cfg Config, models ...Model) (*Server, error) {
	cfg = cfg.withDefaults()
	if len(models) == 0 {
		return nil, errors.New("serve: no models")
	}
	if cfg.MaxN > api.MaxN {
		return nil, fmt.Errorf("serve: MaxN %d is above %d, OpenAI's bound on n", cfg.MaxN, api.MaxN)
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		models:  make(map[string]*model, len(models)),
		created: time.Now().Unix(),
	}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	byGen := map[any]*scheduler{}
	for i, m := range models {
		switch {
		case m.Name == "":
			return nil, fmt.Errorf("serve: model %d has no name", i)
		case s.models[m.Name] != nil:
			return nil, fmt.Errorf("serve: model %q is given twice", m.Name)
		case m.Generator == nil:
			return nil, fmt.Errorf("serve: model %q has no Generator", m.Name)
		case m.Tokenizer == nil:
			return nil, fmt.Errorf("serve: model %q has no Tokenizer", m.Name)
		case m.ContextLength < 0:
			return nil, fmt.Errorf("serve: model %q has a negative ContextLength %d", m.Name, m.ContextLength)
		}
		for i, id := range m.StopTokens {
			if vocab := m.Tokenizer.VocabSize(); id < 0 || int(id) >= vocab {
				return nil, fmt.Errorf("serve: model %q: StopTokens[%d] is %d, outside its vocabulary [0, %d)", m.Name, i, id, vocab)
			}
		}
		mm := &model{Model: m, stop: slices.Clone(m.StopTokens)}
		if len(mm.stop) == 0 {
			if eos, ok := m.Tokenizer.EOS(); ok {
				mm.stop = []int32{eos}
			}
		}
		shared := reflect.ValueOf(m.Generator).Comparable()
		if shared {
			mm.sched = byGen[m.Generator]
		}
		if mm.sched == nil {
			var err error
			if mm.sched, err = s.newScheduler(m.Generator); err != nil {
				return nil, fmt.Errorf("serve: model %q: %w", m.Name, err)
			}
			if shared {
				byGen[m.Generator] = mm.sched
			}
		}
		if mm.sched.loop != nil {
			// The loop's slots hold this much; the budget check refuses
			// or shortens what would not fit.
			mm.ContextLength = mm.sched.loop.Capacity()
			if m.ContextLength > 0 {
				mm.ContextLength = min(mm.ContextLength, m.ContextLength)
			}
		}
		s.models[m.Name] = mm
		s.names = append(s.names, m.Name)
	}
	s.handler = s.routes()
	s.http = &http.Server{
		Addr:              cfg.Addr,
		Handler:           s.handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	for _, sc := range s.scheds {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			sc.run()
		}()
	}
	return s, nil
}

func (s *Server) newScheduler(g Generator) (*scheduler, error) {
	sc := &scheduler{
		gen:      g,
		queue:    make(chan *job, s.cfg.MaxQueue),
		quit:     make(chan struct{}),
		window:   s.cfg.BatchWindow,
		maxBatch: s.cfg.MaxBatch,
		maxQueue: s.cfg.MaxQueue,
		base:     s.base,
		log:      s.log,
	}
	if ls, ok := g.(*local.Sampler); ok && !s.cfg.WholeBatches {
		cf := ls.Engine.Model.Config
		capacity := min(cf.MaxSeq, int(s.cfg.KVCacheBytes/sampler.KVBytes(cf, s.cfg.MaxBatch)))
		if capacity < 2 {
			return nil, fmt.Errorf("a KV cache of %d bytes cannot hold %d samples of 2 tokens each", s.cfg.KVCacheBytes, s.cfg.MaxBatch)
		}
		loop, err := ls.NewLoop(s.cfg.MaxBatch, capacity)
		if err != nil {
			return nil, err
		}
		sc.loop = loop
	}
	s.scheds = append(s.scheds, sc)
	return sc, nil
}

// Handler returns the server's HTTP handler, for use with another
// http.Server or httptest; Shutdown that server before this one.
func (s *Server) Handler() http.Handler { return s.handler }

// ListenAndServe listens on Config.Addr and serves until Shutdown, when
// it returns http.ErrServerClosed. An Addr beyond loopback needs a Token
// or Insecure.
func (s *Server) ListenAndServe() error {
	if !IsLoopback(s.cfg.Addr) && s.cfg.Token == "" && !s.cfg.Insecure {
		return fmt.Errorf("serve: %s listens beyond this machine without a token; set Config.Token, or Config.Insecure to serve anyone who reaches it", s.cfg.Addr)
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return s.Serve(ln)
}

// IsLoopback reports whether a listen address (host:port) accepts
// connections from this machine only: its host is a loopback IP or
// "localhost". An empty host, which listens on every interface, or any
// other name is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Loopback serves models with cfg on a free loopback port in the
// background, and returns the API's base URL ("http://127.0.0.1:PORT/v1")
// and a function that shuts the server down (waiting up to five seconds
// for requests in flight).
func Loopback(cfg Config, models ...Model) (baseURL string, stop func(), err error) {
	srv, err := New(cfg, models...)
	if err != nil {
		return "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	go srv.Serve(ln)
	stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String() + "/v1", stop, nil
}

// Serve serves on ln until Shutdown, when it returns http.ErrServerClosed.
// It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	if s.closing.Load() {
		ln.Close()
		return http.ErrServerClosed
	}
	s.log.Info("serve: listening", "addr", ln.Addr().String(), "models", s.names, "auth", s.cfg.Token != "")
	return s.http.Serve(ln)
}

// Shutdown stops the server gracefully: it stops accepting connections,
// lets in-flight requests (streams included) finish, then stops the
// schedulers. If ctx ends first, it cancels the batches still sampling,
// closes the remaining connections and returns ctx's error. Requests that
// arrive during Shutdown get 503.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.log.Info("serve: shutting down")
	err := s.http.Shutdown(ctx)
	if err != nil {
		s.cancelBase()
		s.http.Close()
	}
	s.stopOnce.Do(func() {
		for _, sc := range s.scheds {
			sc.stop()
		}
	})
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.cancelBase()
		if err == nil {
			err = ctx.Err()
		}
	}
	s.cancelBase()
	if err != nil {
		return fmt.Errorf("serve: shutdown: %w", err)
	}
	s.log.Info("serve: stopped")
	return nil
}

// encode turns a prompt into tokens the way the model expects.
func (m *Model) encode(text string) []int32 {
	if m.Encode != nil {
		return m.Encode(text)
	}
	return m.Tokenizer.Encode(text)
}

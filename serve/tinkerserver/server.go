// Package tinkerserver serves the Tinker training API over rlvr's own CPU
// engine, so that a Tinker client — rlvr's remote backend, or the official
// Tinker SDK — can be run over real HTTP against numbers known exactly:
// every forward, gradient, optimizer step and sample is computed by
// backend/local's Learner and Sampler, as an in-process run
// computes it. It is what `rlvr serve --tinker` runs, and follows SkyRL
// tx's server (skyrl/tinker/api.py) and hosted Tinker on the subset rlvr
// and the SDK use.
//
// # Calls
//
// GET healthz, GET get_server_capabilities, POST client/config,
// create_session, session_heartbeat, create_model, get_info,
// create_sampling_session, join_sampling_session, GET samplers/<id> and
// the REST management calls (rest.go, export.go, ttl.go) answer at once.
// forward, forward_backward, optim_step, save_weights,
// save_weights_for_sampler, load_weights and asample answer at once with
// a future, {"request_id", "model_id"}, and run in the background; POST
// retrieve_future long-polls for the result (up to Config.PollTimeout,
// then 408 {"detail": "Timeout waiting for result"}: poll again), and
// retrieve_futures for the completions of a sampling session's requests
// (futures.go).
// create_model's answer is also a future, already settled, for the SDK.
// Each model has one worker that runs its calls in arrival order; a call
// that repeats a (model_id, seq_id) already recorded answers with the
// recorded call's request_id and does not run again (a client's retry),
// and one that reuses it for another request gets 409.
//
// # Two wire forms
//
// Bodies are JSON (package api/tinker), as rlvr's client and SkyRL's send
// them, except the official SDK's forward_backward: protobuf
// (Content-Type application/x-protobuf, schema in api/tinker/tinkerpb),
// zstd compressed (Content-Encoding: zstd) since client/config answers
// proto_compress_fwdbwd, with forward_only marking a forward call.
// retrieve_future answers forward(_backward) and sample results in
// protobuf to a client that accepts application/x-protobuf (the SDK reads
// them no other way), in JSON otherwise; failures are always JSON. The SDK
// samples through sampling sessions — names for a base model or a sampler
// copy, made by create_sampling_session or by an unnamed
// save_weights_for_sampler with sampling_session_seq_id — and reads one
// sample_sequence_ids entry per sample from asample's future.
//
// Each base model's samples are drawn by one long-lived decoding loop
// (local.Loop): an asample call joins its running batch between two
// decode steps, once its samples fit in the free slots, and its future
// is settled when its own samples end. The samples in flight share one
// set of weights: a call for other weights (another sampler copy, or
// the base model) waits until the batch drains, and the loop then loads
// its weights. Prompt logprobs run on the loop's goroutine as the call
// ends, while the model holds its weights. Under Config.WholeBatches, one
// worker for the whole server passes the calls queued for the same
// weights to one local.Sampler.Sample call instead. Either way a call's
// draws depend only on its own seed. Its numbers depend on the batch
// only as the engine's do: with the pure-Go matrix products not at all,
// and with OpenBLAS, whose kernels round differently for different batch
// sizes, in the last bits of the logprobs (and a token only where two
// were tied to those bits). Config.MaxBatch 1 samples each call alone,
// for results independent of what else was queued. Every
// sample ends at the model's own end tokens besides the call's stop
// tokens; a stop string ends it with the token that completed the string
// kept, as SkyRL tx and vLLM keep it.
//
// # Errors
//
// A problem with the HTTP request itself is an HTTP error with a body
// {"detail": message}, and no call runs: 400 for a body that is not JSON
// (or, for forward_backward, protobuf or zstd) of the call's shape — the
// detail names the field —, a missing identifier, an unsupported feature
// or a value beyond one of the server's limits (Config.MaxDatums and the
// others, Config.MaxModels for create_model; the detail names the field
// and the limit); 401 for a missing or
// wrong API key; 404 for an unknown session, model, base model, sampler
// weights, sampling session or future; 409 for a reused seq_id or
// sampling_session_seq_id; 410 for an expired session (or a model of one)
// and for a future whose result is no longer kept; 413 for a body over
// Config.MaxBodyBytes, compressed or not; 415 for a protobuf body to any
// other call, or a Content-Encoding other than zstd; 429 when too many
// calls wait already; 503 once the server is closing.
//
// Every problem with what a call asks for — the loss function and its
// config, a datum's inputs (lengths, token ids, values), AdamW's
// settings, the sampling parameters and prompt, the name or path of
// saved weights, a save beyond Config.MaxSavedStates or
// Config.MaxSavedBytes — fails the call: retrieve_future answers 200 with
// {"error": message, "category": "user"}, the message naming the datum
// index and the field (the SDK raises it as RequestFailedError). A
// failure of the engine itself (a non-finite loss or gradient) has
// category "server".
//
// # Losses
//
// loss_fn is cross_entropy (−w·logp), importance_sampling (−w·ρ·A, with
// ρ = exp(logp − sampler logp)), ppo (−w·min(ρA, clip(ρ, low, high)·A)),
// cispo (−w·sg(clip(ρ, low, high))·A·logp), dro (−w·(A·logp −
// β/2·(logp − sampler logp)²)) or gspo (−w·min(s·A, clip(s, low,
// high)·A), where s is the sequence ratio exp(mean of logp − sampler logp
// over the positions sequence_ratio_mask marks), every position carrying
// s's value with its own logprob's gradient: Tinker's GSPO-token; run as a
// forward pass and an NLL backward pass weighted by its derivatives); ppo,
// cispo and gspo take loss_fn_config clip_low_threshold 0.8 and
// clip_high_threshold 1.2 by default, 0 < low ≤ 1 ≤ high, and dro
// requires beta ≥ 0. loss_fn_inputs are target_tokens, and for the policy
// losses logprobs and advantages (and gspo's sequence_ratio_mask);
// custom runs a loss the session uploaded with create_custom_loss
// (customloss.go), named by loss_fn_config's loss_id;
// weights, 1 when absent, multiply every term (SkyRL's loss mask). The
// loss is REDUCED BY SUM over every token of every datum, as hosted Tinker
// does, with no normalisation by length or by the number of datums (SkyRL
// tx instead divides each datum's loss by its weight sum and averages over
// datums). A call's result holds, per datum, the learner's logprobs of the
// targets and the per-token loss (elementwise_loss), and metrics
// {"loss:sum"}.
//
// # Weights
//
// create_model trains every parameter of the base model when
// lora_config.rank is 0 (as SkyRL's full-parameter backends take it), and
// LoRA adapters of that rank otherwise (engine/lora: alpha 32 as on
// Tinker's service, over the attention, MLP and unembedding matrices that
// train_attn, train_mlp and train_unembed choose, all by default; A drawn
// from lora_config.seed, at random without one). save_weights writes the
// full training state (the weights, merged with any adapters, as a Hugging
// Face directory; the adapters in Tinker's adapter format,
// adapter_model.safetensors and adapter_config.json; AdamW's state) to
// Config.StateDir/<model_id>/weights/<name>, and load_weights reads such a
// state into any model of the same base and the same adapters, with or
// without its optimizer state. A load_weights that names session_id and
// model_seq_id instead of a model_id first creates that model, of the
// state's base and adapters (the SDK's create_training_client_from_state);
// model ids are <session_id>:train:<model_seq_id>, as the SDK derives
// them. save_weights_for_sampler keeps a copy
// of the weights in memory under tinker://<model_id>/sampler_weights/<name>
// for asample's model_path (at most Config.MaxSamplerWeights per model,
// the oldest dropped first); with kind inflight it publishes the model's
// shared inflight weights instead, which every inflight sampling session
// of the model samples from its next request on.
//
// # Sessions
//
// A session that has had no heartbeat (session_heartbeat, or its
// creation) for Config.SessionTTL expires with its models and sampling
// sessions: their weights are freed, their queued calls fail, and later
// calls naming the session or its models get 410 "session … expired".
//
// # Not supported
//
// The losses stable_reinforce (stableReinforceWhy), dppo and ppo_critic,
// and custom losses with operations customloss.go does not know; sparse
// tensors, image and audio chunks, top-k logprobs, target_prompt_logprobs,
// prompt_alt_tokens_k, record_stability_info, and the SDK's endpoints that
// need accounts (projects, search, copies, audit, billing, traces, auth:
// refusals). Each is refused by name, saying why (404 for an endpoint).
// Telemetry is taken and dropped.
package tinkerserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"rlvr/api/tinker"
	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/engine/sampler"
	"rlvr/internal/secret"
)

// Config configures a Server. Every field but Models and StateDir has a
// zero value meaning what its comment says.
type Config struct {
	// Models maps each base_model name a client may ask for to a local
	// model: a Hugging Face directory or a llama2.c .bin file with its
	// tokenizer beside it, as checkpoint.Open reads them.
	Models map[string]string
	// StateDir holds what save_weights writes: the state saved as
	// tinker://<model_id>/weights/<name> is StateDir/<model_id>/weights/<name>.
	StateDir string
	// APIKey, when set, is the key every /api/v1 request but healthz must
	// carry, in X-API-Key or as "Authorization: Bearer <key>"; others get
	// 401. Empty means no authentication, as SkyRL tx.
	APIKey string
	// MaxBodyBytes bounds a request body (413 beyond it). 0 means 64 MiB.
	MaxBodyBytes int64
	// MaxDatums bounds the datums of one forward(_backward). 0 means 1024.
	MaxDatums int
	// MaxCallTokens bounds the model-input tokens of one call: the
	// datums' total, or an asample prompt. 0 means 262144.
	MaxCallTokens int
	// MaxSamples bounds asample's num_samples. 0 means 128.
	MaxSamples int
	// MaxNewTokens bounds asample's max_tokens. 0 means 4096.
	MaxNewTokens int
	// MaxBatch bounds the sequences (requests × num_samples) sampled at
	// once: the slots of each base model's decoding loop, where a call
	// with more samples runs in parts of at most MaxBatch, drawing what
	// it would at once; under WholeBatches, the sequences of one
	// local.Sampler.Sample call, where a call with more runs alone.
	// 0 means 64.
	MaxBatch int
	// WholeBatches samples the calls queued for the same weights in one
	// batch, run to completion before the next, as the server did before
	// it had a decoding loop. Without it, each base model has a
	// long-lived decoding loop (local.Loop) that a call joins between two
	// decode steps, and leaves when its own samples end.
	WholeBatches bool
	// BatchWindow is how long, under WholeBatches, the idle sampling
	// worker waits after a request arrives for others to join its batch,
	// unless the batch fills first. 0 means 2 ms; negative means no
	// wait.
	BatchWindow time.Duration
	// KVCacheBytes bounds the memory of each decoding loop's KV cache,
	// MaxBatch slots of one context each: when it holds less than
	// MaxBatch full contexts of the model, each slot holds what fits. A
	// call whose prompt and max_tokens need more runs alone in that
	// memory once the calls in flight end, and the calls behind it wait
	// (sampler.Loop); one whose single sample needs more than all of it
	// is refused. 0 means 2 GiB.
	KVCacheBytes int64
	// MaxQueue bounds the calls waiting for one model's worker, and the
	// asample calls in the decoding loops, drawing or waiting, or under
	// WholeBatches waiting for the sampling worker (429 beyond it). 0
	// means 1024.
	MaxQueue int
	// MicroBatchTokens bounds the tokens of one pass of a forward or
	// forward_backward call: a larger call runs in several passes, the
	// gradient accumulated, so that its activations stay bounded. 0
	// means 2048; negative means one pass.
	MicroBatchTokens int
	// MaxSamplerWeights bounds the save_weights_for_sampler copies kept
	// per model, each a copy of every weight; the oldest is dropped first.
	// 0 means 4.
	MaxSamplerWeights int
	// MaxModels bounds the models alive at once, each a copy of its base
	// model's weights with gradients and optimizer state: a create_model
	// (or a load_weights that creates its model) beyond it gets 400. A
	// model stops with its session. 0 means DefaultMaxModels.
	MaxModels int
	// MaxSavedStates bounds the saves kept in StateDir, saved states
	// (save_weights) and exports (save_weights_external) together, and
	// MaxSavedBytes their total size; a save beyond either fails, saying
	// which. A save is freed by deleting it or by its TTL. 0 means
	// DefaultMaxSavedStates and DefaultMaxSavedBytes.
	MaxSavedStates int
	MaxSavedBytes  int64
	// PollTimeout is how long retrieve_future waits for a result before
	// answering 408. 0 means DefaultPollTimeout (SkyRL waits 300 s).
	PollTimeout time.Duration
	// SessionTTL is how long a session lives without a heartbeat. 0
	// means 300 s.
	SessionTTL time.Duration
	// ResultTTL is how long a finished call's result is kept for
	// retrieve_future; once retrieved it is kept one more minute at most,
	// for a client's retry. 0 means one hour.
	ResultTTL time.Duration
	// Logger receives the server's logs: each request and call at Debug,
	// expired sessions at Info, failures at Warn. Nil means
	// slog.Default().
	Logger *slog.Logger
}

// DefaultPollTimeout is Config.PollTimeout's default: 30 s.
const DefaultPollTimeout = 30 * time.Second

// The defaults of the limits on what clients hold: a model of a base
// model of 135M parameters takes about 2 GB of memory with its gradients
// and AdamW's moments, and a saved state of it about 1.6 GB of disk.
const (
	DefaultMaxModels      = 4
	DefaultMaxSavedStates = 32
	DefaultMaxSavedBytes  = 64 << 30
)

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.MaxDatums, 1024)
	def(&c.MaxCallTokens, 1<<18)
	def(&c.MaxSamples, 128)
	def(&c.MaxNewTokens, 4096)
	def(&c.MaxBatch, 64)
	def(&c.MaxQueue, 1024)
	def(&c.MaxSamplerWeights, 4)
	def(&c.MaxModels, DefaultMaxModels)
	def(&c.MaxSavedStates, DefaultMaxSavedStates)
	if c.MaxSavedBytes <= 0 {
		c.MaxSavedBytes = DefaultMaxSavedBytes
	}
	switch {
	case c.MicroBatchTokens == 0:
		c.MicroBatchTokens = 2048
	case c.MicroBatchTokens < 0:
		c.MicroBatchTokens = 0 // backend.MicroBatches: one pass
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = 64 << 20
	}
	if c.KVCacheBytes <= 0 {
		c.KVCacheBytes = 2 << 30
	}
	switch {
	case c.BatchWindow == 0:
		c.BatchWindow = 2 * time.Millisecond
	case c.BatchWindow < 0:
		c.BatchWindow = 0
	}
	if c.PollTimeout <= 0 {
		c.PollTimeout = DefaultPollTimeout
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 300 * time.Second
	}
	if c.ResultTTL <= 0 {
		c.ResultTTL = time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Server answers the Tinker API. Build one with New and stop its workers
// with Close. Its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	key     *secret.Key // Config.APIKey's; nil when there is none
	bases   map[string]*base
	names   []string // base model names, sorted
	handler http.Handler

	ctx     context.Context // the sampling worker's and the janitor's
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the sampling worker and the janitor
	modelWG sync.WaitGroup // the models' workers

	mu       sync.Mutex
	closed   bool
	sessions map[string]*session
	models   map[string]*trainModel
	futures  map[string]*future
	// samplingSessions are every session's sampling sessions, by id.
	samplingSessions map[string]*samplingSession
	downloads        map[string]*download // by token
	lastID           int64                // the last request_id issued
	sampling         samplingQueue
	// creating counts the models being created, outside the lock,
	// against Config.MaxModels.
	creating int

	// saving serializes the check of the save limits with the renaming
	// of a save into place, so two saves cannot both take the last room.
	saving sync.Mutex

	// hook, when set, runs on a worker before each call (tests block
	// workers with it).
	hook atomic.Pointer[func(kind string)]
}

// base is a base model: the weights loaded from disk, never changed, and
// the sampling worker's copy it samples from.
type base struct {
	name    string
	loaded  *checkpoint.Loaded
	weights *weights // the base weights, as a sampling source

	// Owned by the sampling worker.
	sampModel *model.Model
	sampler   *local.Sampler
	current   *weights // the weights sampModel holds
	// loop, unless Config.WholeBatches, draws every sample of this base
	// model; its Run owns sampModel, sampler and current.
	loop *local.Loop
}

// weights are parameters to sample from: a base model's, or a copy saved
// for sampling. params are never changed once made.
type weights struct {
	base   *base
	params []float32
	path   string    // the tinker:// path, or the base model's name
	name   string    // the name of a copy saved for sampling; "" for a base model's
	saved  time.Time // when a copy was saved
	// expires is when a copy's TTL ends (see ttl.go); zero: never.
	expires time.Time
	public  bool // a copy's published flag (see rest.go)
}

// New opens every base model, creates the state directory if need be and
// starts the server's workers.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Models) == 0 {
		return nil, errors.New("tinkerserver: no models")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("tinkerserver: no state directory")
	}
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		bases:    map[string]*base{},
		sessions: map[string]*session{},
		models:   map[string]*trainModel{},
		futures:  map[string]*future{},

		samplingSessions: map[string]*samplingSession{},
		downloads:        map[string]*download{},
	}
	if cfg.APIKey != "" {
		k := secret.NewKey(cfg.APIKey)
		s.key = &k
	}
	for name, path := range cfg.Models {
		if name == "" {
			return nil, fmt.Errorf("tinkerserver: model %s has no name", path)
		}
		l, err := checkpoint.Open(path, "")
		if err != nil {
			return nil, fmt.Errorf("tinkerserver: model %s: %w", name, err)
		}
		sm, err := model.NewEmpty(l.Model.Config)
		if err != nil {
			return nil, fmt.Errorf("tinkerserver: model %s: %w", name, err)
		}
		// Weights change only through sampleWith's copy, which repacks.
		b := &base{name: name, loaded: l, sampModel: sm, sampler: local.NewFixedSampler(sm, l.Tokenizer)}
		b.weights = &weights{base: b, params: l.Model.Params, path: name}
		if !cfg.WholeBatches {
			cf := l.Model.Config
			capacity := min(cf.MaxSeq, int(cfg.KVCacheBytes/sampler.KVBytes(cf, cfg.MaxBatch)))
			if capacity < 2 {
				return nil, fmt.Errorf("tinkerserver: model %s: a KV cache of %d bytes cannot hold %d samples of 2 tokens each", name, cfg.KVCacheBytes, cfg.MaxBatch)
			}
			if b.loop, err = b.sampler.NewLoop(cfg.MaxBatch, capacity); err != nil {
				return nil, fmt.Errorf("tinkerserver: model %s: %w", name, err)
			}
		}
		s.bases[name] = b
		s.names = append(s.names, name)
	}
	slices.Sort(s.names)
	if err := os.MkdirAll(cfg.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("tinkerserver: state directory: %w", err)
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sampling.wake = make(chan struct{}, 1)
	s.handler = s.routes()
	s.wg.Add(1)
	if cfg.WholeBatches {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.runSampling()
		}()
	}
	for _, name := range s.names {
		if b := s.bases[name]; b.loop != nil {
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.runLoop(b)
			}()
		}
	}
	go func() {
		defer s.wg.Done()
		s.janitor()
	}()
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Close stops the workers: the training call each model's worker runs
// finishes, the sampling batch running is cancelled, every call still
// queued fails, and later submissions get 503. Results stay retrievable,
// so every retrieve_future in flight answers: an HTTP server shut down
// after Close stops promptly.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, m := range s.models {
		m.stop(serverErr("the server is shutting down"))
	}
	s.mu.Unlock()
	s.cancel()
	s.modelWG.Wait()
	s.wg.Wait()
	// Calls that never reached a worker.
	s.mu.Lock()
	jobs := s.sampling.jobs
	s.sampling.jobs = nil
	s.mu.Unlock()
	for _, j := range jobs {
		s.fail(j.fut, serverErr("the server is shutting down"))
	}
	return nil
}

// route is one endpoint.
type route struct {
	method string // "" when the handler checks it
	auth   bool
	serve  func(w http.ResponseWriter, r *http.Request)
}

func (s *Server) routes() http.Handler {
	routes := map[string]route{
		tinker.PathHealthz:         {http.MethodGet, false, s.healthz},
		tinker.PathCapabilities:    {http.MethodGet, true, s.capabilities},
		tinker.PathClientConfig:    {http.MethodPost, true, s.clientConfig},
		tinker.PathCreateSession:   {http.MethodPost, true, s.createSession},
		tinker.PathHeartbeat:       {http.MethodPost, true, s.heartbeat},
		tinker.PathCreateModel:     {http.MethodPost, true, s.createModel},
		tinker.PathUnloadModel:     {http.MethodPost, true, s.unloadModel},
		tinker.PathForward:         {http.MethodPost, true, s.forward},
		tinker.PathForwardBackward: {http.MethodPost, true, s.forwardBackward},
		tinker.PathOptimStep:       {http.MethodPost, true, s.optimStep},
		tinker.PathSaveWeights:     {http.MethodPost, true, s.saveWeights},
		tinker.PathSaveForSampler:  {http.MethodPost, true, s.saveForSampler},
		tinker.PathLoadWeights:     {http.MethodPost, true, s.loadWeights},
		tinker.PathGetInfo:         {http.MethodPost, true, s.getInfo},
		tinker.PathSample:          {http.MethodPost, true, s.asample},
		tinker.PathRetrieveFuture:  {http.MethodPost, true, s.retrieveFuture},

		tinker.PathTelemetry:             {http.MethodPost, true, s.telemetry},
		tinker.PathCreateSamplingSession: {http.MethodPost, true, s.createSamplingSession},
		tinker.PathSamplers:              {http.MethodGet, true, s.getSampler},
		tinker.PathSaveWeightsExternal:   {http.MethodPost, true, s.saveWeightsExternal},
		tinker.PathTrainingRuns:          {"", true, s.trainingRuns}, // GET and DELETE, by path
		tinker.PathFiles:                 {http.MethodGet, false, s.serveFile},
		tinker.PathSessions:              {"", true, s.sessionCall}, // GET <id>, POST <id>/finish
		tinker.PathListTrainingRuns:      {http.MethodGet, true, s.listTrainingRuns},
		tinker.PathListSessions:          {http.MethodGet, true, s.listSessions},
		tinker.PathCheckpoints:           {http.MethodGet, true, s.listUserCheckpoints},
		tinker.PathWeightsInfo:           {http.MethodPost, true, s.weightsInfo},
		tinker.PathStorageUsage:          {http.MethodGet, true, s.storageUsage},
		tinker.PathRetrieveFutures:       {http.MethodPost, true, s.retrieveFutures},
		tinker.PathJoinSamplingSession:   {http.MethodPost, true, s.joinSamplingSession},
		tinker.PathCreateCustomLoss:      {http.MethodPost, true, s.createCustomLoss},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("tinkerserver: panic", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
				writeDetail(w, http.StatusInternalServerError, "internal error")
			}
		}()
		path := r.URL.Path
		for _, prefix := range []string{tinker.PathSamplers, tinker.PathTrainingRuns, tinker.PathFiles, tinker.PathSessions} {
			if strings.HasPrefix(path, prefix) {
				path = prefix // samplers/<id>, training_runs/<id>/…, files/<token>/<file>
			}
		}
		rt, ok := routes[path]
		// An unknown path needs the key too: an unauthenticated client
		// learns nothing of the paths.
		if (!ok || rt.auth) && !s.authorized(r) {
			writeDetail(w, http.StatusUnauthorized, "missing or wrong API key (send it in "+tinker.HeaderAPIKey+")")
			return
		}
		if !ok {
			// 404 rather than 501: the SDK retries every 5xx, and treats
			// a 404 of an optional endpoint as its absence.
			if what, why := notOffered(path); what != "" {
				writeRefused(w, what, why)
				return
			}
			writeDetail(w, http.StatusNotFound, "Not Found")
			return
		}
		if rt.method != "" && r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
			writeMethodNotAllowed(w, r, rt.method)
			return
		}
		s.log.Debug("tinkerserver: request", "path", r.URL.Path, "remote", r.RemoteAddr, "type", r.Header.Get("Content-Type"), "encoding", r.Header.Get("Content-Encoding"), "accept", r.Header.Get("Accept"))
		rt.serve(w, r)
	})
}

// authorized checks the API key, in X-API-Key or as a bearer token.
func (s *Server) authorized(r *http.Request) bool {
	if s.key == nil {
		return true
	}
	key := r.Header.Get(tinker.HeaderAPIKey)
	if key == "" {
		if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
			key = strings.TrimSpace(auth[7:])
		}
	}
	return s.key.Matches(key)
}

// httpError is a request refused before any call runs.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) *httpError {
	return &httpError{status, fmt.Sprintf(format, args...)}
}

// writeDetail writes FastAPI's error body.
func writeDetail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, tinker.ErrorDetail{Detail: msg})
}

// writeMethodNotAllowed answers a request for a path that takes only the
// allowed method.
func writeMethodNotAllowed(w http.ResponseWriter, r *http.Request, allowed string) {
	w.Header().Set("Allow", allowed)
	writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed: "+r.URL.Path+" takes "+allowed)
}

// writeNotOffered answers a path of the Tinker API this server does not
// serve, what, naming what it serves instead there when answers is set.
func writeNotOffered(w http.ResponseWriter, what, answers string) {
	msg := what + " is not offered by this server (rlvr serve --tinker)"
	if answers != "" {
		msg += ": it answers " + answers
	}
	writeDetail(w, http.StatusNotFound, msg)
}

// writeRefused answers a path of the Tinker API this server refuses,
// saying why.
func writeRefused(w http.ResponseWriter, what, why string) {
	writeDetail(w, http.StatusNotFound, what+" is not offered by this server (rlvr serve --tinker): "+why)
}

// writeError writes err as an HTTP error; an error that is not an
// *httpError is the server's own.
func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if errors.As(err, &he) {
		if he.status == http.StatusTooManyRequests || he.status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeDetail(w, he.status, he.msg)
		return
	}
	writeDetail(w, http.StatusInternalServerError, err.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"detail":"encoding the response failed"}`)
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// decode reads a request body as JSON into v, with the size limit, and
// returns the body. Only forward_backward reads the SDK's protobuf form
// (forwardBackward); any other call refuses it by name, and reads any
// other type as JSON, as curl's default form type carries JSON too.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, call string, v any) ([]byte, error) {
	if protobufBody(r) {
		mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		return nil, errorf(http.StatusUnsupportedMediaType, "%s: the body is %s; this call reads JSON only (forward_backward also reads %s)", call, mt, tinker.ContentTypeProtobuf)
	}
	b, err := s.readBody(w, r, call)
	if err != nil {
		return nil, err
	}
	return b, decodeJSON(b, call, v)
}

// protobufBody reports whether the request's body is declared protobuf.
func protobufBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (strings.Contains(mt, "protobuf") || mt == "application/octet-stream")
}

// readBody reads a request body within Config.MaxBodyBytes, decompressing
// it first when its Content-Encoding is zstd (the SDK compresses
// forward_backward when client/config asks it to); the limit bounds the
// decompressed body too, so a small body cannot expand without bound.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, call string) ([]byte, error) {
	limit := s.cfg.MaxBodyBytes
	tooBig := func() error {
		return errorf(http.StatusRequestEntityTooLarge, "%s: the body is larger than the server's limit of %d bytes", call, limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return nil, tooBig()
	case err != nil:
		return nil, errorf(http.StatusBadRequest, "%s: reading the body: %v", call, err)
	}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return b, nil
	case tinker.EncodingZstd:
		out, err := unzstd(b, limit)
		switch {
		case errors.Is(err, errTooLarge):
			return nil, tooBig()
		case err != nil:
			return nil, errorf(http.StatusBadRequest, "%s: the body is not valid zstd (Content-Encoding: zstd): %v", call, err)
		}
		return out, nil
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, "%s: Content-Encoding %q is not read (zstd or none)", call, enc)
	}
}

// errTooLarge is a decompressed body beyond the limit.
var errTooLarge = errors.New("the decompressed body is too large")

// maxZstdExpansion bounds the bytes one compressed byte of zstd decodes
// to: an RLE block, the densest, holds up to 128 KiB in 4 bytes (a 3-byte
// header and the byte repeated).
const maxZstdExpansion = 128 << 10 / 4

// unzstd decompresses one zstd body of at most limit bytes. A frame
// header that declares more than the limit is errTooLarge only when the
// body could hold that much; from a smaller body it is not zstd.
func unzstd(b []byte, limit int64) ([]byte, error) {
	window := max(limit, zstd.MinWindowSize)
	dec, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)), zstd.WithDecoderMaxWindow(uint64(window)))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	out, err := io.ReadAll(io.LimitReader(dec, limit+1))
	switch {
	case errors.Is(err, zstd.ErrWindowSizeExceeded):
		return nil, fmt.Errorf("its frame header asks for a window of more than %d bytes", window)
	case errors.Is(err, zstd.ErrDecoderSizeExceeded) && int64(len(b)) <= limit/maxZstdExpansion:
		return nil, fmt.Errorf("its frame header declares more than %d bytes of content, which %d compressed bytes cannot hold", limit, len(b))
	case errors.Is(err, zstd.ErrDecoderSizeExceeded):
		return nil, errTooLarge
	}
	if err != nil {
		return nil, err
	}
	if int64(len(out)) > limit {
		return nil, errTooLarge
	}
	return out, nil
}

// decodeJSON decodes one JSON value into v, naming what is wrong.
func decodeJSON(b []byte, call string, v any) error {
	if len(bytes.TrimSpace(b)) == 0 {
		return errorf(http.StatusBadRequest, "%s: the body is empty; want a JSON object", call)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	err := dec.Decode(v)
	if err == nil {
		if _, extra := dec.Token(); extra != io.EOF {
			return errorf(http.StatusBadRequest, "%s: data after the JSON object", call)
		}
		return nil
	}
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return errorf(http.StatusBadRequest, "%s: malformed JSON at byte %d: %v", call, syn.Offset, syn)
	case errors.As(err, &typ) && typ.Field != "":
		return errorf(http.StatusBadRequest, "%s: field %s: a JSON %s is not a %s", call, typ.Field, typ.Value, typ.Type)
	case errors.As(err, &typ):
		return errorf(http.StatusBadRequest, "%s: the body is a JSON %s, not an object", call, typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "%s: the JSON body ends early", call)
	}
	return errorf(http.StatusBadRequest, "%s: %v", call, err)
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// supportedModel is one entry of get_server_capabilities.
type supportedModel struct {
	ModelName string `json:"model_name"`
}

func (s *Server) capabilities(w http.ResponseWriter, r *http.Request) {
	out := struct {
		SupportedModels []supportedModel `json:"supported_models"`
	}{}
	for _, n := range s.names {
		out.SupportedModels = append(out.SupportedModels, supportedModel{n})
	}
	writeJSON(w, http.StatusOK, out)
}

// telemetry takes the SDK's batches of usage events, which it sends
// unless TINKER_TELEMETRY=0, and keeps none: the SDK logs a failed batch
// as an error with its traceback.
func (s *Server) telemetry(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	writeJSON(w, http.StatusOK, map[string]string{"status": "accepted"})
}

// notOffered names what an SDK path asks for when this server does not
// offer it, and why ("" for a path the SDK does not call).
func notOffered(path string) (what, why string) {
	rest, ok := strings.CutPrefix(path, "/api/v1/")
	if !ok {
		return "", ""
	}
	if why, ok := refusals[rest]; ok {
		return rest, why
	}
	for _, prefix := range []string{"auth/", "billing/"} {
		if strings.HasPrefix(rest, prefix) {
			return strings.TrimSuffix(prefix, "/") + " (" + rest + ")", refusals[prefix]
		}
	}
	return "", ""
}

// refusals say why each endpoint of the SDK's that this server does not
// offer is refused; an entry ending in "/" covers the paths under it.
var refusals = map[string]string{
	"cancel_future": "client/dynamic_config is not offered, so the SDK leaves sample_cancel_enabled false and never cancels; " +
		"a sampling batch runs to its end, bounded by the server's limits",
	"copy_weights":          "copies between accounts and projects need accounts; this server has one user (copy the state directory instead)",
	"client/dynamic_config": "the server's flags are fixed for its life: client/config answers them once, and the SDK keeps its defaults here",
	"audit":                 "there is one user and no audit log",
	"auth/":                 "the API key is fixed when the server starts (--api-key); there are no tokens, key management or principals (whoami)",
	"billing/":              "nothing is billed; GET billing/usage/checkpoints/current reports the saves' count and size",
}

func (s *Server) clientConfig(w http.ResponseWriter, r *http.Request) {
	// The SDK's handshake; the body (its version) is not read. The flags
	// it reads are answered as this server behaves: API-key auth, and
	// forward_backward bodies zstd compressed, which readBody undoes.
	io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	// retrieve_futures and join_sampling_session are served
	// (futures.go), and custom losses run here (customloss.go).
	writeJSON(w, http.StatusOK, map[string]bool{"pjwt_auth_enabled": false, "proto_compress_fwdbwd": true,
		"sample_use_retrieve_futures": true, "sample_join_sampling_session": true, "custom_loss_server_side": true})
}

// maxMessageBytes bounds a failed call's message: many name what the
// request held, and a failure is kept for Config.ResultTTL, even one that
// never ran and so never counted against Config.MaxQueue.
const maxMessageBytes = 1024

// callErr is why a call failed: its category ("user" or "server") and
// message, as retrieve_future reports it.
type callErr struct {
	category string
	msg      string
}

func (e *callErr) Error() string { return e.msg }

func userErr(format string, args ...any) *callErr {
	return &callErr{"user", fmt.Sprintf(format, args...)}
}

func serverErr(format string, args ...any) *callErr {
	return &callErr{"server", fmt.Sprintf(format, args...)}
}

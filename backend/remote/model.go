package remote

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/engine/optim"
	"rlvr/internal/atomicfile"
)

// Config says which server to train on and what.
type Config struct {
	Client Client
	// BaseModel is the server's name of the base model (a Hugging Face
	// name such as Qwen/Qwen3-8B on SkyRL tx and hosted Tinker).
	BaseModel string
	// LoraRank is the LoRA adapter's rank; 0 trains every parameter
	// (rlvr serve --tinker; SkyRL tx's JAX backend and hosted Tinker
	// train LoRA adapters only).
	LoraRank int
	// LoraSeed seeds the adapter's initialization: without one SkyRL draws
	// a seed at random, and a run is not reproduced.
	LoraSeed int64
	// Reduction is how the server reduces a loss over tokens and datums.
	Reduction Reduction
	// Adam holds the betas, eps and weight decay sent with every
	// optim_step; the learning rate and clip norm come with the step.
	Adam optim.AdamWConfig
	// Heartbeat is the session heartbeat's period (0: 10 s; SkyRL marks
	// a session stale after about 300 s without one).
	Heartbeat time.Duration
}

var _ backend.Pipelined = (*Model)(nil)

// Model is a model opened for training on a Tinker-compatible server: a
// session with its heartbeat, the model's id, and the weights published
// for sampling. It implements backend.Learner; Sampler samples from it.
// Its learner methods are not safe for concurrent use, as no learner's
// are; nor is sampling while one of them is under way, since publishing
// the weights takes the model's next seq_id too and a server may run a
// model's calls in seq_id order.
type Model struct {
	cfg     Config
	session string
	id      string
	seq     atomic.Int64 // the last seq_id sent for this model

	// broken is the failure of a forward_backward after which the
	// server's accumulated gradients are partial: no optimizer step may
	// apply them.
	broken error
	// pending says gradients were accumulated since the last step.
	pending bool

	mu        sync.Mutex
	published string // the sampler weights' path; "" before the first step (base model)
	stale     bool   // an optimizer step since the last publication
	steps     int    // optimizer steps taken, naming the publications

	stopHeartbeat context.CancelFunc
	heartbeatDone chan struct{}
	heartbeatErr  atomic.Pointer[error]
}

// Open creates a session and a model on the server.
func Open(ctx context.Context, cfg Config) (*Model, error) {
	if cfg.BaseModel == "" {
		return nil, fmt.Errorf("remote: no base model named")
	}
	if cfg.LoraRank < 0 {
		return nil, fmt.Errorf("remote: LoRA rank %d is negative", cfg.LoraRank)
	}
	if err := cfg.Reduction.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Adam.Validate(); err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	m := &Model{cfg: cfg}
	var s tinker.CreateSessionResponse
	if err := m.cfg.Client.Post(ctx, "create_session", tinker.PathCreateSession, tinker.CreateSessionRequest{Tags: []string{"rlvr"}, SDKVersion: "rlvr", Type: "create_session"}, &s); err != nil {
		return nil, err
	}
	if s.SessionID == "" {
		return nil, &CallError{Call: "create_session", Message: "the server answered without a session_id"}
	}
	if s.ErrorMessage != "" {
		return nil, &CallError{Call: "create_session", Message: s.ErrorMessage}
	}
	m.session = s.SessionID
	var cm tinker.CreateModelResponse
	req := tinker.CreateModelRequest{SessionID: m.session, ModelSeqID: 0, BaseModel: cfg.BaseModel, LoraConfig: tinker.LoraConfig{Rank: cfg.LoraRank, Seed: &cfg.LoraSeed}, Type: "create_model"}
	if err := m.cfg.Client.Post(ctx, "create_model", tinker.PathCreateModel, req, &cm); err != nil {
		return nil, err
	}
	if cm.ModelID == "" {
		return nil, &CallError{Call: "create_model", Message: "the server answered without a model_id"}
	}
	m.id = cm.ModelID
	if cm.RequestID != "" {
		// The model is made in that future (SkyRL's LoRA adapter): wait
		// for it, so that a model the server cannot make — a rank out of
		// its range — fails here, naming why, and not at the first call on
		// the model, after the first rollouts sampled from the base model.
		var made tinker.CreateModelResponse
		if err := m.cfg.Client.Await(ctx, "create_model", cm.RequestID, &made); err != nil {
			return nil, err
		}
	}
	m.startHeartbeat()
	return m, nil
}

// ID is the server's id of the model.
func (m *Model) ID() string { return m.id }

func (m *Model) startHeartbeat() {
	every := m.cfg.Heartbeat
	if every <= 0 {
		every = 10 * time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.stopHeartbeat, m.heartbeatDone = cancel, make(chan struct{})
	go func() {
		defer close(m.heartbeatDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			err := m.cfg.Client.Post(ctx, "session_heartbeat", tinker.PathHeartbeat, tinker.HeartbeatRequest{SessionID: m.session, Type: "session_heartbeat"}, nil)
			switch {
			case err == nil:
				m.heartbeatErr.Store(nil)
			case ctx.Err() == nil:
				m.heartbeatErr.Store(&err)
			}
		}
	}()
}

// Close unloads the model, which frees its weights and (on SkyRL tx) its
// LoRA adapter's slot at once rather than when the session expires, and
// stops the heartbeat. A server that does not offer unload_model (404)
// lets the session expire, as before. The unload is bounded by
// unloadTimeout: a server gone already costs no more.
func (m *Model) Close() error {
	var err error
	if m.id != "" && m.stopHeartbeat != nil {
		ctx, cancel := context.WithTimeout(context.Background(), unloadTimeout)
		err = m.unload(ctx)
		cancel()
	}
	if m.stopHeartbeat != nil {
		m.stopHeartbeat()
		<-m.heartbeatDone
		m.stopHeartbeat = nil
	}
	return err
}

// unloadTimeout bounds Close's unload_model call.
const unloadTimeout = 10 * time.Second

func (m *Model) unload(ctx context.Context) error {
	var res tinker.UnloadModelResponse
	err := m.cfg.Client.Post(ctx, "unload_model", tinker.PathUnloadModel, tinker.UnloadModelRequest{ModelID: m.id, Type: "unload_model"}, &res)
	var ce *CallError
	if errors.As(err, &ce) && ce.Status == http.StatusNotFound {
		return nil
	}
	if err != nil || res.RequestID == "" {
		return err
	}
	return m.cfg.Client.Await(ctx, "unload_model", res.RequestID, &res)
}

// call submits a call on the model with its next seq_id and waits for
// its result.
func (m *Model) call(ctx context.Context, name, path string, req func(seq *int64) any, out any) error {
	p, err := m.submit(ctx, name, path, req)
	if err != nil {
		return err
	}
	return m.await(ctx, p, out)
}

// submit submits a call on the model with its next seq_id; await waits
// for it. Calls submitted in turn run in turn on a server that orders a
// model's calls by seq_id.
func (m *Model) submit(ctx context.Context, name, path string, req func(seq *int64) any) (*Pending, error) {
	seq := m.seq.Add(1)
	p, err := m.cfg.Client.Submit(ctx, name, path, req(&seq))
	return p, m.withHeartbeat(err)
}

func (m *Model) await(ctx context.Context, p *Pending, out any) error {
	return m.withHeartbeat(p.Await(ctx, out))
}

// withHeartbeat adds the heartbeat's failure, if any, to a call's.
func (m *Model) withHeartbeat(err error) error {
	if err != nil {
		if hb := m.heartbeatErr.Load(); hb != nil {
			err = fmt.Errorf("%w (the session's heartbeat failed too: %v)", err, *hb)
		}
	}
	return err
}

// OptimStep implements backend.Learner: optim_step with the step's
// learning rate and clip norm and the configured AdamW settings. It
// refuses when a forward_backward of this step failed, since the
// server's gradients would be partial.
func (m *Model) OptimStep(ctx context.Context, p backend.OptimParams) (backend.StepResult, error) {
	f, err := m.SubmitOptimStep(ctx, p)
	if err != nil {
		return backend.StepResult{}, err
	}
	return f.Await(ctx)
}

// SubmitOptimStep implements backend.Pipelined: OptimStep's call,
// submitted, and awaited by the Future.
func (m *Model) SubmitOptimStep(ctx context.Context, p backend.OptimParams) (backend.Future[backend.StepResult], error) {
	if m.broken != nil {
		return nil, fmt.Errorf("remote: optimizer step refused: the server holds partial gradients after a failed forward_backward (%v); resume from the last checkpoint", m.broken)
	}
	if p.State != "" {
		return nil, fmt.Errorf("remote: optimizer state %q: a Tinker-compatible service keeps one optimizer state per model", p.State)
	}
	a := m.cfg.Adam
	call, err := m.submit(ctx, "optim_step", tinker.PathOptimStep, func(seq *int64) any {
		return tinker.OptimStepRequest{ModelID: m.id, SeqID: seq, Type: "optim_step", AdamParams: tinker.AdamParams{
			LearningRate: float64(p.LearningRate), Beta1: a.Beta1, Beta2: a.Beta2, Eps: a.Eps,
			WeightDecay: a.WeightDecay, GradClipNorm: float64(p.GradClipNorm)}}
	})
	if err != nil {
		// Whether the step applied is unknown: the model must be
		// reloaded from a checkpoint before it trains on.
		m.broken = err
		return nil, err
	}
	return func(ctx context.Context) (backend.StepResult, error) {
		var out tinker.OptimStepResponse
		if err := m.await(ctx, call, &out); err != nil {
			m.broken = err
			return backend.StepResult{}, err
		}
		m.pending = false
		m.mu.Lock()
		m.stale, m.steps = true, m.steps+1
		m.mu.Unlock()
		norm, ok := out.Metrics["grad_norm"]
		if !ok {
			norm = math.NaN()
		}
		return backend.StepResult{GradNorm: norm}, nil
	}, nil
}

// remoteState is what a checkpoint directory of a remote run holds
// beside the tokenizer files: where the server saved the training state.
type remoteState struct {
	BaseModel string `json:"base_model"`
	LoraRank  int    `json:"lora_rank"`
	ModelID   string `json:"model_id"`
	Path      string `json:"path"` // the save_weights path (weights and optimizer)
}

// StateFile is the file a remote run's checkpoint keeps its server-side
// path in.
const StateFile = "remote.json"

// Save implements backend.Learner: save_weights on the server, under the
// directory's name in the characters SkyRL accepts in one (letters,
// digits, '-' and '_'; others become '-'), and remote.json in dir naming
// the saved state. The weights stay on the server.
func (m *Model) Save(ctx context.Context, dir string) error {
	if m.pending {
		return fmt.Errorf("remote: save: gradients are accumulated but not applied")
	}
	name := strings.TrimSuffix(filepath.Base(dir), ".tmp")
	name = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, name)
	var out tinker.SaveWeightsResponse
	err := m.call(ctx, "save_weights", tinker.PathSaveWeights, func(seq *int64) any {
		return tinker.SaveWeightsRequest{ModelID: m.id, Path: name, SeqID: seq, Type: "save_weights"}
	}, &out)
	if err != nil {
		return err
	}
	if out.Path == "" {
		return &CallError{Call: "save_weights", Message: "the server answered without a path"}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(remoteState{BaseModel: m.cfg.BaseModel, LoraRank: m.cfg.LoraRank, ModelID: m.id, Path: out.Path}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteBytes(filepath.Join(dir, StateFile), append(b, '\n'))
}

// ReadState reads the saved state's path from a checkpoint directory
// written by Save; ok is false when dir has none (a local checkpoint).
func ReadState(dir string) (path string, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	} else if err != nil {
		return "", false, err
	}
	var st remoteState
	if err := json.Unmarshal(b, &st); err != nil {
		return "", false, fmt.Errorf("remote: %s: %w", filepath.Join(dir, StateFile), err)
	}
	if st.Path == "" {
		return "", false, fmt.Errorf("remote: %s: no path", filepath.Join(dir, StateFile))
	}
	return st.Path, true, nil
}

// Load replaces the model's weights, and its optimizer state with
// optimizer, by a state saved on the server (resuming a run).
func (m *Model) Load(ctx context.Context, path string, optimizer bool) error {
	var out tinker.LoadWeightsResponse
	err := m.call(ctx, "load_weights", tinker.PathLoadWeights, func(seq *int64) any {
		return tinker.LoadWeightsRequest{ModelID: m.id, Path: path, Optimizer: optimizer, SeqID: seq, Type: "load_weights"}
	}, &out)
	if err != nil {
		return err
	}
	m.broken, m.pending = nil, false
	m.mu.Lock()
	m.stale = true
	m.mu.Unlock()
	return nil
}

// SamplerPath publishes the weights as they are now for sampling, once
// per optimizer step (save_weights_for_sampler), and returns their path
// ("" before any step: the base model), for a Pinned Sampler.
func (m *Model) SamplerPath(ctx context.Context) (string, error) { return m.samplerPath(ctx) }

// samplerPath publishes the weights for sampling when an optimizer step
// changed them since the last publication, and returns the path rollouts
// sample from ("" before any step: the base model).
func (m *Model) samplerPath(ctx context.Context) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.stale {
		return m.published, nil
	}
	var out tinker.SaveWeightsResponse
	name := fmt.Sprintf("step-%06d", m.steps)
	err := m.call(ctx, "save_weights_for_sampler", tinker.PathSaveForSampler, func(seq *int64) any {
		return tinker.SaveWeightsForSamplerRequest{ModelID: m.id, Path: name, SeqID: seq, Type: "save_weights_for_sampler"}
	}, &out)
	if err != nil {
		return "", err
	}
	if out.Path == "" {
		return "", &CallError{Call: "save_weights_for_sampler", Message: "the server answered without a path"}
	}
	m.published, m.stale = out.Path, false
	return m.published, nil
}

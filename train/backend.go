package train

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/backend/remote"
	"rlvr/checkpoint"
	"rlvr/engine/lora"
	"rlvr/internal/httpurl"
	"rlvr/rollout"
)

// Backend kinds.
const (
	BackendLocal  = "local"
	BackendTinker = "tinker"
)

// BackendConfig says where a run trains and samples: on the local engine
// (the default), or on a Tinker-compatible service — self-hosted SkyRL tx,
// hosted Tinker, or rlvr serve --tinker — which does every forward,
// backward, optimizer step and rollout while the run keeps its methods,
// verifiers, experts and logs here. The model's tokenizer and config.json
// are still read from model (a local directory); its weights live on the
// server.
type BackendConfig struct {
	// Kind is "local" or "tinker".
	Kind string `yaml:"kind"`
	// URL is the server's address, e.g. http://127.0.0.1:8000 (tinker).
	URL string `yaml:"url,omitempty"`
	// BaseModel is the server's name of the model (e.g. Qwen/Qwen3-8B);
	// default the model directory's name.
	BaseModel string `yaml:"base_model,omitempty"`
	// LoraRank is the LoRA rank trained; 0 trains every parameter (the
	// local engine, rlvr serve --tinker). SkyRL tx's JAX backend and hosted
	// Tinker train LoRA adapters only, of rank 1 to 32 by default. The
	// local engine trains them as Tinker's service does: alpha 32, every
	// attention, MLP and unembedding matrix, A drawn from the run's seed.
	LoraRank int `yaml:"lora_rank,omitempty"`
	// Reduction is how the server reduces a loss: "sum" (hosted Tinker,
	// rlvr serve --tinker; the default) or "datum-mean" (SkyRL tx's JAX
	// backend), which the client compensates.
	Reduction string `yaml:"reduction,omitempty"`
	// APIKeyEnv names the environment variable holding the API key sent
	// as X-API-Key (default TINKER_API_KEY); the key itself never goes in
	// a config.
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
	// Retries bounds the retries of one HTTP exchange (429, 5xx,
	// transport); 0 means 5.
	Retries int `yaml:"retries,omitempty"`
	// Timeout bounds one call from submission to result, in Go's duration
	// syntax ("30m"); "" means 30 minutes.
	Timeout string `yaml:"timeout,omitempty"`
}

// localLoRA is the adapters a local run with LoraRank trains: Tinker's
// choice of matrices and alpha, A drawn from the run's seed as the tinker
// backend asks the server to draw it.
func (b *BackendConfig) localLoRA(seed uint64) lora.Config {
	return lora.Config{Rank: b.LoraRank, Alpha: lora.DefaultAlpha, Attention: true, MLP: true, Unembed: true, Seed: seed}
}

// remote says the run trains on a Tinker server.
func (b *BackendConfig) remote() bool { return b != nil && b.Kind == BackendTinker }

// resolveBackend checks the backend section and, for a remote one, that
// every loss term the config asks for runs there.
func (c *RLConfig) resolveBackend(add func(format string, args ...any)) {
	b := c.Backend
	if b == nil {
		return
	}
	switch b.Kind {
	case "", BackendLocal:
		b.Kind = BackendLocal
		if b.LoraRank < 0 {
			add("backend.lora_rank = %d is negative", b.LoraRank)
		}
		for _, f := range []struct {
			name string
			set  bool
		}{{"url", b.URL != ""}, {"base_model", b.BaseModel != ""}, {"reduction", b.Reduction != ""},
			{"api_key_env", b.APIKeyEnv != ""}, {"retries", b.Retries != 0}, {"timeout", b.Timeout != ""}} {
			if f.set {
				add("backend.%s is for kind %s, not %s", f.name, BackendTinker, BackendLocal)
			}
		}
		return
	case BackendTinker:
	default:
		add("backend.kind %q is not %s or %s", b.Kind, BackendLocal, BackendTinker)
		return
	}
	if !httpurl.Valid(b.URL) {
		add("backend.url %q is not an http(s) address", b.URL)
	}
	if b.Reduction == "" {
		b.Reduction = string(remote.Sum)
	}
	if err := remote.Reduction(b.Reduction).Validate(); err != nil {
		add("backend.reduction %q: %v", b.Reduction, err)
	}
	if b.APIKeyEnv == "" {
		b.APIKeyEnv = "TINKER_API_KEY"
	}
	switch {
	case b.LoraRank < 0:
		add("backend.lora_rank = %d is negative", b.LoraRank)
	case b.LoraRank == 0 && b.Reduction == string(remote.DatumMean):
		// SkyRL tx's JAX backend, the one that reduces by datum, trains
		// LoRA adapters only; it refuses rank 0 when the model is created.
		add("backend.lora_rank = 0 trains every parameter, which SkyRL tx's JAX backend (reduction %s) does not: give a LoRA rank from 1 to the server's max_lora_rank (32 unless its --backend-config says otherwise)", remote.DatumMean)
	}
	if b.Retries < 0 {
		add("backend.retries = %d is negative", b.Retries)
	}
	if b.Timeout != "" {
		if d, err := time.ParseDuration(b.Timeout); err != nil || d <= 0 {
			add("backend.timeout %q is not a positive duration", b.Timeout)
		}
	}
	if c.GradientCheckpointing {
		add("backend tinker: gradient_checkpointing sets rlvr's own engine; the server decides how it keeps activations (gradient_checkpointing: false)")
	}
	if c.SampleBatch != 0 {
		add("backend tinker: sample_batch = %d bounds rlvr's own sampler; the server schedules its sampling (sample_batch: 0)", c.SampleBatch)
	}
	// The terms no Tinker loss_fn expresses, refused before any work (the
	// parts refuse theirs through part.Run.CheckLoss).
	if c.Entropy != 0 {
		add("backend tinker: entropy = %v: %v (entropy: 0)", c.Entropy, remote.CheckLoss(backend.Loss{Entropy: c.Entropy}))
	}
}

// policy is what the loop trains through: the backend's learner and
// sampler interfaces, and the model's tokenizer side.
type policy struct {
	learner backend.Learner
	sampler rollout.Sampler
	text    *checkpoint.Loaded
	maxLen  int
	close   func() error
	// snapshot is a sampler of the weights as they are now, labelled
	// version, that keeps sampling them while the learner trains on
	// (async runs); reuse, when not nil, is one it returned that is no
	// longer used.
	snapshot func(ctx context.Context, version int, reuse rollout.Sampler) (rollout.Sampler, error)
}

// openPolicy opens the model to train: base's weights, or with ckpt the
// run checkpoint in it (weights and optimizer). It is the loop's only
// contact with a concrete backend.
func openPolicy(ctx context.Context, base, ckpt string, c *RLConfig) (*policy, error) {
	if !c.Backend.remote() {
		var s *local.Session
		var err error
		switch {
		case c.Backend != nil && c.Backend.LoraRank > 0:
			s, err = local.OpenLoRA(base, ckpt, c.AdamW, c.Backend.localLoRA(c.Seed))
		case ckpt != "":
			s, err = local.Open(ckpt, c.AdamW, true)
		default:
			s, err = local.Open(base, c.AdamW, false)
		}
		if err != nil {
			return nil, err
		}
		s.Sampler.Engine.MaxStreams = c.SampleBatch
		s.Model.Recompute = c.GradientCheckpointing
		learner, sampler, err := c.precisions()
		if err != nil {
			return nil, err
		}
		s.SetPrecision(learner, sampler)
		snapshot := func(_ context.Context, version int, reuse rollout.Sampler) (rollout.Sampler, error) {
			r, _ := reuse.(*local.Snapshot)
			return s.Snapshot(version, r)
		}
		return &policy{learner: s, sampler: s.Sampler, text: s.Text, maxLen: s.Model.Config.MaxSeq, close: func() error { return nil },
			snapshot: snapshot}, nil
	}
	var state string
	if ckpt != "" {
		var err error
		if state, err = remoteState(ckpt); err != nil {
			return nil, err
		}
	}
	return openRemote(ctx, base, state, c)
}

// remoteState is the server's saved state that a remote run's checkpoint
// directory names. A resume takes the one of the newest intact checkpoint
// and loads it once (openRemote), so a server's passing failure never
// sends a resume to an older checkpoint nor creates a model per
// checkpoint tried.
func remoteState(ckpt string) (string, error) {
	path, ok, err := remote.ReadState(ckpt)
	if err == nil && !ok {
		err = fmt.Errorf("train: %s is not a checkpoint of a run on a Tinker backend (no %s)", ckpt, remote.StateFile)
	}
	return path, err
}

// openRemote opens the model to train on the server: base, or with state
// the saved state there (weights and optimizer).
func openRemote(ctx context.Context, base, state string, c *RLConfig) (*policy, error) {
	text, err := checkpoint.OpenText(base)
	if err != nil {
		return nil, err
	}
	m, err := remote.Open(ctx, remoteConfig(base, c))
	if err != nil {
		return nil, err
	}
	if state != "" {
		if err := m.Load(ctx, state, true); err != nil {
			m.Close()
			return nil, err
		}
	}
	// A version is published once (save_weights_for_sampler), and its
	// sampler samples it by path while the model trains on.
	snapshot := func(ctx context.Context, _ int, _ rollout.Sampler) (rollout.Sampler, error) {
		path, err := m.SamplerPath(ctx)
		return &remote.Sampler{Model: m, Decoder: text.Tokenizer, Pinned: true, Path: path}, err
	}
	return &policy{learner: m, sampler: &remote.Sampler{Model: m, Decoder: text.Tokenizer}, text: text,
		maxLen: text.HFConfig.MaxPositionEmbeddings, close: m.Close, snapshot: snapshot}, nil
}

// remoteConfig is the client's configuration of a tinker backend.
func remoteConfig(base string, c *RLConfig) remote.Config {
	b := c.Backend
	cl := remote.Client{BaseURL: b.URL, APIKey: os.Getenv(b.APIKeyEnv), Retries: b.Retries}
	if d, err := time.ParseDuration(b.Timeout); err == nil {
		cl.Deadline = d
	}
	name := b.BaseModel
	if name == "" {
		name = filepath.Base(filepath.Clean(base))
	}
	return remote.Config{Client: cl, BaseModel: name, LoraRank: b.LoraRank,
		LoraSeed: int64(c.Seed), Reduction: remote.Reduction(b.Reduction), Adam: c.AdamW}
}

// openReference opens the frozen starting model of a KL term: on the
// local engine, or the base model on the server.
func openReference(base string, c *RLConfig) (backend.Logprober, error) {
	if !c.Backend.remote() {
		learner, _, err := c.precisions()
		if err != nil {
			return nil, err
		}
		f, err := local.OpenFrozen(base)
		if err != nil {
			return nil, err
		}
		// The reference is scored as the learner is, so that the KL
		// starts at 0.
		f.Model.Precision = learner
		return f, nil
	}
	rc := remoteConfig(base, c)
	return &remote.Reference{Client: &rc.Client, BaseModel: rc.BaseModel}, nil
}

// Package tinker is the Tinker training API on the wire: the JSON bodies of
// the calls a remote backend makes to a Tinker-compatible service, as
// SkyRL tx (skyrl/tinker/api.py) and the Tinker SDK's JSON form
// (tinker/types) define them, and the official SDK's protobuf form of
// forward_backward and of its results (proto.go, over the generated
// package tinkerpb), converted to and from the same types. backend/remote
// is the client that speaks the JSON form and serve/tinkerserver a server
// over the local engine that speaks both; they are held to the wire
// fixtures in testdata. Paths are under /api/v1; the API key travels in
// X-API-Key.
//
// A training or sampling call returns a Future; its result is fetched with
// retrieve_future, which answers with the result, a "try_again" (poll
// again), or a RequestFailed. Requests here carry only the fields rlvr sends;
// decoding ignores the others, as the servers' response models do.
package tinker

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// The paths of the calls, under the base URL.
const (
	PathHealthz         = "/api/v1/healthz"
	PathCapabilities    = "/api/v1/get_server_capabilities"
	PathClientConfig    = "/api/v1/client/config"
	PathCreateSession   = "/api/v1/create_session"
	PathHeartbeat       = "/api/v1/session_heartbeat"
	PathCreateModel     = "/api/v1/create_model"
	PathUnloadModel     = "/api/v1/unload_model" // SkyRL's; frees the model's adapter slot
	PathForward         = "/api/v1/forward"      // SkyRL's; the SDK now sends forward_backward with forward_only
	PathForwardBackward = "/api/v1/forward_backward"
	PathOptimStep       = "/api/v1/optim_step"
	PathSaveWeights     = "/api/v1/save_weights"
	PathSaveForSampler  = "/api/v1/save_weights_for_sampler"
	PathLoadWeights     = "/api/v1/load_weights"
	PathGetInfo         = "/api/v1/get_info"
	PathSample          = "/api/v1/asample"
	PathRetrieveFuture  = "/api/v1/retrieve_future"
	// The SDK's sampling sessions: create one for some weights, read what
	// it samples (GET PathSamplers + its id), and name it in asample.
	PathTelemetry             = "/api/v1/telemetry"
	PathCreateSamplingSession = "/api/v1/create_sampling_session"
	PathSamplers              = "/api/v1/samplers/"
	// Weights exported for other programs (save_weights_external), the
	// REST reads of a training run's checkpoints under PathTrainingRuns
	// (<model_id>/checkpoints, and .../checkpoints/external_weights/<name>/
	// external_weights_urls), and the download URLs those hand out, which
	// rlvr's server serves under PathFiles.
	PathSessions            = "/api/v1/sessions/" // <id>/finish: the SDK's ServiceClient.close
	PathSaveWeightsExternal = "/api/v1/save_weights_external"
	PathTrainingRuns        = "/api/v1/training_runs/"
	PathFiles               = "/api/v1/files/"
	HeaderAPIKey            = "X-API-Key"

	// The REST listings and reads of the SDK's RestClient.
	PathListTrainingRuns = "/api/v1/training_runs"
	PathListSessions     = "/api/v1/sessions"
	PathCheckpoints      = "/api/v1/checkpoints"
	PathWeightsInfo      = "/api/v1/weights_info"
	PathStorageUsage     = "/api/v1/billing/usage/checkpoints/current"

	// Batched futures of a sampling session, and its clones' numbers.
	PathRetrieveFutures     = "/api/v1/retrieve_futures"
	PathJoinSamplingSession = "/api/v1/join_sampling_session"
	// Server-side custom losses: a loss's graph, uploaded.
	PathCreateCustomLoss = "/api/v1/create_custom_loss"
)

// Tensor dtypes.
const (
	Int64   = "int64"
	Float32 = "float32"
)

// TensorData is one per-token array of a datum: data with its dtype and,
// optionally, its shape (1-D here). Values travel as JSON numbers, exact
// for token ids below 2^53.
type TensorData struct {
	Data  []float64 `json:"data"`
	Dtype string    `json:"dtype"`
	Shape []int     `json:"shape,omitempty"`
}

// Ints returns a tensor of token ids.
func Ints(xs []int32) TensorData {
	t := TensorData{Data: make([]float64, len(xs)), Dtype: Int64, Shape: []int{len(xs)}}
	for i, x := range xs {
		t.Data[i] = float64(x)
	}
	return t
}

// Floats returns a float32 tensor.
func Floats(xs []float32) TensorData {
	t := TensorData{Data: make([]float64, len(xs)), Dtype: Float32, Shape: []int{len(xs)}}
	for i, x := range xs {
		t.Data[i] = float64(x)
	}
	return t
}

// Int32s reads a tensor of token ids, naming what is wrong.
func (t TensorData) Int32s() ([]int32, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	out := make([]int32, len(t.Data))
	for i, v := range t.Data {
		if v != math.Trunc(v) || v < 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("data[%d] = %v is not a token id", i, v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// Float32s reads a float tensor, naming what is wrong.
func (t TensorData) Float32s() ([]float32, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	out := make([]float32, len(t.Data))
	for i, v := range t.Data {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32 {
			return nil, fmt.Errorf("data[%d] = %v is not a finite float32", i, v)
		}
		out[i] = float32(v)
	}
	return out, nil
}

// check is the agreement of the shape, when given, with the data.
func (t TensorData) check() error {
	if t.Dtype != "" && t.Dtype != Int64 && t.Dtype != Float32 {
		return fmt.Errorf("dtype %q is not int64 or float32", t.Dtype)
	}
	if len(t.Shape) > 0 && (len(t.Shape) != 1 || t.Shape[0] != len(t.Data)) {
		return fmt.Errorf("shape %v does not fit %d values (only 1-D tensors are read)", t.Shape, len(t.Data))
	}
	return nil
}

// Chunk is one piece of a model input: encoded text (token ids). Image
// chunks are not read.
type Chunk struct {
	Type   string  `json:"type"`
	Tokens []int32 `json:"tokens"`
}

// ModelInput is a sequence of chunks.
type ModelInput struct {
	Chunks []Chunk `json:"chunks"`
}

// Text is a model input of one encoded-text chunk.
func Text(tokens []int32) ModelInput {
	return ModelInput{Chunks: []Chunk{{Type: "encoded_text", Tokens: tokens}}}
}

// Tokens concatenates the chunks' tokens; a chunk of another type is an
// error naming it.
func (m ModelInput) Tokens() ([]int32, error) {
	var out []int32
	for i, c := range m.Chunks {
		if c.Type != "" && c.Type != "encoded_text" {
			return nil, fmt.Errorf("chunks[%d]: type %q is not encoded_text", i, c.Type)
		}
		out = append(out, c.Tokens...)
	}
	return out, nil
}

// Datum is one sequence of a forward(-backward) call: the model input
// (full[:-1]) and per-token loss inputs of the same length —
// target_tokens (full[1:]), weights, and for the policy losses the
// sampler's logprobs and the advantages.
type Datum struct {
	ModelInput   ModelInput            `json:"model_input"`
	LossFnInputs map[string]TensorData `json:"loss_fn_inputs"`
}

// The loss functions (loss_fn) and their loss_fn_config keys.
const (
	CrossEntropy       = "cross_entropy"
	ImportanceSampling = "importance_sampling"
	PPO                = "ppo"
	CISPO              = "cispo"
	DRO                = "dro"
	GSPO               = "gspo"
	ClipLowThreshold   = "clip_low_threshold"  // ppo, cispo, gspo: the ratio's lower bound, 1 − ε_low
	ClipHighThreshold  = "clip_high_threshold" // ppo, cispo, gspo: the ratio's upper bound, 1 + ε_high
	Beta               = "beta"                // dro: the weight of the quadratic penalty

	// SequenceRatioMask is gspo's loss_fn_input marking the positions
	// whose log-ratios the sequence ratio averages.
	SequenceRatioMask = "sequence_ratio_mask"
)

// ForwardBackwardInput is the data and loss of a forward(-backward) call.
type ForwardBackwardInput struct {
	Data         []Datum            `json:"data"`
	LossFn       string             `json:"loss_fn"`
	LossFnConfig map[string]float64 `json:"loss_fn_config,omitempty"`
}

// ForwardBackwardRequest accumulates gradients of the loss over the data.
type ForwardBackwardRequest struct {
	ModelID string               `json:"model_id"`
	Input   ForwardBackwardInput `json:"forward_backward_input"`
	SeqID   *int64               `json:"seq_id,omitempty"`
}

// ForwardRequest computes the loss and logprobs without gradients.
type ForwardRequest struct {
	ModelID string               `json:"model_id"`
	Input   ForwardBackwardInput `json:"forward_input"`
	SeqID   *int64               `json:"seq_id,omitempty"`
}

// ForwardBackwardOutput is the result of forward(-backward): per datum,
// its outputs by name ("logprobs": the learner's logprobs of the
// targets; "elementwise_loss"), and metrics ("loss:sum", …).
type ForwardBackwardOutput struct {
	LossFnOutputType string                  `json:"loss_fn_output_type"`
	LossFnOutputs    []map[string]TensorData `json:"loss_fn_outputs"`
	Metrics          map[string]float64      `json:"metrics"`
}

// AdamParams are an optimizer step's AdamW settings (the SDK's defaults:
// beta1 0.9, beta2 0.95, eps 1e-12). GradClipNorm 0 does not clip; SkyRL
// reads no grad_clip_norm, so a client that needs clipping against it
// must know that.
type AdamParams struct {
	LearningRate float64 `json:"learning_rate"`
	Beta1        float64 `json:"beta1"`
	Beta2        float64 `json:"beta2"`
	Eps          float64 `json:"eps"`
	WeightDecay  float64 `json:"weight_decay"`
	GradClipNorm float64 `json:"grad_clip_norm"`
}

// OptimStepRequest applies the accumulated gradients and clears them.
type OptimStepRequest struct {
	ModelID    string     `json:"model_id"`
	AdamParams AdamParams `json:"adam_params"`
	SeqID      *int64     `json:"seq_id,omitempty"`
	Type       string     `json:"type,omitempty"` // "optim_step"
}

// OptimStepResponse is an optimizer step's result.
type OptimStepResponse struct {
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// LoraConfig asks for a LoRA adapter of Rank; rlvr serve --tinker trains
// every parameter when Rank is 0, SkyRL tx's JAX backend refuses it (its
// ranks are 1 to its max_lora_rank, and its alpha is always 32).
type LoraConfig struct {
	Rank         int    `json:"rank"`
	Seed         *int64 `json:"seed,omitempty"`
	TrainUnembed *bool  `json:"train_unembed,omitempty"`
	TrainMLP     *bool  `json:"train_mlp,omitempty"`
	TrainAttn    *bool  `json:"train_attn,omitempty"`
}

// CreateModelRequest creates a trainable model from a base model.
type CreateModelRequest struct {
	SessionID  string     `json:"session_id"`
	ModelSeqID int64      `json:"model_seq_id"`
	BaseModel  string     `json:"base_model"`
	LoraConfig LoraConfig `json:"lora_config"`
	// UserMetadata is the user's, kept with the training run (the
	// cookbook records its renderer there); OptimizerConfig names the
	// optimizer family for the model's life ("adamw" unless set).
	UserMetadata    map[string]any   `json:"user_metadata,omitempty"`
	OptimizerConfig *OptimizerConfig `json:"optimizer_config,omitempty"`
	Type            string           `json:"type,omitempty"` // "create_model"
}

// OptimizerConfig is the optimizer family a model is created with.
type OptimizerConfig struct {
	Type string `json:"type"`
}

// TrainingRun is a model as the REST reads describe it.
type TrainingRun struct {
	TrainingRunID         string         `json:"training_run_id"`
	BaseModel             string         `json:"base_model"`
	ModelOwner            string         `json:"model_owner"`
	IsLoRA                bool           `json:"is_lora"`
	Corrupted             bool           `json:"corrupted"`
	LoRARank              *int           `json:"lora_rank"`
	LastRequestTime       time.Time      `json:"last_request_time"`
	LastCheckpoint        *Checkpoint    `json:"last_checkpoint"`
	LastSamplerCheckpoint *Checkpoint    `json:"last_sampler_checkpoint"`
	UserMetadata          map[string]any `json:"user_metadata"`
}

// CreateModelResponse names the model. The SDK reads create_model's
// answer as a future (RequestID) whose result is this response again;
// SkyRL tx names such a future too; rlvr's client waits for it, so a
// model the server cannot make fails at once.
type CreateModelResponse struct {
	ModelID   string `json:"model_id"`
	Type      string `json:"type,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// UnloadModelRequest frees a model: its weights and, on SkyRL tx, its
// LoRA adapter's slot, which otherwise stays taken until the session
// expires. The answer is a future (UnloadModelResponse with a request_id)
// resolving to an UnloadModelResponse.
type UnloadModelRequest struct {
	ModelID string `json:"model_id"`
	Type    string `json:"type,omitempty"`
}

// UnloadModelResponse is unload_model's answer and its future's result.
type UnloadModelResponse struct {
	ModelID   string `json:"model_id"`
	Status    string `json:"status,omitempty"` // "unloaded", in the result
	Type      string `json:"type,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// CreateSessionRequest opens a session.
type CreateSessionRequest struct {
	Tags         []string       `json:"tags"`
	SDKVersion   string         `json:"sdk_version"`
	UserMetadata map[string]any `json:"user_metadata,omitempty"`
	DisplayName  string         `json:"display_name,omitempty"`
	ProjectID    string         `json:"project_id,omitempty"`
	Type         string         `json:"type,omitempty"` // "create_session"
}

// CreateSessionResponse names the session.
type CreateSessionResponse struct {
	SessionID      string `json:"session_id"`
	Type           string `json:"type,omitempty"`
	InfoMessage    string `json:"info_message,omitempty"`
	WarningMessage string `json:"warning_message,omitempty"`
	ErrorMessage   string `json:"error_message,omitempty"`
}

// HeartbeatRequest keeps a session alive; the response is {"type":
// "session_heartbeat"}.
type HeartbeatRequest struct {
	SessionID string `json:"session_id"`
	Type      string `json:"type,omitempty"` // "session_heartbeat"
}

// SaveWeightsRequest saves the training state (weights and optimizer)
// under a name; the result is a SaveWeightsResponse with its tinker://
// path.
type SaveWeightsRequest struct {
	ModelID    string `json:"model_id"`
	Path       string `json:"path"`
	SeqID      *int64 `json:"seq_id,omitempty"`
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"` // nil: kept until deleted
	Type       string `json:"type,omitempty"`        // "save_weights"
}

// SaveWeightsExternalRequest exports a model's weights for other programs
// under Path, a name: its LoRA adapters in Tinker's adapter format, or a
// full model as a Hugging Face directory. TTLSeconds nil keeps it;
// AgeEncryptionRecipients asks for the files encrypted to age keys.
type SaveWeightsExternalRequest struct {
	ModelID                 string   `json:"model_id"`
	Path                    string   `json:"path"`
	SeqID                   *int64   `json:"seq_id,omitempty"`
	TTLSeconds              *int64   `json:"ttl_seconds,omitempty"`
	AgeEncryptionRecipients []string `json:"age_encryption_recipients,omitempty"`
	Type                    string   `json:"type,omitempty"` // "save_weights_external"
}

// SaveWeightsExternalResponse is save_weights_external's result: the
// export's tinker://<model_id>/external_weights/<name> path and size.
type SaveWeightsExternalResponse struct {
	Path      string `json:"path"`
	SizeBytes int64  `json:"size_bytes"`
	Type      string `json:"type,omitempty"`
}

// Checkpoint is one saved checkpoint of a training run, as the REST
// listing gives it: CheckpointType is "training" (save_weights),
// "sampler" (save_weights_for_sampler) or "external"
// (save_weights_external), and CheckpointID the path's part after the
// model id ("weights/step-10").
type Checkpoint struct {
	CheckpointID   string     `json:"checkpoint_id"`
	CheckpointType string     `json:"checkpoint_type"`
	Time           time.Time  `json:"time"`
	TinkerPath     string     `json:"tinker_path"`
	SizeBytes      *int64     `json:"size_bytes"`
	Public         bool       `json:"public"`
	ExpiresAt      *time.Time `json:"expires_at"`
}

// CheckpointsListResponse lists a training run's checkpoints, or (with a
// Cursor) one page of every run's.
type CheckpointsListResponse struct {
	Checkpoints []Checkpoint `json:"checkpoints"`
	Cursor      *Cursor      `json:"cursor,omitempty"`
}

// Cursor places one page of a listing: Limit items from Offset, of
// TotalCount.
type Cursor struct {
	Offset     int `json:"offset"`
	Limit      int `json:"limit"`
	TotalCount int `json:"total_count"`
}

// TrainingRunsResponse is one page of the training runs.
type TrainingRunsResponse struct {
	TrainingRuns []TrainingRun `json:"training_runs"`
	Cursor       Cursor        `json:"cursor"`
}

// ListSessionsResponse is one page of the session ids.
type ListSessionsResponse struct {
	Sessions []string `json:"sessions"`
}

// GetSessionResponse is what a session holds: its models (training runs)
// and sampling sessions.
type GetSessionResponse struct {
	TrainingRunIDs []string       `json:"training_run_ids"`
	SamplerIDs     []string       `json:"sampler_ids"`
	UserMetadata   map[string]any `json:"user_metadata,omitempty"`
	DisplayName    string         `json:"display_name,omitempty"`
}

// WeightsInfoResponse is what loading saved weights needs to know of
// them: their base model and adapters.
type WeightsInfoResponse struct {
	BaseModel    string `json:"base_model"`
	IsLoRA       bool   `json:"is_lora"`
	LoRARank     *int   `json:"lora_rank,omitempty"`
	TrainUnembed *bool  `json:"train_unembed,omitempty"`
	TrainMLP     *bool  `json:"train_mlp,omitempty"`
	TrainAttn    *bool  `json:"train_attn,omitempty"`
}

// ExternalWeightsURLsResponse gives a download URL for each file of an
// export, keyed by the file's path in it, valid until Expires.
type ExternalWeightsURLsResponse struct {
	URLs    map[string]string `json:"urls"`
	Expires time.Time         `json:"expires"`
}

// SaveWeightsForSamplerRequest publishes the weights for sampling.
type SaveWeightsForSamplerRequest struct {
	ModelID    string `json:"model_id"`
	Path       string `json:"path,omitempty"`
	SeqID      *int64 `json:"seq_id,omitempty"`
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"` // nil: kept until deleted
	Type       string `json:"type,omitempty"`        // "save_weights_for_sampler"
}

// SaveWeightsResponse is the tinker:// path weights were saved under,
// for both saves.
type SaveWeightsResponse struct {
	Path string `json:"path"`
	Type string `json:"type,omitempty"`
}

// LoadWeightsRequest loads a saved training state into a model, with its
// optimizer state when Optimizer is set.
type LoadWeightsRequest struct {
	ModelID   string `json:"model_id,omitempty"`
	Path      string `json:"path"`
	Optimizer bool   `json:"optimizer"`
	SeqID     *int64 `json:"seq_id,omitempty"`
	// SessionID and ModelSeqID, in place of ModelID, create the model the
	// state is loaded into, as create_model would, its adapters those of
	// the state (the SDK's create_training_client_from_state); BaseModel
	// then overrides the state's base model.
	SessionID    string         `json:"session_id,omitempty"`
	ModelSeqID   *int64         `json:"model_seq_id,omitempty"`
	BaseModel    string         `json:"base_model,omitempty"`
	UserMetadata map[string]any `json:"user_metadata,omitempty"` // the created model's, as create_model's
	Type         string         `json:"type,omitempty"`          // "load_weights"
}

// LoadWeightsResponse confirms a load.
type LoadWeightsResponse struct {
	Path string `json:"path,omitempty"`
	Type string `json:"type,omitempty"`
}

// SamplingParams are a sample call's settings. Stop is token ids or
// strings, never both; TopK −1 keeps every token.
type SamplingParams struct {
	MaxTokens   int             `json:"max_tokens"`
	Seed        *int64          `json:"seed,omitempty"`
	Stop        json.RawMessage `json:"stop,omitempty"`
	Temperature float64         `json:"temperature"`
	TopK        int             `json:"top_k"`
	TopP        float64         `json:"top_p"`
}

// SampleRequest samples NumSamples continuations of a prompt from the
// weights at ModelPath (a save_weights_for_sampler path) or the base
// model.
type SampleRequest struct {
	NumSamples     int            `json:"num_samples"`
	Prompt         ModelInput     `json:"prompt"`
	SamplingParams SamplingParams `json:"sampling_params"`
	ModelPath      string         `json:"model_path,omitempty"`
	BaseModel      string         `json:"base_model,omitempty"`
	PromptLogprobs bool           `json:"prompt_logprobs,omitempty"`
	Type           string         `json:"type,omitempty"` // "sample"
}

// Stop reasons.
const (
	StopLength = "length"
	StopStop   = "stop"
)

// SampledSequence is one continuation with the sampler's logprob of each
// token.
type SampledSequence struct {
	StopReason string    `json:"stop_reason"`
	Tokens     []int32   `json:"tokens"`
	Logprobs   []float64 `json:"logprobs,omitempty"`
}

// SampleResponse holds a sample call's continuations.
type SampleResponse struct {
	Sequences      []SampledSequence `json:"sequences"`
	PromptLogprobs []*float64        `json:"prompt_logprobs,omitempty"`
	Type           string            `json:"type,omitempty"`
}

// Future is what a training or sampling call returns: the id to retrieve
// its result with.
type Future struct {
	RequestID string `json:"request_id"`
	ModelID   string `json:"model_id,omitempty"`
	// SampleSequenceIDs are a sample call's: one id per sample, in the
	// order of the result's sequences (the SDK requires them).
	SampleSequenceIDs []string `json:"sample_sequence_ids,omitempty"`
}

// RetrieveFutureRequest asks for a future's result.
type RetrieveFutureRequest struct {
	RequestID string `json:"request_id"`
}

// RequestFailed is a retrieve_future answer that the call failed;
// Category is "user", "server" or "unknown".
type RequestFailed struct {
	Message  string `json:"error"`
	Category string `json:"category,omitempty"`
}

// ErrorDetail is the body of an HTTP error from SkyRL (FastAPI).
type ErrorDetail struct {
	Detail string `json:"detail"`
}

// Result reads a retrieve_future answer, in the SDK's order: a "try_again"
// type, or a "complete_metadata" status, means poll again (ready false);
// an "error" key is a failure, returned as *RequestFailed; anything else
// is the result, decoded into v.
func Result(body []byte, v any) (ready bool, err error) {
	var head struct {
		Type   string          `json:"type"`
		Status string          `json:"status"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return false, fmt.Errorf("tinker: retrieve_future: %w", err)
	}
	switch {
	case head.Type == "try_again" || head.Status == "complete_metadata":
		return false, nil
	case head.Error != nil:
		var f RequestFailed
		if err := json.Unmarshal(body, &f); err != nil {
			return false, fmt.Errorf("tinker: retrieve_future: a failure whose error is not a string: %w", err)
		}
		return true, &f
	}
	if err := json.Unmarshal(body, v); err != nil {
		return true, fmt.Errorf("tinker: retrieve_future: %w", err)
	}
	return true, nil
}

// Error implements error: the failure's category and message.
func (f *RequestFailed) Error() string {
	if f.Category == "" {
		return "tinker: request failed: " + f.Message
	}
	return "tinker: request failed (" + f.Category + "): " + f.Message
}

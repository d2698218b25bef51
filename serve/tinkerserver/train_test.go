package tinkerserver

import (
	"context"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/engine/lora"
	"rlvr/engine/optim"
)

// localLearner opens a second copy of the test model in this process.
func localLearner(t *testing.T) *local.Learner {
	t.Helper()
	l, err := checkpoint.Open(testModelDir(t), "")
	if err != nil {
		t.Fatal(err)
	}
	learner, err := local.NewLearner(l.Model, optim.DefaultAdamW())
	if err != nil {
		t.Fatal(err)
	}
	return learner
}

// makeBatch returns random data for loss_fn as the wire sends it and as
// the engine takes it, with the sampler's logprobs near the learner's so
// that some ratios are clipped and some not.
func makeBatch(t *testing.T, r *rand.Rand, fn string, learner *local.Learner) ([]tinker.Datum, []backend.Datum) {
	t.Helper()
	var batch []backend.Datum
	for range 3 {
		n := 4 + r.IntN(12)
		seq := make([]int32, n+1)
		for i := range seq {
			seq[i] = int32(r.IntN(testModelConfig.Vocab))
		}
		d := backend.Datum{Tokens: seq[:n], Targets: seq[1:], Weights: make([]float32, n)}
		for i := range d.Weights {
			d.Weights[i] = []float32{0, 1, 0.5}[r.IntN(3)]
		}
		batch = append(batch, d)
	}
	if fn != tinker.CrossEntropy {
		lps, err := learner.Logprobs(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range batch {
			d := &batch[i]
			for _, lp := range lps[i] {
				d.SamplerLogprobs = append(d.SamplerLogprobs, lp+float32(r.NormFloat64()*0.3))
				d.Advantages = append(d.Advantages, float32(r.NormFloat64()))
			}
		}
	}
	data := make([]tinker.Datum, len(batch))
	for i, d := range batch {
		in := map[string]tinker.TensorData{"target_tokens": tinker.Ints(d.Targets), "weights": tinker.Floats(d.Weights)}
		if fn != tinker.CrossEntropy {
			in["logprobs"], in["advantages"] = tinker.Floats(d.SamplerLogprobs), tinker.Floats(d.Advantages)
		}
		data[i] = tinker.Datum{ModelInput: tinker.Text(d.Tokens), LossFnInputs: in}
	}
	return data, batch
}

// params returns a copy of a served model's weights.
func (h *harness) params(id string) []float32 {
	h.srv.mu.Lock()
	defer h.srv.mu.Unlock()
	return slices.Clone(h.srv.models[id].learner.Model.Params)
}

func bitsEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestTrainingMatchesLocal trains over HTTP with each loss function and
// the same steps on a second copy of the model in this process: the
// logprobs, losses, gradient norms and weights agree bit for bit.
func TestTrainingMatchesLocal(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	learner := localLearner(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	adam := tinker.AdamParams{LearningRate: 0.02, Beta1: 0.8, Beta2: 0.9, Eps: 1e-8, WeightDecay: 0.01, GradClipNorm: 0.5}
	seq := int64(0)
	next := func() *int64 { seq++; s := seq; return &s }
	for step, tc := range []struct {
		fn   string
		cfg  map[string]float64
		loss backend.Loss
	}{
		{tinker.CrossEntropy, nil, backend.Loss{NLL: 1}},
		{tinker.ImportanceSampling, nil, backend.Loss{PolicyGradient: backend.Importance}},
		{tinker.PPO, nil, backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: float32(1 - 0.8), ClipHigh: float32(1.2 - 1)}},
		{tinker.PPO, map[string]float64{tinker.ClipLowThreshold: 0.9, tinker.ClipHighThreshold: 1.05}, backend.Loss{PolicyGradient: backend.ClippedPG, ClipLow: float32(1 - 0.9), ClipHigh: float32(1.05 - 1)}},
	} {
		data, batch := makeBatch(t, r, tc.fn, learner)
		var out tinker.ForwardBackwardOutput
		h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, SeqID: next(),
			Input: tinker.ForwardBackwardInput{Data: data, LossFn: tc.fn, LossFnConfig: tc.cfg}}, &out)
		res, err := learner.ForwardBackward(ctx, batch, tc.loss)
		if err != nil {
			t.Fatal(err)
		}
		if out.LossFnOutputType != "TensorData" || len(out.LossFnOutputs) != len(batch) {
			t.Fatalf("step %d: output %+v", step, out)
		}
		if out.Metrics["loss:sum"] != res.Metrics.Loss {
			t.Errorf("step %d (%s): loss:sum %v, local %v", step, tc.fn, out.Metrics["loss:sum"], res.Metrics.Loss)
		}
		sum := 0.0
		for i, o := range out.LossFnOutputs {
			lps, err := o["logprobs"].Float32s()
			if err != nil || !bitsEqual(lps, res.Logprobs[i]) {
				t.Fatalf("step %d datum %d: logprobs %v (%v), local %v", step, i, lps, err, res.Logprobs[i])
			}
			el, err := o["elementwise_loss"].Float32s()
			if err != nil || len(el) != len(lps) {
				t.Fatalf("step %d datum %d: elementwise_loss %v (%v)", step, i, el, err)
			}
			for j, v := range el {
				if batch[i].Weights[j] == 0 && v != 0 {
					t.Errorf("step %d datum %d position %d: loss %v at weight 0", step, i, j, v)
				}
				sum += float64(v)
			}
		}
		if math.Abs(sum-res.Metrics.Loss) > 1e-5*math.Max(1, math.Abs(sum)) {
			t.Errorf("step %d (%s): elementwise losses sum to %v, the loss is %v", step, tc.fn, sum, res.Metrics.Loss)
		}
		var os tinker.OptimStepResponse
		h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, SeqID: next(), AdamParams: adam, Type: "optim_step"}, &os)
		if err := learner.Opt.SetConfig(optim.AdamWConfig{Beta1: adam.Beta1, Beta2: adam.Beta2, Eps: adam.Eps, WeightDecay: adam.WeightDecay}); err != nil {
			t.Fatal(err)
		}
		st, err := learner.OptimStep(ctx, backend.OptimParams{LearningRate: float32(adam.LearningRate), GradClipNorm: float32(adam.GradClipNorm)})
		if err != nil {
			t.Fatal(err)
		}
		if os.Metrics["grad_norm"] != st.GradNorm {
			t.Errorf("step %d: grad_norm %v, local %v", step, os.Metrics["grad_norm"], st.GradNorm)
		}
		if !bitsEqual(h.params(id), learner.Model.Params) {
			t.Fatalf("step %d (%s): the weights differ from the local learner's", step, tc.fn)
		}
	}

	// forward: the same logprobs and losses, and no gradient.
	for _, fn := range []string{tinker.CrossEntropy, tinker.ImportanceSampling, tinker.PPO} {
		data, batch := makeBatch(t, r, fn, learner)
		var out tinker.ForwardBackwardOutput
		h.call(tinker.PathForward, tinker.ForwardRequest{ModelID: id, SeqID: next(), Input: tinker.ForwardBackwardInput{Data: data, LossFn: fn}}, &out)
		lps, err := local.Logprobs(ctx, learner.Model, batch)
		if err != nil {
			t.Fatal(err)
		}
		want := 0.0
		for i, o := range out.LossFnOutputs {
			got, _ := o["logprobs"].Float32s()
			if !bitsEqual(got, lps[i]) {
				t.Fatalf("forward %s datum %d: logprobs %v, local %v", fn, i, got, lps[i])
			}
			for j, lp := range lps[i] {
				w, l := float64(batch[i].Weights[j]), float64(lp)
				switch fn {
				case tinker.CrossEntropy:
					want -= w * l
				case tinker.ImportanceSampling:
					want -= w * math.Exp(l-float64(batch[i].SamplerLogprobs[j])) * float64(batch[i].Advantages[j])
				case tinker.PPO:
					ratio, a := math.Exp(l-float64(batch[i].SamplerLogprobs[j])), float64(batch[i].Advantages[j])
					want -= w * math.Min(ratio*a, math.Max(0.8, math.Min(1.2, ratio))*a)
				}
			}
		}
		if got := out.Metrics["loss:sum"]; math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
			t.Errorf("forward %s: loss:sum %v, want %v", fn, got, want)
		}
	}
	h.srv.mu.Lock()
	grads := h.srv.models[id].learner.Model.Grads
	h.srv.mu.Unlock()
	if slices.ContainsFunc(grads, func(g float32) bool { return g != 0 }) {
		t.Error("forward accumulated a gradient")
	}
}

// TestLossValidation sends data wrong in each way: the call fails as the
// user's, naming the datum and the field.
func TestLossValidation(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	good := func() tinker.Datum {
		return tinker.Datum{ModelInput: tinker.Text([]int32{1, 2, 3}), LossFnInputs: map[string]tinker.TensorData{
			"target_tokens": tinker.Ints([]int32{2, 3, 4}), "weights": tinker.Floats([]float32{1, 1, 1}),
			"logprobs": tinker.Floats([]float32{-1, -1, -1}), "advantages": tinker.Floats([]float32{1, -1, 0.5})}}
	}
	long := make([]int32, testModelConfig.MaxSeq+1)
	for _, tc := range []struct {
		name   string
		fn     string
		cfg    map[string]float64
		change func(d *tinker.Datum)
		want   []string
	}{
		{"targets short", tinker.CrossEntropy, nil, func(d *tinker.Datum) { d.LossFnInputs["target_tokens"] = tinker.Ints([]int32{2, 3}) },
			[]string{"data[1]", "loss_fn_inputs.target_tokens has 2 values, model_input 3"}},
		{"weights long", tinker.ImportanceSampling, nil, func(d *tinker.Datum) { d.LossFnInputs["weights"] = tinker.Floats([]float32{1, 1, 1, 1}) },
			[]string{"data[1]", "loss_fn_inputs.weights has 4 values"}},
		{"target outside vocabulary", tinker.CrossEntropy, nil, func(d *tinker.Datum) { d.LossFnInputs["target_tokens"] = tinker.Ints([]int32{2, 3, 259}) },
			[]string{"data[1]", "loss_fn_inputs.target_tokens: data[2] = 259 is outside the vocabulary [0, 259)"}},
		{"target not an integer", tinker.PPO, nil, func(d *tinker.Datum) { d.LossFnInputs["target_tokens"].Data[0] = 1.5 },
			[]string{"data[1]", "loss_fn_inputs.target_tokens: data[0] = 1.5 is not a token id"}},
		{"input outside vocabulary", tinker.CrossEntropy, nil, func(d *tinker.Datum) { d.ModelInput.Chunks[0].Tokens[1] = 300 },
			[]string{"data[1]", "model_input token 1 is 300"}},
		{"too long", tinker.CrossEntropy, nil, func(d *tinker.Datum) {
			*d = tinker.Datum{ModelInput: tinker.Text(long), LossFnInputs: map[string]tinker.TensorData{"target_tokens": tinker.Ints(long)}}
		}, []string{"data[1]", "model_input has 65 tokens, more than the model's context of 64"}},
		{"no tokens", tinker.CrossEntropy, nil, func(d *tinker.Datum) { *d = tinker.Datum{} }, []string{"data[1]", "model_input has no tokens"}},
		{"image chunk", tinker.CrossEntropy, nil, func(d *tinker.Datum) { d.ModelInput.Chunks[0].Type = "image" },
			[]string{"data[1]", `model_input.chunks[0]: type "image" is not encoded_text`}},
		{"ppo without advantages", tinker.PPO, nil, func(d *tinker.Datum) { delete(d.LossFnInputs, "advantages") },
			[]string{"data[1]", "loss_fn_inputs.advantages is missing", "ppo"}},
		{"importance without logprobs", tinker.ImportanceSampling, nil, func(d *tinker.Datum) { delete(d.LossFnInputs, "logprobs") },
			[]string{"data[1]", "loss_fn_inputs.logprobs is missing"}},
		{"no targets", tinker.CrossEntropy, nil, func(d *tinker.Datum) { delete(d.LossFnInputs, "target_tokens") },
			[]string{"data[1]", "loss_fn_inputs.target_tokens is missing"}},
		{"unknown input", tinker.CrossEntropy, nil, func(d *tinker.Datum) { d.LossFnInputs["values"] = tinker.Floats([]float32{1, 2, 3}) },
			[]string{"data[1]", "loss_fn_inputs.values is not an input of cross_entropy"}},
		{"bad dtype", tinker.CrossEntropy, nil, func(d *tinker.Datum) {
			w := d.LossFnInputs["weights"]
			w.Dtype = "bfloat16"
			d.LossFnInputs["weights"] = w
		},
			[]string{"data[1]", `loss_fn_inputs.weights: dtype "bfloat16"`}},
		{"unknown loss", "dpo", nil, nil, []string{`loss_fn "dpo" is not supported`}},
		{"unsupported loss", "stable_reinforce", nil, nil, []string{`loss_fn stable_reinforce is not supported here: Tinker publishes neither its objective`}},
		{"dro needs beta", "dro", nil, nil, []string{`loss_fn_config.beta is missing`}},
		{"no loss", "", nil, nil, []string{"loss_fn is missing"}},
		{"config for cross_entropy", tinker.CrossEntropy, map[string]float64{"clip_low_threshold": 0.8}, nil,
			[]string{"loss_fn_config", "cross_entropy takes no config", "clip_low_threshold"}},
		{"unknown ppo key", tinker.PPO, map[string]float64{"value_clip": 0.2}, nil, []string{"loss_fn_config", "does not take value_clip"}},
		{"ppo low above 1", tinker.PPO, map[string]float64{"clip_low_threshold": 1.1}, nil, []string{"loss_fn_config.clip_low_threshold is 1.1, want in (0, 1]"}},
		{"ppo low zero", tinker.PPO, map[string]float64{"clip_low_threshold": 0}, nil, []string{"loss_fn_config.clip_low_threshold is 0"}},
		{"ppo high below 1", tinker.PPO, map[string]float64{"clip_high_threshold": 0.9}, nil, []string{"loss_fn_config.clip_high_threshold is 0.9, want at least 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []tinker.Datum{good(), good()}
			if tc.change != nil {
				tc.change(&data[1])
			}
			for _, path := range []string{tinker.PathForwardBackward, tinker.PathForward} {
				var req any = tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: data, LossFn: tc.fn, LossFnConfig: tc.cfg}}
				if path == tinker.PathForward {
					req = tinker.ForwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: data, LossFn: tc.fn, LossFnConfig: tc.cfg}}
				}
				f := h.failure(path, req)
				if f.Category != "user" {
					t.Errorf("%s: category %q, want user", path, f.Category)
				}
				for _, w := range tc.want {
					if !strings.Contains(f.Message, w) {
						t.Errorf("%s: %q does not mention %q", path, f.Message, w)
					}
				}
			}
		})
	}
	// Empty data, and ppo's bounds of exactly 1, which are allowed.
	f := h.failure(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{LossFn: tinker.CrossEntropy}})
	if !strings.Contains(f.Message, "data is empty") {
		t.Errorf("empty data: %q", f.Message)
	}
	var out tinker.ForwardBackwardOutput
	h.call(tinker.PathForward, tinker.ForwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: []tinker.Datum{good()}, LossFn: tinker.PPO,
		LossFnConfig: map[string]float64{tinker.ClipLowThreshold: 1, tinker.ClipHighThreshold: 1}}}, &out)
	// Weights default to 1.
	d := good()
	delete(d.LossFnInputs, "weights")
	h.call(tinker.PathForward, tinker.ForwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: []tinker.Datum{d}, LossFn: tinker.CrossEntropy}}, &out)
	lps, _ := out.LossFnOutputs[0]["logprobs"].Float32s()
	el, _ := out.LossFnOutputs[0]["elementwise_loss"].Float32s()
	for j := range lps {
		if el[j] != -lps[j] {
			t.Errorf("position %d: loss %v with no weights, logprob %v", j, el[j], lps[j])
		}
	}
}

// TestOptimStep checks AdamW's settings are validated, the defaults taken
// when absent, and a non-finite gradient refused as the server's failure.
func TestOptimStep(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	f := h.failure(tinker.PathOptimStep, map[string]any{"model_id": id, "adam_params": map[string]any{"learning_rate": -1, "beta1": 1, "eps": 0}})
	for _, w := range []string{"adam_params.learning_rate is -1", "adam_params.beta1 is 1", "adam_params.eps is 0"} {
		if f.Category != "user" || !strings.Contains(f.Message, w) {
			t.Errorf("%+v does not mention %q as the user's", f, w)
		}
	}
	status, b := h.do(http.MethodPost, tinker.PathOptimStep, map[string]any{"model_id": id})
	expectDetail(t, status, b, http.StatusBadRequest, "adam_params is missing")

	// Absent settings take SkyRL's defaults.
	var out tinker.OptimStepResponse
	h.call(tinker.PathOptimStep, map[string]any{"model_id": id, "adam_params": map[string]any{"learning_rate": 0.01}}, &out)
	h.srv.mu.Lock()
	m := h.srv.models[id]
	h.srv.mu.Unlock()
	if got, want := m.learner.Opt.Config(), (optim.AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-12}); got != want {
		t.Errorf("AdamW config %+v, want %+v", got, want)
	}

	// A NaN gradient: the step is refused, the gradients dropped, and the
	// next step runs.
	m.learner.Model.Grads[3] = float32(math.NaN())
	f = h.failure(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}})
	if f.Category != "server" || !strings.Contains(f.Message, "non-finite gradient") {
		t.Errorf("NaN gradient: %+v", f)
	}
	h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: tinker.AdamParams{LearningRate: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}}, &out)
}

// TestSaveLoad saves a trained model's state and loads it into a new
// model, with and without the optimizer: training on from the loaded
// state matches training on from the saved one.
func TestSaveLoad(t *testing.T) {
	h := newHarness(t, Config{})
	_, a := h.newModel()
	r := rand.New(rand.NewPCG(5, 6))
	learner := localLearner(t)
	adam := tinker.AdamParams{LearningRate: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}
	train := func(id string, data []tinker.Datum) {
		var out tinker.ForwardBackwardOutput
		h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: data, LossFn: tinker.CrossEntropy}}, &out)
		var os tinker.OptimStepResponse
		h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: adam}, &os)
	}
	data, _ := makeBatch(t, r, tinker.CrossEntropy, learner)
	train(a, data)
	var saved tinker.SaveWeightsResponse
	h.call(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: a, Path: "ckpt-1", Type: "save_weights"}, &saved)
	if want := "tinker://" + a + "/weights/ckpt-1"; saved.Path != want || saved.Type != "save_weights" {
		t.Fatalf("saved %+v, want path %s", saved, want)
	}
	for _, f := range []string{"config.json", "model.safetensors", local.OptimizerFile} {
		if _, err := os.Stat(filepath.Join(h.srv.cfg.StateDir, a, "weights", "ckpt-1", f)); err != nil {
			t.Error(err)
		}
	}
	f := h.failure(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: a, Path: "ckpt-1"})
	if f.Category != "user" || !strings.Contains(f.Message, "saved already") {
		t.Errorf("saving twice: %+v", f)
	}

	// Resume with the optimizer: the same next step.
	_, b := h.newModel()
	var loaded tinker.LoadWeightsResponse
	h.call(tinker.PathLoadWeights, tinker.LoadWeightsRequest{ModelID: b, Path: saved.Path, Optimizer: true, Type: "load_weights"}, &loaded)
	if !bitsEqual(h.params(a), h.params(b)) {
		t.Fatal("the loaded weights differ from the saved ones")
	}
	next, _ := makeBatch(t, r, tinker.CrossEntropy, learner)
	train(a, next)
	train(b, next)
	if !bitsEqual(h.params(a), h.params(b)) {
		t.Fatal("a step after loading with the optimizer differs from the step after saving")
	}

	// Without the optimizer: fresh moments, so a different step.
	_, c := h.newModel()
	h.call(tinker.PathLoadWeights, tinker.LoadWeightsRequest{ModelID: c, Path: saved.Path}, &loaded)
	h.srv.mu.Lock()
	_, _, steps := h.srv.models[c].learner.Opt.State()
	h.srv.mu.Unlock()
	if steps != 0 {
		t.Errorf("loaded without the optimizer: %d steps", steps)
	}

	for _, tc := range []struct {
		path any
		req  any
		want string
	}{
		{tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: a, Path: "../escape"}, `path "../escape" is not a name`},
		{tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: a, Path: ".hidden"}, "is not a name"},
		{tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: a, Path: "a/b"}, "is not a name"},
		{tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: a, Path: ""}, "is not a name"},
		{tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: a, Path: strings.Repeat("x", 256)}, "at most 255 bytes"},
		{tinker.PathSaveForSampler, tinker.SaveWeightsForSamplerRequest{ModelID: a, Path: ".."}, "is not a name"},
		{tinker.PathLoadWeights, tinker.LoadWeightsRequest{ModelID: b, Path: "tinker://" + a + "/weights/../../x"}, "is not a saved state's path"},
		{tinker.PathLoadWeights, tinker.LoadWeightsRequest{ModelID: b, Path: "/etc/passwd"}, "is not a saved state's path"},
		{tinker.PathLoadWeights, tinker.LoadWeightsRequest{ModelID: b, Path: "tinker://" + a + "/sampler_weights/ckpt-1"}, "is not a saved state's path"},
		{tinker.PathLoadWeights, tinker.LoadWeightsRequest{ModelID: b, Path: "tinker://" + a + "/weights/nothing"}, "no weights are saved at"},
	} {
		f := h.failure(tc.path.(string), tc.req)
		if f.Category != "user" || !strings.Contains(f.Message, tc.want) {
			t.Errorf("%s %+v: %+v, want a user failure mentioning %q", tc.path, tc.req, f, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(h.srv.cfg.StateDir, "escape")); err == nil {
		t.Error("a save escaped the state directory")
	}
}

// TestFailureBounded checks a failed call's message stays short however
// much of the request it names: failures are kept for Config.ResultTTL.
func TestFailureBounded(t *testing.T) {
	h := newHarness(t, Config{})
	_, id := h.newModel()
	name := strings.Repeat("é", 1<<20)
	f := h.failure(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: id, Path: name})
	if f.Category != "user" || !strings.HasPrefix(f.Message, `save_weights: path "éé`) || !strings.HasSuffix(f.Message, "é…") {
		t.Errorf("failure %.200q (category %s), want a user failure naming the path, cut short", f.Message, f.Category)
	}
	if n := len(f.Message); n > maxMessageBytes+len("…") {
		t.Errorf("the message is %d bytes, more than %d", n, maxMessageBytes+len("…"))
	}
}

// TestLoRA trains LoRA adapters through the server: the same steps as a
// local LoRA learner with the same seed, bit for bit; get_info says so;
// only adapted matrices move; a saved state resumes exactly and is refused
// by a model that trains every parameter.
func TestLoRA(t *testing.T) {
	h := newHarness(t, Config{})
	seed := int64(4)
	attnOnly := false
	create := func() string {
		var m tinker.CreateModelResponse
		strict(t, h.post(tinker.PathCreateModel, tinker.CreateModelRequest{SessionID: h.session(), BaseModel: testBase,
			LoraConfig: tinker.LoraConfig{Rank: 2, Seed: &seed, TrainMLP: &attnOnly}}), &m)
		return m.ModelID
	}
	a := create()
	var info modelInfo
	strict(t, h.post(tinker.PathGetInfo, map[string]string{"model_id": a}), &info)
	if !info.IsLoRA || info.LoRARank != 2 {
		t.Errorf("get_info: %+v", info)
	}

	ref := localLearner(t)
	base := slices.Clone(ref.Model.Params)
	adam := tinker.AdamParams{LearningRate: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-12}
	lref, err := local.NewLoRALearner(ref.Model, optim.AdamWConfig{Beta1: adam.Beta1, Beta2: adam.Beta2, Eps: adam.Eps},
		lora.Config{Rank: 2, Alpha: 32, Attention: true, Unembed: true, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(8, 9))
	step := func(id string, data []tinker.Datum, fn string) {
		var out tinker.ForwardBackwardOutput
		h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: data, LossFn: fn}}, &out)
		var os tinker.OptimStepResponse
		h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: adam}, &os)
	}
	for _, tc := range []struct {
		fn   string
		loss backend.Loss
	}{{tinker.CrossEntropy, backend.Loss{NLL: 1}}, {tinker.ImportanceSampling, backend.Loss{PolicyGradient: backend.Importance}}} {
		data, batch := makeBatch(t, r, tc.fn, lref)
		step(a, data, tc.fn)
		if _, err := lref.ForwardBackward(context.Background(), batch, tc.loss); err != nil {
			t.Fatal(err)
		}
		if _, err := lref.OptimStep(context.Background(), backend.OptimParams{LearningRate: 0.01}); err != nil {
			t.Fatal(err)
		}
	}
	if !bitsEqual(h.params(a), lref.Model.Params) {
		t.Fatal("the server's LoRA steps differ from the local LoRA learner's")
	}
	for _, tn := range lref.Model.Tensors {
		moved := !slices.Equal(base[tn.Offset:tn.Offset+tn.Len()], lref.Model.Params[tn.Offset:tn.Offset+tn.Len()])
		want := strings.Contains(tn.Name, "self_attn.") && strings.HasSuffix(tn.Name, "_proj.weight") ||
			tn.Name == "lm_head.weight" || tn.Name == "model.embed_tokens.weight" && lref.Model.Config.TiedEmbeddings
		if moved != want {
			t.Errorf("%s: moved %v, want %v", tn.Name, moved, want)
		}
	}

	var saved tinker.SaveWeightsResponse
	h.call(tinker.PathSaveWeights, tinker.SaveWeightsRequest{ModelID: a, Path: "lora-1"}, &saved)
	b := create()
	var loaded tinker.LoadWeightsResponse
	h.call(tinker.PathLoadWeights, tinker.LoadWeightsRequest{ModelID: b, Path: saved.Path, Optimizer: true}, &loaded)
	next, _ := makeBatch(t, r, tinker.CrossEntropy, lref)
	step(a, next, tinker.CrossEntropy)
	step(b, next, tinker.CrossEntropy)
	if !bitsEqual(h.params(a), h.params(b)) {
		t.Fatal("a step after loading the adapters with their optimizer differs from the step after saving")
	}
	// The SDK's create_training_client_from_state: a load without a
	// model_id makes the model, with the state's adapters, under the id
	// the SDK derives.
	sess := h.session()
	seq := int64(3)
	var fut tinker.Future
	strict(t, h.post(tinker.PathLoadWeights, tinker.LoadWeightsRequest{SessionID: sess, ModelSeqID: &seq, Path: saved.Path, Optimizer: true}), &fut)
	var done tinker.LoadWeightsResponse
	strict(t, h.wait(fut.RequestID), &done)
	c := sess + ":train:3"
	strict(t, h.post(tinker.PathGetInfo, map[string]string{"model_id": c}), &info)
	if !info.IsLoRA || info.LoRARank != 2 {
		t.Errorf("get_info of the model made by loading: %+v", info)
	}
	step(c, next, tinker.CrossEntropy)
	if !bitsEqual(h.params(a), h.params(c)) {
		t.Fatal("the model made by loading the state steps otherwise than the saved one")
	}
	for _, tc := range []struct {
		req  tinker.LoadWeightsRequest
		code int
		want string
	}{
		{tinker.LoadWeightsRequest{Path: saved.Path}, 400, "name the model"},
		{tinker.LoadWeightsRequest{SessionID: sess, ModelSeqID: &seq, Path: "x"}, 400, `path "x" is not a saved state's path`},
		{tinker.LoadWeightsRequest{SessionID: sess, ModelSeqID: &seq, Path: "tinker://" + a + "/weights/none"}, 404, "no weights are saved at"},
		{tinker.LoadWeightsRequest{SessionID: sess, ModelSeqID: &seq, Path: saved.Path, BaseModel: "other"}, 404, `base_model "other" is not served here`},
	} {
		status, b := h.do(http.MethodPost, tinker.PathLoadWeights, tc.req)
		expectDetail(t, status, b, tc.code, tc.want)
	}

	_, full := h.newModel()
	if f := h.failure(tinker.PathLoadWeights, tinker.LoadWeightsRequest{ModelID: full, Path: saved.Path}); f.Category != "user" ||
		!strings.Contains(f.Message, "is of LoRA adapters, and model "+full+" trains every parameter") {
		t.Errorf("a full model loading adapters: %+v", f)
	}
}

// TestMicroBatchedPasses runs a forward_backward larger than the server's
// pass budget: in several passes, the gradient accumulated, it gives the
// loss, logprobs and step of one local pass, to float rounding.
func TestMicroBatchedPasses(t *testing.T) {
	h := newHarness(t, Config{MicroBatchTokens: 8})
	_, id := h.newModel()
	learner := localLearner(t)
	r := rand.New(rand.NewPCG(3, 4))
	data, batch := makeBatch(t, r, tinker.CrossEntropy, learner)
	if n := len(backend.MicroBatches(batch, 8)); n < 2 {
		t.Fatalf("the batch fits one pass of 8 tokens (%d passes): the test needs more", n)
	}
	var out tinker.ForwardBackwardOutput
	h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: id, Input: tinker.ForwardBackwardInput{Data: data, LossFn: tinker.CrossEntropy}}, &out)
	res, err := learner.ForwardBackward(context.Background(), batch, backend.Loss{NLL: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := out.Metrics["loss:sum"], res.Metrics.Loss; math.Abs(got-want) > 1e-5*math.Max(1, math.Abs(want)) {
		t.Errorf("loss:sum %v in passes, %v in one", got, want)
	}
	for i, o := range out.LossFnOutputs {
		lps, _ := o["logprobs"].Float32s()
		for j := range lps {
			if math.Abs(float64(lps[j]-res.Logprobs[i][j])) > 1e-5 {
				t.Fatalf("datum %d position %d: logprob %v in passes, %v in one", i, j, lps[j], res.Logprobs[i][j])
			}
		}
	}
	adam := tinker.AdamParams{LearningRate: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8}
	var os tinker.OptimStepResponse
	h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: id, AdamParams: adam}, &os)
	if err := learner.Opt.SetConfig(optim.AdamWConfig{Beta1: adam.Beta1, Beta2: adam.Beta2, Eps: adam.Eps}); err != nil {
		t.Fatal(err)
	}
	if _, err := learner.OptimStep(context.Background(), backend.OptimParams{LearningRate: 0.01}); err != nil {
		t.Fatal(err)
	}
	var worst float64
	for i, p := range h.params(id) {
		worst = math.Max(worst, math.Abs(float64(p-learner.Model.Params[i])))
	}
	if worst > 1e-6 {
		t.Errorf("the step after passes differs from one pass's by up to %g", worst)
	}
}

package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"rlvr/backend"
	"rlvr/checkpoint"
	"rlvr/engine/lora"
	"rlvr/engine/optim"
	"rlvr/format/hf"
	"rlvr/format/hfconfig"
	"rlvr/format/safetensors"
	"rlvr/internal/atomicfile"
)

var _ backend.Learner = (*Learner)(nil)

// OptimizerFile holds AdamW's moments and step beside the weights.
const OptimizerFile = "optimizer.safetensors"

// Save implements backend.Learner: a complete Hugging Face model directory
// (config.json, model.safetensors in float32, and the tokenizer files of
// Source, see checkpoint.TokenizerFiles) plus the optimizer state in
// optimizer.safetensors, each file written atomically. config.json is
// HFConfig, else Source's config.json, else one derived from the model;
// it must describe the learner's model.
func (l *Learner) Save(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := l.saveModel(dir); err != nil {
		return err
	}
	if l.LoRA != nil {
		if err := saveLoRA(dir, l.LoRA); err != nil {
			return fmt.Errorf("local: save: %w", err)
		}
	}
	m, v, step := l.Opt.State()
	ts := []safetensors.Tensor{{Name: "adamw.m", Shape: []int{len(m)}, Data: m}, {Name: "adamw.v", Shape: []int{len(v)}, Data: v}}
	meta := map[string]string{"format": "rlvr-adamw", "step": strconv.FormatInt(step, 10)}
	// Each named state (backend.OptimParams.State) beside the shared one:
	// its step under "state.<name>", its moments as adamw.<name>.m and .v.
	for _, name := range slices.Sorted(maps.Keys(l.named)) {
		m, v, step := l.named[name].State()
		ts = append(ts, safetensors.Tensor{Name: "adamw." + name + ".m", Shape: []int{len(m)}, Data: m},
			safetensors.Tensor{Name: "adamw." + name + ".v", Shape: []int{len(v)}, Data: v})
		meta[namedStatePrefix+name] = strconv.FormatInt(step, 10)
	}
	return safetensors.Write(filepath.Join(dir, OptimizerFile), ts, meta, safetensors.F32)
}

// saveModel writes the merged weights as a Hugging Face directory, with
// Source's tokenizer files.
func (l *Learner) saveModel(dir string) error {
	cfg, err := l.saveConfig()
	if err != nil {
		return err
	}
	if err := hf.Save(dir, l.Model, cfg, safetensors.F32); err != nil {
		return err
	}
	if err := l.writeSourceFiles(dir); err != nil {
		return fmt.Errorf("local: save: %w", err)
	}
	return nil
}

// Export writes the weights as other programs take them, without the
// optimizer state: a LoRA learner's adapters alone, in Tinker's adapter
// format (what Tinker's save_weights_external exports), and a full
// learner's model as a Hugging Face directory.
func (l *Learner) Export(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if l.LoRA == nil {
		return l.saveModel(dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	if err := saveLoRA(dir, l.LoRA); err != nil {
		return fmt.Errorf("local: export: %w", err)
	}
	return nil
}

// namedStatePrefix marks a named optimizer state's step in the optimizer
// file's metadata.
const namedStatePrefix = "state."

// writeSourceFiles writes Source's tokenizer files into dir, reading them
// the first time.
func (l *Learner) writeSourceFiles(dir string) error {
	if l.Source == "" {
		return nil
	}
	if l.sourceFiles == nil || l.sourceRead != l.Source {
		files, err := checkpoint.ReadTokenizerFiles(l.Source)
		if err != nil {
			return err
		}
		l.sourceFiles, l.sourceRead = files, l.Source
	}
	for name, b := range l.sourceFiles {
		if err := atomicfile.WriteBytes(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	return nil
}

// saveConfig returns the config.json Save writes, nil meaning one derived
// from the model, after checking that it describes the learner's model.
func (l *Learner) saveConfig() (*hfconfig.Config, error) {
	cfg, from := l.HFConfig, "HFConfig"
	if cfg == nil && l.Source != "" {
		from = filepath.Join(l.Source, "config.json")
		hc, err := hfconfig.Load(from)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("local: save: %w", err)
		}
		cfg = hc
		l.HFConfig = hc // kept, as the tokenizer files are
	}
	if cfg == nil {
		return nil, nil
	}
	mc, err := hf.ModelConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("local: save: %s: %w", from, err)
	}
	if got, want := mc.WithDefaults(), l.Model.Config.WithDefaults(); !got.Equal(want) {
		return nil, fmt.Errorf("local: save: %s describes another model than the learner's: %+v, not %+v", from, got, want)
	}
	return cfg, nil
}

// Load restores a learner saved by Save: the model from the Hugging Face
// checkpoint in dir, whose config.json and tokenizer files a later Save
// keeps (HFConfig and Source), and, when optimizer.safetensors is there, the AdamW
// state (otherwise the optimizer starts fresh, as when fine-tuning a
// downloaded model).
func Load(dir string, cfg optim.AdamWConfig) (*Learner, error) {
	m, hc, err := hf.Load(dir)
	if err != nil {
		return nil, err
	}
	l, err := NewLearner(m, cfg)
	if err != nil {
		return nil, err
	}
	l.HFConfig, l.Source = hc, dir
	return l, l.LoadOptimizer(dir)
}

// LoadOptimizer restores the AdamW state Save wrote to dir, if there is
// one; without it the optimizer stays as it is.
func (l *Learner) LoadOptimizer(dir string) error {
	path := filepath.Join(dir, OptimizerFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	// A LoRA learner's optimizer state is its adapters'.
	if _, err := os.Stat(filepath.Join(dir, LoRAFile)); (err == nil) != (l.LoRA != nil) {
		if l.LoRA == nil {
			return fmt.Errorf("local: %s is the state of LoRA adapters (%s), and this learner trains every parameter", path, LoRAFile)
		}
		return fmt.Errorf("local: %s is the state of a learner of every parameter, and this one trains LoRA adapters", path)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	mom, _, err1 := f.Float32("adamw.m")
	vel, _, err2 := f.Float32("adamw.v")
	step, err3 := strconv.ParseInt(f.Metadata()["step"], 10, 64)
	for _, e := range []error{err1, err2, err3} {
		if e != nil {
			return fmt.Errorf("local: %s: %w", path, e)
		}
	}
	if err := l.Opt.SetState(mom, vel, step); err != nil {
		return fmt.Errorf("local: %s: %w", path, err)
	}
	l.named = nil // the file's named states replace any this learner had
	for key, value := range f.Metadata() {
		name, ok := strings.CutPrefix(key, namedStatePrefix)
		if !ok {
			continue
		}
		mom, _, err1 := f.Float32("adamw." + name + ".m")
		vel, _, err2 := f.Float32("adamw." + name + ".v")
		step, err3 := strconv.ParseInt(value, 10, 64)
		opt, err4 := l.optimizer(name)
		for _, e := range []error{err1, err2, err3, err4} {
			if e != nil {
				return fmt.Errorf("local: %s: optimizer state %q: %w", path, name, e)
			}
		}
		if err := opt.SetState(mom, vel, step); err != nil {
			return fmt.Errorf("local: %s: optimizer state %q: %w", path, name, err)
		}
	}
	return nil
}

// A LoRA learner's adapters are saved beside its merged weights in
// Tinker's adapter format, which tinker-cookbook's weights.build_hf_model
// merges into a Hugging Face model: PEFT's (adapter_model.safetensors,
// adapter_config.json), with the output head's adapter named
// model.unembed_tokens whether or not the head is tied to the embedding.
const (
	LoRAFile       = "adapter_model.safetensors"
	LoRAConfigFile = "adapter_config.json"
)

// adapterName is the name of target t's adapter matrix part ("lora_A" or
// "lora_B") in an adapter file.
func adapterName(t lora.Target, part string) string {
	module := strings.TrimSuffix(t.Name, ".weight")
	if t.Unembed {
		module = "model.unembed_tokens"
	}
	return "base_model.model." + module + "." + part + ".weight"
}

// adapterConfig is adapter_config.json: PEFT's fields, which rlvr reads
// back as the adapters' settings.
type adapterConfig struct {
	PEFTType      string   `json:"peft_type"`
	TaskType      string   `json:"task_type"`
	R             int      `json:"r"`
	LoRAAlpha     float32  `json:"lora_alpha"`
	LoRADropout   float32  `json:"lora_dropout"`
	Bias          string   `json:"bias"`
	TargetModules []string `json:"target_modules"`
}

// The modules each setting of lora.Config adapts, as target_modules
// names them.
var (
	attentionModules = []string{"q_proj", "k_proj", "v_proj", "o_proj"}
	mlpModules       = []string{"gate_proj", "up_proj", "down_proj"}
	unembedModule    = "unembed_tokens"
)

func adapterConfigOf(c lora.Config) adapterConfig {
	var modules []string
	if c.Attention {
		modules = append(modules, attentionModules...)
	}
	if c.MLP {
		modules = append(modules, mlpModules...)
	}
	if c.Unembed {
		modules = append(modules, unembedModule)
	}
	return adapterConfig{PEFTType: "LORA", TaskType: "CAUSAL_LM", R: c.Rank, LoRAAlpha: c.Alpha, Bias: "none", TargetModules: modules}
}

// saveLoRA writes a's adapters into dir: each target's A (rank × in) and
// B (out × rank), and their settings.
func saveLoRA(dir string, a *lora.Adapters) error {
	var ts []safetensors.Tensor
	r := a.Config.Rank
	for _, t := range a.Targets {
		ts = append(ts, safetensors.Tensor{Name: adapterName(t, "lora_A"), Shape: []int{r, t.Cols}, Data: a.A(t)},
			safetensors.Tensor{Name: adapterName(t, "lora_B"), Shape: []int{t.Rows, r}, Data: a.B(t)})
	}
	b, err := json.MarshalIndent(adapterConfigOf(a.Config), "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(dir, LoRAConfigFile), append(b, '\n')); err != nil {
		return err
	}
	return safetensors.Write(filepath.Join(dir, LoRAFile), ts, map[string]string{"format": "pt"}, safetensors.F32)
}

// ReadLoRAConfig reads the settings of the adapters saved in dir (all but
// the seed, which their saved values supersede); ok is false when dir
// holds no adapters.
func ReadLoRAConfig(dir string) (cfg lora.Config, ok bool, err error) {
	path := filepath.Join(dir, LoRAConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, false, nil
	}
	if err != nil {
		return cfg, false, fmt.Errorf("local: %w", err)
	}
	var ac adapterConfig
	if err := json.Unmarshal(b, &ac); err != nil {
		return cfg, false, fmt.Errorf("local: %s: %w", path, err)
	}
	cfg = lora.Config{Rank: ac.R, Alpha: ac.LoRAAlpha}
	for _, m := range ac.TargetModules {
		switch {
		case slices.Contains(attentionModules, m):
			cfg.Attention = true
		case slices.Contains(mlpModules, m):
			cfg.MLP = true
		case m == unembedModule:
			cfg.Unembed = true
		default:
			return cfg, false, fmt.Errorf("local: %s: target_modules: %q is none of %v, %v or %s", path, m, attentionModules, mlpModules, unembedModule)
		}
	}
	if !sameSet(adapterConfigOf(cfg).TargetModules, ac.TargetModules) {
		return cfg, false, fmt.Errorf("local: %s: target_modules %v adapt part of the attention or MLP projections; rlvr adapts all of a block's or none", path, ac.TargetModules)
	}
	switch {
	case ac.PEFTType != "LORA":
		return cfg, false, fmt.Errorf("local: %s: peft_type %q, want LORA", path, ac.PEFTType)
	case ac.R < 1:
		return cfg, false, fmt.Errorf("local: %s: r = %d, want at least 1", path, ac.R)
	case !(ac.LoRAAlpha > 0):
		return cfg, false, fmt.Errorf("local: %s: lora_alpha = %v, want a positive number", path, ac.LoRAAlpha)
	}
	return cfg, true, nil
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x string) bool { return !slices.Contains(b, x) })
}

// LoadLoRA restores the adapters saved in dir into a LoRA learner made
// over the same base model with the same settings, and merges them.
func (l *Learner) LoadLoRA(dir string) error {
	path := filepath.Join(dir, LoRAFile)
	if l.LoRA == nil {
		return fmt.Errorf("local: %s: the learner trains every parameter, not adapters", path)
	}
	saved, ok, err := ReadLoRAConfig(dir)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("local: %s: no %s", dir, LoRAConfigFile)
	}
	want := l.LoRA.Config
	for _, c := range []struct {
		name      string
		got, want any
	}{{"r", saved.Rank, want.Rank}, {"lora_alpha", saved.Alpha, want.Alpha}, {"attention", saved.Attention, want.Attention},
		{"mlp", saved.MLP, want.MLP}, {"unembedding", saved.Unembed, want.Unembed}} {
		if c.got != c.want {
			return fmt.Errorf("local: %s: %s is %v, but the learner's adapters have %v", filepath.Join(dir, LoRAConfigFile), c.name, c.got, c.want)
		}
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	defer f.Close()
	// Read into the adapters in place; a file that fails part-way leaves
	// them as they were.
	kept := slices.Clone(l.LoRA.Params)
	fail := func(err error) error {
		copy(l.LoRA.Params, kept)
		return fmt.Errorf("local: %s: %w", path, err)
	}
	r := l.LoRA.Config.Rank
	for _, t := range l.LoRA.Targets {
		for _, part := range []struct {
			name       string
			rows, cols int
			dst        []float32
		}{{adapterName(t, "lora_A"), r, t.Cols, l.LoRA.A(t)}, {adapterName(t, "lora_B"), t.Rows, r, l.LoRA.B(t)}} {
			data, shape, err := f.Float32(part.name)
			if err != nil {
				return fail(err)
			}
			if !slices.Equal(shape, []int{part.rows, part.cols}) {
				return fail(fmt.Errorf("%s has shape %v, want [%d %d]", part.name, shape, part.rows, part.cols))
			}
			copy(part.dst, data)
		}
	}
	l.LoRA.Merge(l.Model.Params)
	return nil
}

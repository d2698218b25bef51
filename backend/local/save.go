package local

import (
	"context"
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
	if l.LoRA != nil {
		if err := saveLoRA(filepath.Join(dir, LoRAFile), l.LoRA); err != nil {
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

// LoRAFile holds a LoRA learner's adapters beside its merged weights.
const LoRAFile = "lora.safetensors"

// saveLoRA writes a's adapters to path: each target's A and B as
// NAME.lora_A (rank × in) and NAME.lora_B (out × rank), and its settings
// in the metadata.
func saveLoRA(path string, a *lora.Adapters) error {
	var ts []safetensors.Tensor
	r := a.Config.Rank
	for _, t := range a.Targets {
		ts = append(ts, safetensors.Tensor{Name: t.Name + ".lora_A", Shape: []int{r, t.Cols}, Data: a.A(t)},
			safetensors.Tensor{Name: t.Name + ".lora_B", Shape: []int{t.Rows, r}, Data: a.B(t)})
	}
	return safetensors.Write(path, ts, loraMetadata(a.Config), safetensors.F32)
}

// loraMetadata is what a saved adapter file says of its settings.
func loraMetadata(c lora.Config) map[string]string {
	return map[string]string{
		"format": "rlvr-lora", "rank": strconv.Itoa(c.Rank), "alpha": strconv.FormatFloat(float64(c.Alpha), 'g', -1, 32),
		"attention": strconv.FormatBool(c.Attention), "mlp": strconv.FormatBool(c.MLP), "unembed": strconv.FormatBool(c.Unembed),
	}
}

// ReadLoRAConfig reads the settings of the adapters Save wrote to dir (all
// but the seed, which their saved values supersede); ok is false when dir
// holds no adapters.
func ReadLoRAConfig(dir string) (cfg lora.Config, ok bool, err error) {
	path := filepath.Join(dir, LoRAFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return cfg, false, nil
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return cfg, false, fmt.Errorf("local: %w", err)
	}
	defer f.Close()
	cfg, err = loraConfigOf(path, f.Metadata())
	return cfg, err == nil, err
}

// loraConfigOf reads the settings loraMetadata wrote into the adapter
// file at path.
func loraConfigOf(path string, meta map[string]string) (lora.Config, error) {
	rank, err1 := strconv.Atoi(meta["rank"])
	alpha, err2 := strconv.ParseFloat(meta["alpha"], 32)
	attn, err3 := strconv.ParseBool(meta["attention"])
	mlp, err4 := strconv.ParseBool(meta["mlp"])
	unembed, err5 := strconv.ParseBool(meta["unembed"])
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil || meta["format"] != "rlvr-lora" {
		return lora.Config{}, fmt.Errorf("local: %s: metadata %v is not rlvr-lora's rank, alpha, attention, mlp and unembed (%v)", path, meta, err)
	}
	return lora.Config{Rank: rank, Alpha: float32(alpha), Attention: attn, MLP: mlp, Unembed: unembed}, nil
}

// LoadLoRA restores the adapters Save wrote to dir into a LoRA learner
// made over the same base model with the same settings, and merges them.
func (l *Learner) LoadLoRA(dir string) error {
	path := filepath.Join(dir, LoRAFile)
	if l.LoRA == nil {
		return fmt.Errorf("local: %s: the learner trains every parameter, not adapters", path)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	defer f.Close()
	saved, err := loraConfigOf(path, f.Metadata())
	if err != nil {
		return err
	}
	got, want := loraMetadata(saved), loraMetadata(l.LoRA.Config)
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if got[key] != want[key] {
			return fmt.Errorf("local: %s: %s is %q, but the learner's adapters have %q", path, key, got[key], want[key])
		}
	}
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
			suffix     string
			rows, cols int
			dst        []float32
		}{{".lora_A", r, t.Cols, l.LoRA.A(t)}, {".lora_B", t.Rows, r, l.LoRA.B(t)}} {
			data, shape, err := f.Float32(t.Name + part.suffix)
			if err != nil {
				return fail(err)
			}
			if !slices.Equal(shape, []int{part.rows, part.cols}) {
				return fail(fmt.Errorf("%s%s has shape %v, want [%d %d]", t.Name, part.suffix, shape, part.rows, part.cols))
			}
			copy(part.dst, data)
		}
	}
	l.LoRA.Merge(l.Model.Params)
	return nil
}

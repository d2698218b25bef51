package bench

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/format/llama2c"
	"rlvr/internal/flagcheck"
)

// Bounds on the engine benchmark's model: the tokens of one step
// (--batch × --seq) and its parameters.
const (
	maxEngineTokens = 1 << 20
	maxEngineParams = 1 << 30
)

// EngineCommand are rlvr bench engine's settings, a field for each of its
// flags (the command binds them and prints the report): the model's shape
// and the step's batch, and what is timed. Validate reports every problem
// with them at once, naming the flags; Run validates and measures. The
// options are read, never written.
type EngineCommand struct {
	// Model is the shape: --layers, --dim, --heads, --kv-heads, --ffn,
	// --vocab, --seq (MaxSeq, the tokens of each sequence), --tied and
	// --qkv-bias.
	Model     model.Config
	Sequences int     // --batch: sequences per step
	Reps      int     // --reps: timed steps
	Recompute bool    // --recompute
	GEMM      bool    // --gemm: time GEMM at 512³–2048³ first
	Precision string  // --precision: fp32 or bf16
	Peak      float64 // --peak: the machine's GFLOP/s (0: estimated)
}

// Validate reports every problem with the options at once, each naming
// its flag: sizes out of bounds, a shape the model cannot take, and a
// step too large to allocate.
func (o *EngineCommand) Validate() error {
	_, err := o.check()
	return err
}

// checkPrecision reads --precision, adding a problem to c when it names
// no precision, or int8 where the benchmark trains (int8 is a sampling
// precision).
func checkPrecision(c *flagcheck.Check, s string, sampling bool) model.Precision {
	prec, err := model.ParsePrecision(s)
	switch {
	case err != nil && sampling:
		c.Add("precision", "%q: want fp32, bf16 or int8", s)
	case err != nil || prec == model.INT8 && !sampling:
		c.Add("precision", "%q: want fp32 or bf16 (int8 is for sampling: rlvr bench sample)", s)
	}
	return prec
}

// check checks the options and returns the precision.
func (o *EngineCommand) check() (model.Precision, error) {
	var c flagcheck.Check
	cfg := o.Model
	for _, f := range []struct {
		flag string
		v    int
		max  int
	}{
		{"layers", cfg.Layers, 256}, {"dim", cfg.Dim, 1 << 14}, {"heads", cfg.Heads, 1 << 10}, {"kv-heads", cfg.KVHeads, 1 << 10},
		{"ffn", cfg.Hidden, 1 << 16}, {"vocab", cfg.Vocab, 1 << 20}, {"seq", cfg.MaxSeq, 1 << 16},
		{"batch", o.Sequences, 1 << 12}, {"reps", o.Reps, 1 << 16},
	} {
		c.IntIn(f.flag, f.v, 1, f.max)
	}
	c.FloatIn("peak", o.Peak, 0, math.Inf(1), false)
	prec := checkPrecision(&c, o.Precision, false)
	if c.Len() == 0 {
		switch {
		case cfg.Dim%cfg.Heads != 0:
			c.Add("heads", "%d does not divide --dim %d", cfg.Heads, cfg.Dim)
		case cfg.Heads%cfg.KVHeads != 0:
			c.Add("kv-heads", "%d does not divide --heads %d", cfg.KVHeads, cfg.Heads)
		case cfg.Dim/cfg.Heads%2 != 0:
			c.Add("heads", "%d: the head size --dim/--heads = %d must be even", cfg.Heads, cfg.Dim/cfg.Heads)
		}
		if n := float64(cfg.MaxSeq) * float64(o.Sequences); n > maxEngineTokens {
			c.Add("batch", "%d × --seq %d tokens per step: more than %d", o.Sequences, cfg.MaxSeq, maxEngineTokens)
		}
		if n := engineParams(cfg); n > maxEngineParams {
			c.Add("dim", "%d, --layers %d, --ffn %d and --vocab %d: %.3g parameters, more than %d", cfg.Dim, cfg.Layers, cfg.Hidden, cfg.Vocab, n, int64(maxEngineParams))
		}
	}
	return prec, c.Err()
}

// Run validates the options and measures the engine (see Engine).
func (o *EngineCommand) Run() (*EngineReport, error) {
	prec, err := o.check()
	if err != nil {
		return nil, err
	}
	eo := EngineOptions{Sequences: o.Sequences, SeqLen: o.Model.MaxSeq, Reps: o.Reps, Peak: MachinePeak(o.Peak), Recompute: o.Recompute, Precision: prec}
	if o.GEMM {
		eo.GEMMSizes = []int{512, 1024, 2048}
	}
	return Engine(o.Model, eo)
}

// engineParams approximates the parameters of a benchmark model: its
// embedding and head, and each layer's attention and MLP matrices.
func engineParams(c model.Config) float64 {
	D, hd := float64(c.Dim), float64(c.Dim/c.Heads)
	attn := D * hd * float64(2*c.Heads+2*c.KVHeads)
	return 2*float64(c.Vocab)*D + float64(c.Layers)*(attn+3*D*float64(c.Hidden))
}

// Stories is the name of llama2.c's stories260K among the models rlvr
// bench sample measures.
const Stories = "stories260K"

// SampleModels are the names of the models rlvr bench sample measures
// (--models): stories260K, then the DecodeShapes.
func SampleModels() []string {
	names := []string{Stories}
	for _, s := range DecodeShapes(1) {
		names = append(names, s.Name)
	}
	return names
}

// SampleCommand are rlvr bench sample's settings, a field for each of its
// flags (the command binds them and prints the report): the models
// measured and how. Validate reports every problem with them at once,
// naming the flags; Run validates and measures. The options are read,
// never written.
type SampleCommand struct {
	Stories string   // --stories: llama2.c's stories260K checkpoint, tok512.bin beside it
	Paths   []string // --model: models with their weights, alone unless Names is given
	Names   []string // --models: of SampleModels
	Streams []int    // --streams: stream counts, each one batch
	// MaxTokens are the tokens each stream generates, within the model's
	// context; Reps the runs per measurement, the best reported.
	MaxTokens, Reps int
	RunC            string  // --run-c: llama2.c's run binary, timed on stories260K
	Peak            float64 // --peak: the machine's GFLOP/s (0: measured)
	Precision       string  // --precision: fp32, bf16 or int8, the products every model samples with

	// Given reports whether the command line gave the flag named; nil
	// means none was given.
	Given flagcheck.Given
	// Models checks and opens the models of Paths.
	Models checkpoint.Models
}

// Validate reports every problem with the options at once, each naming
// its flag.
func (o *SampleCommand) Validate() error {
	_, _, err := o.check()
	return err
}

// check checks the options and returns the names of the models measured
// and the precision they sample in.
func (o *SampleCommand) check() ([]string, model.Precision, error) {
	var c flagcheck.Check
	prec := checkPrecision(&c, o.Precision, true)
	c.IntIn("max-tokens", o.MaxTokens, 1, 1<<14)
	c.IntIn("reps", o.Reps, 1, 1<<10)
	c.FloatIn("peak", o.Peak, 0, math.Inf(1), false)
	for _, n := range o.Streams {
		c.IntIn("streams", n, 1, 1<<12)
	}
	for _, p := range o.Paths {
		c.Error("model", o.Models.Check(p))
	}
	names := o.Names
	if len(o.Paths) > 0 && !o.Given.Has("models") {
		names = nil // only the models named by path
	}
	known := SampleModels()
	for _, m := range names {
		if !slices.Contains(known, m) {
			c.Add("models", "%q is not one of %s", m, strings.Join(known, ", "))
		}
	}
	stories := slices.Contains(names, Stories)
	if stories {
		c.File("stories", o.Stories)
	}
	if o.RunC != "" {
		c.File("run-c", o.RunC)
		if !stories { // run.c reads the stories checkpoint too
			c.File("stories", o.Stories)
		}
	}
	return names, prec, c.Err()
}

// Run validates the options and measures each model in turn: stories260K,
// the DecodeShapes named, the models of Paths, then llama2.c's run.c.
func (o *SampleCommand) Run(ctx context.Context) (*SampleReport, error) {
	names, prec, err := o.check()
	if err != nil {
		return nil, err
	}
	rep := NewSampleReport(MachinePeak(o.Peak))
	if slices.Contains(names, Stories) {
		rep.StartModel()
		sm, err := llama2c.LoadModel(o.Stories)
		if err != nil {
			return nil, err
		}
		sm.Precision = prec
		if err := Sample(ctx, Stories, sm, llama2c.BOS, o.Streams, min(o.MaxTokens, sm.Config.MaxSeq-1), o.Reps, rep); err != nil {
			return nil, err
		}
	}
	for _, s := range DecodeShapes(o.MaxTokens + 1) {
		if !slices.Contains(names, s.Name) {
			continue
		}
		rep.StartModel()
		m, err := model.New(s.Config, 1)
		if err != nil {
			return nil, err
		}
		m.Precision = prec
		if err := Sample(ctx, s.Name, m, 0, o.Streams, o.MaxTokens, o.Reps, rep); err != nil {
			return nil, err
		}
	}
	for _, p := range o.Paths {
		rep.StartModel()
		l, err := o.Models.Open(p, "")
		if err != nil {
			return nil, err
		}
		// A one-token prompt, as llama.cpp's llama-batched-bench -npp 1
		// gives: the BOS token, or token 0 for a model without one.
		bos, _ := l.Tokenizer.BOS()
		n := min(o.MaxTokens, l.Model.Config.MaxSeq-1)
		l.Model.Precision = prec
		if err := Sample(ctx, l.Name, l.Model, bos, o.Streams, n, o.Reps, rep); err != nil {
			return nil, err
		}
	}
	if o.RunC != "" {
		tok := filepath.Join(filepath.Dir(o.Stories), "tok512.bin")
		v, err := RunC(ctx, o.RunC, o.Stories, tok, o.MaxTokens+1, o.Reps) // the BOS prompt, then MaxTokens
		if err != nil {
			return nil, err
		}
		rep.RunC = v
	}
	return rep, nil
}

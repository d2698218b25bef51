package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rlvr/format/hf"
	"rlvr/format/hfconfig"
	"rlvr/format/safetensors"
	"rlvr/internal/atomicfile"
	"rlvr/internal/flagcheck"
)

// ImportOptions are rlvr import's settings, its argument and a field for
// each of its flags (the command binds them and prints the result): a
// GGUF file converted into a Hugging Face directory. Validate reports
// every problem with them at once, naming the flags; Run validates and
// converts. The options are read, never written.
type ImportOptions struct {
	GGUF  string // the MODEL.gguf argument
	Out   string // --out: the Hugging Face directory written
	DType string // --dtype: f32 or bf16, the weights' in model.safetensors
	Force bool   // --force: replace Out when it exists
}

// ImportResult is what an import did.
type ImportResult struct {
	// Kept says Out already held this import and was left as it was;
	// the other fields are then unset.
	Kept    bool
	Config  *hfconfig.Config // the config.json written
	Params  int              // the model's parameters
	Elapsed time.Duration
}

// importDTypes are the weights' types --dtype names.
var importDTypes = map[string]safetensors.DType{"f32": safetensors.F32, "bf16": safetensors.BF16}

// Validate reports every problem with the options at once, each naming
// its flag or argument.
func (o *ImportOptions) Validate() error {
	var c flagcheck.Check
	c.File("MODEL.gguf", o.GGUF)
	if o.Out == "" {
		c.Add("out", "is required")
	} else {
		c.OutDir("out", o.Out, o.Force)
	}
	if importDTypes[o.DType] == "" {
		c.Add("dtype", "%q: want f32 or bf16", o.DType)
	}
	return c.Err()
}

// Run validates the options and converts the GGUF file: its model,
// dequantized, and its tokenizer files are written into a directory of
// this process's own beside Out and renamed into place, so that a failure
// leaves no half directory and imports running at once never touch each
// other's files.
func (o *ImportOptions) Run() (*ImportResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	l, err := Open(o.GGUF, "")
	if err != nil {
		return nil, err
	}
	files, err := ReadTokenizerFiles(o.GGUF)
	if err != nil {
		return nil, err
	}
	tmp, err := atomicfile.StageDir(o.Out)
	if err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := hf.Save(tmp, l.Model, l.HFConfig, importDTypes[o.DType]); err != nil {
		return nil, err
	}
	for name, b := range files {
		if err := atomicfile.WriteBytes(filepath.Join(tmp, name), b); err != nil {
			return nil, err
		}
	}
	// Out exists with contents when Force replaces it or when another
	// import finished first: the same files are kept.
	kept, err := atomicfile.PublishDir(tmp, o.Out, func(dir string) (bool, error) {
		same, err := atomicfile.SameTree(tmp, dir)
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil // replaced meanwhile: publish again
		} else if err != nil || same {
			return same, err
		}
		if !o.Force {
			return false, fmt.Errorf("--out: %s was filled by another process during the import; replace it with --force", o.Out)
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	if kept {
		return &ImportResult{Kept: true}, nil
	}
	return &ImportResult{Config: l.HFConfig, Params: l.Model.NumParams(), Elapsed: time.Since(start)}, nil
}

// InitModelOptions are rlvr init-model's settings, a field for each of
// its flags (the command binds them and prints the result): a randomly
// initialised model of a named shape around a tokenizer. Validate reports
// every problem with them at once, naming the flags; Run validates and
// writes the model (InitRandom). The options are read, never written.
type InitModelOptions struct {
	Tokenizer string // --tokenizer: the directory of tokenizer.json and tokenizer_config.json
	Shape     string // --shape: a name of Shapes
	Out       string // --out: the directory written
	Seed      uint64 // --seed
	Force     bool   // --force: write into a non-empty Out
	// Over are the dimensions --dim, --layers, --heads, --kv-heads,
	// --head-dim, --hidden and --max-seq set over the shape's, each read
	// only when given.
	Over Shape

	// Given reports whether the command line gave the flag named; nil
	// means none was given.
	Given flagcheck.Given
}

// overrides are the flags that override a shape's dimensions: each
// flag's field of a Shape, and the bounds of its value.
var overrides = []struct {
	flag     string
	field    func(s *Shape) *int
	min, max int
}{
	{"dim", func(s *Shape) *int { return &s.Dim }, 1, hfconfig.MaxHiddenSize},
	{"layers", func(s *Shape) *int { return &s.Layers }, 1, hfconfig.MaxHiddenLayers},
	{"heads", func(s *Shape) *int { return &s.Heads }, 1, hfconfig.MaxAttentionHeads},
	{"kv-heads", func(s *Shape) *int { return &s.KVHeads }, 1, hfconfig.MaxAttentionHeads},
	{"head-dim", func(s *Shape) *int { return &s.HeadDim }, 0, hfconfig.MaxHeadDim},
	{"hidden", func(s *Shape) *int { return &s.Hidden }, 1, hfconfig.MaxIntermediateSize},
	{"max-seq", func(s *Shape) *int { return &s.MaxSeq }, 1, hfconfig.MaxPositionEmbeddings},
}

// Validate reports every problem with the options at once, each naming
// its flag.
func (o *InitModelOptions) Validate() error {
	_, err := o.shape()
	return err
}

// shape checks the options and returns the shape they describe: the
// named one with the dimensions given set over it.
func (o *InitModelOptions) shape() (Shape, error) {
	var c flagcheck.Check
	if o.Tokenizer == "" {
		c.Add("tokenizer", "is required")
	} else {
		c.Dir("tokenizer", o.Tokenizer)
	}
	if o.Out == "" {
		c.Add("out", "is required")
	} else {
		c.OutDir("out", o.Out, o.Force)
	}
	over := o.Over
	for _, d := range overrides {
		if o.Given.Has(d.flag) {
			c.IntIn(d.flag, *d.field(&over), d.min, d.max)
		}
	}
	shape, err := LookupShape(o.Shape)
	if err != nil {
		c.Add("shape", "%q: unknown (known: %s)", o.Shape, strings.Join(ShapeNames(), ", "))
	}
	if err := c.Err(); err != nil {
		return Shape{}, err
	}
	for _, d := range overrides {
		if o.Given.Has(d.flag) {
			*d.field(&shape) = *d.field(&over)
		}
	}
	// Outside Qwen3 the head size follows from dim and heads.
	if (o.Given.Has("dim") || o.Given.Has("heads")) && !o.Given.Has("head-dim") && shape.Architecture != hfconfig.Qwen3 {
		shape.HeadDim = 0
	}
	return shape, nil
}

// Run validates the options and writes the model (see InitRandom).
func (o *InitModelOptions) Run() (*InitResult, error) {
	shape, err := o.shape()
	if err != nil {
		return nil, err
	}
	return InitRandom(InitOptions{Tokenizer: o.Tokenizer, Shape: shape, Seed: o.Seed, Out: o.Out, Force: o.Force})
}

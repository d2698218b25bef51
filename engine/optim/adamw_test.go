package optim

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// refAdamW is a plain float64 AdamW written straight from the paper's
// algorithm, independent of the optimised float32 loop.
type refAdamW struct {
	cfg     AdamWConfig
	decay   []bool
	p, m, v []float64
	t       int
}

func newRef(cfg AdamWConfig, params []float32, segs []Segment) *refAdamW {
	r := &refAdamW{
		cfg:   cfg,
		decay: make([]bool, len(params)),
		p:     make([]float64, len(params)),
		m:     make([]float64, len(params)),
		v:     make([]float64, len(params)),
	}
	for i, x := range params {
		r.p[i] = float64(x)
	}
	for _, s := range segs {
		for i := s.Offset; i < s.Offset+s.Len; i++ {
			r.decay[i] = s.Decay
		}
	}
	return r
}

func (r *refAdamW) step(grads []float32, lr float64) {
	r.t++
	c := r.cfg
	for i, g32 := range grads {
		g := float64(g32)
		if r.decay[i] {
			r.p[i] -= lr * c.WeightDecay * r.p[i]
		}
		r.m[i] = c.Beta1*r.m[i] + (1-c.Beta1)*g
		r.v[i] = c.Beta2*r.v[i] + (1-c.Beta2)*g*g
		mhat := r.m[i] / (1 - math.Pow(c.Beta1, float64(r.t)))
		vhat := r.v[i] / (1 - math.Pow(c.Beta2, float64(r.t)))
		r.p[i] -= lr * mhat / (math.Sqrt(vhat) + c.Eps)
	}
}

func randSlab(rng *rand.Rand, n int, scale float64) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64() * scale)
	}
	return s
}

// testSegs covers [0, 100) with a gap at [60, 70) that no segment claims.
var testSegs = []Segment{
	{Name: "norm.gain", Offset: 50, Len: 10},
	{Name: "wq", Offset: 0, Len: 50, Decay: true},
	{Name: "empty", Offset: 60, Len: 0, Decay: true},
	{Name: "wo", Offset: 70, Len: 30, Decay: true},
}

const testN = 100

// closeRel reports whether got is within tol of want, relative to
// max(|want|, floor).
func closeRel(got float32, want, tol, floor float64) bool {
	return math.Abs(float64(got)-want) <= tol*math.Max(math.Abs(want), floor)
}

func TestAdamWMatchesReference(t *testing.T) {
	tests := []struct {
		name string
		cfg  AdamWConfig
		segs []Segment
	}{
		{"defaults", DefaultAdamW(), testSegs},
		{"weight decay", AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}, testSegs},
		{"torch betas", AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-6, WeightDecay: 0.01}, testSegs},
		{"no momentum", AdamWConfig{Beta1: 0, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}, testSegs},
		{"no segments", AdamWConfig{Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1}, nil},
	}
	lrs := []float32{1e-2, 3e-2, 1e-2, 5e-3, 0, 2e-2}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			params := randSlab(rng, testN, 1)
			ref := newRef(tt.cfg, params, tt.segs)
			opt, err := NewAdamW(tt.cfg, testN, tt.segs)
			if err != nil {
				t.Fatal(err)
			}
			for step, lr := range lrs {
				grads := randSlab(rng, testN, 0.5)
				ref.step(grads, float64(lr))
				if err := opt.Step(params, grads, lr); err != nil {
					t.Fatalf("step %d: %v", step+1, err)
				}
				m, v, n := opt.State()
				if n != int64(step+1) {
					t.Fatalf("step %d: counter = %d", step+1, n)
				}
				for i := range params {
					// Floors: params and moments are O(1) or O(g), so
					// near-zero values are compared on that scale.
					if !closeRel(params[i], ref.p[i], 1e-6, 1) ||
						!closeRel(m[i], ref.m[i], 1e-6, 0.1) ||
						!closeRel(v[i], ref.v[i], 1e-6, 0.01) {
						t.Fatalf("step %d, elem %d: p, m, v = %v, %v, %v; reference %v, %v, %v",
							step+1, i, params[i], m[i], v[i], ref.p[i], ref.m[i], ref.v[i])
					}
					if grads[i] != 0 {
						t.Fatalf("step %d: grads[%d] = %v after Step, want 0", step+1, i, grads[i])
					}
				}
			}
		})
	}
}

// With bias correction, the first update is lr*g/(|g|+eps) ≈ lr*sign(g)
// whatever the betas; without it, it would be off by (1-beta1)/sqrt(1-beta2).
func TestAdamWFirstStepIsLR(t *testing.T) {
	tests := []struct {
		name         string
		beta1, beta2 float64
	}{
		{"tinker", 0.9, 0.95},
		{"torch", 0.9, 0.999},
		{"slow", 0.99, 0.9999},
	}
	const lr = 1e-3
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := AdamWConfig{Beta1: tt.beta1, Beta2: tt.beta2, Eps: 1e-8, WeightDecay: 0.1}
			opt, err := NewAdamW(cfg, 8, []Segment{{Name: "bias", Len: 8}})
			if err != nil {
				t.Fatal(err)
			}
			params := make([]float32, 8)
			grads := []float32{1, -1, 0.01, -0.01, 100, -100, 3.5, -0.25}
			want := make([]float64, len(grads))
			for i, g := range grads {
				want[i] = -lr * math.Copysign(1, float64(g))
			}
			if err := opt.Step(params, grads, lr); err != nil {
				t.Fatal(err)
			}
			for i, p := range params {
				if !closeRel(p, want[i], 1e-5, 0) {
					t.Errorf("params[%d] = %v after first step, want %v", i, p, want[i])
				}
			}
		})
	}
}

// With zero gradients the Adam term vanishes, leaving only the decoupled
// decay: Decay segments shrink by exactly (1-lr*wd), everything else stays.
func TestAdamWDecoupledDecay(t *testing.T) {
	const lr, wd = 0.01, 0.1
	cfg := DefaultAdamW()
	cfg.WeightDecay = wd
	opt, err := NewAdamW(cfg, testN, testSegs)
	if err != nil {
		t.Fatal(err)
	}
	params := randSlab(rand.New(rand.NewPCG(3, 4)), testN, 1)
	before := slices.Clone(params)
	if err := opt.Step(params, make([]float32, testN), lr); err != nil {
		t.Fatal(err)
	}
	keep := float32(1 - lr*wd)
	tests := []struct {
		name     string
		lo, hi   int
		decayed  bool
		wantKeep float32
	}{
		{"wq", 0, 50, true, keep},
		{"norm.gain", 50, 60, false, 1},
		{"gap", 60, 70, false, 1},
		{"wo", 70, 100, true, keep},
	}
	for _, tt := range tests {
		for i := tt.lo; i < tt.hi; i++ {
			if want := before[i] * tt.wantKeep; params[i] != want {
				t.Errorf("%s: params[%d] = %v, want %v (decayed %v)", tt.name, i, params[i], want, tt.decayed)
			}
		}
	}
}

func TestAdamWNonFinite(t *testing.T) {
	tests := []struct {
		name    string
		at      int
		val     float32
		segment string
		index   int
	}{
		{"NaN in wq", 7, float32(math.NaN()), "wq", 7},
		{"+Inf in norm", 53, float32(math.Inf(1)), "norm.gain", 3},
		{"-Inf in wo", 99, float32(math.Inf(-1)), "wo", 29},
		{"NaN in gap", 65, float32(math.NaN()), "", 65},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(5, 6))
			cfg := DefaultAdamW()
			cfg.WeightDecay = 0.1
			opt, err := NewAdamW(cfg, testN, testSegs)
			if err != nil {
				t.Fatal(err)
			}
			params := randSlab(rng, testN, 1)
			for range 2 { // give m, v and the counter non-trivial values
				if err := opt.Step(params, randSlab(rng, testN, 1), 1e-2); err != nil {
					t.Fatal(err)
				}
			}
			m, v, step := opt.State()
			wantP, wantM, wantV := bits(params), bits(m), bits(v)
			grads := randSlab(rng, testN, 1)
			grads[tt.at] = tt.val
			if tt.at+1 < testN {
				// A later bad value must not be the one reported.
				grads[tt.at+1] = float32(math.NaN())
			}
			wantG := bits(grads)

			err = opt.Step(params, grads, 1e-2)
			var nf *NonFiniteError
			if !errors.As(err, &nf) {
				t.Fatalf("Step error = %v, want *NonFiniteError", err)
			}
			if nf.Segment != tt.segment || nf.Index != tt.index || math.Float32bits(nf.Value) != math.Float32bits(tt.val) {
				t.Errorf("got %+v, want segment %q index %d value %v", *nf, tt.segment, tt.index, tt.val)
			}
			if tt.segment != "" && !strings.Contains(err.Error(), tt.segment) {
				t.Errorf("message %q does not name segment %q", err, tt.segment)
			}
			m, v, gotStep := opt.State()
			for _, c := range []struct {
				name      string
				got, want []uint32
			}{
				{"params", bits(params), wantP},
				{"m", bits(m), wantM},
				{"v", bits(v), wantV},
				{"grads", bits(grads), wantG},
			} {
				if !slices.Equal(c.got, c.want) {
					t.Errorf("%s changed by failed Step", c.name)
				}
			}
			if gotStep != step {
				t.Errorf("step counter = %d after failed Step, want %d", gotStep, step)
			}

			// Skipping the bad batch must leave the optimizer usable.
			clear(grads)
			if err := opt.Step(params, grads, 1e-2); err != nil {
				t.Errorf("Step after skipping the bad batch: %v", err)
			}
		})
	}
}

func bits(s []float32) []uint32 {
	b := make([]uint32, len(s))
	for i, x := range s {
		b[i] = math.Float32bits(x)
	}
	return b
}

func TestAdamWStepRejectsBadInput(t *testing.T) {
	tests := []struct {
		name        string
		nP, nG      int
		lr          float32
		errContains string
	}{
		{"short params", testN - 1, testN, 1e-3, "99 params"},
		{"long grads", testN, testN + 1, 1e-3, "101 grads"},
		{"negative lr", testN, testN, -1e-3, "lr"},
		{"NaN lr", testN, testN, float32(math.NaN()), "lr"},
		{"Inf lr", testN, testN, float32(math.Inf(1)), "lr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt, err := NewAdamW(DefaultAdamW(), testN, testSegs)
			if err != nil {
				t.Fatal(err)
			}
			params, grads := make([]float32, tt.nP), make([]float32, tt.nG)
			for i := range grads {
				grads[i] = 1
			}
			err = opt.Step(params, grads, tt.lr)
			if err == nil || !strings.Contains(err.Error(), tt.errContains) {
				t.Fatalf("Step error = %v, want mention of %q", err, tt.errContains)
			}
			if _, _, step := opt.State(); step != 0 || slices.ContainsFunc(grads, func(g float32) bool { return g != 1 }) {
				t.Errorf("failed Step changed state: step %d", step)
			}
		})
	}
}

func TestNewAdamWRejectsBadInput(t *testing.T) {
	tests := []struct {
		name        string
		cfg         AdamWConfig
		n           int
		segs        []Segment
		errContains []string
	}{
		{"overlap", DefaultAdamW(), 10, []Segment{{Name: "a", Len: 6}, {Name: "b", Offset: 5, Len: 5}}, []string{`"b"`, `"a"`, "overlaps"}},
		{"past end", DefaultAdamW(), 10, []Segment{{Name: "a", Offset: 8, Len: 3}}, []string{`"a"`, "outside"}},
		{"negative offset", DefaultAdamW(), 10, []Segment{{Name: "a", Offset: -1, Len: 3}}, []string{`"a"`, "outside"}},
		{"negative length", DefaultAdamW(), 10, []Segment{{Name: "a", Offset: 2, Len: -1}}, []string{`"a"`, "outside"}},
		{"negative size", DefaultAdamW(), -1, nil, []string{"nParams = -1"}},
		{"bad config", AdamWConfig{Beta1: 1}, 10, nil, []string{"Beta1 = 1", "Eps = 0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewAdamW(tt.cfg, tt.n, tt.segs)
			if err == nil {
				t.Fatal("NewAdamW succeeded, want error")
			}
			for _, s := range tt.errContains {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestAdamWConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  AdamWConfig
		want []string // substrings of the error; nil means valid
	}{
		{"defaults", DefaultAdamW(), nil},
		{"zero betas", AdamWConfig{Eps: 1e-8}, nil},
		{"everything wrong", AdamWConfig{Beta1: -0.1, Beta2: 1, Eps: 0, WeightDecay: -1},
			[]string{"Beta1 = -0.1", "Beta2 = 1", "Eps = 0", "WeightDecay = -1"}},
		{"NaN", AdamWConfig{Beta1: math.NaN(), Beta2: 0.9, Eps: math.Inf(1), WeightDecay: math.NaN()},
			[]string{"Beta1 = NaN", "Eps = +Inf", "WeightDecay = NaN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkProblems(t, tt.cfg.Validate(), tt.want)
		})
	}
}

// checkProblems checks that err is nil when want is, and otherwise is a
// single error mentioning every string in want.
func checkProblems(t *testing.T, err error, want []string) {
	t.Helper()
	if want == nil {
		if err != nil {
			t.Errorf("got error %v, want nil", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got nil error, want mentions of %q", want)
	}
	for _, s := range want {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestAdamWStateRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cfg := DefaultAdamW()
	cfg.WeightDecay = 0.1
	a, _ := NewAdamW(cfg, testN, testSegs)
	b, _ := NewAdamW(cfg, testN, testSegs)
	pa := randSlab(rng, testN, 1)
	for range 3 {
		if err := a.Step(pa, randSlab(rng, testN, 1), 1e-2); err != nil {
			t.Fatal(err)
		}
	}
	m, v, step := a.State()
	if err := b.SetState(slices.Clone(m), slices.Clone(v), step); err != nil {
		t.Fatal(err)
	}
	pb := slices.Clone(pa)
	g := randSlab(rng, testN, 1)
	if err := a.Step(pa, slices.Clone(g), 1e-2); err != nil {
		t.Fatal(err)
	}
	if err := b.Step(pb, g, 1e-2); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bits(pa), bits(pb)) {
		t.Error("restored optimizer diverged from the original")
	}

	for _, bad := range []struct {
		m, v []float32
		step int64
	}{
		{make([]float32, testN-1), make([]float32, testN), 1},
		{make([]float32, testN), make([]float32, testN+1), 1},
		{make([]float32, testN), make([]float32, testN), -1},
	} {
		if err := b.SetState(bad.m, bad.v, bad.step); err == nil {
			t.Errorf("SetState(len %d, len %d, %d) succeeded, want error", len(bad.m), len(bad.v), bad.step)
		}
	}
	if _, _, s := b.State(); s != step+1 {
		t.Errorf("failed SetState changed step to %d", s)
	}
}

// Chunked updates must be bit-identical to serial ones, whatever the split,
// including chunks that cut through segments and the gap.
func TestAdamWParallelMatchesSerial(t *testing.T) {
	cfg := DefaultAdamW()
	cfg.WeightDecay = 0.1
	for _, chunks := range []int{2, 3, 7, 150} {
		rng := rand.New(rand.NewPCG(15, 16))
		serial, _ := newAdamW(cfg, testN, testSegs, 1)
		par, err := newAdamW(cfg, testN, testSegs, chunks)
		if err != nil {
			t.Fatal(err)
		}
		ps := randSlab(rng, testN, 1)
		pp := slices.Clone(ps)
		for step := range 4 {
			g := randSlab(rng, testN, 1)
			if step == 3 {
				g[testN-1] = float32(math.Inf(1)) // only the last chunk sees it
			}
			es := serial.Step(ps, slices.Clone(g), 1e-2)
			ep := par.Step(pp, g, 1e-2)
			if es == nil != (ep == nil) || es != nil && es.Error() != ep.Error() {
				t.Fatalf("%d chunks, step %d: error %v, serial %v", chunks, step+1, ep, es)
			}
		}
		ms, vs, ns := serial.State()
		mp, vp, np := par.State()
		if !slices.Equal(bits(ps), bits(pp)) || !slices.Equal(bits(ms), bits(mp)) || !slices.Equal(bits(vs), bits(vp)) || ns != np {
			t.Errorf("%d chunks: state differs from serial update", chunks)
		}
	}
}

func TestAdamWStepDoesNotAllocate(t *testing.T) {
	for _, chunks := range []int{1, 3} {
		opt, err := newAdamW(DefaultAdamW(), testN, testSegs, chunks)
		if err != nil {
			t.Fatal(err)
		}
		params, grads := make([]float32, testN), make([]float32, testN)
		allocs := testing.AllocsPerRun(100, func() {
			grads[0] = 1
			if err := opt.Step(params, grads, 1e-3); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%d chunks: Step allocates %v times per call, want 0", chunks, allocs)
		}
	}
}

// BenchmarkAdamWStep updates a 3.4M-parameter slab (roughly a small
// transformer) split into weight and norm segments.
func BenchmarkAdamWStep(b *testing.B) {
	const n = 3_400_000
	var segs []Segment
	for off := 0; off < n; {
		w := min(64*1024, n-off)
		segs = append(segs, Segment{Name: "w", Offset: off, Len: w, Decay: true})
		off += w
		g := min(256, n-off)
		segs = append(segs, Segment{Name: "norm", Offset: off, Len: g})
		off += g
	}
	cfg := DefaultAdamW()
	cfg.WeightDecay = 0.1
	opt, err := NewAdamW(cfg, n, segs)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	params, src := randSlab(rng, n, 1), randSlab(rng, n, 1)
	grads := make([]float32, n)
	b.SetBytes(n * 4) // one float32 parameter per element
	for b.Loop() {
		// Refill outside the timer: Step zeroes grads, and steps on zero
		// gradients would drive m and v into slow subnormals.
		b.StopTimer()
		copy(grads, src)
		b.StartTimer()
		if err := opt.Step(params, grads, 1e-3); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mparams/s")
}

// TestAdamWSetConfig changes the hyperparameters between steps: the next
// step uses the new ones with the old moments and step count, exactly as
// the float64 reference does when its config changes at the same point;
// an invalid config changes nothing.
func TestAdamWSetConfig(t *testing.T) {
	other := AdamWConfig{Beta1: 0.5, Beta2: 0.8, Eps: 1e-3, WeightDecay: 0.2}
	for _, tc := range []struct {
		name string
		cfg  AdamWConfig
		want []string // nil: accepted
	}{
		{"same", DefaultAdamW(), nil},
		{"other", other, nil},
		{"zero betas", AdamWConfig{Eps: 1e-12}, nil},
		{"bad", AdamWConfig{Beta1: 1, Beta2: -0.5, Eps: 0, WeightDecay: math.Inf(1)}, []string{"Beta1 = 1", "Beta2 = -0.5", "Eps = 0", "WeightDecay = +Inf"}},
		{"NaN", AdamWConfig{Beta1: math.NaN(), Beta2: 0.9, Eps: 1e-8}, []string{"Beta1 = NaN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			start := DefaultAdamW()
			a, err := NewAdamW(start, testN, testSegs)
			if err != nil {
				t.Fatal(err)
			}
			p := randSlab(rng, testN, 1)
			ref := newRef(start, p, testSegs)
			for range 2 {
				g := randSlab(rng, testN, 1)
				ref.step(g, 1e-2)
				if err := a.Step(p, g, 1e-2); err != nil {
					t.Fatal(err)
				}
			}
			m0, v0, step0 := a.State()
			m0, v0 = slices.Clone(m0), slices.Clone(v0)
			err = a.SetConfig(tc.cfg)
			checkProblems(t, err, tc.want)
			m1, v1, step1 := a.State()
			if !slices.Equal(bits(m0), bits(m1)) || !slices.Equal(bits(v0), bits(v1)) || step1 != step0 {
				t.Fatal("SetConfig changed the moments or the step count")
			}
			if err != nil {
				if a.Config() != start {
					t.Fatalf("a refused config was applied: %+v", a.Config())
				}
				return
			}
			if a.Config() != tc.cfg {
				t.Fatalf("Config() = %+v, want %+v", a.Config(), tc.cfg)
			}
			ref.cfg = tc.cfg
			g := randSlab(rng, testN, 1)
			ref.step(g, 1e-2)
			if err := a.Step(p, g, 1e-2); err != nil {
				t.Fatal(err)
			}
			for i := range p {
				if !closeRel(p[i], ref.p[i], 1e-5, 1e-3) {
					t.Fatalf("param %d = %v after the step, reference %v", i, p[i], ref.p[i])
				}
			}
		})
	}
}

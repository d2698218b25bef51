package train

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"rlvr/backend"
	"rlvr/eval"
	"rlvr/internal/atomicfile"
	"rlvr/internal/stats"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
)

// ColdStartConfig is a cold start: before the first step, an SFT stage on
// demonstrations of the listed parts' protocols (EAPO's consult action,
// MEL's four-section reflection), each written from a training example by
// the part (part.ColdStart). The papers' 4B–14B models follow those
// protocols from the prompt; a 135M–270M model does not, so without a cold
// start the parts never act on it. The stage teaches the protocols' form,
// not the task: the record (rundir.ColdStartFile) gives the protocol rates and
// the validation accuracy before and after it, paired by problem.
//
// The demonstrations are trained as one loss term with a learning rate
// and AdamW moments of their own, so the RL steps that follow start with
// the optimizer state they would have had without it.
type ColdStartConfig struct {
	// Examples is how many training questions the demonstrations are
	// written from, drawn in a seeded order of their own; 0 means 256.
	Examples int `yaml:"examples,omitempty"`
	// Epochs is the passes over the demonstrations; 0 means 2.
	Epochs int `yaml:"epochs,omitempty"`
	// Batch is the demonstrations per optimizer step; 0 means 16.
	Batch int `yaml:"batch,omitempty"`
	// LR is the stage's constant learning rate; 0 means 1e-5.
	LR float64 `yaml:"lr,omitempty"`
	// Probe is how many validation questions each protocol rate is
	// measured on, before the stage and after it; 0 means 64, −1 none.
	Probe int `yaml:"probe,omitempty"`
	// Unaided is the share of the drawn questions that also demonstrate
	// answering alone, in [0, 1]; 0 (the default) none. Each such
	// question's answer is the starting policy's own greedy one behind the
	// evaluation prompt, sampled before the stage, and is trained behind
	// that prompt and, by a part whose protocol can be declined (EAPO),
	// after a consult action the environment declined. A stage of
	// protocol demonstrations alone teaches the protocol everywhere: on
	// SmolLM2, EAPO's made consulting the first action even without the
	// grant, and a declined consultation was answered by consulting
	// again (docs/eapo.md). The answers are the policy's, right or wrong:
	// they teach where the protocol is not used, not the task.
	Unaided float64 `yaml:"unaided,omitempty"`
}

// resolve fills the defaults and reports what is inconsistent with the
// run.
func (cs *ColdStartConfig) resolve(c *RLConfig, add func(string, ...any)) {
	if cs == nil {
		return
	}
	if cs.Examples == 0 {
		cs.Examples = 256
	}
	if cs.Epochs == 0 {
		cs.Epochs = 2
	}
	if cs.Batch == 0 {
		cs.Batch = 16
	}
	if cs.LR == 0 {
		cs.LR = 1e-5
	}
	if cs.Probe == 0 {
		cs.Probe = 64
	}
	for _, f := range []struct {
		name    string
		v, lo   int
		hi      int
		meaning string
	}{{"examples", cs.Examples, 1, 1 << 20, "training questions"}, {"epochs", cs.Epochs, 1, 1000, "passes"},
		{"batch", cs.Batch, 1, 1 << 16, "demonstrations per step"}, {"probe", cs.Probe, -1, 1 << 16, "validation questions, or −1 for none"}} {
		if f.v < f.lo || f.v > f.hi {
			add("cold_start.%s = %d must be in [%d, %d] (%s)", f.name, f.v, f.lo, f.hi, f.meaning)
		}
	}
	if !(cs.LR > 0 && cs.LR < 1) {
		add("cold_start.lr = %g must be in (0, 1)", cs.LR)
	}
	if !(cs.Unaided >= 0 && cs.Unaided <= 1) {
		add("cold_start.unaided = %g must be in [0, 1] (the share of questions that also demonstrate answering alone)", cs.Unaided)
	}
	switch {
	case c.Data.IsWorld():
		add("cold_start is for a chat model on a dataset: the world's model learns its protocols in pretraining")
	case c.Algorithm == method.SFT:
		add("cold_start precedes RL, and algorithm sft has no protocol to teach")
	case c.Backend.remote():
		add("cold_start trains on the local engine; backend %s keeps one optimizer state", c.Backend.Kind)
	}
}

// ColdStartRecord is what a cold start did and measured.
type ColdStartRecord struct {
	Parts          []string `json:"parts"`
	Examples       int      `json:"examples"`       // training questions drawn
	Demonstrations int      `json:"demonstrations"` // written from them
	// Unaided counts the demonstrations, among them, of answering alone
	// (ColdStartConfig.Unaided).
	Unaided int `json:"unaided,omitempty"`
	// Skipped counts the questions left without a demonstration, by
	// reason (no reference solution, an expert that failed, …).
	Skipped map[string]float64 `json:"skipped,omitempty"`
	// Partial counts the questions whose demonstration is a part of the
	// protocol only, by reason (EAPO: the action alone, when the reply
	// gave no answer to close from).
	Partial map[string]float64 `json:"partial,omitempty"`
	Steps   int                `json:"steps"` // optimizer steps
	LR      float64            `json:"lr"`
	// Loss is each step's token-mean NLL of the demonstrations.
	Loss     []float64      `json:"loss"`
	Protocol []ProtocolRate `json:"protocol,omitempty"`
	// Greedy validation accuracy on the plain prompt (single-turn: no
	// consultation granted, no reflection), before and after, on the same
	// Problems, and their difference paired by problem with its 95%
	// interval.
	Problems       int     `json:"problems"`
	AccuracyBefore float64 `json:"accuracy_before"`
	AccuracyAfter  float64 `json:"accuracy_after"`
	Delta          float64 `json:"delta"`
	DeltaLow       float64 `json:"delta_low"`
	DeltaHigh      float64 `json:"delta_high"`
	Seconds        float64 `json:"seconds"`
}

// ProtocolRate is a part's protocol rate before and after a cold start.
type ProtocolRate struct {
	Part     string         `json:"part"`
	Protocol string         `json:"protocol"` // what was counted: "consult" actions, "reflection"s
	Before   stats.Interval `json:"before"`
	After    stats.Interval `json:"after"`
	// UnaskedBefore and UnaskedAfter are the share of greedy validation
	// answers to the evaluation prompt, where the protocol is not offered,
	// that follow it all the same (part.ColdStart.Unasked; EAPO: consult
	// actions without the grant), when the part measures it.
	UnaskedBefore *stats.Interval `json:"unasked_before,omitempty"`
	UnaskedAfter  *stats.Interval `json:"unasked_after,omitempty"`
}

// ColdStartDemonstrationsFile holds a cold start's demonstrations in its
// run directory while the stage runs, so that a resumed stage trains on the
// same ones without sampling them again.
const ColdStartDemonstrationsFile = "cold_start_demonstrations.json.gz"

// coldStartState is a cold start's progress, kept in the run state of the
// step-0 checkpoint it writes after its demonstrations and after each of
// its steps: on a CPU the stage takes hours, and a run stopped or killed
// in it resumes at the step it reached, bit for bit as if it had not
// stopped, instead of from the beginning.
type coldStartState struct {
	Done bool `json:"done,omitempty"`
	// Record is the record so far: the rates before, the demonstrations'
	// counts, the steps taken and their losses.
	Record ColdStartRecord `json:"record"`
	// Before is each validation problem's greedy reward before the stage.
	Before map[string]float64 `json:"before"`
}

// coldStart runs the stage, or resumes it from resumed: protocol rates and
// validation accuracy before, the demonstrations' SFT, the same
// measurements after. It writes rundir.ColdStartFile and logs a summary. Each
// step ends in a step-0 checkpoint; with stop closed the stage returns
// ErrStopped after the step under way.
func (l *loop) coldStart(ctx context.Context, starts []part.ColdStart, resumed *coldStartState, stop <-chan struct{}, logf func(string, ...any)) error {
	cs, cfg := l.cfg.ColdStart, l.cfg
	t0 := time.Now()
	probe := l.held.Val
	if cs.Probe >= 0 && cs.Probe < len(probe) {
		probe = probe[:cs.Probe]
	} else if cs.Probe < 0 {
		probe = nil
	}
	var st coldStartState
	var demos []backend.Datum
	demosPath := filepath.Join(l.runDir, ColdStartDemonstrationsFile)
	if resumed != nil {
		st = *resumed
		var err error
		if demos, err = readDemonstrations(demosPath, st.Record.Demonstrations); err != nil {
			return err
		}
		logf("cold start: resumed after step %d, %d demonstrations from %s", st.Record.Steps, len(demos), demosPath)
		t0 = t0.Add(-time.Duration(st.Record.Seconds * float64(time.Second)))
	} else {
		var err error
		if st, demos, err = l.coldStartData(ctx, starts, probe, logf); err != nil {
			return err
		}
		if err := writeDemonstrations(demosPath, demos); err != nil {
			return err
		}
		st.Record.Seconds = time.Since(t0).Seconds()
		if err := l.saveColdStart(ctx, st); err != nil {
			return err
		}
	}
	rec := &st.Record
	steps := cs.Epochs * ((len(demos) + cs.Batch - 1) / cs.Batch)
	step := 0
	for epoch := range cs.Epochs {
		order := make([]backend.Datum, len(demos))
		copy(order, demos)
		task.Shuffle(order, cfg.Seed+uint64(epoch)*1_000_003+77)
		stepStart, took := time.Now(), false
		for b := 0; b < len(order); b += cs.Batch {
			if step++; step <= rec.Steps {
				continue // taken before the stage was resumed
			}
			took = true
			m := method.Metrics{}
			batch := &method.Batch{Terms: []method.Term{{Name: "cold_start", Data: order[b:min(b+cs.Batch, len(order))],
				Loss: backend.Loss{NLL: 1}, Aggregation: backend.TokenMean, LR: cs.LR}}}
			if err := l.learn(ctx, batch, m); err != nil {
				return fmt.Errorf("cold start step %d: %w", rec.Steps+1, err)
			}
			rec.Steps++
			rec.Loss = append(rec.Loss, m[LossMetric("cold_start")])
			// A stage of long demonstrations takes minutes a step on a
			// CPU: each step says where it is.
			logf("cold start: step %d of %d, loss %.4f, %.0f s", rec.Steps, steps, rec.Loss[len(rec.Loss)-1], time.Since(stepStart).Seconds())
			stepStart = time.Now()
			rec.Seconds = time.Since(t0).Seconds()
			if err := l.saveColdStart(ctx, st); err != nil {
				return err
			}
			if stopped(stop) && rec.Steps < steps {
				return ErrStopped
			}
		}
		if took {
			logf("cold start: epoch %d of %d, %d steps, loss %.4f", epoch+1, cs.Epochs, step, rec.Loss[step-1])
		}
	}

	sc := l.coldStartContext(1)
	for i, s := range starts {
		if len(probe) > 0 {
			var err error
			if rec.Protocol[i].After, err = protocolRate(ctx, s, sc, probe); err != nil {
				return err
			}
			logf("cold start: %s %s rate after: %s", s.Part, s.Protocol, rateText(rec.Protocol[i].After))
		}
	}
	after, texts, err := l.greedyByProblem(ctx)
	if err != nil {
		return err
	}
	for i, s := range starts {
		if rec.Protocol[i].UnaskedAfter = unasked(s, texts); rec.Protocol[i].UnaskedAfter != nil {
			logf("cold start: %s %s without it offered, after: %s", s.Part, s.Protocol, rateText(*rec.Protocol[i].UnaskedAfter))
		}
	}
	var diffs []float64
	for id, a := range after {
		if b, ok := st.Before[id]; ok {
			diffs = append(diffs, a-b)
			rec.AccuracyBefore += b
			rec.AccuracyAfter += a
		}
	}
	rec.Problems = len(diffs)
	if n := float64(len(diffs)); n > 0 {
		rec.AccuracyBefore /= n
		rec.AccuracyAfter /= n
		d := stats.MeanInterval(diffs)
		rec.Delta, rec.DeltaLow, rec.DeltaHigh = d.Mean, d.Low, d.High
	}
	logf("cold start: greedy validation accuracy on the plain prompt (no consultation, no reflection) %.1f%% -> %.1f%% on %d problems (paired Δ %+.1f pp [%+.1f, %+.1f])",
		100*rec.AccuracyBefore, 100*rec.AccuracyAfter, rec.Problems, 100*rec.Delta, 100*rec.DeltaLow, 100*rec.DeltaHigh)
	rec.Seconds = time.Since(t0).Seconds()
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteBytes(filepath.Join(l.runDir, rundir.ColdStartFile), append(b, '\n')); err != nil {
		return err
	}
	st.Done = true
	if err := l.saveColdStart(ctx, st); err != nil {
		return err
	}
	return os.Remove(demosPath)
}

// coldStartData measures what comes before the stage (the protocol rates
// and the greedy validation accuracy) and has the parts write the
// demonstrations.
func (l *loop) coldStartData(ctx context.Context, starts []part.ColdStart, probe []task.Example, logf func(string, ...any)) (coldStartState, []backend.Datum, error) {
	cs, cfg := l.cfg.ColdStart, l.cfg
	st := coldStartState{Record: ColdStartRecord{Examples: cs.Examples, LR: cs.LR, Skipped: map[string]float64{}, Partial: map[string]float64{}}}
	rec := &st.Record
	for _, s := range starts {
		rec.Parts = append(rec.Parts, s.Part)
	}
	examples, err := coldStartExamples(l.src, cs.Examples, cfg.Seed)
	if err != nil {
		return st, nil, err
	}
	sc := l.coldStartContext(0)
	rec.Protocol = make([]ProtocolRate, len(starts))
	for i, s := range starts {
		rec.Protocol[i] = ProtocolRate{Part: s.Part, Protocol: s.Protocol}
		if len(probe) > 0 {
			if rec.Protocol[i].Before, err = protocolRate(ctx, s, sc, probe); err != nil {
				return st, nil, err
			}
			logf("cold start: %s %s rate before: %s", s.Part, s.Protocol, rateText(rec.Protocol[i].Before))
		}
	}
	var texts []string
	if st.Before, texts, err = l.greedyByProblem(ctx); err != nil {
		return st, nil, err
	}
	for i, s := range starts {
		if rec.Protocol[i].UnaskedBefore = unasked(s, texts); rec.Protocol[i].UnaskedBefore != nil {
			logf("cold start: %s %s without it offered, before: %s", s.Part, s.Protocol, rateText(*rec.Protocol[i].UnaskedBefore))
		}
	}
	// The record's skipped and partial counts are the demonstrations'
	// alone, not the probe's questions too.
	sc.Metrics = method.Metrics{}
	var demos []backend.Datum
	for _, s := range starts {
		d, err := s.Demonstrations(ctx, sc, examples)
		if err != nil {
			return st, nil, err
		}
		logf("cold start: %d %s demonstrations from %d training questions", len(d), s.Part, len(examples))
		demos = append(demos, d...)
	}
	if n := int(math.Round(cs.Unaided * float64(len(examples)))); n > 0 {
		d, err := unaidedDemonstrations(ctx, starts, sc, examples[:n])
		if err != nil {
			return st, nil, err
		}
		logf("cold start: %d demonstrations of answering alone from %d training questions", len(d), n)
		rec.Unaided = len(d)
		demos = append(demos, d...)
	}
	for k, v := range sc.Metrics {
		if name, ok := strings.CutPrefix(k, "cold_start/skipped/"); ok {
			rec.Skipped[name] += v
		} else if name, ok := strings.CutPrefix(k, "cold_start/partial/"); ok {
			rec.Partial[name] += v
		}
	}
	if len(rec.Partial) > 0 {
		logf("cold start: partial demonstrations: %v", rec.Partial)
	}
	rec.Demonstrations = len(demos)
	if len(demos) == 0 {
		return st, nil, fmt.Errorf("cold_start: no demonstration could be written from %d training questions (skipped: %v)", len(examples), rec.Skipped)
	}
	for i := range demos {
		if demos[i].Len() > l.pol.maxLen {
			return st, nil, fmt.Errorf("cold_start: a demonstration of %d tokens exceeds the model's context of %d", demos[i].Len(), l.pol.maxLen)
		}
	}
	return st, demos, nil
}

// unaidedDemonstrations samples the policy's greedy answers to examples
// behind the evaluation prompt and writes them as demonstrations: each
// behind that prompt, and after each part's declined protocol
// (part.ColdStart.Unaided). A question whose prompt leaves no room to
// answer, or answered by nothing, is skipped and counted.
func unaidedDemonstrations(ctx context.Context, starts []part.ColdStart, sc *method.StepContext, examples []task.Example) ([]backend.Datum, error) {
	var prompts [][]int32
	var asked []task.Example
	for _, e := range examples {
		p, err := sc.Prompt(e, method.Variant{SingleTurn: true})
		if err != nil {
			return nil, err
		} else if p == nil {
			sc.Metrics["cold_start/skipped/unaided_long_prompt"]++
			continue
		}
		prompts = append(prompts, p)
		asked = append(asked, e)
	}
	p := sc.Sampling
	p.Temperature = 0
	groups, err := rollout.SampleGroups(ctx, sc.Policy, sc.Render, prompts, 1, p)
	if err != nil {
		return nil, fmt.Errorf("cold_start: sampling the policy's own answers: %w", err)
	}
	var out []backend.Datum
	var answered []task.Example
	var answers [][]int32
	for i, g := range groups {
		t := g.Trajectories[0]
		if len(t.Tokens) == 0 {
			sc.Metrics["cold_start/skipped/unaided_empty_answer"]++
			continue
		}
		out = append(out, method.EpisodeDatum(&t))
		answered = append(answered, asked[i])
		answers = append(answers, t.Tokens)
	}
	for _, s := range starts {
		if s.Unaided == nil {
			continue
		}
		d, err := s.Unaided(ctx, sc, answered, answers)
		if err != nil {
			return nil, err
		}
		out = append(out, d...)
	}
	return out, nil
}

// saveColdStart writes the step-0 checkpoint that holds the stage's
// progress: the weights and optimizer state as they are, and st.
func (l *loop) saveColdStart(ctx context.Context, st coldStartState) error {
	run := runState{Step: 0, Cursor: l.src.drawn, OptSteps: &l.optSteps, ColdStart: &st}
	return saveCheckpoint(ctx, l.pol.learner, l.runDir, run, l.cfg.KeepLast, l.cfg.KeepOptimizer == KeepOptimizerLast)
}

// writeDemonstrations writes a cold start's demonstrations to path,
// gzipped JSON.
func writeDemonstrations(path string, demos []backend.Datum) error {
	return atomicfile.Write(path, func(w io.Writer) error {
		z := gzip.NewWriter(w)
		if err := json.NewEncoder(z).Encode(demos); err != nil {
			return err
		}
		return z.Close()
	})
}

// readDemonstrations reads the n demonstrations writeDemonstrations wrote.
func readDemonstrations(path string, n int) ([]backend.Datum, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cold_start: resuming the stage: %w", err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("cold_start: resuming the stage: %s: %w", path, err)
	}
	var demos []backend.Datum
	if err := json.NewDecoder(z).Decode(&demos); err != nil {
		return nil, fmt.Errorf("cold_start: resuming the stage: %s: %w", path, err)
	}
	if len(demos) != n {
		return nil, fmt.Errorf("cold_start: resuming the stage: %s holds %d demonstrations, the checkpoint's record %d", path, len(demos), n)
	}
	return demos, nil
}

// checkColdStart checks, before the run directory is claimed, that the
// listed parts have a protocol to teach and that the training examples
// give what their demonstrations are written from.
func checkColdStart(cfg *RLConfig, starts []part.ColdStart, src *source) error {
	if cfg.ColdStart == nil {
		return nil
	}
	if len(starts) == 0 {
		return fmt.Errorf("train config: cold_start: none of the listed parts %v has a protocol to teach this model (consultation and meta_experience do, on a chat model)", cfg.Parts)
	}
	examples, err := coldStartExamples(src, cfg.ColdStart.Examples, cfg.Seed)
	if err != nil {
		return err
	}
	for _, s := range starts {
		if !s.NeedsSolutions {
			continue
		}
		if !task.AnySolution(examples) {
			return fmt.Errorf("cold_start: %s writes its demonstrations from reference solutions, and none of the %d training examples drawn from %s (dataset %s) has one: name the solution field (data.fields.solution) or drop cold_start",
				s.Part, len(examples), cfg.Data.Train, cfg.Data.Name)
		}
	}
	return nil
}

// coldStartContext is the method environment the parts write demonstrations
// and sample protocols in: the rollouts' sampling, seeded apart from the
// steps' (phase 0 before the stage, 1 after).
func (l *loop) coldStartContext(phase uint64) *method.StepContext {
	cfg := l.cfg
	return &method.StepContext{
		Policy:   l.pol.sampler,
		Render:   l.render,
		Reward:   eval.Reward,
		Sampling: sample.Params{MaxTokens: cfg.MaxTokens, Temperature: cfg.Temperature, StopTokens: l.pol.text.StopTokens},
		Step:     0,
		Seed:     cfg.Seed*1_000_003 ^ 0x636f6c642d737461 + phase, // "cold-sta"
		More:     func(int) ([]task.Example, error) { return nil, fmt.Errorf("cold_start: no more examples") },
		Metrics:  method.Metrics{},
	}
}

// coldStartExamples draws n training examples in a seeded order of their
// own, without moving the run's cursor: the RL steps draw what they would
// have drawn without a cold start.
func coldStartExamples(src *source, n int, seed uint64) ([]task.Example, error) {
	if len(src.pool) == 0 {
		return nil, fmt.Errorf("cold_start: the run has no training examples to write demonstrations from")
	}
	order := append([]task.Example(nil), src.pool...)
	task.Shuffle(order, seed+4_000_000)
	return order[:min(n, len(order))], nil
}

// protocolRate measures one part's protocol rate on examples.
func protocolRate(ctx context.Context, s part.ColdStart, sc *method.StepContext, examples []task.Example) (stats.Interval, error) {
	ok, n, err := s.Rate(ctx, sc, examples)
	if err != nil {
		return stats.Interval{}, fmt.Errorf("cold_start: measuring %s's %s rate: %w", s.Part, s.Protocol, err)
	}
	return stats.WilsonInterval(ok, n), nil
}

// unasked is the share of texts, answers to the evaluation prompt, that
// follow s's protocol all the same; nil when s does not measure it.
func unasked(s part.ColdStart, texts []string) *stats.Interval {
	if s.Unasked == nil || len(texts) == 0 {
		return nil
	}
	n := 0
	for _, t := range texts {
		if s.Unasked(t) {
			n++
		}
	}
	iv := stats.WilsonInterval(n, len(texts))
	return &iv
}

// rateText is a rate with its interval, in percent.
func rateText(iv stats.Interval) string {
	if iv.N == 0 || math.IsNaN(iv.Mean) {
		return "no sample"
	}
	return fmt.Sprintf("%.1f%% [%.1f, %.1f] of %d", 100*iv.Mean, 100*iv.Low, 100*iv.High, iv.N)
}

// greedyByProblem is each validation problem's greedy reward under the
// evaluation prompt (no grant), by example id, and the greedy answers.
func (l *loop) greedyByProblem(ctx context.Context) (rewards map[string]float64, texts []string, err error) {
	prompted := make([]task.Example, len(l.held.Val))
	for i, e := range l.held.Val {
		text, err := l.render.Text(e, method.Variant{})
		if err != nil {
			return nil, nil, err
		}
		e.Prompt = text
		prompted[i] = e
	}
	rewards = map[string]float64{}
	cfg := eval.Config{MaxTokens: l.cfg.MaxTokens, Batch: l.cfg.SampleBatch, OnSample: func(s eval.Sample) error {
		if s.Pass == "greedy" {
			rewards[s.ID] = s.Reward
			texts = append(texts, s.Text)
		}
		return nil
	}}
	if _, err := eval.Run(ctx, eval.NewSampled(l.pol.sampler, l.pol.text), prompted, cfg); err != nil {
		return nil, nil, err
	}
	return rewards, texts, nil
}

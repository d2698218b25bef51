package train

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"

	"rlvr/eval"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rundir"
	"rlvr/task"
)

// evaluate scores the validation problems and, after the last step, the
// test problems, each prompted as in training (chat template and system
// prompt included): greedy accuracy, and whatever the evaluators add. Each
// line says where its problems come from, and the evaluator that reports a
// choice on the test line (the best expert) says where it was made: on the
// final validation, scored just before it. It first writes what the method
// shows of its latest work.
func (l *loop) evaluate(ctx context.Context, step int) error {
	return l.evaluateShowing(ctx, step, exhibitsOf(l.meth))
}

// evaluateShowing is evaluate showing exhibits, the method's latest work
// as of the step evaluated (an async run's method is ahead of it).
func (l *loop) evaluateShowing(ctx context.Context, step int, exhibits []method.Exhibit) error {
	last := step == l.cfg.Steps
	for _, ex := range exhibits {
		if err := rundir.AppendSample(l.runDir, rundir.Sample{Step: step, Title: ex.Title, Text: ex.Text}); err != nil {
			return err
		}
	}
	valFrom, testFrom := splitSources(&l.cfg.Data)
	val, err := l.score(ctx, "val", step, l.held.Val, last && len(l.held.Test) == 0, "")
	if err != nil {
		return err
	}
	val.Source = valFrom
	if err := rundir.AppendEval(l.runDir, val); err != nil {
		return err
	}
	if !last || len(l.held.Test) == 0 {
		return rundir.RemoveScored(l.runDir)
	}
	test, err := l.score(ctx, "test", step, l.held.Test, true, fmt.Sprintf("validation (%d problems %s)", len(l.held.Val), valFrom))
	if err != nil {
		return err
	}
	test.Problems, test.ProblemSet, test.Source = len(l.held.Test), ProblemSet(l.held.Test), testFrom
	if err := rundir.AppendEval(l.runDir, test); err != nil {
		return err
	}
	return rundir.RemoveScored(l.runDir)
}

// score evaluates examples as the record of split after step: greedy
// accuracy under the plain prompt, with what each evaluator adds to the
// evaluation and to the record; final marks the end of the run's, and
// chosenOn names the validation a choice reported on the test split is
// made on (part.Evaluation.ChosenOn).
func (l *loop) score(ctx context.Context, split string, step int, examples []task.Example, final bool, chosenOn string) (rundir.Eval, error) {
	rec := rundir.Eval{Step: step, Split: split}
	ev := &part.Evaluation{Split: split, Step: step, Final: final, Examples: examples, Prompt: l.render.Text,
		Config: &eval.Config{MaxTokens: l.cfg.MaxTokens, Batch: l.cfg.SampleBatch}, ChosenOn: chosenOn}
	prompted := make([]task.Example, len(examples))
	for i, e := range examples {
		text, err := l.render.Text(e, method.Variant{})
		if err != nil {
			return rec, err
		}
		e.Prompt = text
		prompted[i] = e
	}
	for _, x := range l.evaluators {
		if err := x.Prepare(ev); err != nil {
			return rec, err
		}
	}
	// What a killed run scored of this evaluation is taken as it is, and
	// each chunk of what is left is kept as it ends.
	scored, err := rundir.ReadScored(l.runDir, step, split)
	if err != nil {
		return rec, err
	}
	ev.Config.Scored = func(pass, id string) []string { return scored[pass][id] }
	ev.Config.OnSample = func(s eval.Sample) error {
		return rundir.AppendScored(l.runDir, rundir.Scored{Step: step, Split: split, Pass: s.Pass, ID: s.ID, Index: s.Index, Text: s.Text})
	}
	ev.Config.Chunk = 4 * max(l.cfg.SampleBatch, 64)
	rep, err := eval.Run(ctx, eval.NewSampled(l.pol.sampler, l.pol.text), prompted, *ev.Config)
	if err != nil {
		return rec, err
	}
	rec.Greedy, rec.GreedyLow, rec.GreedyHigh, rec.Outcomes, rec.Seconds = rep.Greedy.Mean, rep.Greedy.Low, rep.Greedy.High, rep.Outcomes, rep.Seconds
	for _, x := range l.evaluators {
		if err := x.Record(ev, rep, &rec); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

// evaluators are a run's evaluators: the answers sampled at the end
// (eval_samples), then the parts'.
func evaluators(c *RLConfig, b *part.Build) []part.Evaluator {
	var out []part.Evaluator
	if c.EvalSamples > 0 {
		out = append(out, sampledAnswers{n: c.EvalSamples, temperature: c.EvalTemperature, seed: c.Seed})
	}
	return append(out, b.Evaluators...)
}

// sampledAnswers is eval_samples: in the final evaluation, n answers per
// problem at a temperature, for their mean accuracy, pass@n and the mean
// per-problem variance (EAPO's Pass@32 mean and Var) beside greedy
// accuracy.
type sampledAnswers struct {
	n           int
	temperature float32
	seed        uint64
}

// Prepare implements part.Evaluator.
func (s sampledAnswers) Prepare(ev *part.Evaluation) error {
	if ev.Final {
		ev.Config.K, ev.Config.PassK, ev.Config.Temperature, ev.Config.Seed = s.n, []int{s.n}, s.temperature, s.seed
	}
	return nil
}

// Record implements part.Evaluator.
func (s sampledAnswers) Record(_ *part.Evaluation, rep *eval.Report, rec *rundir.Eval) error {
	if rep.K > 0 {
		RecordSampled(rep, rec)
	}
	return nil
}

// RecordSampled writes a report's sampled answers (k per problem) into an
// evaluation record: their number and temperature, avg@k, pass@k and the
// per-problem variance.
func RecordSampled(rep *eval.Report, rec *rundir.Eval) {
	rec.Samples, rec.SampleTemperature = rep.K, rep.Temperature
	rec.AvgAtK, rec.Variance = &rep.AvgAtK, &rep.Variance
	rec.PassAtK = map[string]float64{strconv.Itoa(rep.K): rep.PassAtK[rep.K]}
}

// ProblemSet is the fingerprint of a list of problems: the first 12 hex
// digits of the SHA-256 of their IDs, one per line.
func ProblemSet(examples []task.Example) string {
	h := sha256.New()
	for _, e := range examples {
		io.WriteString(h, e.ID+"\n")
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

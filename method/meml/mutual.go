package meml

import (
	"context"

	"rlvr/backend"
	"rlvr/method"
)

// MutualLearning is MEML-GRPO's inter-expert mutual learning (eq. 9, in
// the direction the package doc in doc.go explains, not the printed
// sign): for each question asked under several expert prompts, the
// expert with the best mean reward (E+) teaches the one with the worst
// (E−) along E+'s correct answers O+, minimising KL(π(·|Q,P+) ‖ π(·|Q,P−))
// with the teacher side held fixed. A question is skipped when the two
// tie or E+ has no correct answer.
type MutualLearning struct {
	// Weight is λ1.
	Weight float32
	// Exact takes the per-position full-vocabulary KL (the learner's
	// teacher-KL term); otherwise the sequence-level Monte-Carlo estimate
	// log p(O+|P+) − log p(O+|P−), whose gradient with the teacher side
	// fixed is the NLL of O+ under P−.
	Exact bool
}

// Mutual learning's metrics, each step.
const (
	// MetricMutualFiredFrac is the share of questions whose experts
	// differed, E+ with a correct answer.
	MetricMutualFiredFrac = "mutual/fired_frac"
	MetricMutualAnswers   = "mutual/answers" // E+'s correct answers trained under P−
	// MetricMutualTeacherLogp is the mean logprob per token of those
	// answers under P+: with loss/mutual, the student's NLL per token,
	// the sequence-level KL estimate per token.
	MetricMutualTeacherLogp = "mutual/teacher_logp"
)

// MetricMutualPair counts the questions on which expert teacher taught
// expert student: mutual/pair/E1>E2.
func MetricMutualPair(teacher, student string) string {
	return "mutual/pair/" + teacher + ">" + student
}

// Terms implements method.Extra.
func (ml *MutualLearning) Terms(_ context.Context, sc *method.StepContext, groups []method.Scored) ([]method.Term, error) {
	var data []backend.Datum
	var questions, fired, teacherLogp, teacherTokens float64
	for _, qs := range byQuestion(groups) {
		if len(qs) < 2 {
			continue
		}
		questions++
		best, worst := qs[0], qs[0]
		for _, g := range qs[1:] {
			if method.Mean(g.Rewards) > method.Mean(best.Rewards) {
				best = g
			}
			if method.Mean(g.Rewards) < method.Mean(worst.Rewards) {
				worst = g
			}
		}
		if method.Mean(best.Rewards) == method.Mean(worst.Rewards) || !anyTrue(best.Correct) {
			continue
		}
		student, err := sc.Prompt(worst.Example, worst.Variant)
		if err != nil {
			return nil, err
		} else if student == nil {
			continue
		}
		fired++
		sc.Metrics[MetricMutualPair(best.Variant.Name, worst.Variant.Name)]++
		for i := range best.Trajectories {
			if !best.Correct[i] {
				continue
			}
			t := &best.Trajectories[i]
			d := method.PolicyDatum(t, 0)
			// The same continuation after the student's prompt.
			s := responseDatumMasked(student, t.Tokens, t.Policy)
			if ml.Exact {
				s.Teacher = &backend.Teacher{Tokens: d.Tokens, Aligned: len(t.Tokens)}
			}
			for j, w := range d.Weights {
				if w != 0 {
					teacherLogp += float64(d.SamplerLogprobs[j])
					teacherTokens++
				}
			}
			data = append(data, s)
		}
	}
	if questions > 0 {
		sc.Metrics.Set(MetricMutualFiredFrac, fired/questions)
	}
	sc.Metrics.Set(MetricMutualAnswers, float64(len(data)))
	if teacherTokens > 0 {
		// With loss/mutual (the student's NLL per token), this gives the
		// sequence-level KL estimate per token.
		sc.Metrics.Set(MetricMutualTeacherLogp, teacherLogp/teacherTokens)
	}
	if len(data) == 0 {
		return nil, nil
	}
	loss := backend.Loss{NLL: ml.Weight}
	if ml.Exact {
		loss = backend.Loss{TeacherKL: ml.Weight}
	}
	return []method.Term{{Name: "mutual", Data: data, Loss: loss, Aggregation: backend.TokenMean}}, nil
}

// responseDatumMasked is method.ResponseDatum for a continuation of which
// only the positions where policy is true carry weight.
func responseDatumMasked(prompt, response []int32, policy []bool) backend.Datum {
	d := method.ResponseDatum(prompt, response)
	off := len(prompt) - 1
	for i, p := range policy {
		if !p {
			d.Weights[off+i] = 0
		}
	}
	return d
}

// byQuestion groups the scored groups of each example, in order of first
// appearance.
func byQuestion(groups []method.Scored) [][]*method.Scored {
	index := map[string]int{}
	var out [][]*method.Scored
	for i := range groups {
		g := &groups[i]
		key := g.Example.ID + "\x00" + g.Example.Prompt
		k, ok := index[key]
		if !ok {
			k = len(out)
			index[key] = k
			out = append(out, nil)
		}
		out[k] = append(out[k], g)
	}
	return out
}

func anyTrue(v []bool) bool {
	for _, b := range v {
		if b {
			return true
		}
	}
	return false
}

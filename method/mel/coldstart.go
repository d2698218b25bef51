package mel

import (
	"context"
	"fmt"
	"strings"

	"rlvr/backend"
	"rlvr/method"
	"rlvr/method/part"
	"rlvr/rollout"
	"rlvr/task"
)

// ColdStart is meta-experience learning's cold start, for a chat model
// (the world's model learns its reflection format in pretraining). Each
// demonstration is a reflection request as training makes them, the
// instruction I with a question, a right answer y+ and a wrong one y−, and
// a reply in the four sections Parse reads, written by TemplateReflection.
// y− is the policy's own answer, sampled at the rollouts' temperature and
// kept when wrong; y+ is the example's reference solution, since a small
// model is rarely right. The template teaches where each section goes and
// that the failure point quotes the wrong answer; its critique and
// heuristics are generic, and what a good reflection says is left to RL.
func (me *MetaExperience) ColdStart() part.ColdStart {
	return part.ColdStart{Part: PartMetaExperience, Protocol: "reflection", NeedsSolutions: true,
		Demonstrations: me.demonstrations, Rate: me.protocolRate}
}

// Cold-start metrics: examples left without a demonstration, by reason.
const (
	MetricColdStartSkipped = "cold_start/skipped/"
	skipNoSolution         = "no_solution"
	skipPolicyRight        = "policy_right"
	skipLongRequest        = "long_request"
)

// coldPair is a cold start's contrastive pair and its rendered request.
type coldPair struct {
	correct, wrong string
	request        []int32
}

// coldPairs samples one answer per example and pairs each wrong one with
// the example's reference solution.
func (me *MetaExperience) coldPairs(ctx context.Context, sc *method.StepContext, examples []task.Example, seed uint64) ([]coldPair, error) {
	var asked []task.Example
	var prompts [][]int32
	for _, e := range examples {
		if task.ReferenceResponse(e) == "" {
			sc.Metrics[MetricColdStartSkipped+skipNoSolution]++
			continue
		}
		p, err := sc.Prompt(e, singleTurn)
		if err != nil {
			return nil, err
		} else if p == nil {
			sc.Metrics[MetricColdStartSkipped+skipLongRequest]++
			continue
		}
		asked, prompts = append(asked, e), append(prompts, p)
	}
	p := sc.Sampling
	p.Seed = seed
	groups, err := rollout.SampleGroups(ctx, sc.Policy, sc.Render, prompts, 1, p)
	if err != nil {
		return nil, err
	}
	var out []coldPair
	for i, g := range groups {
		e, t := asked[i], &g.Trajectories[0]
		if r, _ := sc.Reward(e, t.PolicyText); r > 0 {
			sc.Metrics[MetricColdStartSkipped+skipPolicyRight]++
			continue
		}
		correct := referenceAnswer(e)
		wrong := strings.TrimSpace(shownText(sc, t))
		req := task.Example{ID: e.ID + "/reflection", Prompt: me.Format.Request(e.Prompt, correct, wrong)}
		pr, err := sc.Prompt(req, singleTurn)
		if err != nil {
			return nil, err
		} else if pr == nil {
			sc.Metrics[MetricColdStartSkipped+skipLongRequest]++
			continue
		}
		out = append(out, coldPair{correct: correct, wrong: wrong, request: pr})
	}
	return out, nil
}

// demonstrations implements part.ColdStart.Demonstrations.
func (me *MetaExperience) demonstrations(ctx context.Context, sc *method.StepContext, examples []task.Example) ([]backend.Datum, error) {
	if _, ok := me.Format.(Chat); !ok {
		return nil, fmt.Errorf("meta_experience: a cold start writes reflections in the chat format; the world's model learns its own in pretraining")
	}
	pairs, err := me.coldPairs(ctx, sc, examples, sc.Seed^0x636f6c642d796e65) // "cold-yne"
	if err != nil {
		return nil, err
	}
	out := make([]backend.Datum, len(pairs))
	for i, cp := range pairs {
		out[i] = method.ResponseDatum(cp.request, sc.Render.Response(TemplateReflection(cp.correct, cp.wrong)))
	}
	return out, nil
}

// protocolRate implements part.ColdStart.Rate: one reflection per pair,
// sampled as training samples them, and the share that parses.
func (me *MetaExperience) protocolRate(ctx context.Context, sc *method.StepContext, examples []task.Example) (int, int, error) {
	pairs, err := me.coldPairs(ctx, sc, examples, sc.Seed^0x636f6c642d726174) // "cold-rat"
	if err != nil {
		return 0, 0, err
	}
	p := sc.Sampling
	if me.Temperature > 0 {
		p.Temperature = me.Temperature
	}
	if me.MaxTokens > 0 {
		p.MaxTokens = me.MaxTokens
	}
	p.Seed = sc.Seed ^ 0x636f6c642d726566 // "cold-ref"
	prompts := make([][]int32, len(pairs))
	for i := range pairs {
		prompts[i] = pairs[i].request
	}
	groups, err := rollout.SampleGroups(ctx, sc.Policy, sc.Render, prompts, 1, p)
	if err != nil {
		return 0, 0, err
	}
	ok := 0
	for _, g := range groups {
		if _, err := me.Format.Parse(shownText(sc, &g.Trajectories[0])); err == nil {
			ok++
		}
	}
	return ok, len(groups), nil
}

// TemplateReflection is a reflection on a (right, wrong) pair in the four
// sections of the paper's output format: the failure point is the first
// line of the wrong answer that the right one does not have (its last
// line when every line is shared), the success factor quotes the right
// answer's first step, and the summary and heuristics are general rules
// that name nothing of the problem, as the paper's generalization
// constraint asks.
func TemplateReflection(correct, wrong string) string {
	failure := divergence(correct, wrong)
	first := firstLine(correct)
	return "1. Failure Resolution Path & Error Pattern Recognition\n" +
		"- Failure Point: " + failure + "\n" +
		"- Latent Cognitive Pattern: From this step on, the incorrect solution builds on a quantity it never checked against the question, so the error is carried to the final answer.\n" +
		"2. Analysis of Success Factors\n" +
		"- Robustness Factor: The correct solution establishes each quantity from the question before using it, starting with: " + first + "\n" +
		"- Reason for Effectiveness: Every step uses only quantities that are already established, so no error can spread.\n" +
		"3. First-Person Reflective Summary\n" +
		"I compared the two solutions. The incorrect one left the correct path at the failure point above and never went back to check it. I will restate what each quantity means before I combine it with others, and check each intermediate result against the question before I use it again.\n" +
		"4. Subject Heuristics (Internalized Experience)\n" +
		"- [Quantity Check]: When a step combines several quantities, I must first confirm what each one stands for in the question.\n" +
		"- [Result Check]: If an intermediate result will be used again, then I recompute it once before going on.\n" +
		"- [Goal Check]: Before the final answer, I must verify that it answers exactly what the question asks for."
}

// divergence is the first non-empty line of wrong that correct does not
// contain, or wrong's last non-empty line.
func divergence(correct, wrong string) string {
	have := map[string]bool{}
	for _, l := range strings.Split(correct, "\n") {
		have[strings.TrimSpace(l)] = true
	}
	last := ""
	for _, l := range strings.Split(wrong, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if !have[l] {
			return clipLine(l)
		}
		last = l
	}
	if last == "" {
		return "the incorrect solution gives no reasoning to check"
	}
	return clipLine(last)
}

// firstLine is text's first non-empty line.
func firstLine(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return clipLine(l)
		}
	}
	return ""
}

// clipLine keeps a quoted line short.
func clipLine(s string) string {
	const max = 300
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

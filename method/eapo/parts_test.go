package eapo

import (
	"math"
	"strings"
	"testing"

	"rlvr/method"
	"rlvr/method/methodtest"
	"rlvr/method/part"
)

// TestConsultGrantChatOnWorld grants a chat model the consult action on the
// world too, where the config sets no consultation.system.
func TestConsultGrantChatOnWorld(t *testing.T) {
	k := &ConsultationConfig{}
	if err := methodtest.Resolve(k, &part.Run{World: true, MaxTokens: 256, Parts: []string{PartConsultation}}); err != "" {
		t.Fatal(err)
	}
	if k.System != "" {
		t.Fatalf("the world's config set a system prompt %q", k.System)
	}
	if g := k.Grant(); !strings.Contains(g, "E1, E2, E3") || strings.Contains(g, "{experts}") {
		t.Errorf("grant %q does not name the world's experts", g)
	}
}

// TestConsultationDefaults: on a dataset the pool must be given and the
// chat grant is the default system text; the advantage normalization
// divides by the verdicts' std where the algorithm would divide by the
// group's.
func TestConsultationDefaults(t *testing.T) {
	k := &ConsultationConfig{}
	err := methodtest.Resolve(k, &part.Run{MaxTokens: 256, Parts: []string{PartConsultation}})
	if !strings.Contains(err, "consultation.experts: give the pool") || k.System != ChatTrainingPrompt || *k.Penalty != 0.05 || k.MaxQueries != 3 {
		t.Errorf("on a dataset: %s; %+v", err, k)
	}
	for in, want := range map[method.AdvantageNorm]method.AdvantageNorm{method.NormGroupStd: method.NormCorrectnessStd, method.NormNone: method.NormNone} {
		if got := part.DefaultAdvantageNorm([]string{PartConsultation}, in); got != want {
			t.Errorf("norm %s becomes %s, want %s", in, got, want)
		}
	}
}

// TestConsultationBudgetMatched: consultation.budget_matched makes the
// part's schedules the constants of BudgetMatched; without it the part
// anneals.
func TestConsultationBudgetMatched(t *testing.T) {
	for _, matched := range []bool{false, true} {
		k := &ConsultationConfig{BudgetMatched: matched}
		if err := methodtest.Resolve(k, &part.Run{World: true, MaxTokens: 256, Steps: 200, Parts: []string{PartConsultation}}); err != "" {
			t.Fatal(err)
		}
		c := k.Consultation(200, false, nil)
		p0, p199, t0, t199 := c.Acceptance(0), c.Acceptance(199), c.TurnBudget(0), c.TurnBudget(199)
		switch {
		case matched && (p0 != p199 || math.Abs(p0-146.5/200) > 0.01 || t0 != 2 || t199 != 2):
			t.Errorf("budget-matched: p %v → %v, turns %d → %d", p0, p199, t0, t199)
		case !matched && (p0 != 1 || p199 > 0.01 || t0 != 3 || t199 != 1):
			t.Errorf("annealed: p %v → %v, turns %d → %d", p0, p199, t0, t199)
		}
	}
}

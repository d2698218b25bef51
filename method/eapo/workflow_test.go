package eapo

import (
	"context"
	"testing"

	"rlvr/method/methodtest"
	"rlvr/sample"
	"rlvr/task"
)

// TestWorkflowExamplesReachTheReference: the test-time workflow maps each
// prompt to its example, so a reference expert in the opening answers
// from that example's solution and a policy that copies the reply is
// right on every question; without the map it has nothing to answer from.
func TestWorkflowExamplesReachTheReference(t *testing.T) {
	examples := solved(3)
	r := methodtest.ByteRender{}
	for _, withExamples := range []bool{true, false} {
		w := &Workflow{Consultation: referencePool(), Policy: &consulter{Own: "0"}, Render: r, Encode: r.Encode,
			Questions: map[string]string{}}
		var prompts []string
		for _, e := range examples {
			w.Questions[e.Prompt] = e.ID
			prompts = append(prompts, e.Prompt)
		}
		if withExamples {
			w.Examples = map[string]task.Example{}
			for _, e := range examples {
				w.Examples[e.Prompt] = e
			}
		}
		out, err := w.Generate(context.Background(), prompts, sample.Params{MaxTokens: 40})
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range examples {
			right := out[i][0] == "####"+e.Answer+"\n"
			if right != withExamples {
				t.Errorf("examples %v, %s: answered %q (gold %s)", withExamples, e.ID, out[i][0], e.Answer)
			}
		}
	}
}

package remote

import (
	"context"
	"strings"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend"
)

// TestReferenceReadsBothPromptLogprobForms scores one datum against a
// server answering prompt_logprobs as the Tinker SDK does (one entry per
// prompt token, the first null) and as SkyRL tx 0.3.0 does (the first
// left out): both give the same reference logprobs, and any other length
// is an error naming asample.
func TestReferenceReadsBothPromptLogprobForms(t *testing.T) {
	d := backend.Datum{Tokens: []int32{5, 6, 7}, Targets: []int32{6, 7, 8}, Weights: []float32{0, 1, 1}}
	for _, tc := range []struct {
		name, promptLogprobs, err string
	}{
		{"tinker", `[null, -0.5, -1.5, -2.5]`, ""},
		{"skyrl", `[-0.5, -1.5, -2.5]`, ""},
		{"short", `[-1.5, -2.5]`, "2 prompt logprobs for a prompt of 4 tokens"},
		{"null inside", `[-0.5, null, -2.5]`, "prompt_logprobs[1] is not a logprob"},
	} {
		f, srv := newFake(t)
		f.result = func(path string, req map[string]any, _ int) (int, string) {
			if path != tinker.PathSample || req["prompt_logprobs"] != true {
				t.Errorf("%s: a call to %s with %v", tc.name, path, req)
			}
			return 200, `{"sequences":[{"stop_reason":"length","tokens":[9],"logprobs":[-3]}],"prompt_logprobs":` + tc.promptLogprobs + `}`
		}
		ref := &Reference{Client: &Client{BaseURL: srv.URL, Backoff: time.Millisecond}, BaseModel: "base"}
		lp, err := ref.Logprobs(context.Background(), []backend.Datum{d})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), "asample") || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want asample's %q", tc.name, err, tc.err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case len(lp) != 1 || len(lp[0]) != 3 || lp[0][0] != -0.5 || lp[0][1] != -1.5 || lp[0][2] != -2.5:
			t.Errorf("%s: reference logprobs %v, want [[-0.5 -1.5 -2.5]]", tc.name, lp)
		}
	}
}

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalConsultWorkflows runs EAPO's test-time workflows on the world's
// model: the consultation loop with the scripted experts (the
// expert-assisted workflow) opening every episode, and with meaningless
// experts, whose replies hold nothing, so that the model answers alone.
func TestEvalConsultWorkflows(t *testing.T) {
	configs, err := filepath.Abs(filepath.Join("..", "..", "configs"))
	if err != nil {
		t.Fatal(err)
	}
	cliFixture(t)
	common := []string{"--threads", "1", "--levels", "4", "--problems", "12", "--max-tokens", "96"}
	for _, tc := range []struct {
		config, want string
	}{
		{"world-eapo.yaml", "every episode opening with E1, E2, E3 asked the whole question): 12 episodes, 12 consulted, 0 further queries asked, 0 failed"},
		{"world-eapo-meaningless.yaml", "12 episodes, 12 consulted"},
	} {
		path := filepath.Join(configs, tc.config)
		rep, stderr := evalJSON(t, append(common, "--consult", path, "--consult-open")...)
		if rep.Problems != 12 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: %d problems; stderr %q does not say %q", tc.config, rep.Problems, stderr, tc.want)
		}
	}
	// Without an opening, the model consults when it chooses: greedily,
	// never on these problems, so the loop scores what plain eval does.
	path := filepath.Join(configs, "world-eapo.yaml")
	plain, _ := evalJSON(t, common...)
	chosen, stderr := evalJSON(t, append(common, "--consult", path)...)
	if chosen.Greedy.Mean != plain.Greedy.Mean || !strings.Contains(stderr, "consulting as it chose") {
		t.Errorf("greedy %v with the loop, %v without; stderr %q", chosen.Greedy.Mean, plain.Greedy.Mean, stderr)
	}
}

func TestEvalConsultFlagsRefused(t *testing.T) {
	dir := cliFixture(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"eval", "--consult-open"}, []string{"--consult-open needs --consult"}},
		{[]string{"eval", "--consult", "x.yaml", "--endpoint", "http://127.0.0.1:1/v1"}, []string{"[consult endpoint] were all set"}},
		{[]string{"eval", "--consult", "missing.yaml"}, []string{"--consult"}},
		{[]string{"eval", "--consult", "afile.txt", "--experts", "2"}, []string{"[consult experts] were all set"}},
	} {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) { refused(t, dir, tc.args, tc.want) })
	}
}

package consult

import (
	"math"
	"strings"
	"testing"
	"time"

	"rlvr/expert/collect"
)

func TestExpertConfigDefaults(t *testing.T) {
	style := 2
	for _, tt := range []struct {
		e          ExpertConfig
		i          int
		chatPolicy bool
		want       ExpertConfig
	}{
		{ExpertConfig{World: &style}, 0, false,
			ExpertConfig{Name: "E1", World: &style, API: collect.APICompletion, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		{ExpertConfig{URL: "http://gpu1:8000/v1"}, 2, true,
			ExpertConfig{Name: "E3", URL: "http://gpu1:8000/v1", API: collect.APIChat, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		{ExpertConfig{Reply: "I cannot help."}, 4, false,
			ExpertConfig{Name: "E5", Reply: "I cannot help.", API: collect.APICompletion, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		// What is set stays.
		{ExpertConfig{Name: "gpt", URL: "https://api.example.com/v1", API: collect.APICompletion, Concurrency: 2, Timeout: time.Second,
			Retries: -1, Deadline: 3 * time.Second, MaxTokens: 64, Temperature: 0.7}, 0, true,
			ExpertConfig{Name: "gpt", URL: "https://api.example.com/v1", API: collect.APICompletion, Concurrency: 2, Timeout: time.Second,
				Retries: -1, Deadline: 3 * time.Second, MaxTokens: 64, Temperature: 0.7}},
		{ExpertConfig{Model: "runs/x/model", API: collect.APIChat}, 1, false,
			ExpertConfig{Name: "E2", Model: "runs/x/model", API: collect.APIChat, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		{ExpertConfig{Policy: true}, 0, false,
			ExpertConfig{Name: "E1", Policy: true, API: collect.APICompletion, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
	} {
		e := tt.e
		if err := e.Check("consult.experts", tt.i, tt.chatPolicy); err != nil {
			t.Errorf("Check(%+v): %v", tt.e, err)
			continue
		}
		if e != tt.want {
			t.Errorf("Check(%+v) filled\n%+v, want\n%+v", tt.e, e, tt.want)
		}
		// Checking again changes nothing.
		again := e
		if err := again.Check("consult.experts", tt.i, tt.chatPolicy); err != nil || again != e {
			t.Errorf("Check twice: %+v, %v", again, err)
		}
	}
	// Every world style but the reference is an expert.
	for s := 1; s <= 3; s++ {
		e := ExpertConfig{World: &s}
		if err := e.Check("consult.experts", 0, false); err != nil {
			t.Errorf("world %d: %v", s, err)
		}
	}
}

func TestExpertConfigErrors(t *testing.T) {
	zero, four, minus := 0, 4, -1
	one := 1
	for _, tt := range []struct {
		e    ExpertConfig
		i    int
		want []string
	}{
		{ExpertConfig{}, 0, []string{"consult.experts[0]", "exactly one", "(0 set)"}},
		{ExpertConfig{Name: "x"}, 3, []string{"consult.experts[3]", "exactly one"}},
		{ExpertConfig{URL: "http://a/v1", World: &one}, 1, []string{"consult.experts[1]", "exactly one", "(2 set)"}},
		{ExpertConfig{Reply: "no", Model: "m"}, 0, []string{"consult.experts[0]", "(2 set)"}},
		{ExpertConfig{World: &one, Policy: true}, 0, []string{"consult.experts[0]", "(2 set)"}},
		{ExpertConfig{URL: "gpu1:8000/v1"}, 2, []string{"consult.experts[2]", `url "gpu1:8000/v1"`}},
		{ExpertConfig{URL: "ftp://gpu1/v1"}, 0, []string{"consult.experts[0]", "url"}},
		{ExpertConfig{World: &zero}, 0, []string{"consult.experts[0]", "world 0"}},
		{ExpertConfig{World: &four}, 1, []string{"consult.experts[1]", "world 4"}},
		{ExpertConfig{World: &minus}, 0, []string{"consult.experts[0]", "world -1"}},
		{ExpertConfig{Reply: "x", API: "responses"}, 0, []string{"consult.experts[0]", `api "responses"`}},
		{ExpertConfig{Reply: "x", API: "Chat"}, 0, []string{"consult.experts[0]", `api "Chat"`}},
		{ExpertConfig{Name: "my expert", Reply: "x"}, 5, []string{"consult.experts[5]", `name "my expert"`}},
		{ExpertConfig{Name: "E1:big", Reply: "x"}, 0, []string{"consult.experts[0]", `name "E1:big"`}},
		{ExpertConfig{Name: "E1;E2", Reply: "x"}, 0, []string{"consult.experts[0]", "name"}},
		{ExpertConfig{Name: "why?", Reply: "x"}, 0, []string{"consult.experts[0]", "name"}},
		{ExpertConfig{Name: `say"`, Reply: "x"}, 0, []string{"consult.experts[0]", "name"}},
		{ExpertConfig{Name: "tab\there", Reply: "x"}, 0, []string{"consult.experts[0]", "name"}},
		{ExpertConfig{Reply: "x", Concurrency: -1}, 0, []string{"consult.experts[0]", "concurrency"}},
		{ExpertConfig{Reply: "x", Timeout: -time.Second}, 0, []string{"consult.experts[0]", "timeout"}},
		{ExpertConfig{Reply: "x", Deadline: -time.Second}, 0, []string{"consult.experts[0]", "deadline"}},
		{ExpertConfig{Reply: "x", MaxTokens: -5}, 0, []string{"consult.experts[0]", "max_tokens"}},
		{ExpertConfig{Reply: "x", Retries: -2}, 0, []string{"consult.experts[0]", "retries"}},
		{ExpertConfig{Reply: "x", Temperature: -0.1}, 0, []string{"consult.experts[0]", "temperature"}},
		{ExpertConfig{Reply: "x", Temperature: 11}, 0, []string{"consult.experts[0]", "temperature"}},
		{ExpertConfig{Reply: "x", Temperature: float32(math.NaN())}, 0, []string{"consult.experts[0]", "temperature"}},
		// Everything wrong at once is reported at once.
		{ExpertConfig{Name: "a b", URL: "gpu", World: &four, API: "x"}, 7,
			[]string{`consult.experts[7]: name "a b"`, "consult.experts[7]: set exactly one", `consult.experts[7]: url "gpu"`,
				"consult.experts[7]: world 4", `consult.experts[7]: api "x"`}},
	} {
		e := tt.e
		err := e.Check("consult.experts", tt.i, false)
		if err == nil {
			t.Errorf("Check(%+v): no error", tt.e)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Check(%+v) = %q, want it to say %q", tt.e, err, w)
			}
		}
	}
}

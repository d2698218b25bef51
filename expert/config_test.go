package expert

import (
	"cmp"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestConfigDefaults(t *testing.T) {
	style := 2
	for _, tt := range []struct {
		e          Config
		i          int
		chatPolicy bool
		want       Config
	}{
		{Config{World: &style}, 0, false,
			Config{Name: "E1", World: &style, defaultAPI: APICompletion, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		{Config{URL: "http://gpu1:8000/v1"}, 2, true,
			Config{Name: "E3", URL: "http://gpu1:8000/v1", defaultAPI: APIChat, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		{Config{Reply: "I cannot help."}, 4, false,
			Config{Name: "E5", Reply: "I cannot help.", defaultAPI: APICompletion, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		// What is set stays.
		{Config{Name: "gpt", URL: "https://api.example.com/v1", API: APICompletion, Concurrency: 2, Timeout: time.Second,
			Retries: -1, Deadline: 3 * time.Second, MaxTokens: 64, Temperature: 0.7}, 0, true,
			Config{Name: "gpt", URL: "https://api.example.com/v1", API: APICompletion, defaultAPI: APIChat, Concurrency: 2, Timeout: time.Second,
				Retries: -1, Deadline: 3 * time.Second, MaxTokens: 64, Temperature: 0.7}},
		{Config{Model: "runs/x/model", API: APIChat}, 1, false,
			Config{Name: "E2", Model: "runs/x/model", API: APIChat, defaultAPI: APICompletion, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		{Config{Policy: true}, 0, false,
			Config{Name: "E1", Policy: true, defaultAPI: APICompletion, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		{Config{Kind: KindReference}, 1, true,
			Config{Name: "E2", Kind: KindReference, defaultAPI: APIChat, Concurrency: 8, Timeout: 30 * time.Second,
				Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
		{Config{Model: "m.gguf", System: "You are a careful math teacher."}, 0, true,
			Config{Name: "E1", Model: "m.gguf", System: "You are a careful math teacher.", defaultAPI: APIChat, Concurrency: 8,
				Timeout: 30 * time.Second, Retries: 2, Deadline: time.Minute, MaxTokens: 256}},
	} {
		e := tt.e
		if err := e.Check("consult.experts", tt.i, tt.chatPolicy); err != nil {
			t.Errorf("Check(%+v): %v", tt.e, err)
			continue
		}
		if !reflect.DeepEqual(e, tt.want) {
			t.Errorf("Check(%+v) filled\n%+v, want\n%+v", tt.e, e, tt.want)
		}
		// Checking again changes nothing.
		again := e
		if err := again.Check("consult.experts", tt.i, tt.chatPolicy); err != nil || !reflect.DeepEqual(again, e) {
			t.Errorf("Check twice: %+v, %v", again, err)
		}
	}
	// Every world style but the reference is an expert.
	for s := 1; s <= 3; s++ {
		e := Config{World: &s}
		if err := e.Check("consult.experts", 0, false); err != nil {
			t.Errorf("world %d: %v", s, err)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	zero, four, minus := 0, 4, -1
	one := 1
	for _, tt := range []struct {
		e    Config
		i    int
		want []string
	}{
		{Config{}, 0, []string{"consult.experts[0]", "exactly one", "(0 set)"}},
		{Config{Name: "x"}, 3, []string{"consult.experts[3]", "exactly one"}},
		{Config{URL: "http://a/v1", World: &one}, 1, []string{"consult.experts[1]", "exactly one", "(2 set)"}},
		{Config{Reply: "no", Model: "m"}, 0, []string{"consult.experts[0]", "(2 set)"}},
		{Config{World: &one, Policy: true}, 0, []string{"consult.experts[0]", "(2 set)"}},
		{Config{URL: "gpu1:8000/v1"}, 2, []string{"consult.experts[2]", `url "gpu1:8000/v1"`}},
		{Config{URL: "ftp://gpu1/v1"}, 0, []string{"consult.experts[0]", "url"}},
		{Config{World: &zero}, 0, []string{"consult.experts[0]", "world 0"}},
		{Config{World: &four}, 1, []string{"consult.experts[1]", "world 4"}},
		{Config{World: &minus}, 0, []string{"consult.experts[0]", "world -1"}},
		{Config{Reply: "x", API: "responses"}, 0, []string{"consult.experts[0]", `api "responses"`}},
		{Config{Reply: "x", API: "Chat"}, 0, []string{"consult.experts[0]", `api "Chat"`}},
		{Config{Name: "my expert", Reply: "x"}, 5, []string{"consult.experts[5]", `name "my expert"`}},
		{Config{Name: "E1:big", Reply: "x"}, 0, []string{"consult.experts[0]", `name "E1:big"`}},
		{Config{Name: "E1;E2", Reply: "x"}, 0, []string{"consult.experts[0]", "name"}},
		{Config{Name: "why?", Reply: "x"}, 0, []string{"consult.experts[0]", "name"}},
		{Config{Name: `say"`, Reply: "x"}, 0, []string{"consult.experts[0]", "name"}},
		{Config{Name: "tab\there", Reply: "x"}, 0, []string{"consult.experts[0]", "name"}},
		{Config{Reply: "x", Concurrency: -1}, 0, []string{"consult.experts[0]", "concurrency"}},
		{Config{Reply: "x", Timeout: -time.Second}, 0, []string{"consult.experts[0]", "timeout"}},
		{Config{Reply: "x", Deadline: -time.Second}, 0, []string{"consult.experts[0]", "deadline"}},
		{Config{Reply: "x", MaxTokens: -5}, 0, []string{"consult.experts[0]", "max_tokens"}},
		{Config{Reply: "x", Retries: -2}, 0, []string{"consult.experts[0]", "retries"}},
		{Config{Reply: "x", Temperature: -0.1}, 0, []string{"consult.experts[0]", "temperature"}},
		{Config{Reply: "x", Temperature: 11}, 0, []string{"consult.experts[0]", "temperature"}},
		{Config{Reply: "x", Temperature: float32(math.NaN())}, 0, []string{"consult.experts[0]", "temperature"}},
		{Config{Reply: "x", Wrong: true}, 0, []string{"consult.experts[0]", "wrong is for a world expert"}},
		{Config{Kind: "oracle"}, 0, []string{"consult.experts[0]", `kind "oracle"`, "reference"}},
		{Config{Kind: KindReference, URL: "http://a/v1"}, 0, []string{"consult.experts[0]", "kind", "(2 set)"}},
		{Config{World: &one, System: "Be brief."}, 0, []string{"consult.experts[0]", "system", "world"}},
		{Config{Reply: "x", System: "Be brief."}, 1, []string{"consult.experts[1]", "system", "fixed reply"}},
		{Config{Kind: KindReference, System: "Be brief."}, 2, []string{"consult.experts[2]", "system", "reference"}},
		{Config{URL: "http://a/v1", System: " \n"}, 0, []string{"consult.experts[0]", "system is blank"}},
		{Config{URL: "http://a/v1", Template: "Q: {q}\nA:"}, 0, []string{"consult.experts[0]", "template", "has no {question}"}},
		{Config{URL: "http://a/v1", API: APIChat, Template: "{question}\nA:"}, 0, []string{"consult.experts[0]", "template", "api is chat"}},
		{Config{Kind: KindReference, Template: "{question}"}, 0, []string{"consult.experts[0]", "template", "reads no prompt"}},
		// Everything wrong at once is reported at once.
		{Config{Name: "a b", URL: "gpu", World: &four, API: "x"}, 7,
			[]string{`consult.experts[7]: name "a b"`, "consult.experts[7]: set exactly one", `consult.experts[7]: url "gpu"`,
				"consult.experts[7]: world 4", `consult.experts[7]: api "x"`}},
	} {
		e := tt.e
		saysAll(t, "Check", e.Check("consult.experts", tt.i, false), tt.want...)
	}
}

// saysAll fails the test unless err says each of want.
func saysAll(t *testing.T, call string, err error, want ...string) {
	t.Helper()
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v, want it to say %q", call, err, w)
		}
	}
}

func TestCheckAll(t *testing.T) {
	one := 1
	experts := []Config{{World: &one}, {Name: "E1", Reply: "x"}, {Reply: "y", API: "x"}}
	saysAll(t, "CheckAll", CheckAll("consultation.experts", experts, false),
		"consultation.experts[1]: the name E1 is given twice", `consultation.experts[2]: api "x"`)
	if experts[2].Name != "E3" {
		t.Errorf("defaults not filled: %+v", experts[2])
	}
	if err := CheckAll("experts", WorldPool(), false); err != nil {
		t.Errorf("the world's pool: %v", err)
	}
}

// TestAskedAPI checks that the API Check chooses is kept apart from the
// one written: a config written back (as a run's config.yaml is) and read
// again still leaves it to the default, which a checkpoint without a chat
// template may then turn into completion.
func TestAskedAPI(t *testing.T) {
	for _, tt := range []struct {
		e    Config
		chat bool
		want string
	}{
		{Config{Model: "m"}, true, APIChat},
		{Config{Model: "m"}, false, APICompletion},
		{Config{Model: "m", API: APICompletion}, true, APICompletion},
		{Config{Model: "m", API: APIChat}, false, APIChat},
	} {
		e := tt.e
		if got := e.AskedAPI(); got != cmp.Or(tt.e.API, APICompletion) {
			t.Errorf("%+v unchecked: AskedAPI %s", tt.e, got)
		}
		if err := e.Check("experts", 0, tt.chat); err != nil {
			t.Fatal(err)
		}
		if got := e.AskedAPI(); got != tt.want || e.API != tt.e.API {
			t.Errorf("%+v checked with chat %v: AskedAPI %s, API %q", tt.e, tt.chat, got, e.API)
		}
		b, err := yaml.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if written := strings.Contains(string(b), "api:"); written != (tt.e.API != "") {
			t.Errorf("%+v written as\n%s", tt.e, b)
		}
	}
}

package expert

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"rlvr/internal/httpurl"
	"rlvr/task"
	"rlvr/task/world"
)

// Config is one expert, as a run's config (consultation.experts) or
// rlvr experts collect's --expert flags and --experts file give it. Where
// it answers is exactly one of URL (any OpenAI-compatible server), World
// (one of the built-in world's scripted styles), Reply (a fixed reply:
// EAPO App. E's meaningless expert), Model (a checkpoint), Policy (the
// run's starting model) or Kind (KindReference: the dataset's own worked
// solution). See Open for how each is asked.
type Config struct {
	Name string `yaml:"name"` // what consult actions and D_ME name; default E1, E2, … by position

	URL   string `yaml:"url,omitempty"`   // base URL with the version: http://gpu1:8000/v1
	World *int   `yaml:"world,omitempty"` // a world style, 1 to 3
	// Wrong makes a World expert's every reply wrong: its last step slips
	// (world.SolveWrong; EAPO App. E's high-error experts).
	Wrong bool   `yaml:"wrong,omitempty"`
	Reply string `yaml:"reply,omitempty"` // the same reply to everything
	Model string `yaml:"model,omitempty"` // a checkpoint directory, .gguf file or llama2.c .bin
	// Policy is a frozen copy of the run's starting model: experts that
	// think like the policy (EAPO's homogeneous pool, Table 3).
	Policy bool `yaml:"policy,omitempty"`
	// Kind is an expert that is no model: KindReference, the only kind,
	// answers from the reference solution of the example being worked on
	// (see Reference), an oracle of the training split.
	Kind string `yaml:"kind,omitempty"`

	// RemoteModel is the model asked at URL; "" sends Name.
	RemoteModel string `yaml:"remote_model,omitempty"`
	// API is APICompletion or APIChat (the question as a chat's user
	// message); "" is the default Check chooses: completion for the
	// world's formats, chat for a chat policy's or a dataset's. A
	// checkpoint without a chat template is asked by completion when API
	// is left to the default; written as chat, Open refuses it.
	API string `yaml:"api,omitempty"`
	// System is the persona the expert is asked under ("" for none): with
	// the chat API, the system message before the question's user
	// message; with the completion API, a line of its own after the
	// question (Concat). It is for experts that read a prompt (url,
	// model, policy), not for the world's styles, fixed replies or the
	// reference. In rlvr experts collect, an expert with a System is
	// asked under it instead of its expert prompt P_i, and D_ME still
	// records P_i, the prompt the policy is trained behind.
	System string `yaml:"system,omitempty"`
	// Template is the completion prompt of an expert asked by completion,
	// with {question} replaced by the question and {system} by the
	// persona: what a base model needs to answer rather than continue
	// ("Question: {question}\nAnswer:"). "" is Concat(question, persona).
	Template string `yaml:"template,omitempty"`
	// APIKeyEnv names the environment variable holding the bearer token
	// sent to URL ("" sends none).
	APIKeyEnv string `yaml:"api_key_env,omitempty"`
	// APIKey is the bearer token itself, for a caller that holds it (a
	// command-line flag); it takes precedence over APIKeyEnv and is never
	// read from or written to a config file.
	APIKey string `yaml:"-" json:"-"`

	Concurrency int           `yaml:"concurrency,omitempty"` // requests in flight; 0 means 8
	Timeout     time.Duration `yaml:"timeout,omitempty"`     // one attempt; 0 means 30s
	Retries     int           `yaml:"retries,omitempty"`     // after a 429, 5xx, timeout or reset; 0 means 2, −1 none
	Deadline    time.Duration `yaml:"deadline,omitempty"`    // one answer, retries included; 0 means 60s
	MaxTokens   int           `yaml:"max_tokens,omitempty"`  // of a reply; 0 means 256
	Temperature float32       `yaml:"temperature,omitempty"` // 0 is greedy
	Stop        []string      `yaml:"stop,omitempty"`        // strings that end a reply

	// defaultAPI is the API Check chose for an API left unset; never
	// written to a config, so that a config written back and read again
	// still says the API was not chosen.
	defaultAPI string
}

// KindReference is the reference-solution expert's Kind.
const KindReference = "reference"

// AskedAPI is the API the expert is asked through: API, or when it is
// unset the default Check chose (completion before any Check).
func (e *Config) AskedAPI() string {
	switch {
	case e.API != "":
		return e.API
	case e.defaultAPI != "":
		return e.defaultAPI
	}
	return APICompletion
}

// IsReference reports whether the expert is the reference solution.
func (e *Config) IsReference() bool { return e.Kind == KindReference }

// WorldPool is the built-in world's scripted experts E1 to E3, the pool
// when none is given on the world.
func WorldPool() []Config {
	var out []Config
	for s := 1; s < len(world.Styles); s++ {
		out = append(out, Config{Name: task.ExpertName(s), World: &s})
	}
	return out
}

// CheckAll checks a list of experts named field: each one (Check, with
// chat choosing the default API), and that no two share a name, so that
// a consult action or a D_ME line names one expert.
func CheckAll(field string, experts []Config, chat bool) error {
	var errs []string
	names := map[string]bool{}
	for i := range experts {
		if err := experts[i].Check(field, i, chat); err != nil {
			errs = append(errs, err.Error())
		}
		if name := experts[i].Name; names[name] {
			errs = append(errs, fmt.Sprintf("%s[%d]: the name %s is given twice", field, i, name))
		}
		names[experts[i].Name] = true
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// Check reports, for the expert at position i of a list named field,
// everything wrong with it, filling the defaults; chat chooses the default
// API, which is kept apart from API (see AskedAPI). Checking again
// changes nothing.
func (e *Config) Check(field string, i int, chat bool) error {
	var errs []string
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s[%d]: ", field, i)+fmt.Sprintf(format, args...))
	}
	if e.Name == "" {
		e.Name = task.ExpertName(i + 1)
	}
	if strings.ContainsAny(e.Name, " \t\n;:?!\"") {
		add("name %q: no spaces, quotes or ;:?! (they delimit consult actions)", e.Name)
	}
	set := 0
	for _, b := range []bool{e.URL != "", e.World != nil, e.Reply != "", e.Model != "", e.Policy, e.Kind != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		add("set exactly one of url, world, reply, model, policy and kind (%d set)", set)
	}
	if e.Kind != "" && e.Kind != KindReference {
		add("kind %q: the only kind is %s (the dataset's reference solution)", e.Kind, KindReference)
	}
	if e.System != "" {
		switch {
		case e.World != nil:
			add("system: a world expert answers in its style whatever it is asked under; a persona is for url, model or policy experts")
		case e.Reply != "":
			add("system: a fixed reply reads no prompt; a persona is for url, model or policy experts")
		case e.Kind != "":
			add("system: the %s expert reads no prompt; a persona is for url, model or policy experts", e.Kind)
		case strings.TrimSpace(e.System) == "":
			add("system is blank")
		}
	}
	if e.Template != "" {
		switch {
		case e.World != nil || e.Reply != "" || e.Kind != "":
			add("template: the expert reads no prompt; a template is for url, model or policy experts")
		case !strings.Contains(e.Template, "{question}"):
			add("template %q has no {question}", e.Template)
		case e.API == APIChat:
			add("template is the prompt of a completion; api is chat")
		}
	}
	if e.URL != "" && !httpurl.Valid(e.URL) {
		add("url %q is not http(s)://…", e.URL)
	}
	if e.World != nil && (*e.World < 1 || *e.World >= len(world.Styles)) {
		add("world %d: the world's experts are styles 1 to %d", *e.World, len(world.Styles)-1)
	}
	if e.Wrong && e.World == nil {
		add("wrong is for a world expert (world: 1 to %d)", len(world.Styles)-1)
	}
	if e.defaultAPI == "" {
		e.defaultAPI = APICompletion
		if chat {
			e.defaultAPI = APIChat
		}
	}
	if e.API != "" && e.API != APICompletion && e.API != APIChat {
		add("api %q is not %s or %s", e.API, APICompletion, APIChat)
	}
	if e.Concurrency == 0 {
		e.Concurrency = 8
	}
	if e.Timeout == 0 {
		e.Timeout = 30 * time.Second
	}
	if e.Retries == 0 {
		e.Retries = 2
	}
	if e.Deadline == 0 {
		e.Deadline = time.Minute
	}
	if e.MaxTokens == 0 {
		e.MaxTokens = 256
	}
	if e.Concurrency < 0 || e.Timeout < 0 || e.Deadline < 0 || e.MaxTokens < 0 || e.Retries < -1 {
		add("concurrency, timeout, deadline and max_tokens must be positive, retries at least −1")
	}
	if !(e.Temperature >= 0 && e.Temperature <= 10) { // NaN too
		add("temperature %g is not in [0, 10]", e.Temperature)
	}
	for k, s := range e.Stop {
		if s == "" {
			add("stop %d is empty", k)
		}
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

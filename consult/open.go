package consult

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"rlvr/checkpoint"
	client "rlvr/client/openai"
	"rlvr/expert"
	"rlvr/expert/collect"
	"rlvr/internal/httpurl"
	"rlvr/sample"
	"rlvr/serve"
	"rlvr/task/world"
)

// ExpertConfig is one expert of a pool, as a run's config gives it. Where
// it answers is exactly one of URL (any OpenAI-compatible server), World
// (one of the built-in world's scripted styles), Reply (a fixed reply:
// EAPO App. E's meaningless expert), Model (a checkpoint) or Policy (the
// run's starting model). All but URL are served by rlvr on a loopback
// port of the process, so every expert is asked over HTTP through the same
// client.
type ExpertConfig struct {
	Name string `yaml:"name"` // what consult actions name; default E1, E2, … by position

	URL   string `yaml:"url,omitempty"`   // base URL with the version: http://gpu1:8000/v1
	World *int   `yaml:"world,omitempty"` // a world style, 1 to 3
	Reply string `yaml:"reply,omitempty"` // the same reply to everything
	Model string `yaml:"model,omitempty"` // a checkpoint directory, .gguf file or llama2.c .bin
	// Policy is a frozen copy of the run's starting model: experts that
	// think like the policy (EAPO's homogeneous pool, Table 3).
	Policy bool `yaml:"policy,omitempty"`

	// RemoteModel is the model asked at URL; "" sends Name.
	RemoteModel string `yaml:"remote_model,omitempty"`
	// API is "completion" or "chat" (the question as a chat's user
	// message); default completion for the world's formats, chat for a
	// chat policy's.
	API string `yaml:"api,omitempty"`
	// APIKeyEnv names the environment variable holding the bearer token
	// sent to URL ("" sends none).
	APIKeyEnv string `yaml:"api_key_env,omitempty"`

	Concurrency int           `yaml:"concurrency,omitempty"` // requests in flight; 0 means 8
	Timeout     time.Duration `yaml:"timeout,omitempty"`     // one attempt; 0 means 30s
	Retries     int           `yaml:"retries,omitempty"`     // after a 429, 5xx, timeout or reset; 0 means 2, −1 none
	Deadline    time.Duration `yaml:"deadline,omitempty"`    // one answer, retries included; 0 means 60s
	MaxTokens   int           `yaml:"max_tokens,omitempty"`  // of a reply; 0 means 256
	Temperature float32       `yaml:"temperature,omitempty"` // 0 is greedy
}

// Check reports, for the expert at position i of a list named field,
// everything wrong with it, filling the defaults.
func (e *ExpertConfig) Check(field string, i int, chatPolicy bool) error {
	var errs []string
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Sprintf("%s[%d]: ", field, i)+fmt.Sprintf(format, args...))
	}
	if e.Name == "" {
		e.Name = fmt.Sprintf("E%d", i+1)
	}
	if strings.ContainsAny(e.Name, " \t\n;:?!\"") {
		add("name %q: no spaces, quotes or ;:?! (they delimit consult actions)", e.Name)
	}
	set := 0
	for _, b := range []bool{e.URL != "", e.World != nil, e.Reply != "", e.Model != "", e.Policy} {
		if b {
			set++
		}
	}
	if set != 1 {
		add("set exactly one of url, world, reply, model and policy (%d set)", set)
	}
	if e.URL != "" && !httpurl.Valid(e.URL) {
		add("url %q is not http(s)://…", e.URL)
	}
	if e.World != nil && (*e.World < 1 || *e.World >= len(world.Styles)) {
		add("world %d: the world's experts are styles 1 to %d", *e.World, len(world.Styles)-1)
	}
	if e.API == "" {
		e.API = collect.APICompletion
		if chatPolicy {
			e.API = collect.APIChat
		}
	}
	if e.API != collect.APICompletion && e.API != collect.APIChat {
		add("api %q is not %s or %s", e.API, collect.APICompletion, collect.APIChat)
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
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}

// Open starts the pool a config describes: the loopback-served experts in
// one server of this process, and a client per URL; policy is the path of
// the run's starting model, which Policy experts load. stop shuts the
// server down; call it when the pool is no longer used. The experts must
// have been Checked.
func Open(experts []ExpertConfig, policy string, seed uint64) (pool *Pool, stop func(), err error) {
	stop = func() {}
	var local []serve.Model
	styles := expert.WorldModels()
	for _, e := range experts {
		switch {
		case e.World != nil:
			m := styles[*e.World]
			m.Name = e.Name
			local = append(local, m)
		case e.Reply != "":
			local = append(local, expert.FixedModel(e.Name, e.Reply))
		case e.Model != "" || e.Policy:
			path := e.Model
			if e.Policy {
				path = policy
			}
			l, err := checkpoint.Open(path, "")
			if err != nil {
				return nil, stop, fmt.Errorf("expert %s: %w", e.Name, err)
			}
			local = append(local, serve.Checkpoint(e.Name, l))
		}
	}
	var base string
	if len(local) > 0 {
		base, stop, err = serve.Loopback(serve.Config{Logger: slog.New(slog.DiscardHandler)}, local...)
		if err != nil {
			return nil, func() {}, fmt.Errorf("consult: serving the experts: %w", err)
		}
	}
	pool = &Pool{}
	for _, e := range experts {
		url, model, key := base, e.Name, ""
		if e.URL != "" {
			url, model = e.URL, e.RemoteModel
			if model == "" {
				model = e.Name
			}
			if e.APIKeyEnv != "" {
				key = os.Getenv(e.APIKeyEnv)
			}
		}
		cl := client.New(client.Config{BaseURL: url, APIKey: key, Timeout: e.Timeout, MaxRetries: e.Retries, MaxConcurrent: e.Concurrency})
		pool.Members = append(pool.Members, Member{Name: e.Name, Chat: e.API == collect.APIChat, Answerer: &collect.Endpoint{
			Client: cl, Model: model, Concurrency: e.Concurrency, Deadline: e.Deadline,
			Params: sample.Params{MaxTokens: e.MaxTokens, Temperature: e.Temperature, Seed: seed}}})
	}
	return pool, stop, nil
}

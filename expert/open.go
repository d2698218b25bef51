package expert

import (
	"fmt"
	"log/slog"
	"os"

	"rlvr/checkpoint"
	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/sample"
	"rlvr/serve"
)

// Options are what Open needs beyond the experts' configs.
type Options struct {
	// Policy is the path of the run's starting model, which Policy
	// experts load.
	Policy string
	// Seed seeds the experts' sampling: each question is sampled with
	// Seed, the member's index, a hash of its text and the Ask's Seed,
	// the same however the questions are batched or resumed.
	Seed uint64
	// Batch, when positive, answers checkpoint experts (Model, Policy) in
	// this process, Batch prompts per call of the model (Batched): an
	// offline collection asks thousands of questions at once. Zero serves
	// them on loopback beside the world's and fixed experts, asked over
	// HTTP like the rest.
	Batch int
	// Warn receives what Open changes about an expert, such as an expert
	// whose API was left to the default (chat) being asked by completion
	// because its model has no chat template; nil discards it.
	Warn func(msg string)
}

// Open opens the experts of a pool, which must have been Checked. Each is
// asked through its own OpenAI client (Endpoint), whose limits are the
// expert's: URL experts at their URL, and the others — world, reply and
// checkpoint experts — on a loopback port of this process, where one
// server serves them all, so that every expert is asked over HTTP with
// the same retries, deadlines and failure kinds. With Options.Batch,
// checkpoints are asked directly instead. A reference expert answers in
// this process (Reference). An expert written as api: chat on a
// checkpoint without a chat template is an error naming both. Close the
// pool when it is no longer used.
func Open(experts []Config, opt Options) (*Pool, error) {
	warn := opt.Warn
	if warn == nil {
		warn = func(string) {}
	}
	pool := &Pool{Members: make([]Member, len(experts))}
	var served []serve.Model
	for i, e := range experts {
		m := &pool.Members[i]
		m.Name, m.API, m.Model, m.System, m.Template = e.Name, e.AskedAPI(), e.Name, e.System, e.Template
		switch {
		case e.IsReference():
			m.Model, m.Answerer = KindReference, Reference{}
		case e.World != nil && e.Wrong:
			served = append(served, WrongModel(e.Name, *e.World))
		case e.World != nil:
			w := WorldModels()[*e.World]
			w.Name = e.Name
			served = append(served, w)
		case e.Reply != "":
			served = append(served, FixedModel(e.Name, e.Reply))
		case e.Model != "" || e.Policy:
			m.Model = e.Model
			if e.Policy {
				m.Model = opt.Policy
			}
			l, err := checkpoint.Open(m.Model, "")
			if err != nil {
				return nil, fmt.Errorf("expert %s: %w", e.Name, err)
			}
			if m.API == APIChat && l.Chat == nil {
				if e.API != "" {
					return nil, fmt.Errorf("expert %s: api: %s, but the model %s has no chat template: write api: %s, or give a chat model", e.Name, e.API, m.Model, APICompletion)
				}
				m.API = APICompletion
				warn(fmt.Sprintf("expert %s: %s has no chat template; it is asked by completion", e.Name, m.Model))
			}
			if opt.Batch > 0 {
				b := &Batched{Gen: eval.NewLocal(l), Params: params(e, opt.Seed), Batch: opt.Batch}
				if m.API == APIChat {
					b.Chat = l.Chat
				}
				m.Answerer = b
				continue
			}
			served = append(served, serve.Checkpoint(e.Name, l))
		case e.URL != "":
			if e.RemoteModel != "" {
				m.Model = e.RemoteModel
			}
		}
	}
	base := ""
	if len(served) > 0 {
		var err error
		base, pool.stop, err = serve.Loopback(serve.Config{Logger: slog.New(slog.DiscardHandler)}, served...)
		if err != nil {
			return nil, fmt.Errorf("expert: serving the experts: %w", err)
		}
	}
	for i, e := range experts {
		m := &pool.Members[i]
		switch {
		case e.URL != "":
			key := e.APIKey
			if key == "" && e.APIKeyEnv != "" {
				key = os.Getenv(e.APIKeyEnv)
			}
			m.Answerer = endpoint(e.URL, key, m.Model, e, memberSeed(opt.Seed, i))
		case m.Answerer == nil: // served
			m.Answerer = endpoint(base, "", e.Name, e, memberSeed(opt.Seed, i))
		}
	}
	return pool, nil
}

// memberSeed is the seed of the pool's member i: members that serve the
// same model (self-collaboration's copies of the policy) sample different
// replies to one question.
func memberSeed(seed uint64, i int) uint64 { return seed + uint64(i)*0x9e3779b97f4a7c15 }

// endpoint asks model at url, with the bearer token key, as e says: its
// own client, whose concurrency limit is the expert's.
func endpoint(url, key, model string, e Config, seed uint64) *Endpoint {
	cl := client.New(client.Config{BaseURL: url, APIKey: key, Timeout: e.Timeout, MaxRetries: e.Retries, MaxConcurrent: e.Concurrency})
	return &Endpoint{Client: cl, Model: model, Concurrency: e.Concurrency, Deadline: e.Deadline, Params: params(e, seed)}
}

// params are an expert's sampling parameters.
func params(e Config, seed uint64) sample.Params {
	return sample.Params{MaxTokens: e.MaxTokens, Temperature: e.Temperature, Stop: e.Stop, Seed: seed}
}

package main

import (
	"fmt"

	"rlvr/backend/local"
	"rlvr/checkpoint"
	"rlvr/expert"
	"rlvr/method/eapo"
	"rlvr/method/part"
	"rlvr/task"
	"rlvr/task/world"
	"rlvr/train"
)

// newConsultWorkflow reads the consultation part of the training config
// at path and opens its pool for the model l (at modelPath: a policy
// expert is a copy of it), for EAPO's test-time workflows; with open,
// every episode opens with each expert asked its example's question. The
// caller closes the pool.
func newConsultWorkflow(path, modelPath string, l *checkpoint.Loaded, open bool, examples []task.Example, prompted []task.Example) (*eapo.Workflow, func(), error) {
	cfg, err := train.LoadRLConfig(path, "")
	if err != nil {
		return nil, nil, err
	}
	recipe, err := cfg.Resolve()
	if err != nil {
		return nil, nil, fmt.Errorf("--consult %s: %w", path, err)
	}
	k := part.Get[*eapo.ConsultationConfig](recipe.Sections)
	if k == nil {
		return nil, nil, fmt.Errorf("--consult %s: the config has no consultation part", path)
	}
	render, err := train.NewRenderer(l, train.ChatConfig{Template: "auto"}, l.Model.Config.MaxSeq)
	if err != nil {
		return nil, nil, err
	}
	pool, err := expert.Open(k.Experts, expert.Options{Policy: modelPath, Seed: cfg.Seed})
	if err != nil {
		return nil, nil, err
	}
	w := &eapo.Workflow{Consultation: k.TestTime(cfg.Steps, l.Chat != nil, pool), Policy: local.NewFixedSampler(l.Model, l.Tokenizer),
		Render: render, Encode: l.Encode, Stop: l.StopTokens}
	if len(examples) > 0 {
		w.Examples = map[string]task.Example{}
		for i, e := range examples {
			w.Examples[prompted[i].Prompt] = e
		}
	}
	if open {
		w.Questions = map[string]string{}
		for i, e := range examples {
			w.Questions[prompted[i].Prompt] = world.QuestionText(e.Prompt)
		}
	}
	return w, pool.Close, nil
}

package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"rlvr/checkpoint"
	"rlvr/engine/model"
	"rlvr/eval"
	"rlvr/expert/prompt"
	"rlvr/internal/atomicfile"
	"rlvr/rundir"
	"rlvr/task"
	"rlvr/task/world"
	"rlvr/train"
)

func evalCmd() *cobra.Command {
	var o eval.Options
	o = eval.Options{Models: localModels, TestSplit: testSplit, Workflow: evalWorkflow,
		Record: func(dir, modelPath string, seed uint64, precision model.Precision, examples []task.Example, rep *eval.Report) error {
			machine := train.MachineRecord(0, precision, precision)
			if o.Endpoint != "" {
				machine = train.EndpointRecord(0, o.Endpoint)
			}
			return recordEvaluation(dir, os.Args, modelPath, seed, machine, examples, rep)
		}}
	var asJSON bool
	cmd := &cobra.Command{
		Use:     "eval",
		Short:   "Score a model: greedy pass@1, pass@k, avg@k, maj@k, variance, per-expert accuracy",
		Long:    evalLong,
		Example: evalExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Given = cmd.Flags().Changed
			rep, err := o.Run(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return printReport(cmd, rep, asJSON)
		},
	}
	bindEvalFlags(cmd.Flags(), &o, &asJSON)
	// One flag names the model; --expert I sets the prompt itself; the
	// consultation loop runs on a local model and asks the pool, not
	// expert prompts.
	cmd.MarkFlagsMutuallyExclusive("world", "model", "endpoint")
	cmd.MarkFlagsMutuallyExclusive("expert", "prompt-suffix")
	cmd.MarkFlagsMutuallyExclusive("expert", "experts")
	cmd.MarkFlagsMutuallyExclusive("consult", "endpoint")
	cmd.MarkFlagsMutuallyExclusive("consult", "experts")
	pathFlags(cmd, "model", "tokenizer", "samples", "consult", "test-of", "run")
	return cmd
}

// evalLong is rlvr eval's help.
var evalLong = `eval scores a local model or an OpenAI-compatible endpoint on the built-in
world or a dataset: greedy pass@1 with a 95% interval; with --k, pass@k (unbiased
estimator), avg@k, maj@k and the per-problem variance at --temperature; with
--experts N, each expert prompt's greedy accuracy, the error-overlap table
(errors, errors another expert gets right, errors shared by all) and the
experts' majority vote (MEML-GRPO's Table 6), for plain text and chats alike.

A model with a chat template is prompted through it (--chat auto), with the
--system prompt when given; --chat off sends plain text, and --chat on
requires a template. An --endpoint is sent plain-text completions, or chats
with --chat on. --prompt-prefix precedes and --prompt-suffix follows every
plain-text prompt, as a base model is asked (--prompt-prefix 'Question: '
--prompt-suffix '\nAnswer:' --stop '\nQuestion:'); a --stop string ends a
completion, cut before it. In --system, the prompt's affixes and --stop, \n
is a newline.

EAPO's test-time workflows run its consultation loop without training:
--consult CONFIG takes the pool, the most queries per action and the first
turn budget of a training config's consultation part and lets the model
consult in every episode, each reply accepted; --consult-open opens every
episode with each expert asked the whole question. A pool of other models is
the expert-assisted workflow, a pool of copies of the model (policy: true)
self-collaboration.

--test-of RUN scores the test problems of the world training run RUN, as its
config.yaml draws them, at its max_tokens, with its eval_samples answers at its
eval_temperature and its sample_batch in flight, with RUN's starting model
and its sampler_precision (the flags, when given, take precedence): the starting model, or a test-time
workflow, on exactly the problems a trained run was scored on. --run DIR
records the evaluation as a run without training (config.yaml with the seed,
eval.jsonl with the test line), which rlvr report --table puts beside
trained runs, paired by seed and by problem.

MEML-GRPO trains one model behind several expert prompts and uses it under
the best one. --expert I evaluates a model under expert I's prompt; for
--expert 2, the world's suffix "@E2\n" after plain text, and in a chat the
persona "` + prompt.Default.Of(2).System + `"
after the --system prompt, in one system message, as training writes them.`

// evalExample is rlvr eval's examples.
const evalExample = `  rlvr eval --levels 0,3,5 --k 8 --experts 4
  rlvr eval --expert 2 --model runs/meml/ckpt-000100
  rlvr eval --data gsm8k=../shared/data/gsm8k/test.jsonl --model runs/qwen-meml/ckpt-000100 --experts 4 \
      --system 'Solve the problem; end with #### and the answer.'
  rlvr eval --prompt-suffix '@E2\n' --levels 6
  rlvr eval --levels 5,6 --consult configs/world-eapo.yaml --consult-open
  rlvr eval --data gsm8k=../shared/data/gsm8k/test.jsonl --model runs/qwen-meml/ckpt-000100 --expert 3
  rlvr eval --data gsm8k=../shared/data/gsm8k/test.jsonl --endpoint http://localhost:8000/v1 --endpoint-model qwen \
      --chat on --system 'Solve the problem; end with #### and the answer.'`

// bindEvalFlags binds rlvr eval's flags to o, and --json to asJSON.
func bindEvalFlags(f *pflag.FlagSet, o *eval.Options, asJSON *bool) {
	f.StringVar(&o.Model, "model", defaultModel(), "local model: Hugging Face directory, .gguf file or llama2.c .bin file")
	f.IntVar(&o.World, "world", 1, "the world version whose pretrained model to score, instead of --model (docs/world.md)")
	f.StringVar(&o.Tokenizer, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&o.Endpoint, "endpoint", "", "OpenAI-compatible base URL (e.g. http://localhost:8000/v1) instead of a local model")
	f.StringVar(&o.EndpointModel, "endpoint-model", "", "model name at the endpoint")
	f.StringVar(&o.APIKey, "api-key", "", "bearer token for the endpoint")
	f.StringVar(&o.Data, "data", "world", "world, or NAME=PATH of a dataset file")
	f.IntSliceVar(&o.Levels, "levels", []int{0, 1, 2, 3, 4, 5, 6}, "world levels (with --data world)")
	f.IntVar(&o.Problems, "problems", 200, "problems per world level, or in all for a dataset")
	f.BoolVar(&o.WorldWords, "world-words", false, "ask the world's problems in words in plain text too (a chat always is), as a base model is asked")
	f.IntVar(&o.Skip, "skip", 0, "skip the first problems of the seeded draw (per world level), to run a long evaluation in parts: the parts draw the problems and the samples one whole run would")
	f.IntVar(&o.Config.K, "k", 0, "samples per problem for pass@k, avg@k, maj@k and variance (0: greedy only)")
	f.Float32Var(&o.Config.Temperature, "temperature", 1, "temperature of the k samples")
	f.Float32Var(&o.Config.TopP, "top-p", 1, "nucleus mass of the k samples")
	f.IntVar(&o.Config.MaxTokens, "max-tokens", 256, "tokens per completion")
	f.IntVar(&o.Config.Batch, "batch", 64, "sequences in flight at once (prompts × samples; with a local model a prompt's samples start as others end), which bounds the KV cache's memory")
	f.Uint64Var(&o.Config.Seed, "seed", 0, "seed for sampling and problem selection")
	f.IntVar(&o.Experts, "experts", 0, fmt.Sprintf("evaluate expert prompts E0..E<n-1> and their majority vote: the suffix \"@Ei\\n\" on plain text, the paper's persona after --system in a chat (at most %d)", len(world.Styles)))
	f.IntVar(&o.Expert, "expert", 0, `evaluate under expert I's prompt: the suffix "@EI\n" on plain text, the paper's persona after --system in a chat`)
	f.StringVar(&o.Chat, "chat", "auto", "auto (the model's chat template when it has one), on (required) or off (plain-text prompts); an --endpoint is sent chats only with on")
	f.StringVar(&o.System, "system", "", "system prompt of every chat (replacing a dataset's own)")
	f.StringVar(&o.Prefix, "prompt-prefix", "", `text before every plain-text prompt (e.g. "Question: ", or few-shot examples)`)
	f.StringVar(&o.Suffix, "prompt-suffix", "", `text appended to every plain-text prompt (e.g. a world expert's "@E2\n")`)
	f.StringArrayVar(&o.Config.Stop, "stop", nil, "a string that ends a completion, which is cut before it (repeatable)")
	f.BoolVar(asJSON, "json", false, "print JSON")
	f.StringVar(&o.Samples, "samples", "", "write every scored completion to this JSON Lines file (id, pass, index, gold, text, answer, reward)")
	f.StringVar(&o.Consult, "consult", "", "a training config with the consultation part: run its consultation loop at test time, every reply accepted (EAPO's expert-assisted workflow; self-collaboration with a pool of policy copies)")
	f.StringVar(&o.TestOf, "test-of", "", "score the test problems of this world training run's directory, at its max_tokens, eval_samples, eval_temperature, sample_batch and sampler_precision, with its starting model unless --model or --world names one")
	f.StringVar(&o.Precision, "precision", "fp32", precisionUsage)
	f.StringVar(&o.RunDir, "run", "", "record the evaluation in this directory as a run without training, for rlvr report --table")
	f.BoolVar(&o.ConsultOpen, "consult-open", false, "with --consult, open every episode with each expert of the pool asked the whole question")
}

// testSplit draws the test problems of the world training run in dir,
// with the settings of its config that eval takes.
func testSplit(dir string) ([]task.Example, eval.TestRun, error) {
	tested, c, err := train.TestSplit(dir)
	if err != nil {
		return nil, eval.TestRun{}, err
	}
	return tested, eval.TestRun{Model: c.Model, World: c.Data.World, MaxTokens: c.MaxTokens, Samples: c.EvalSamples,
		Temperature: c.EvalTemperature, Batch: c.SampleBatch, Precision: c.SamplerPrecision, Seed: c.Seed}, nil
}

// evalWorkflow opens EAPO's test-time workflow for eval --consult (see
// newConsultWorkflow); done writes its summary and closes its pool.
func evalWorkflow(path, modelPath string, l *checkpoint.Loaded, open bool, examples, prompted []task.Example) (eval.Generator, func(io.Writer), error) {
	w, stop, err := newConsultWorkflow(path, modelPath, l, open, examples, prompted)
	if err != nil {
		return nil, nil, err
	}
	return w, func(out io.Writer) {
		w.Summary(out)
		stop()
	}, nil
}

// recordEvaluation writes an evaluation as a run without training: a
// config.yaml naming the command, the model and the seed the run pairs by,
// and eval.jsonl's test line, as a trained run's final evaluation is
// written. It holds the directory's lock while it writes, and refuses a
// directory that another process gave an evaluation meanwhile.
func recordEvaluation(dir string, args []string, model string, seed uint64, machine rundir.Machine, examples []task.Example, rep *eval.Report) error {
	lock, err := rundir.Lock(dir)
	if err != nil {
		return fmt.Errorf("--run: %w", err)
	}
	defer lock.Release()
	if _, err := os.Stat(filepath.Join(dir, rundir.EvalFile)); err == nil {
		return fmt.Errorf("--run: %s was given an evaluation (%s) while this one ran", dir, rundir.EvalFile)
	}
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = strconv.Quote(a)
	}
	config := fmt.Sprintf("# an evaluation without training\nevaluation: [%s]\nmodel: %s\nseed: %d\n", strings.Join(quoted, ", "), strconv.Quote(model), seed)
	if err := atomicfile.WriteBytes(filepath.Join(dir, rundir.ConfigFile), []byte(config)); err != nil {
		return err
	}
	if err := rundir.AppendMachine(dir, machine); err != nil {
		return err
	}
	rec := rundir.Eval{Step: 0, Split: "test", Greedy: rep.Greedy.Mean, GreedyLow: rep.Greedy.Low, GreedyHigh: rep.Greedy.High,
		Problems: len(examples), ProblemSet: train.ProblemSet(examples), Outcomes: rep.Outcomes, Seconds: rep.Seconds}
	if rep.K > 0 {
		train.RecordSampled(rep, &rec)
	}
	return rundir.AppendEval(dir, rec)
}

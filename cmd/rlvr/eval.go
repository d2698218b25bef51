package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	client "rlvr/client/openai"
	"rlvr/eval"
	"rlvr/expert"
	"rlvr/internal/atomicfile"
	"rlvr/method/meml"
	"rlvr/rundir"
	"rlvr/sample"
	"rlvr/task"
	"rlvr/task/world"
	"rlvr/train"
)

func evalCmd() *cobra.Command {
	var (
		modelPath, tokPath, endpoint, endpointModel, apiKey, data  string
		chatMode, system, prefix, suffix, consultPath, samplesPath string
		testOf, runDir, precisionName                              string
		worldWords                                                 bool
		levels                                                     []int
		problems, skip, experts, expertIdx, worldVersion           int
		cfg                                                        eval.Config
		asJSON, consultOpen                                        bool
	)
	cmd := &cobra.Command{
		Use:   "eval",
		Short: "Score a model: greedy pass@1, pass@k, avg@k, maj@k, variance, per-expert accuracy",
		Long: `eval scores a local model or an OpenAI-compatible endpoint on the built-in
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
persona "` + expert.RenderPrompt(meml.PaperExpertSystem, 2, "E2") + `"
after the --system prompt, in one system message, as training writes them.`,
		Example: `  rlvr eval --levels 0,3,5 --k 8 --experts 4
  rlvr eval --expert 2 --model runs/meml/ckpt-000100
  rlvr eval --data gsm8k=../shared/data/gsm8k/test.jsonl --model runs/qwen-meml/ckpt-000100 --experts 4 \
      --system 'Solve the problem; end with #### and the answer.'
  rlvr eval --prompt-suffix '@E2\n' --levels 6
  rlvr eval --levels 5,6 --consult configs/world-eapo.yaml --consult-open
  rlvr eval --data gsm8k=../shared/data/gsm8k/test.jsonl --model runs/qwen-meml/ckpt-000100 --expert 3
  rlvr eval --data gsm8k=../shared/data/gsm8k/test.jsonl --endpoint http://localhost:8000/v1 --endpoint-model qwen \
      --chat on --system 'Solve the problem; end with #### and the answer.'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var c flagCheck
			if cmd.Flags().Changed("world") {
				if p := worldModelPath(worldVersion); p == "" {
					c.add("world", "%d: no such world version (%v)", worldVersion, world.Versions)
				} else {
					modelPath = p
				}
			}
			var testRun *train.RLConfig
			var tested []task.Example
			if testOf != "" {
				for _, name := range []string{"data", "levels", "problems", "skip", "world-words"} {
					if cmd.Flags().Changed(name) {
						c.add(name, "--test-of draws the problems")
					}
				}
				var err error
				if tested, testRun, err = train.TestSplit(testOf); err != nil {
					c.add("test-of", "%v", err)
				} else {
					// The run's own starting model, unless another is named.
					if !cmd.Flags().Changed("model") && !cmd.Flags().Changed("world") && endpoint == "" {
						modelPath = testRun.Model
						if modelPath == "" {
							modelPath = worldModelPath(max(testRun.Data.World, 1))
						}
					}
					if !cmd.Flags().Changed("max-tokens") {
						cfg.MaxTokens = testRun.MaxTokens
					}
					if !cmd.Flags().Changed("k") {
						cfg.K = testRun.EvalSamples
					}
					if !cmd.Flags().Changed("temperature") {
						cfg.Temperature = testRun.EvalTemperature
					}
					if !cmd.Flags().Changed("batch") && testRun.SampleBatch > 0 {
						cfg.Batch = testRun.SampleBatch
					}
					if !cmd.Flags().Changed("precision") && testRun.SamplerPrecision != "" {
						precisionName = testRun.SamplerPrecision
					}
				}
			}
			prec := c.precision("precision", precisionName)
			if endpoint != "" {
				c.url("endpoint", endpoint)
				if cmd.Flags().Changed("precision") {
					c.add("precision", "sets rlvr's own engine; an --endpoint computes in its own")
				}
			} else {
				c.model("model", modelPath)
				if tokPath != "" {
					c.file("tokenizer", tokPath)
				}
			}
			name, path, isFile := strings.Cut(data, "=")
			switch {
			case data == "world":
				c.worldLevels(levels)
			case !isFile || !slices.Contains(task.Names(), name):
				c.add("data", "%q: want world or NAME=PATH, NAME one of %s", data, strings.Join(task.Names(), ", "))
			default:
				c.file("data", path)
				if cmd.Flags().Changed("levels") {
					c.add("levels", "is for --data world")
				}
			}
			if runDir != "" {
				if _, err := os.Stat(filepath.Join(runDir, rundir.EvalFile)); err == nil {
					c.add("run", "%s already holds an evaluation (%s)", runDir, rundir.EvalFile)
				}
			}
			c.intIn("problems", problems, 1, maxProblems)
			c.intIn("skip", skip, 0, maxProblems)
			if worldWords && data != "world" {
				c.add("world-words", "is for --data world")
			}
			if data == "world" {
				c.worldTotal(levels, problems+skip)
			}
			c.intIn("k", cfg.K, 0, maxSamples)
			checkSampling(&c, sample.Params{Temperature: cfg.Temperature, TopP: cfg.TopP}, "the --k samples are drawn at it; greedy pass@1 is always scored")
			c.intIn("max-tokens", cfg.MaxTokens, 1, maxNewTokens)
			c.intIn("batch", cfg.Batch, 1, maxSamples)
			c.intIn("experts", experts, 0, len(world.Styles))
			system = withNewlines(system)
			prefix, suffix = withNewlines(prefix), withNewlines(suffix)
			for i, s := range cfg.Stop {
				if s == "" {
					c.add("stop", "an empty string would end every completion at once")
				}
				cfg.Stop[i] = withNewlines(s)
			}
			expertIdx = checkPrompting(&c, cmd, chatMode, endpoint != "", expertIdx, experts)
			switch {
			case consultPath != "":
				c.file("consult", consultPath)
			case consultOpen:
				c.add("consult-open", "needs --consult, the config of the pool")
			}
			if err := c.err(); err != nil {
				return err
			}
			draw := eval.Draw{Levels: levels, Problems: problems, Skip: skip, WorldWords: worldWords, Seed: cfg.Seed}
			if data != "world" {
				draw.Task, draw.Path = name, path
			}
			var examples []task.Example
			var err error
			if testRun != nil {
				// Sampled as the run's own test evaluation is seeded
				// unless --seed says otherwise.
				examples = tested
				if !cmd.Flags().Changed("seed") {
					cfg.Seed = testRun.Seed
				}
			} else {
				var seed uint64
				if examples, seed, err = draw.Examples(); err != nil {
					return err
				}
				cfg.Seed = seed
			}
			drawn := examples
			prompting := eval.Prompting{Chat: chatMode, System: system, Prefix: prefix, Suffix: suffix, Expert: expertIdx, Experts: experts,
				Persona: expertPersona}
			var gen eval.Generator
			if endpoint != "" {
				name := endpoint
				if endpointModel != "" {
					name = endpointModel + " at " + endpoint
				}
				remote := &eval.Remote{Client: client.New(client.Config{BaseURL: endpoint, Model: endpointModel, APIKey: apiKey}),
					Chat: chatMode == "on"}
				examples, remote.System, cfg.Experts = prompting.Endpoint(cmd.ErrOrStderr(), name, examples)
				gen = remote
			} else {
				l, err := openModel(modelPath, tokPath)
				if err != nil {
					return err
				}
				l.Model.Precision = prec
				raw := examples
				if examples, cfg.Experts, err = prompting.Local(cmd.ErrOrStderr(), l, examples); err != nil {
					return err
				}
				gen = eval.NewLocal(l)
				if consultPath != "" {
					w, stop, err := newConsultWorkflow(consultPath, modelPath, l, consultOpen, raw, examples)
					if err != nil {
						return err
					}
					defer stop()
					defer w.Summary(cmd.ErrOrStderr())
					gen = w
				}
			}
			var rep *eval.Report
			if samplesPath == "" {
				rep, err = eval.Run(cmd.Context(), gen, examples, cfg)
			} else {
				// The samples file appears whole, or not at all.
				err = atomicfile.Write(samplesPath, func(w io.Writer) (err error) {
					enc := json.NewEncoder(w)
					cfg.OnSample = func(s eval.Sample) error { return enc.Encode(s) }
					rep, err = eval.Run(cmd.Context(), gen, examples, cfg)
					return err
				})
			}
			if err != nil {
				return err
			}
			if runDir != "" {
				pairSeed := cfg.Seed
				if testRun != nil {
					pairSeed = testRun.Seed
				}
				if err := recordEvaluation(runDir, os.Args, modelPath, pairSeed, drawn, rep); err != nil {
					return err
				}
			}
			return printReport(cmd, rep, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&modelPath, "model", defaultModel(), "local model: Hugging Face directory, .gguf file or llama2.c .bin file")
	f.IntVar(&worldVersion, "world", 1, "the world version whose pretrained model to score, instead of --model (docs/world.md)")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer file (default: beside the model)")
	f.StringVar(&endpoint, "endpoint", "", "OpenAI-compatible base URL (e.g. http://localhost:8000/v1) instead of a local model")
	f.StringVar(&endpointModel, "endpoint-model", "", "model name at the endpoint")
	f.StringVar(&apiKey, "api-key", "", "bearer token for the endpoint")
	f.StringVar(&data, "data", "world", "world, or NAME=PATH of a dataset file")
	f.IntSliceVar(&levels, "levels", []int{0, 1, 2, 3, 4, 5, 6}, "world levels (with --data world)")
	f.IntVar(&problems, "problems", 200, "problems per world level, or in all for a dataset")
	f.BoolVar(&worldWords, "world-words", false, "ask the world's problems in words in plain text too (a chat always is), as a base model is asked")
	f.IntVar(&skip, "skip", 0, "skip the first problems of the seeded draw (per world level), to run a long evaluation in parts: the parts draw the problems and the samples one whole run would")
	f.IntVar(&cfg.K, "k", 0, "samples per problem for pass@k, avg@k, maj@k and variance (0: greedy only)")
	f.Float32Var(&cfg.Temperature, "temperature", 1, "temperature of the k samples")
	f.Float32Var(&cfg.TopP, "top-p", 1, "nucleus mass of the k samples")
	f.IntVar(&cfg.MaxTokens, "max-tokens", 256, "tokens per completion")
	f.IntVar(&cfg.Batch, "batch", 64, "sequences in flight at once (prompts × samples; with a local model a prompt's samples start as others end), which bounds the KV cache's memory")
	f.Uint64Var(&cfg.Seed, "seed", 0, "seed for sampling and problem selection")
	f.IntVar(&experts, "experts", 0, fmt.Sprintf("evaluate expert prompts E0..E<n-1> and their majority vote: the suffix \"@Ei\\n\" on plain text, the paper's persona after --system in a chat (at most %d)", len(world.Styles)))
	f.IntVar(&expertIdx, "expert", 0, `evaluate under expert I's prompt: the suffix "@EI\n" on plain text, the paper's persona after --system in a chat`)
	f.StringVar(&chatMode, "chat", "auto", "auto (the model's chat template when it has one), on (required) or off (plain-text prompts); an --endpoint is sent chats only with on")
	f.StringVar(&system, "system", "", "system prompt of every chat (replacing a dataset's own)")
	f.StringVar(&prefix, "prompt-prefix", "", `text before every plain-text prompt (e.g. "Question: ", or few-shot examples)`)
	f.StringVar(&suffix, "prompt-suffix", "", `text appended to every plain-text prompt (e.g. a world expert's "@E2\n")`)
	f.StringArrayVar(&cfg.Stop, "stop", nil, "a string that ends a completion, which is cut before it (repeatable)")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	f.StringVar(&samplesPath, "samples", "", "write every scored completion to this JSON Lines file (id, pass, index, gold, text, answer, reward)")
	f.StringVar(&consultPath, "consult", "", "a training config with the consultation part: run its consultation loop at test time, every reply accepted (EAPO's expert-assisted workflow; self-collaboration with a pool of policy copies)")
	f.StringVar(&testOf, "test-of", "", "score the test problems of this world training run's directory, at its max_tokens, eval_samples, eval_temperature, sample_batch and sampler_precision, with its starting model unless --model or --world names one")
	f.StringVar(&precisionName, "precision", "fp32", precisionUsage)
	f.StringVar(&runDir, "run", "", "record the evaluation in this directory as a run without training, for rlvr report --table")
	f.BoolVar(&consultOpen, "consult-open", false, "with --consult, open every episode with each expert of the pool asked the whole question")
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

// recordEvaluation writes an evaluation as a run without training: a
// config.yaml naming the command, the model and the seed the run pairs by,
// and eval.jsonl's test line, as a trained run's final evaluation is
// written. It holds the directory's lock while it writes, and refuses a
// directory that another process gave an evaluation meanwhile.
func recordEvaluation(dir string, args []string, model string, seed uint64, examples []task.Example, rep *eval.Report) error {
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
	rec := rundir.Eval{Step: 0, Split: "test", Greedy: rep.Greedy.Mean, GreedyLow: rep.Greedy.Low, GreedyHigh: rep.Greedy.High,
		Problems: len(examples), ProblemSet: train.ProblemSet(examples)}
	if rep.K > 0 {
		train.RecordSampled(rep, &rec)
	}
	return rundir.AppendEval(dir, rec)
}

// checkPrompting checks the flags that say how examples are prompted, as
// far as they can be checked before the model is opened, and returns the
// --expert index (-1 when it is not given).
func checkPrompting(c *flagCheck, cmd *cobra.Command, chatMode string, endpoint bool, expert, experts int) int {
	f := cmd.Flags()
	switch chatMode {
	case "auto", "on", "off":
	default:
		c.add("chat", "%q: want auto, on or off", chatMode)
	}
	expert = checkExpert(c, cmd, expert)
	switch {
	case chatMode == "off" && f.Changed("system"):
		c.add("system", "is the system prompt of a chat, and --chat off sends plain text")
	case endpoint && chatMode == "auto" && f.Changed("system"):
		c.add("system", "needs --chat on with --endpoint, which is otherwise sent plain-text completions")
	}
	if chatMode == "on" {
		if f.Changed("prompt-suffix") {
			c.add("prompt-suffix", "is for plain-text prompts, not --chat on: give a chat's expert prompt with --system")
		}
		if f.Changed("prompt-prefix") {
			c.add("prompt-prefix", "is for plain-text prompts, not --chat on")
		}
		if experts > 0 && endpoint {
			c.add("experts", "%d: an --endpoint's chats carry one system prompt: give one --expert I at a time", experts)
		}
	}
	return expert
}

// checkExpert checks --expert I, when given, and returns it: eval.NoExpert when
// it is not given. (The flags that would also set the prompt are marked
// mutually exclusive with it.)
func checkExpert(c *flagCheck, cmd *cobra.Command, expert int) int {
	if !cmd.Flags().Changed("expert") {
		return eval.NoExpert
	}
	c.intIn("expert", expert, 0, math.MaxInt)
	return expert
}

// expertPersona is MEML-GRPO's persona of expert i in a chat, as training
// renders it.
func expertPersona(i int) string {
	return expert.RenderPrompt(meml.PaperExpertSystem, i, task.ExpertName(i))
}

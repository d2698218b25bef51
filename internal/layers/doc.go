// Package layers keeps rlvr's packages in layers: a package imports only
// packages of its own layer or of the layers below it (tests aside). Its
// test reads the imports with go list and names every import that reaches
// up. From the bottom:
//
//  1. engine (engine/...): kernels, the model, the optimizer and the
//     sampler. It imports nothing of rlvr outside engine/.
//  2. helpers (internal/...): leaves that import nothing of rlvr outside
//     internal/: atomic files, JSON lines, HTTP retries, locks, secrets,
//     the checks of a command's flags, and where the shared data and the
//     real models are kept. A helper that serves one layer (a test model,
//     a test D_ME) lives in that layer, beside what it serves, not here.
//  3. formats (format/..., checkpoint/...): real files, read and
//     written, a model opened with its tokenizer, and the models tests
//     write (checkpoint/modeltest).
//  4. shared types (sample, backend, api/..., rundir): the contracts of
//     generation and of learning, the OpenAI and Tinker wire types, and
//     the run directory's files and records, with the loop's metric names
//     and the report columns and evaluation records the parts declare.
//  5. backends (backend/local, backend/remote, client/openai): the engine
//     behind those contracts, a Tinker-compatible service, and the client
//     of OpenAI-compatible servers.
//  6. servers (serve/...): the OpenAI API over local models, which the
//     experts and the consultation use, and the Tinker API.
//  7. tasks and verifiers (task/..., verify, worldmodel): examples,
//     datasets, the built-in world, answer checking.
//  8. evaluation and experts (eval, expert/...): evaluation of a policy,
//     the expert pool, the expert prompts (expert/prompt), and the
//     collection of MEML-GRPO's D_ME with its test writer
//     (expert/collect/dmetest).
//  9. methods (rollout, method/...): how questions become trajectories,
//     rewards and loss terms: the GRPO core in method, the registry of
//     guidance parts in method/part, and each paper's parts in a package
//     of its own (method/dapo, method/meml, method/eapo, method/mel), and
//     the probe of a world model before training (method/probe).
//  10. train (train): the training loop.
//  11. reports (report): a run's metrics, evaluations and samples as
//     tables, charts and a page, named by the metric names rundir keeps
//     and the columns and evaluation records each part declares there.
//  12. commands (cmd/..., bench, scripts/..., configs).
//
// Besides, the shared types, rollout, client/openai, task/..., verify and
// report depend on no engine package, not even through another package:
// what speaks only the contracts, or reads only a run's records, compiles
// no engine.
package layers

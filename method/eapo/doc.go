// Package eapo is EAPO (Expert-Assisted Policy Optimization): a policy that
// may consult expert models during its training episodes, and learns to
// need them less, so that it answers alone at test time.
//
// The consultation part (ConsultationConfig, Consultation) makes each
// rollout an episode of at most T(t) policy turns (§2.3). A turn may end
// in a consult action of up to k queries, each to a named expert of the
// pool or to whichever the pool picks (Format: the world's
// "?E1:19*3;E3:12+7?" lines, or a tag-and-JSON schema for chat models);
// the queries of every episode go to the pool at once (expert.Pool). An
// expert's reply is written into the history as environment tokens, which
// carry no weight in the loss, only if u < p(t) for a fresh u ~ U(0,1): a
// declined query costs no call, and a declined, failed or unreadable reply
// is written as unavailable, never a crash.
//
// The reward is the verifiable one on what the policy wrote (§2.1; an
// expert's reply never earns it anything) minus a penalty per consult
// action, answered or not (§1: "a penalty term on consultation"), which
// Consultation applies as a reward shaper. With it, a run's advantages are
// divided by the std of the verdicts rather than of the shaped rewards,
// so that the penalty stays small beside a right answer (docs/eapo.md).
//
// Annealing (§2.3): the acceptance p(t) falls (cosine from 1 to 0 by
// default) and the turn budget T(t) shrinks toward the evaluation's single
// turn, both Schedules of the step alone, so that a resumed run consults
// as the first would have; App. H's budget-matched rate is a Schedule too.
//
// The test-time workflows of Table 1 (the expert-assisted workflow and
// self-collaboration, the policy consulting copies of itself) run the same
// episodes without training, every reply accepted: Workflow, behind
// rlvr eval --consult.
package eapo

// Package dapo holds two parts of DAPO (Yu et al. 2025, "an open-source
// LLM RL system at scale") beside its objective, which is a member of the
// GRPO family (method.DAPO: clip-higher and token-mean aggregation):
//
//   - dynamic_sampling (DynamicSampling): a group whose answers are all
//     right or all wrong has no group-relative advantage, so it is kept
//     out of the objective's batch and more questions are drawn, up to
//     max_rounds extra rounds per step. Extra terms still see every group.
//   - overlong_penalty (OverlongPenalty): the soft overlong punishment, a
//     reward falling linearly from 0 to −1 over the last buffer tokens of
//     the response budget.
//
// Algorithm dapo runs both when a config lists no parts; the dapo preset
// names them.
package dapo

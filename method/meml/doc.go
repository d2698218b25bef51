// Package meml is MEML-GRPO (Heterogeneous Multi-Expert Mutual Learning
// for RLVR, arXiv 2508.09670): one policy asked under several expert
// prompts, whose experts learn from each other, with an SFT buffer of the
// problems they keep failing.
//
// Multi-expert fine-tuning (MEF, §3.1) trains the policy on the answers of
// several models, each behind its own expert prompt P_i ("You are Expert
// i, …", prompt.Paper). The answers come from rlvr experts collect
// (D_ME, package expert/collect); an sft run with data.dme and the
// expert_prompts part trains expert i's answers behind the variant E<i>
// alone (package train reads the file; method.Supervised trains it).
//
// Reinforced inter-expert learning (RIEL, §3.2) has three parts:
//
//   - expert_prompts: every question is asked under each expert prompt,
//     G answers each, and advantages stay inside each expert's group:
//     A = r − mean of the expert's group (eq. 5, advantage_norm: none),
//     trained by REINFORCE on max(A, 0) (eq. 6, policy_loss:
//     reinforce_positive) and averaged over the experts (eq. 7).
//   - mutual_learning (MutualLearning): per question, the expert with the
//     best mean reward E+ and the worst E− (eq. 8); along E+'s correct
//     answers O+, E− is pulled toward E+ by KL(π(·|Q,P+) ‖ π(·|Q,P−)) with
//     the teacher side held fixed. Eq. 9 as printed,
//     log p(O+|P−) − log p(O+|P+), would push p(O+|P−) down if minimized;
//     rlvr trains the intended direction, by the sequence-level estimate
//     (its gradient is the NLL of O+ under P−) or the exact per-position
//     KL. λ1 is its weight.
//   - hard_buffer (HardBuffer): an expert wrong on more than K of its G
//     answers adds (Q, P_i) → the reference solution with probability
//     K/G; a full buffer of B trains by NLL (eq. 10) and empties. λ2 is
//     its weight; with update: joint its term is in the step's one
//     gradient, L = L_GRPO + λ1·L_KL + λ2·L_SFT (eq. 11, §3.3).
//
// Inference (§4.3, Table 6) is one expert alone: every evaluation scores
// each expert prompt and the experts' majority vote (ExpertEvaluator), and
// at the end the expert best on validation is reported on the test split
// with Delta, the vote's accuracy minus its own.
//
// The meml-grpo preset is RIEL: the three parts on expert prompts E1-E3
// with eq. 5's advantage and eq. 6's loss.
package meml

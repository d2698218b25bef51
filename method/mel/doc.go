// Package mel is MEL (Internalizing Meta-Experience into Memory for Guided
// RL): the policy contrasts its own right and wrong answers, writes down
// what went wrong as a meta-experience, keeps those that help it answer
// again, and learns them by NLL beside the RL objective.
//
// The meta_experience part (MetaExperience) is an extra loss term on every
// scored group of a step:
//
//   - Contrast (eqs. 2-5): from each group whose answers are both right
//     and wrong (eq. 1's verdicts), pairs (y+, y−); given the instruction
//     I, the question x and the pair, the policy writes M = (bifurcation
//     step s*, critique C, heuristic H), all pairs in one batched pass.
//   - Replay validation (eq. 6): the question is asked again with M before
//     it as working memory; M is kept only if that answer verifies.
//   - Internalization (eq. 7): the NLL of each kept M given the
//     retrospective context [I, x, y+, y−], a token mean per M averaged
//     over the Ms, joins the base objective's gradient: J = J_RLVR +
//     J_MEL (eqs. 9-10), whatever the base (GRPO, RFT, REINFORCE++).
//
// The reflection protocol is a Format: the world's line format (R:/+/-,
// S:/C:/H:, M:) for tiny models, or the paper's wording of App. C
// (PaperInstruction, PaperValidation) for chat models, whose replies are
// read by their four sections.
package mel

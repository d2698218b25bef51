// Package optim updates model parameters from gradients: the AdamW
// optimizer, global gradient-norm clipping and learning-rate schedules.
//
// Conventions:
//
//   - Parameters and gradients each live in one flat []float32 slab of the
//     same length. The model owns both slabs; functions here update them in
//     place and never keep a reference past the call.
//   - The slab is described by a list of [Segment] values (one per named
//     tensor), which says where weight decay applies and lets errors name the
//     tensor at fault.
//   - An [AdamW] owns its moment slabs (m, v) and step counter; [AdamW.State]
//     and [AdamW.SetState] expose them for checkpointing.
//   - The hot paths (AdamW.Step, ClipGradNorm) do not allocate, so a training
//     loop produces no garbage per step.
//   - Results are deterministic: element updates are independent and norms
//     are summed in a fixed order.
package optim

// Package expert is everything that answers as an expert: the config of
// one expert (Config: an OpenAI-compatible endpoint, one of the built-in
// world's scripted styles, a fixed reply, a checkpoint, a copy of the
// policy, or the dataset's reference solution), the answerers that ask
// one (Endpoint over the OpenAI API, with retries, deadlines and failure
// kinds; Batched over a model in this process; Reference, an oracle that
// answers from the worked solution of the example being worked on), the
// pool that Open builds from configs, and the world's scripted and fixed
// experts served as models.
//
// EAPO's consultations (method/eapo: the protocol and the episodes) ask a
// Pool; MEML-GRPO's D_ME
// collection (expert/collect) asks its members one question per dataset
// example. Neither is known here.
package expert

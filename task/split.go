package task

import "hash/fnv"

// Fraction places an example's question at a point of [0, 1) that depends
// only on the question's text (its prompt and chat messages), not on the
// file or position it was read from. Splitting by fraction therefore puts
// a question on the same side wherever it appears: in a dataset, in the
// multi-expert answers collected for it, in the world's generated stream.
// MEML-GRPO's 20% warm-up / 80% RL split is InWarmup(e, 0.2).
func Fraction(e Example) float64 {
	// The top 53 bits give a uniform float64 in [0, 1).
	return float64(TextHash(e.Prompt, e.Messages)>>11) / (1 << 53)
}

// InWarmup says whether e is on the warm-up side of a split that reserves
// fraction of the questions for warm-up training.
func InWarmup(e Example, fraction float64) bool { return Fraction(e) < fraction }

// TextHash is an FNV-1a hash of a question's text: a prompt and chat
// messages, each role and content behind a zero byte.
func TextHash(prompt string, messages []Message) uint64 {
	h := fnv.New64a()
	h.Write([]byte(prompt))
	for _, m := range messages {
		h.Write([]byte{0})
		h.Write([]byte(m.Role))
		h.Write([]byte{0})
		h.Write([]byte(m.Content))
	}
	return h.Sum64()
}

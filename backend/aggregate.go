package backend

import "fmt"

// Aggregation is how per-token losses become one number. The learner sums;
// Aggregate turns the mode into per-token scale factors.
type Aggregation string

const (
	// TokenMean divides by the number of weighted tokens in the whole
	// mini-batch, so every token counts the same (DAPO).
	TokenMean Aggregation = "token-mean"
	// SeqMeanTokenMean averages each sequence over its tokens, then
	// sequences over the batch (GRPO). Long answers get less weight per
	// token: the length bias Dr.GRPO removes.
	SeqMeanTokenMean Aggregation = "seq-mean-token-mean"
	// SeqMeanTokenSumNorm sums each sequence's tokens and divides by a
	// constant (the generation budget) times the number of sequences
	// (Dr.GRPO).
	SeqMeanTokenSumNorm Aggregation = "seq-mean-token-sum-norm"
)

// ParseAggregation accepts the three named modes.
func ParseAggregation(s string) (Aggregation, error) {
	switch a := Aggregation(s); a {
	case TokenMean, SeqMeanTokenMean, SeqMeanTokenSumNorm:
		return a, nil
	}
	return "", fmt.Errorf("unknown loss aggregation %q (want %q, %q or %q)", s, TokenMean, SeqMeanTokenMean, SeqMeanTokenSumNorm)
}

// Aggregate multiplies the Weights of every datum in the mini-batch by the
// scale that makes the learner's sum equal the chosen aggregate. A token
// counts when its weight is non-zero. norm is Dr.GRPO's constant (used by
// SeqMeanTokenSumNorm only; it must be positive there). Datums with no
// weighted token are left as they are and not counted as sequences.
func Aggregate(batch []Datum, mode Aggregation, norm float32) error {
	var tokens, seqs int
	for i := range batch {
		if c := weighted(batch[i].Weights); c > 0 {
			tokens += c
			seqs++
		}
	}
	if seqs == 0 {
		return nil
	}
	for i := range batch {
		w := batch[i].Weights
		c := weighted(w)
		if c == 0 {
			continue
		}
		var scale float32
		switch mode {
		case TokenMean:
			scale = 1 / float32(tokens)
		case SeqMeanTokenMean:
			scale = 1 / (float32(seqs) * float32(c))
		case SeqMeanTokenSumNorm:
			if norm <= 0 {
				return fmt.Errorf("aggregation %s needs a positive normalizer, got %v", mode, norm)
			}
			scale = 1 / (float32(seqs) * norm)
		default:
			_, err := ParseAggregation(string(mode))
			return err
		}
		for j := range w {
			w[j] *= scale
		}
	}
	return nil
}

func weighted(w []float32) int {
	n := 0
	for _, v := range w {
		if v != 0 {
			n++
		}
	}
	return n
}

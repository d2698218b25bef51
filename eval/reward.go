package eval

import (
	"rlvr/task"
	"rlvr/verify"
)

// Reward is the verifiable reward of a response to an example: 1 when its
// answer is the gold one, else 0. ok is false when the example's gold
// answer cannot be read, so the reward does not apply (TRL's None).
func Reward(e task.Example, response string) (reward float64, ok bool) {
	switch e.Kind {
	case task.MultipleChoice:
		return verify.ScoreChoice(response, e.Answer, options(e))
	case task.YesNo:
		return verify.Score(response, e.Answer, verify.KindYesNo)
	}
	return verify.Score(response, e.Answer, verify.KindMath)
}

// Answer is the normalized final answer of a response, the key majority
// voting counts ("" when it has none).
func Answer(e task.Example, response string) string {
	switch e.Kind {
	case task.YesNo:
		if v, ok := verify.YesNo(response); ok {
			if v {
				return "yes"
			}
			return "no"
		}
		return ""
	case task.MultipleChoice:
		letter, _ := verify.Choice(response, options(e))
		return letter
	}
	a, _ := verify.Extract(response)
	return verify.Normalize(a)
}

// options are a multiple-choice example's choices, lettered a, b, c, …
func options(e task.Example) []verify.Option {
	opts := make([]verify.Option, len(e.Choices))
	for i, c := range e.Choices {
		opts[i] = verify.Option{Letter: string(rune('a' + i)), Text: c}
	}
	return opts
}

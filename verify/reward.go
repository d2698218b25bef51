package verify

import "strings"

// Kind selects how [Score] reads a gold answer and a response.
type Kind int

// The kinds of [Score].
const (
	// KindMath compares the response's extracted final answer with a gold
	// math answer.
	KindMath Kind = iota
	// KindChoice compares the letter a response chooses with a gold letter.
	KindChoice
	// KindYesNo compares a response's yes/no verdict with a gold yes/no.
	KindYesNo
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case KindMath:
		return "math"
	case KindChoice:
		return "choice"
	case KindYesNo:
		return "yes-no"
	}
	return "unknown"
}

// Score is a verifiable reward: 1 when the response's answer is equivalent to
// gold, 0 when it is not or when the response has no answer. ok is false when
// the reward does not apply because gold cannot be read (an empty math
// answer, a choice that is not a letter, a yes/no that is neither); the
// reward is then 0 and should be treated as missing rather than wrong, as
// TRL does with None rewards.
//
// For KindMath, gold may be a final answer ("18", "\frac{3}{4}") or a
// reference solution: when it has a "#### x" or a \boxed{…}, that answer is
// used. The response's answer is found with [Extract] and compared with
// [Equal]. For KindChoice, gold is a letter ("c", "(C)") and only letters are
// recognised in the response; use [ScoreChoice] to also accept an option's
// value. For KindYesNo, gold is yes, no, true or false.
func Score(response, gold string, kind Kind) (reward float64, ok bool) {
	switch kind {
	case KindMath:
		g := GoldAnswer(gold)
		if Normalize(g) == "" {
			return 0, false
		}
		a, rule := Extract(response)
		if rule == RuleNone {
			return 0, true
		}
		return reward01(Equal(a, g)), true
	case KindChoice:
		return ScoreChoice(response, gold, nil)
	case KindYesNo:
		g, ok := ParseBool(gold)
		if !ok {
			return 0, false
		}
		return reward01(CheckYesNo(response, g)), true
	}
	return 0, false
}

// ScoreChoice is [Score] for a multiple-choice question with its options, so
// that a response may also name the chosen option by its value.
func ScoreChoice(response, gold string, options []Option) (reward float64, ok bool) {
	if _, ok := GoldLetter(gold); !ok {
		return 0, false
	}
	return reward01(CheckChoice(response, gold, options)), true
}

// GoldAnswer returns the final answer of a gold string: the "#### x" or
// \boxed{…} answer of a reference solution, or the trimmed string itself.
func GoldAnswer(gold string) string {
	a, rule := ExtractWith(gold, ExtractOptions{})
	if rule == RuleHashes || rule == RuleBoxed {
		return a
	}
	return strings.TrimSpace(gold)
}

func reward01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

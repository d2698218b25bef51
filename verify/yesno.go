package verify

import "strings"

// boolWord maps a yes/no word to its value.
func boolWord(w string) (value, ok bool) {
	switch strings.ToLower(w) {
	case "yes", "true":
		return true, true
	case "no", "false":
		return false, true
	}
	return false, false
}

// words splits s into runs of ASCII letters.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r > 0x7f || !isLetter(byte(r))
	})
}

// firstBool returns the value of the first word of s when it is yes, no,
// true or false.
func firstBool(s string) (value, ok bool) {
	w := words(s)
	if len(w) == 0 {
		return false, false
	}
	return boolWord(w[0])
}

// YesNo returns the yes/no verdict of a response: yes and true are true, no
// and false are false, in any case. In order it reads the first word of the
// extracted final answer (\boxed{yes}, "the answer is no"), the first word of
// the response ("Yes, because …"), then the last yes/no/true/false word of
// the response. It reports false when there is none.
func YesNo(response string) (answer, ok bool) {
	text := tail(response, MaxInput)
	if a, rule := ExtractWith(text, ExtractOptions{}); rule != RuleNone {
		if v, ok := firstBool(canon(a)); ok {
			return v, true
		}
	}
	w := words(text)
	if len(w) > 0 {
		if v, ok := boolWord(w[0]); ok {
			return v, true
		}
	}
	for i := len(w) - 1; i >= 0; i-- {
		if v, ok := boolWord(w[i]); ok {
			return v, true
		}
	}
	return false, false
}

// ParseBool reads a gold yes/no answer: exactly one of yes, no, true or
// false (any case, surrounding spaces, punctuation and LaTeX text wrappers
// ignored); false when gold is anything else.
func ParseBool(gold string) (value, ok bool) {
	if len(gold) > maxPhrase {
		return false, false
	}
	w := words(canon(gold))
	if len(w) != 1 {
		return false, false
	}
	return boolWord(w[0])
}

// CheckYesNo reports whether a response's yes/no verdict is gold.
func CheckYesNo(response string, gold bool) bool {
	v, ok := YesNo(response)
	return ok && v == gold
}

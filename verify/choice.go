package verify

import (
	"errors"
	"regexp"
	"strings"
)

// Option is one choice of a multiple-choice question.
type Option struct {
	// Letter is the option's lower-case letter: "a", "b", …
	Letter string
	// Text is the option's value as written, such as "12" or "15 cm".
	Text string
}

// ErrNoOptions is returned by [ParseOptions] when fewer than two options are
// found.
var ErrNoOptions = errors.New("verify: no multiple-choice options found")

// maxOptions bounds the options ParseOptions reads.
const maxOptions = 26

// ParseOptions parses a multiple-choice options string in MathQA's format,
// "a ) 12 , b ) 15 , c ) 18", also written as a Python list
// "['a ) 12', 'b ) 15']" or with parenthesized letters "(a) 12 (b) 15".
// Letters must come in order from a; they are returned in lower case. A
// value that repeats its own letter ("a ) a ) 4 inches") is cleaned up.
func ParseOptions(s string) ([]Option, error) {
	s = tail(s, MaxAnswer)
	type mark struct{ start, end int }
	var marks []mark
	want := byte('a')
	for i := 0; i < len(s) && len(marks) < maxOptions; i++ {
		if end, ok := markerAt(s, i, want); ok {
			marks = append(marks, mark{i, end})
			want++
			i = end - 1
		}
	}
	if len(marks) < 2 {
		return nil, ErrNoOptions
	}
	opts := make([]Option, len(marks))
	for k, m := range marks {
		end := len(s)
		if k+1 < len(marks) {
			end = marks[k+1].start
		}
		v := strings.TrimSpace(s[m.end:end])
		v = strings.TrimRight(v, " ,'\"")
		if k+1 == len(marks) {
			v = strings.TrimRight(v, " ]'\"")
		}
		v = strings.TrimSpace(strings.TrimLeft(v, "'\""))
		letter := string('a' + byte(k))
		if e, ok := markerAt(v, 0, letter[0]); ok {
			v = strings.TrimSpace(v[e:])
		}
		opts[k] = Option{Letter: letter, Text: v}
	}
	return opts, nil
}

// markerAt reports whether an option marker for letter want ("a )", "a)",
// "(a)", "A )") starts at s[i], and returns the index after it. The marker
// must start the string or follow a separator, so that "( a + b )" inside a
// value is not taken for one.
func markerAt(s string, i int, want byte) (int, bool) {
	j := i
	paren := j < len(s) && s[j] == '('
	if paren {
		j++
	}
	if j >= len(s) || lower(s[j]) != want {
		return 0, false
	}
	j++
	if j < len(s) && s[j] == ' ' {
		j++
	}
	if j >= len(s) || s[j] != ')' {
		return 0, false
	}
	// What precedes the marker.
	k := i - 1
	for k >= 0 && s[k] == ' ' {
		k--
	}
	if k >= 0 && !strings.ContainsRune(",['\";\n", rune(s[k])) && !(paren && k < i-1) {
		return 0, false
	}
	return j + 1, true
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// letterSet lists the letters a response may choose: those of the options,
// or a to e without options.
func letterSet(options []Option) string {
	if len(options) == 0 {
		return "abcde"
	}
	var b strings.Builder
	for _, o := range options {
		if len(o.Letter) == 1 {
			b.WriteByte(lower(o.Letter[0]))
		}
	}
	return b.String()
}

var (
	letterParen = regexp.MustCompile(`^\(\s?([a-z])\s?\)`)
	letterClose = regexp.MustCompile(`^([a-z]) ?\)`)
	letterAlone = regexp.MustCompile(`^([a-z]) ?[.:]?$`)
	letterDot   = regexp.MustCompile(`^([a-z]) ?[.:] `)
	letterNote  = regexp.MustCompile(`^([a-z]) \(`)
	letterBrack = regexp.MustCompile(`^\[ ?([a-z]) ?\]`)
	choicePrefs = []string{"the", "correct", "final", "answer", "option", "choice", "is", ":", "=", "-"}
)

// letterOf reads a chosen letter from a short answer: "c", "(C)", "c )
// 18", "option c", "\text{(C)}".
func letterOf(ans, letters string) (string, bool) {
	if len(ans) > maxPhrase {
		return "", false
	}
	s := strings.ToLower(canon(ans))
	for changed := true; changed; {
		changed = false
		s = strings.TrimSpace(s)
		for _, p := range choicePrefs {
			if strings.HasPrefix(s, p) && (len(s) == len(p) || !isLetter(s[len(p)]) || !isLetter(p[0])) {
				s = s[len(p):]
				changed = true
			}
		}
	}
	for _, re := range []*regexp.Regexp{letterParen, letterClose, letterAlone, letterDot, letterNote, letterBrack} {
		if m := re.FindStringSubmatch(s); m != nil && strings.Contains(letters, m[1]) {
			return m[1], true
		}
	}
	return "", false
}

// valueChoice returns the letter of the only option whose value equals ans.
func valueChoice(ans string, options []Option) (string, bool) {
	found := ""
	for _, o := range options {
		if Equal(ans, o.Text) {
			if found != "" && found != o.Letter {
				return "", false
			}
			found = o.Letter
		}
	}
	return found, found != ""
}

var (
	choiceWord    = regexp.MustCompile(`(?i)\b(?:option|choice)\s*[:(]?\s*\(?([a-z])\b`)
	choiceIs      = regexp.MustCompile(`(?i)(?:^|[\s(\[])([a-z])\)?\s+is\s+(?:the\s+)?(?:correct|right|answer)\b`)
	choiceBracket = regexp.MustCompile(`\[\s?([a-zA-Z])\s?\]`)
	choiceParen   = regexp.MustCompile(`\(([a-zA-Z])\)`)
	choiceTrailer = regexp.MustCompile(`(?:^|[\s:=(])([a-zA-Z])\s*[.)"'*]*\s*$`)
)

// Choice returns the lower-case letter a response chooses among options (or
// among a to e when options is empty), and false when it chooses none. In
// order it looks at the extracted final answer (a letter such as "c",
// "(c)", "option c", or an option's value), the whole response when it is
// that short, the last "option c" or "(c)", a letter ending the response,
// and the last number when it equals exactly one option's value.
func Choice(response string, options []Option) (letter string, ok bool) {
	text := tail(response, MaxInput)
	letters := letterSet(options)
	if a, rule := ExtractWith(text, ExtractOptions{}); rule != RuleNone {
		if l, ok := letterOf(a, letters); ok {
			return l, true
		}
		if l, ok := valueChoice(a, options); ok {
			return l, true
		}
	}
	if t := strings.TrimSpace(text); len(t) <= 64 {
		if l, ok := letterOf(t, letters); ok {
			return l, true
		}
		if l, ok := valueChoice(t, options); ok {
			return l, true
		}
	}
	for _, re := range []*regexp.Regexp{choiceWord, choiceIs, choiceParen, choiceBracket, choiceTrailer} {
		ms := re.FindAllStringSubmatch(text, -1)
		for i := len(ms) - 1; i >= 0; i-- {
			if l := strings.ToLower(ms[i][1]); strings.Contains(letters, l) {
				return l, true
			}
		}
	}
	if n, ok := lastNumber(text); ok {
		if l, ok := valueChoice(n, options); ok {
			return l, true
		}
	}
	return "", false
}

// GoldLetter reads a gold multiple-choice letter such as "c", "C" or "(c)",
// returned in lower case; false when gold is not a letter.
func GoldLetter(gold string) (string, bool) {
	return letterOf(gold, "abcdefghijklmnopqrstuvwxyz")
}

// CheckChoice reports whether a response chooses the gold letter among
// options (which may be nil: then only letters are recognised).
func CheckChoice(response, gold string, options []Option) bool {
	g, ok := GoldLetter(gold)
	if !ok {
		return false
	}
	c, ok := Choice(response, options)
	return ok && c == g
}

package verify

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// MaxInput is how many bytes of a text extraction considers: a longer text is
// cut to its last MaxInput bytes, where final answers are.
const MaxInput = 64 << 10

// maxCandidates bounds how many "####" candidates extraction tries.
const maxCandidates = 64

// maxPhrase bounds the length of an answer taken from an "answer is" phrase.
const maxPhrase = 512

// Rule names the extraction rule that produced an answer.
type Rule int

// The extraction rules, in priority order.
const (
	// RuleNone means no rule matched: there is no answer.
	RuleNone Rule = iota
	// RuleHashes is GSM8K's "#### x": the last one whose x normalizes to a
	// number or an expression.
	RuleHashes
	// RuleBoxed is the last complete \boxed{…}, \fbox{…} or \framebox{…},
	// nested braces included.
	RuleBoxed
	// RuleAnswerPhrase is the last "the answer is …", "answer: …",
	// "answer = …" or "answer should be …".
	RuleAnswerPhrase
	// RuleLastNumber is the last number in the text, the fallback.
	RuleLastNumber
)

// String returns the rule's name.
func (r Rule) String() string {
	switch r {
	case RuleNone:
		return "none"
	case RuleHashes:
		return "hashes"
	case RuleBoxed:
		return "boxed"
	case RuleAnswerPhrase:
		return "answer-phrase"
	case RuleLastNumber:
		return "last-number"
	}
	return "unknown"
}

// ExtractOptions controls [ExtractWith]. Every field is taken literally: start
// from [DefaultExtractOptions] and override what you need.
type ExtractOptions struct {
	// LastNumber enables the last-number fallback when no other rule
	// matches.
	LastNumber bool
}

// DefaultExtractOptions returns the options [Extract] uses: the last-number
// fallback is on.
func DefaultExtractOptions() ExtractOptions {
	return ExtractOptions{LastNumber: true}
}

// Extract returns the final answer of a solution text and the rule that
// found it, with [DefaultExtractOptions]. It returns "" and [RuleNone] when
// there is no answer.
func Extract(text string) (answer string, rule Rule) {
	return ExtractWith(text, DefaultExtractOptions())
}

// ExtractWith returns the final answer of a solution text and the rule that
// found it. The rules are tried in priority order: "#### x" (GSM8K), the
// last \boxed{…}, the last "the answer is …" phrase, then, if enabled, the
// last number. Only the last [MaxInput] bytes of text are considered.
func ExtractWith(text string, opts ExtractOptions) (answer string, rule Rule) {
	text = tail(text, MaxInput)
	if a, ok := extractHashes(text); ok {
		return a, RuleHashes
	}
	if a, ok := extractBoxed(text); ok {
		return a, RuleBoxed
	}
	if a, ok := extractPhrase(text); ok {
		return a, RuleAnswerPhrase
	}
	if opts.LastNumber {
		if a, ok := lastNumber(text); ok {
			return a, RuleLastNumber
		}
	}
	return "", RuleNone
}

// tail returns the last n bytes of s, starting on a rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(s[i]) {
			return s[i:]
		}
	}
	return s
}

// extractHashes finds the last "#### x" whose x is an answer (a number, an
// expression or a structure of them), so that a Markdown heading such as
// "#### Step 2" is not taken for one.
func extractHashes(text string) (string, bool) {
	end := len(text)
	for tries := 0; tries < maxCandidates; tries++ {
		i := strings.LastIndex(text[:end], "####")
		if i < 0 {
			return "", false
		}
		end = i
		for end > 0 && text[end-1] == '#' {
			end--
		}
		rest := text[i+4:]
		rest = strings.TrimLeft(rest, "# \t")
		if len(rest) > maxPhrase {
			rest = rest[:maxPhrase]
		}
		if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
			rest = rest[:nl]
		}
		rest = strings.TrimSpace(rest)
		if rest != "" && isMath(rest) {
			return rest, true
		}
	}
	return "", false
}

// isMath reports whether an answer normalizes to something the evaluator
// understands: a number or an expression, alone or in a structure.
func isMath(a string) bool {
	v := analyze(a)
	if v == nil {
		return false
	}
	return anyMath(v)
}

func anyMath(v *value) bool {
	if v.kind == 's' {
		return v.num != nil || v.ex != nil
	}
	for _, e := range v.elems {
		if anyMath(e) {
			return true
		}
	}
	return false
}

var boxNames = []string{`\boxed`, `\fbox`, `\framebox`}

// extractBoxed returns the content of the last complete, non-empty box.
func extractBoxed(text string) (string, bool) {
	if !strings.Contains(text, "box") {
		return "", false
	}
	match := matchBraces(text)
	best, bestAt := "", -1
	for _, name := range boxNames {
		end := len(text)
		for {
			i := strings.LastIndex(text[:end], name)
			if i < 0 || i <= bestAt {
				break
			}
			end = i
			if c, ok := boxContent(text, i+len(name), match); ok {
				best, bestAt = c, i
				break
			}
		}
	}
	return best, bestAt >= 0
}

// boxContent reads the argument of a box command whose name ends at j.
func boxContent(text string, j int, match []int) (string, bool) {
	if j < len(text) && isLetter(text[j]) {
		return "", false // \boxedfoo is another command
	}
	k := j
	for k < len(text) && (text[k] == ' ' || text[k] == '\t') {
		k++
	}
	if k < len(text) && text[k] == '[' { // \framebox[width]{…}
		if e := strings.IndexByte(text[k:], ']'); e >= 0 && e < 64 {
			k += e + 1
		}
	}
	if k < len(text) && text[k] == '{' {
		m := match[k]
		if m < 0 {
			return "", false
		}
		c := strings.TrimSpace(text[k+1 : m])
		return c, c != ""
	}
	if k == j {
		return "", false
	}
	// "\boxed 5": up to the end of the math or of the line.
	e := k
	for e < len(text) && text[e] != '$' && text[e] != '\n' && e-k < maxPhrase {
		e++
	}
	c := strings.TrimSpace(text[k:e])
	return c, c != ""
}

var answerPhrase = regexp.MustCompile(`(?i)\banswer(?:\s*\*\*)?\s*(?:is\b\s*:?|:|=|(?:should|would|will|must) be\b)`)

// extractPhrase returns the answer after the last "answer is", "answer:" or
// "answer =".
func extractPhrase(text string) (string, bool) {
	locs := answerPhrase.FindAllStringIndex(text, -1)
	for i := len(locs) - 1; i >= 0 && i >= len(locs)-maxCandidates; i-- {
		rest := text[locs[i][1]:]
		if a := phraseAnswer(rest); a != "" && !prose(a) {
			return a, true
		}
	}
	return "", false
}

// prose reports whether what follows "the answer is" is a sentence rather
// than an answer: no digit, and five words or more ("the final answer is
// given as a number after ####") or the word "answer" itself ("this answer
// is the correct answer"). The phrase then states no answer.
func prose(a string) bool {
	if strings.ContainsAny(a, "0123456789") {
		return false
	}
	words := strings.Fields(a)
	if len(words) >= 5 {
		return true
	}
	for _, w := range words {
		if strings.EqualFold(strings.Trim(w, `.,;:!?"'*`), "answer") {
			return true // "this answer is the correct answer"
		}
	}
	return false
}

// phraseAnswer cuts the answer out of the text that follows "answer is".
func phraseAnswer(rest string) string {
	if len(rest) > maxPhrase {
		rest = rest[:maxPhrase]
	}
	rest = strings.TrimLeft(rest, " \t:*")
	if nl := strings.IndexByte(rest, '\n'); nl >= 0 {
		rest = rest[:nl]
	}
	for _, d := range [][2]string{{"$$", "$$"}, {"$", "$"}, {`\(`, `\)`}, {`\[`, `\]`}} {
		if strings.HasPrefix(rest, d[0]) {
			if e := strings.Index(rest[len(d[0]):], d[1]); e >= 0 {
				return strings.TrimSpace(rest[len(d[0]) : len(d[0])+e])
			}
		}
	}
	// The sentence ends at a period that follows a word or number and is
	// followed by a space or the end ("5." or "5. Next"), not at a spaced
	// " . " as in MathQA's "rs . 1300".
	for i := 1; i < len(rest); i++ {
		if rest[i] == '.' && rest[i-1] != ' ' && (i+1 == len(rest) || rest[i+1] == ' ' || rest[i+1] == '\t') {
			rest = rest[:i]
			break
		}
	}
	// What follows a connective explains the answer rather than states it.
	for _, c := range connectives {
		if i := strings.Index(rest, c); i > 0 {
			rest = rest[:i]
		}
	}
	rest = strings.TrimSpace(strings.Trim(strings.TrimSpace(rest), "*"))
	// Filler words: "the answer is therefore 3".
	for _, w := range fillers {
		if len(rest) > len(w) && strings.EqualFold(rest[:len(w)], w) && rest[len(w)] == ' ' {
			rest = strings.TrimSpace(rest[len(w):])
		}
	}
	return rest
}

var connectives = []string{" because ", " since ", ", which ", ", as ", ", so ", ", because ", ", since "}

var fillers = []string{"therefore", "thus", "hence", "then", "so", "simply", "just", "exactly", "approximately", "about"}

var fracNumber = regexp.MustCompile(`^-?\\[dtc]?frac\{\d+\}\{\d+\}`)

// lastNumber returns the last number of the text: an integer, a decimal, a
// number with thousands separators, a fraction a/b or \frac{a}{b} (\dfrac,
// \tfrac, \cfrac), a root \sqrt{n} with its coefficient, with its sign and
// its percent sign.
func lastNumber(text string) (string, bool) {
	i := len(text) - 1
	for i >= 0 {
		if !isDigit(text[i]) {
			i--
			continue
		}
		// text[i] ends a digit run; find the start of the number.
		end := i + 1
		start := i
		for start > 0 && (isDigit(text[start-1]) ||
			(text[start-1] == '.' || text[start-1] == ',' || text[start-1] == '/') && start > 1 && isDigit(text[start-2])) {
			start--
		}
		if start > 0 && text[start-1] == '.' {
			start-- // .5
		}
		if label(text, start) {
			i = start - 1
			continue
		}
		if h, ok := clockHour(text, start, end); ok {
			return h, true
		}
		// A square root \sqrt{n}, with its coefficient: "2\sqrt{3}".
		if end < len(text) && text[end] == '}' && strings.HasSuffix(text[:start], `\sqrt{`) {
			s := start - len(`\sqrt{`)
			for s > 0 && isDigit(text[s-1]) {
				s--
			}
			if s > 0 && text[s-1] == '-' {
				s--
			}
			return text[s : end+1], true
		}
		start = spacedThousands(text, start, end)
		num := text[start:end]
		num = fixSeparators(num)
		if strings.HasPrefix(text[end:], "%") || strings.HasPrefix(text[end:], `\%`) {
			num += text[end : end+strings.IndexByte(text[end:], '%')+1] // "25%": a percentage
		}
		// A LaTeX fraction \frac{a}{b} ending here.
		if b := strings.LastIndex(text[max(0, start-40):start], `frac{`); b >= 0 {
			b += max(0, start-40)
			s := b - 1
			for s > 0 && (text[s] == 'd' || text[s] == 't' || text[s] == 'c') {
				s--
			}
			if s >= 0 && text[s] == '\\' {
				if s > 0 && text[s-1] == '-' {
					s--
				}
				if m := fracNumber.FindString(text[s:]); m != "" && s+len(m) == end+1 {
					return m, true
				}
			}
		}
		if start > 0 && text[start-1] == '-' && (start == 1 || !isLetter(text[start-2]) && !isDigit(text[start-2]) && text[start-2] != ')') {
			num = "-" + num
		}
		if num != "" && num != "." {
			return num, true
		}
		i = start - 1
	}
	return "", false
}

// label reports whether the number starting at text[start] is part of a
// name rather than a quantity: glued to the word before it ("vitamin D3",
// "mp3", "H2O"; a LaTeX command such as "\sqrt2" is not a word) or after a
// number sign ("horse #12").
func label(text string, start int) bool {
	if start == 0 {
		return false
	}
	if text[start-1] == '#' {
		return true
	}
	w := start
	for w > 0 && isLetter(text[w-1]) {
		w--
	}
	if w == start {
		return false
	}
	return w == 0 || text[w-1] != '\\' && !isDigit(text[w-1])
}

// clockHour reads a clock time "h:mm" ending at text[end]: the last number
// is the time, not its minutes. A time on the hour, "2:00 pm", is its hour,
// "2"; another is returned whole, "2:30", and equals no number.
func clockHour(text string, start, end int) (string, bool) {
	if end-start != 2 || start < 2 || text[start-1] != ':' || !isDigit(text[start-2]) {
		return "", false
	}
	h := start - 2
	if h > 0 && isDigit(text[h-1]) {
		h--
	}
	if h > 0 && (isDigit(text[h-1]) || text[h-1] == ':' || text[h-1] == '.') {
		return "", false // 123:45, 1:02:03, 1.5:30
	}
	if text[start:end] == "00" {
		return text[h : start-1], true
	}
	return text[h:end], true
}

// spacedThousands extends the number text[start:end] to the left over
// thousands groups separated by single spaces, "118 000" or "5 650 000",
// and returns its new start: the number must begin with a group of exactly
// three digits, and only a group of 1 to 3 digits that no other digit or
// separator precedes can lead it.
func spacedThousands(text string, start, end int) int {
	for {
		g := start
		for g < end && isDigit(text[g]) {
			g++
		}
		if g-start != 3 || g < end && text[g] == ',' {
			return start
		}
		if start < 2 || text[start-1] != ' ' || !isDigit(text[start-2]) {
			return start
		}
		p := start - 1
		for p > 0 && isDigit(text[p-1]) {
			p--
		}
		n := start - 1 - p
		if n > 3 || p > 0 && (text[p-1] == '.' || text[p-1] == ',') {
			return start
		}
		start = p
		if n < 3 { // a shorter group leads the number
			return start
		}
	}
}

// fixSeparators keeps a number's commas only when they are valid thousands
// separators; otherwise it keeps the part after the last comma ("1,2" is
// two numbers). Trailing dots and slashes are dropped.
func fixSeparators(num string) string {
	num = strings.TrimRight(num, "./,")
	if !strings.Contains(num, ",") {
		return num
	}
	intPart := num
	if d := strings.IndexAny(num, "./"); d >= 0 {
		intPart = num[:d]
	}
	groups := strings.Split(intPart, ",")
	ok := len(groups[0]) >= 1 && len(groups[0]) <= 3
	for _, g := range groups[1:] {
		ok = ok && len(g) == 3
	}
	if ok {
		return num
	}
	return num[strings.LastIndexByte(num, ',')+1:]
}

package verify

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Internal markers for the set braces \{ and \}. Control characters in the
// input are turned into spaces first, so the markers cannot collide with it.
const (
	setOpen  = '\x01'
	setClose = '\x02'
)

// maxGroupDepth bounds the recursion of the argument canonicalization.
const maxGroupDepth = 32

var unicodeReplacer = strings.NewReplacer(
	"\u2212", "-", // minus sign
	"\u2013", "-", // en dash
	"\u2014", "-", // em dash
	"\u00d7", `\times `,
	"\u00b7", `\cdot `,
	"\u22c5", `\cdot `,
	"\u2217", "*",
	"\u00f7", "/",
	"\u03c0", `\pi `,
	"\u221a", `\sqrt`,
	"\u00b0", "",
	"\u00b2", "^2",
	"\u00b3", "^3",
	"\u221e", `\infty `,
	"\u00b1", `\pm `,
	"\u222a", `\cup `,
	"\u2264", `\le `,
	"\u2265", `\ge `,
	"\u00bd", `\frac{1}{2}`,
	"\u00bc", `\frac{1}{4}`,
	"\u00be", `\frac{3}{4}`,
	"\u00a0", " ",
	"\u2009", " ",
	"\u202f", " ",
	"\u20ac", "", // euro sign
	"\u00a3", "", // pound sign
	"\u00a5", "", // yen sign
	"\u20b9", "", // rupee sign
	// Degree signs and thousands separators spelled in LaTeX.
	`^{\circ}`, "",
	`^\circ`, "",
	`{,}`, ",",
)

// commaBang matches LaTeX thousands separators such as "10,\!080" and
// "11,\! 111".
var commaBang = regexp.MustCompile(`,\s*\\!\s*`)

// calcAnnotation matches GSM8K's calculator annotations, <<16-3-4=9>>.
var calcAnnotation = regexp.MustCompile(`<<[^<>]{0,200}>>`)

// wrappers are commands whose braced argument is kept as plain text with
// spaces around it: \text{ cm} becomes " cm ", \boxed{5} becomes " 5 ".
var wrappers = map[string]bool{
	"text": true, "textbf": true, "textit": true, "textrm": true, "textnormal": true,
	"texttt": true, "textsf": true, "textup": true, "textmd": true, "mathrm": true,
	"mathbf": true, "mathit": true, "mathsf": true, "mathtt": true, "mathbb": true,
	"mathcal": true, "mathnormal": true, "mbox": true, "hbox": true, "operatorname": true,
	"boldsymbol": true, "bm": true, "emph": true, "boxed": true, "fbox": true,
	"framebox": true, "underline": true,
}

// dropped are commands that only affect spacing or sizing.
var dropped = map[string]bool{
	"left": true, "right": true, "big": true, "Big": true, "bigg": true, "Bigg": true,
	"bigl": true, "bigr": true, "Bigl": true, "Bigr": true, "biggl": true, "biggr": true,
	"Biggl": true, "Biggr": true, "middle": true, "displaystyle": true, "textstyle": true,
	"scriptstyle": true, "limits": true, "nolimits": true, "quad": true, "qquad": true,
	"hfill": true, "space": true, "enspace": true, "thinspace": true, "negthinspace": true,
}

// renamed maps commands to their canonical spelling.
var renamed = map[string]string{
	"dfrac": `\frac`, "tfrac": `\frac`, "cfrac": `\frac`, "frac": `\frac`,
	"dbinom": `\binom`, "tbinom": `\binom`, "binom": `\binom`,
	"cdot": "*", "times": "*", "ast": "*", "div": "/",
	"circ": "", "degree": "", "degrees": "",
	"leq": `\le`, "le": `\le`, "leqslant": `\le`, "geq": `\ge`, "ge": `\ge`, "geqslant": `\ge`,
	"neq": `\ne`, "ne": `\ne`, "ldots": `\dots`, "cdots": `\dots`, "dots": `\dots`,
	"emptyset": `\emptyset`, "varnothing": `\emptyset`, "infin": `\infty`, "infty": `\infty`,
	"lbrace": string(setOpen), "rbrace": string(setClose),
	"varpi": `\pi`,
}

// canon rewrites an answer into a canonical LaTeX-ish string: math
// delimiters, dollar signs, sizing and spacing commands are dropped, text
// wrappers are unwrapped, fraction and root arguments get braces, thousands
// separators are removed and whitespace is collapsed. The result keeps single
// spaces, which later steps use to recognise trailing units.
func canon(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "")
	}
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if strings.Contains(s, "<<") {
		s = calcAnnotation.ReplaceAllString(s, " ")
	}
	s = commaBang.ReplaceAllString(s, ",")
	s = unicodeReplacer.Replace(s)
	s = rewriteCommands(s)
	s = canonArgs(s, 0)
	s = dropThousands(s)
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, " ^", "^")
	for len(s) > 0 {
		c := s[len(s)-1]
		if c == '.' || c == ',' || c == ';' || c == ' ' {
			s = s[:len(s)-1]
			continue
		}
		break
	}
	return strings.TrimLeft(s, " ")
}

// matchBraces returns, for every unescaped '{' in s, the index of its
// matching '}', and -1 at every other index. It runs in linear time.
func matchBraces(s string) []int {
	match := make([]int, len(s))
	for i := range match {
		match[i] = -1
	}
	var stack []int
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++ // skip the escaped character: \{ and \} are not groups
		case '{':
			stack = append(stack, i)
		case '}':
			if n := len(stack); n > 0 {
				match[stack[n-1]] = i
				stack = stack[:n-1]
			}
		}
	}
	return match
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// rewriteCommands performs the one-pass command rewriting of canon.
func rewriteCommands(s string) string {
	match := matchBraces(s)
	closeRep := make(map[int]string)
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c == '}' {
			if rep, ok := closeRep[i]; ok {
				b.WriteString(rep)
				i++
				continue
			}
		}
		if c == '$' {
			i++
			continue
		}
		if c != '\\' {
			b.WriteByte(c)
			i++
			continue
		}
		j := i + 1
		if j >= len(s) {
			break
		}
		if !isLetter(s[j]) {
			switch s[j] {
			case '!', ',':
			case ';', ':', ' ', '>':
				b.WriteByte(' ')
			case '$', '(', ')', '[', ']':
			case '{':
				b.WriteByte(setOpen)
			case '}':
				b.WriteByte(setClose)
			case '%':
				b.WriteByte('%')
			case '\\':
				b.WriteString(`\\`)
			default:
				b.WriteByte(s[j])
			}
			i = j + 1
			continue
		}
		k := j
		for k < len(s) && isLetter(s[k]) {
			k++
		}
		name := s[j:k]
		i = k
		switch {
		case dropped[name]:
			// \left. and \right. are invisible delimiters.
			if name == "left" || name == "right" {
				m := i
				for m < len(s) && s[m] == ' ' {
					m++
				}
				if m < len(s) && s[m] == '.' {
					i = m + 1
				}
			}
			b.WriteByte(' ')
		case wrappers[name]:
			m := i
			for m < len(s) && s[m] == ' ' {
				m++
			}
			if name == "framebox" && m < len(s) && s[m] == '[' {
				if e := strings.IndexByte(s[m:], ']'); e >= 0 {
					m += e + 1
				}
			}
			b.WriteByte(' ')
			if m < len(s) && s[m] == '{' && match[m] >= 0 {
				closeRep[match[m]] = " "
				i = m + 1
			}
		default:
			rep, ok := renamed[name]
			if !ok {
				rep = `\` + name
			}
			b.WriteString(rep)
			if strings.HasPrefix(rep, `\`) && i < len(s) && isLetter(s[i]) {
				b.WriteByte(' ')
			}
		}
	}
	return b.String()
}

// readArg reads one macro argument of s starting at i (after optional
// spaces): a braced group, a single digit or letter, or a command name. It
// returns the argument's text without braces and the index after it.
func readArg(s string, i int, match []int) (arg string, next int, ok bool) {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if i >= len(s) {
		return "", i, false
	}
	switch c := s[i]; {
	case c == '{':
		if m := match[i]; m >= 0 {
			return s[i+1 : m], m + 1, true
		}
		return "", i, false
	case isDigit(c) || isLetter(c):
		return s[i : i+1], i + 1, true
	case c == '\\':
		k := i + 1
		for k < len(s) && isLetter(s[k]) {
			k++
		}
		if k == i+1 {
			return "", i, false
		}
		return s[i:k], k, true
	}
	return "", i, false
}

// canonArgs gives \frac, \binom and \sqrt braced arguments (\frac34 becomes
// \frac{3}{4}, \sqrt2 becomes \sqrt{2}) and drops the braces around
// single-character exponents and subscripts (x^{2} becomes x^2).
func canonArgs(s string, depth int) string {
	if depth > maxGroupDepth || !strings.ContainsAny(s, `\^_`) {
		return s
	}
	match := matchBraces(s)
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\' && (strings.HasPrefix(s[i:], `\frac`) || strings.HasPrefix(s[i:], `\binom`)) &&
			!(i+5 < len(s) && isLetter(s[i+5]) && strings.HasPrefix(s[i:], `\frac`)) &&
			!(i+6 < len(s) && isLetter(s[i+6]) && strings.HasPrefix(s[i:], `\binom`)):
			name := `\frac`
			if s[i+1] == 'b' {
				name = `\binom`
			}
			j := i + len(name)
			a1, j1, ok1 := readArg(s, j, match)
			if !ok1 {
				b.WriteString(name)
				i = j
				continue
			}
			a2, j2, ok2 := readArg(s, j1, match)
			if !ok2 {
				b.WriteString(name)
				i = j
				continue
			}
			b.WriteString(name + "{" + canonArgs(a1, depth+1) + "}{" + canonArgs(a2, depth+1) + "}")
			i = j2
		case c == '\\' && strings.HasPrefix(s[i:], `\sqrt`) && !(i+5 < len(s) && isLetter(s[i+5])):
			j := i + 5
			b.WriteString(`\sqrt`)
			for j < len(s) && s[j] == ' ' {
				j++
			}
			if j < len(s) && s[j] == '[' {
				e := strings.IndexByte(s[j:], ']')
				if e < 0 {
					i = j
					continue
				}
				b.WriteString("[" + canonArgs(s[j+1:j+e], depth+1) + "]")
				j += e + 1
			}
			a, j1, ok := readArg(s, j, match)
			if !ok {
				i = j
				continue
			}
			b.WriteString("{" + canonArgs(a, depth+1) + "}")
			i = j1
		case c == '^' || c == '_':
			j := i + 1
			for j < len(s) && s[j] == ' ' {
				j++
			}
			if j < len(s) && s[j] == '{' && match[j] >= 0 {
				inner := strings.TrimSpace(canonArgs(s[j+1:match[j]], depth+1))
				switch len(inner) {
				case 0: // an emptied exponent, as in ^{ \circ }
				case 1:
					b.WriteString(string(c) + inner)
				default:
					b.WriteString(string(c) + "{" + inner + "}")
				}
				i = match[j] + 1
				continue
			}
			b.WriteByte(c)
			i = j
		case c == '\\':
			// Copy a command name whole, so that \frac inside \fracture-like
			// names is not rewritten.
			k := i + 1
			for k < len(s) && isLetter(s[k]) {
				k++
			}
			if k == i+1 && k < len(s) {
				k++
			}
			b.WriteString(s[i:k])
			i = k
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// dropThousands removes thousands separators: a comma followed by exactly
// three digits inside a digit run such as 1,000 or 1,450,000 (no space after
// the comma). A run whose groups are not all three digits long, such as
// "1,2" or "1,000,5", is left alone and later read as a list.
func dropThousands(s string) string {
	if !strings.Contains(s, ",") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if !isDigit(s[i]) || (i > 0 && (isDigit(s[i-1]) || s[i-1] == '.' || isLetter(s[i-1]))) {
			b.WriteByte(s[i])
			i++
			continue
		}
		// A digit run starts at i.
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j-i > 3 {
			b.WriteString(s[i:j])
			i = j
			continue
		}
		k := j
		groups := 0
		for k < len(s) && s[k] == ',' {
			if k+4 > len(s) || !isDigit(s[k+1]) || !isDigit(s[k+2]) || !isDigit(s[k+3]) {
				break
			}
			if k+4 < len(s) && isDigit(s[k+4]) {
				break
			}
			k += 4
			groups++
		}
		// Reject when another comma-digit follows, as in "1,000,5".
		if groups == 0 || (k+1 < len(s) && s[k] == ',' && isDigit(s[k+1])) {
			b.WriteString(s[i:j])
			i = j
			continue
		}
		for _, ch := range []byte(s[i:k]) {
			if ch != ',' {
				b.WriteByte(ch)
			}
		}
		i = k
	}
	return b.String()
}

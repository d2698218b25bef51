package verify

import (
	"math"
	"math/big"
	"regexp"
	"strings"
)

// Default tolerances of [DefaultOptions].
const (
	DefaultRelTol = 1e-6
	DefaultAbsTol = 1e-9
)

// MaxAnswer is the longest answer, in bytes, that [Check] normalizes. Longer
// answers are compared as whitespace-trimmed strings, so the work per call
// stays bounded.
const MaxAnswer = 4 << 10

// Bounds of the structure parser.
const (
	maxStructDepth = 8   // nesting of tuples, sets and intervals
	maxElems       = 256 // scalars in one answer
)

// Options controls how [Check] compares two answers. Every field is taken
// literally, zero included: zero does not mean "use the default". Start from
// [DefaultOptions] and override what you need.
type Options struct {
	// RelTol is the relative tolerance for numbers: a and b are equal when
	// |a-b| <= RelTol*max(|a|,|b|). Two exact integers are always compared
	// exactly, whatever the tolerance, so 1000000 never equals 1000001.
	RelTol float64
	// AbsTol is the absolute tolerance for numbers: a and b are equal when
	// |a-b| <= AbsTol. It matters near zero, where RelTol alone demands
	// exact equality.
	AbsTol float64
	// PercentScaling lets a side written with a percent sign also match
	// its value divided by 100 when the other side has none: "50%" equals
	// both 50 and 0.5. Without it "50%" only equals 50.
	PercentScaling bool
}

// DefaultOptions returns the options [Equal] uses: RelTol [DefaultRelTol],
// AbsTol [DefaultAbsTol] and PercentScaling on.
func DefaultOptions() Options {
	return Options{RelTol: DefaultRelTol, AbsTol: DefaultAbsTol, PercentScaling: true}
}

// Method says how [Check] reached its verdict.
type Method int

// The methods of [Check].
const (
	// MethodNone means no comparison was made: an answer normalized to
	// nothing.
	MethodNone Method = iota
	// MethodNumeric compares two constants by value.
	MethodNumeric
	// MethodExpression compares two expressions in the same single-letter
	// variables by evaluating them at fixed sample points.
	MethodExpression
	// MethodString compares normalized strings.
	MethodString
	// MethodStructure compares tuples, intervals, sets, lists, unions or
	// matrices element by element.
	MethodStructure
)

// String returns the method's name.
func (m Method) String() string {
	switch m {
	case MethodNone:
		return "none"
	case MethodNumeric:
		return "numeric"
	case MethodExpression:
		return "expression"
	case MethodString:
		return "string"
	case MethodStructure:
		return "structure"
	}
	return "unknown"
}

// Result is the verdict of [Check] with the normalized forms it compared.
type Result struct {
	// Equal reports whether the prediction is equivalent to the gold answer.
	Equal bool
	// Pred and Gold are the normalized forms of the two answers; empty when
	// an answer normalized to nothing.
	Pred, Gold string
	// Method says how the verdict was reached.
	Method Method
}

// Equal reports whether the answer pred is equivalent to the gold answer
// under [DefaultOptions]. Both are final answers, not whole solutions: use
// [Extract] first to pull the answer out of a solution text. An empty answer
// never equals anything.
func Equal(pred, gold string) bool {
	return Check(pred, gold, DefaultOptions()).Equal
}

// Check compares the answer pred with the gold answer and returns the
// verdict with both normalized forms. See the package documentation for the
// conventions. Check never panics and its work is bounded: answers longer
// than [MaxAnswer] bytes are compared as trimmed strings.
func Check(pred, gold string, opts Options) Result {
	p, g := strings.TrimSpace(pred), strings.TrimSpace(gold)
	if len(p) > MaxAnswer || len(g) > MaxAnswer {
		return Result{Equal: p != "" && p == g, Pred: p, Gold: g, Method: MethodString}
	}
	pv, gv := analyze(p), analyze(g)
	var res Result
	if pv != nil {
		res.Pred = pv.String()
	}
	if gv != nil {
		res.Gold = gv.String()
	}
	if pv == nil || gv == nil {
		return res
	}
	res.Equal, res.Method = opts.equal(pv, gv)
	return res
}

// Normalize returns the normalized form of an answer, as [Check] reports
// it: the canonical string that the comparison works on.
func Normalize(answer string) string {
	a := strings.TrimSpace(answer)
	if len(a) > MaxAnswer {
		return a
	}
	if v := analyze(a); v != nil {
		return v.String()
	}
	return ""
}

// value is a parsed answer: a scalar or a structure of values.
type value struct {
	kind        byte // 's' scalar, 'b' tuple or interval, 'S' set, 'L' list, 'U' union, 'M' matrix
	open, close byte // brackets of 'b'
	elems       []*value
	rows, cols  int // of 'M'

	// Scalars.
	name string // the variable of a dropped "x =", if any
	text string
	pct  bool
	num  *number
	ex   *expr
	smp  [numSamples]float64
}

func (v *value) String() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *value) write(b *strings.Builder) {
	join := func(sep string) {
		for i, e := range v.elems {
			if i > 0 {
				b.WriteString(sep)
			}
			e.write(b)
		}
	}
	switch v.kind {
	case 's':
		if v.name != "" {
			b.WriteString(v.name + "=")
		}
		b.WriteString(v.text)
		if v.pct {
			b.WriteByte('%')
		}
	case 'b':
		b.WriteByte(v.open)
		join(",")
		b.WriteByte(v.close)
	case 'S':
		b.WriteString(`\{`)
		join(",")
		b.WriteString(`\}`)
	case 'L':
		join(",")
	case 'U':
		join(`\cup`)
	case 'M':
		b.WriteString(`\begin{pmatrix}`)
		for i, e := range v.elems {
			if i > 0 {
				if i%v.cols == 0 {
					b.WriteString(`\\`)
				} else {
					b.WriteByte('&')
				}
			}
			e.write(b)
		}
		b.WriteString(`\end{pmatrix}`)
	}
}

// analyze normalizes and parses an answer; nil when nothing is left.
func analyze(s string) *value {
	c := canon(s)
	if c == "" {
		return nil
	}
	budget := maxElems
	v := parseValue(c, 0, &budget, true)
	if v == nil || v.kind == 's' && v.text == "" {
		return nil
	}
	return v
}

// depthClass classifies a byte for bracket matching: +1 opens, -1 closes.
func depthClass(c byte) int {
	switch c {
	case '(', '[', '{', setOpen:
		return 1
	case ')', ']', '}', setClose:
		return -1
	}
	return 0
}

// closing returns the index where the bracket opened at s[0] closes, or -1.
func closing(s string) int {
	d := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '\\' || depthClass(s[i+1]) != 0) {
			i++
			continue
		}
		d += depthClass(s[i])
		if d == 0 {
			return i
		}
	}
	return -1
}

// splitTop splits s at the occurrences of sep outside any brackets.
func splitTop(s, sep string) []string {
	if !strings.Contains(s, sep) {
		return []string{s}
	}
	var parts []string
	d, start := 0, 0
	for i := 0; i < len(s); i++ {
		if d == 0 && strings.HasPrefix(s[i:], sep) {
			// A command separator must not be the prefix of a longer name.
			if sep[0] == '\\' && i+len(sep) < len(s) && isLetter(s[i+len(sep)]) {
				continue
			}
			parts = append(parts, s[start:i])
			i += len(sep) - 1
			start = i + 1
			continue
		}
		d += depthClass(s[i])
		if d < 0 {
			d = 0
		}
	}
	return append(parts, s[start:])
}

var (
	varPrefix = regexp.MustCompile(`^([A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?|\\(?:alpha|beta|gamma|delta|theta|phi|varphi|lambda|mu|omega|sigma|tau|rho|psi)|[A-Za-z]\([A-Za-z]\)|\(\s?[A-Za-z](?:\s?,\s?[A-Za-z])*\s?\))\s?(=|\\approx|\\in)\s?`)
	eqPrefix  = regexp.MustCompile(`^(?:=|\\approx)\s?`)
)

// stripVarPrefix drops a leading "x =", "x \in", "f(x) =" or "(x, y) =".
// name is the variable of the last "x =" dropped (compacted, as "x_1" or
// "f(x)"), empty when there was none or it was not a single variable.
func stripVarPrefix(s string) (rest, name string) {
	for range 4 {
		loc := varPrefix.FindStringSubmatchIndex(s)
		if loc == nil {
			loc = eqPrefix.FindStringSubmatchIndex(s)
		}
		if loc == nil || loc[1] == len(s) {
			break
		}
		name = ""
		if len(loc) >= 4 && loc[2] >= 0 && !strings.HasPrefix(s[loc[2]:loc[3]], "(") {
			name = compact(s[loc[2]:loc[3]])
		}
		s = s[loc[1]:]
	}
	return s, name
}

// lastSide returns the result of a worked equation, "1440/1440 = 1" or
// "3 + 4 \approx 7.0": the last side, when every side before it is a
// constant expression. Any other s is returned as it is, so that an
// equation in variables ("x^2 + y^2 = 25") stays whole.
func lastSide(s string) string {
	if !strings.Contains(s, "=") && !strings.Contains(s, `\approx`) {
		return s
	}
	var sides []string
	for _, p := range splitTop(s, "=") {
		sides = append(sides, splitTop(p, `\approx`)...)
	}
	last := strings.TrimSpace(sides[len(sides)-1])
	if len(sides) < 2 || last == "" {
		return s
	}
	for _, p := range sides[:len(sides)-1] {
		if p = strings.TrimSpace(p); p == "" || !isConstant(p) {
			return s
		}
	}
	return last
}

var matrixEnvs = []string{"pmatrix", "bmatrix", "Bmatrix", "vmatrix", "Vmatrix", "smallmatrix", "matrix", "array"}

// parseMatrix parses \begin{pmatrix} a & b \\ c & d \end{pmatrix}.
func parseMatrix(s string, depth int, budget *int) (*value, bool) {
	if !strings.HasPrefix(s, `\begin{`) {
		return nil, false
	}
	for _, env := range matrixEnvs {
		open, end := `\begin{`+env+`}`, `\end{`+env+`}`
		if !strings.HasPrefix(s, open) || !strings.HasSuffix(s, end) || len(s) < len(open)+len(end) {
			continue
		}
		body := s[len(open) : len(s)-len(end)]
		if env == "array" && strings.HasPrefix(strings.TrimSpace(body), "{") {
			body = strings.TrimSpace(body)
			if c := closing(body); c > 0 {
				body = body[c+1:]
			}
		}
		var rows [][]string
		for _, r := range splitTop(body, `\\`) {
			if strings.TrimSpace(r) == "" {
				continue
			}
			rows = append(rows, splitTop(r, "&"))
		}
		if len(rows) == 0 {
			return nil, false
		}
		m := &value{kind: 'M', rows: len(rows), cols: len(rows[0])}
		for _, r := range rows {
			if len(r) != m.cols {
				return nil, false
			}
			for _, c := range r {
				m.elems = append(m.elems, parseValue(c, depth+1, budget, false))
			}
		}
		return m, true
	}
	return nil, false
}

// parseValue parses a canonical answer into a value. pm allows a single
// \pm to expand into two answers (in lists and sets, not inside tuples).
func parseValue(s string, depth int, budget *int, pm bool) *value {
	s = strings.TrimSpace(s)
	// "a = 3, b = 5" is a list of equations, each keeping its variable.
	name := ""
	if len(splitTop(s, ",")) == 1 {
		s, name = stripVarPrefix(s)
		s = lastSide(s)
	}
	v := parseBody(strings.TrimSpace(s), depth, budget, pm)
	if v.kind == 's' && v.name == "" {
		v.name = name
	}
	return v
}

func parseBody(s string, depth int, budget *int, pm bool) *value {
	if depth > maxStructDepth || *budget <= 0 || s == "" {
		return scalar(s, budget)
	}
	if parts := splitTop(s, `\cup`); len(parts) > 1 {
		return compound('U', 0, 0, parts, depth, budget, false)
	}
	if m, ok := parseMatrix(s, depth, budget); ok {
		return m
	}
	first, last := s[0], s[len(s)-1]
	if (first == '(' || first == '[') && (last == ')' || last == ']') && closing(s) == len(s)-1 {
		inner := s[1 : len(s)-1]
		parts := splitTop(inner, ",")
		if len(parts) > 1 {
			return compound('b', first, last, parts, depth, budget, false)
		}
		if first == '(' && last == ')' || first == '[' && last == ']' {
			return parseValue(inner, depth+1, budget, pm)
		}
		return scalar(s, budget)
	}
	if (first == setOpen && last == setClose || first == '{' && last == '}') && closing(s) == len(s)-1 {
		inner := s[1 : len(s)-1]
		parts := splitTop(inner, ",")
		if len(parts) > 1 || first == setOpen {
			return compound('S', 0, 0, parts, depth, budget, true)
		}
		return parseValue(inner, depth+1, budget, pm)
	}
	for _, sep := range []string{",", ";", " and ", " or "} {
		if parts := splitTop(s, sep); len(parts) > 1 {
			return compound('L', 0, 0, parts, depth, budget, true)
		}
	}
	if pm {
		if alts, ok := expandPM(s); ok {
			return compound('L', 0, 0, alts, depth, budget, false)
		}
	}
	return scalar(s, budget)
}

// expandPM turns "a \pm b" into "a + b" and "a - b".
func expandPM(s string) ([]string, bool) {
	if strings.Count(s, `\pm`) != 1 {
		return nil, false
	}
	i := strings.Index(s, `\pm`)
	if i+3 < len(s) && isLetter(s[i+3]) {
		return nil, false
	}
	return []string{s[:i] + "+" + s[i+3:], s[:i] + "-" + s[i+3:]}, true
}

func compound(kind, open, close byte, parts []string, depth int, budget *int, pm bool) *value {
	v := &value{kind: kind, open: open, close: close}
	for _, p := range parts {
		if *budget <= 0 {
			break
		}
		if pm {
			if alts, ok := expandPM(strings.TrimSpace(p)); ok {
				for _, a := range alts {
					v.elems = append(v.elems, parseValue(a, depth+1, budget, false))
				}
				continue
			}
		}
		v.elems = append(v.elems, parseValue(p, depth+1, budget, false))
	}
	return v
}

var (
	unitWord   = regexp.MustCompile(`^[A-Za-z]+\.?(?:\^-?[0-9]|\^\{-?[0-9]+\})?(?:/[A-Za-z]+(?:\^[0-9]|\^\{[0-9]+\})?)?$`)
	gluedUnit  = regexp.MustCompile(`^(-?[0-9]*\.?[0-9]+) ?([A-Za-z]+)(?:\^[0-9])?$`)
	currencies = map[string]bool{"rs": true, "rs.": true, "inr": true, "usd": true, "eur": true, "gbp": true, "us": true}
	shortUnits = map[string]bool{"m": true, "g": true, "s": true, "h": true, "l": true, "L": true}
	knownUnits = map[string]bool{
		"cm": true, "mm": true, "km": true, "kg": true, "mg": true, "lb": true, "lbs": true,
		"oz": true, "ft": true, "inch": true, "inches": true, "mi": true, "mph": true, "kmph": true,
		"kph": true, "hr": true, "hrs": true, "min": true, "mins": true, "sec": true, "secs": true,
		"cents": true, "dollars": true, "units": true, "degrees": true, "deg": true, "days": true,
		"years": true, "hours": true, "minutes": true, "seconds": true, "meters": true, "metres": true,
		"ml": true, "cc": true, "percent": true,
	}
)

// isUnitToken reports whether a whitespace-separated token looks like a
// unit word (cm, dollars, km/h, inches^2).
func isUnitToken(t string) bool {
	if t == "." {
		return true
	}
	if !unitWord.MatchString(t) {
		return false
	}
	n := 0
	for n < len(t) && isLetter(t[n]) {
		n++
	}
	return n >= 2 || shortUnits[t[:n]]
}

// compact removes spaces except between two letters, where a space
// separates words or a command from a variable (\pi r).
func compact(s string) string {
	if !strings.Contains(s, " ") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			if i > 0 && i+1 < len(s) && isLetter(s[i-1]) && isLetter(s[i+1]) && b.Len() > 0 {
				b.WriteByte(' ')
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func parses(s string) bool {
	_, ok := parseExpr(compact(s))
	return ok
}

// stripUnits drops trailing unit words ("5 cm", "5 dollars") and leading
// currency words ("Rs. 5") when what remains is an expression.
func stripUnits(t string) string {
	if m := gluedUnit.FindStringSubmatch(t); m != nil && (knownUnits[strings.ToLower(m[2])] || shortUnits[m[2]] && strings.Contains(t, " ")) {
		return m[1]
	}
	if !strings.Contains(t, " ") {
		return t
	}
	toks := strings.Split(t, " ")
	k := len(toks)
	for k > 1 && isUnitToken(toks[k-1]) {
		k--
	}
	if k < len(toks) {
		if c := strings.Join(toks[:k], " "); parses(c) {
			t, toks = c, toks[:k]
		}
	}
	// Leading currency words and abbreviations: "Rs. 5", "rs . 5", "s . 5".
	s := 0
	for s < len(toks)-1 && (currencies[strings.ToLower(toks[s])] || toks[s] == "." ||
		len(toks[s]) <= 3 && isWords(toks[s]+"x") && toks[s+1] == "." ||
		len(toks[s]) <= 4 && strings.HasSuffix(toks[s], ".") && isWords(toks[s][:len(toks[s])-1]+"x")) {
		s++
	}
	if s > 0 {
		if c := strings.Join(toks[s:], " "); isConstant(c) {
			t = c
		}
	}
	return t
}

// isConstant reports whether s parses as an expression without variables.
func isConstant(s string) bool {
	e, ok := parseExpr(compact(s))
	return ok && e.vars == 0
}

// isWords reports whether s is made of letters, spaces, hyphens and
// apostrophes, with at least two letters: a text answer such as "Evelyn".
func isWords(s string) bool {
	letters := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case isLetter(c):
			letters++
		case c == ' ' || c == '-' || c == '\'':
		default:
			return false
		}
	}
	return letters >= 2
}

// scalar builds a scalar value: percent and units are stripped, the text is
// compacted, and the expression is evaluated when it parses.
func scalar(s string, budget *int) *value {
	*budget--
	t, name := stripVarPrefix(strings.TrimSpace(s))
	t = strings.TrimSpace(t)
	v := &value{kind: 's', name: name}
	if strings.HasSuffix(t, "%") {
		v.pct = true
		t = strings.TrimSpace(strings.TrimRight(t, "%"))
	}
	if strings.HasSuffix(t, " percent") {
		v.pct = true
		t = strings.TrimSuffix(t, " percent")
	}
	if len(t) > maxExprLen {
		v.text = t
		return v
	}
	t = stripUnits(t)
	if isWords(t) {
		t = strings.ToLower(t)
	}
	v.text = compact(t)
	if e, ok := parseExpr(v.text); ok {
		if e.vars == 0 {
			if n, ok := evalConst(e.root); ok {
				v.num = &n
			}
		} else {
			v.ex = &e
			v.smp = e.samples()
		}
	}
	return v
}

// equal compares two values.
func (o Options) equal(p, g *value) (bool, Method) {
	p, g = single(p), single(g)
	switch {
	case p.kind == 's' && g.kind == 's':
		return o.scalarEqual(p, g)
	case (p.kind == 'S' || p.kind == 'L') && (g.kind == 'S' || g.kind == 'L'), p.kind == 'U' && g.kind == 'U':
		return o.unordered(p.elems, g.elems), MethodStructure
	case p.kind == 'b' && g.kind == 'b':
		return p.open == g.open && p.close == g.close && o.ordered(p.elems, g.elems), MethodStructure
	case p.kind == 'M' && g.kind == 'M':
		return p.rows == g.rows && p.cols == g.cols && o.ordered(p.elems, g.elems), MethodStructure
	case p.kind == 'M' && g.kind == 'b':
		return isVector(p) && g.open == '(' && g.close == ')' && o.ordered(p.elems, g.elems), MethodStructure
	case p.kind == 'b' && g.kind == 'M':
		return isVector(g) && p.open == '(' && p.close == ')' && o.ordered(p.elems, g.elems), MethodStructure
	}
	return false, MethodStructure
}

func isVector(m *value) bool { return m.rows == 1 || m.cols == 1 }

// single unwraps a one-element list or set.
func single(v *value) *value {
	for (v.kind == 'L' || v.kind == 'S') && len(v.elems) == 1 {
		v = v.elems[0]
	}
	return v
}

func (o Options) ordered(p, g []*value) bool {
	if len(p) != len(g) {
		return false
	}
	for i := range p {
		if ok, _ := o.equal(p[i], g[i]); !ok {
			return false
		}
	}
	return true
}

// unordered reports whether p and g are equal as multisets, by bipartite
// matching on the pairwise equality.
func (o Options) unordered(p, g []*value) bool {
	n := len(p)
	if n != len(g) {
		return false
	}
	eq := make([][]bool, n)
	for i := range p {
		eq[i] = make([]bool, n)
		any := false
		for j := range g {
			eq[i][j], _ = o.equal(p[i], g[j])
			any = any || eq[i][j]
		}
		if !any {
			return false
		}
	}
	matchG := make([]int, n)
	for j := range matchG {
		matchG[j] = -1
	}
	var seen []bool
	var try func(i int) bool
	try = func(i int) bool {
		for j := 0; j < n; j++ {
			if eq[i][j] && !seen[j] {
				seen[j] = true
				if matchG[j] < 0 || try(matchG[j]) {
					matchG[j] = i
					return true
				}
			}
		}
		return false
	}
	for i := 0; i < n; i++ {
		seen = make([]bool, n)
		if !try(i) {
			return false
		}
	}
	return true
}

func (o Options) scalarEqual(p, g *value) (bool, Method) {
	if p.name != "" && g.name != "" && p.name != g.name {
		return false, MethodString // x = 5 is not y = 5
	}
	if p.num != nil && g.num != nil {
		if o.numEqual(*p.num, *g.num) {
			return true, MethodNumeric // 50% equals 50
		}
		if o.PercentScaling && p.pct != g.pct {
			// 50% also equals 0.5 when the other side has no percent sign.
			pn, gn := *p.num, *g.num
			if p.pct {
				pn = percentOf(pn)
			} else {
				gn = percentOf(gn)
			}
			return o.numEqual(pn, gn), MethodNumeric
		}
		return false, MethodNumeric
	}
	if p.ex != nil && g.ex != nil && p.ex.vars == g.ex.vars {
		valid, same := 0, true
		for k := range p.smp {
			a, b := p.smp[k], g.smp[k]
			fa, fb := finite(a), finite(b)
			if fa != fb {
				same = false
				break
			}
			if !fa {
				continue
			}
			valid++
			if !o.close(a, b) {
				same = false
				break
			}
		}
		if !same || valid >= 2 {
			if !same && p.text == g.text {
				return true, MethodString
			}
			return same, MethodExpression
		}
	}
	return p.text == g.text, MethodString
}

// percentOf divides a number by 100.
func percentOf(n number) number {
	if n.r != nil {
		return number{r: new(big.Rat).Quo(n.r, big.NewRat(100, 1))}
	}
	return number{f: n.f / 100}
}

func (o Options) numEqual(p, g number) bool {
	if p.r != nil && g.r != nil {
		if p.r.Cmp(g.r) == 0 {
			return true
		}
		if p.r.IsInt() && g.r.IsInt() {
			return false
		}
	}
	return o.close(p.float(), g.float())
}

func (o Options) close(a, b float64) bool {
	if a == b {
		return true
	}
	d := math.Abs(a - b)
	return d <= o.AbsTol || d <= o.RelTol*math.Max(math.Abs(a), math.Abs(b))
}

package verify

import (
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Bounds of the expression evaluator. An expression that exceeds them is not
// evaluated and is compared as a string instead.
const (
	maxExprLen   = 1024 // bytes of one expression
	maxExprNodes = 512  // syntax-tree nodes
	maxExprDepth = 64   // nesting of the recursive-descent parser
	maxRatBits   = 4096 // bits of an exact rational before it degrades to float64
	maxLiteral   = 200  // digits of a literal read exactly
	numSamples   = 3    // points at which expressions with variables are compared
	maxBinom     = 1000 // largest n of an exact \binom{n}{k}
)

// node is a syntax-tree node of a parsed expression.
type node struct {
	op   byte // 'n' literal, 'v' variable, 'p' pi, '+', '-', '*', '/', '^', 'u' negation, 's' square root, 'r' n-th root, 'b' binomial
	lit  *big.Rat
	flit float64 // literal too long to read exactly
	v    int     // variable index for 'v'
	a, b *node
}

// expr is a parsed expression with the set of variables it uses.
type expr struct {
	root *node
	vars uint64 // bit i set when variable i occurs
}

// number is an evaluated constant: exact when r is non-nil, else f.
type number struct {
	r *big.Rat
	f float64
}

func (n number) float() float64 {
	if n.r != nil {
		f, _ := n.r.Float64()
		return f
	}
	return n.f
}

func (n number) String() string {
	if n.r != nil {
		if n.r.IsInt() {
			return n.r.Num().String()
		}
		return n.r.String()
	}
	return strconv.FormatFloat(n.f, 'g', -1, 64)
}

// varIndex maps a letter to a variable index.
func varIndex(c byte) int {
	if c >= 'a' && c <= 'z' {
		return int(c - 'a')
	}
	return 26 + int(c-'A')
}

// parser is a bounded recursive-descent parser for the small expression
// language: numbers, single-letter variables, + - * / ^, implicit
// multiplication, parentheses and braces, \frac{a}{b}, \sqrt{x},
// \sqrt[n]{x}, \pi, and mixed numbers such as 1\frac{4}{5}.
type parser struct {
	s     string
	i     int
	nodes int
	depth int
	vars  uint64
	bad   bool
}

// parseExpr parses s as a whole expression. It reports false when s is not
// in the language or exceeds the bounds.
func parseExpr(s string) (expr, bool) {
	if len(s) == 0 || len(s) > maxExprLen {
		return expr{}, false
	}
	p := &parser{s: s}
	n := p.sum()
	p.skip()
	if p.bad || n == nil || p.i != len(p.s) {
		return expr{}, false
	}
	return expr{root: n, vars: p.vars}, true
}

func (p *parser) skip() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *parser) mk(op byte, a, b *node) *node {
	p.nodes++
	if p.nodes > maxExprNodes {
		p.bad = true
	}
	if p.bad {
		return nil
	}
	return &node{op: op, a: a, b: b}
}

func (p *parser) enter() bool {
	p.depth++
	if p.depth > maxExprDepth {
		p.bad = true
	}
	return !p.bad
}

func (p *parser) leave() { p.depth-- }

func (p *parser) sum() *node {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	n := p.product()
	for !p.bad {
		p.skip()
		if p.i >= len(p.s) || (p.s[p.i] != '+' && p.s[p.i] != '-') {
			break
		}
		op := p.s[p.i]
		p.i++
		n = p.mk(op, n, p.product())
	}
	return n
}

func (p *parser) product() *node {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	n := p.unary()
	for !p.bad {
		p.skip()
		if p.i >= len(p.s) {
			break
		}
		switch c := p.s[p.i]; {
		case c == '*' || c == '/':
			p.i++
			n = p.mk(c, n, p.unary())
		case p.startsPrimary():
			n = p.mk('*', n, p.power())
		default:
			return n
		}
	}
	return n
}

func (p *parser) unary() *node {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	p.skip()
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '-':
			p.i++
			return p.mk('u', p.unary(), nil)
		case '+':
			p.i++
			return p.unary()
		}
	}
	return p.power()
}

func (p *parser) power() *node {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	base := p.primary()
	p.skip()
	if !p.bad && p.i < len(p.s) && p.s[p.i] == '^' {
		p.i++
		p.skip()
		var e *node
		if p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] == '+') {
			neg := p.s[p.i] == '-'
			p.i++
			e = p.power()
			if neg {
				e = p.mk('u', e, nil)
			}
		} else {
			e = p.power()
		}
		return p.mk('^', base, e)
	}
	return base
}

// command reports the command name at the current position, if any.
func (p *parser) command() string {
	if p.i >= len(p.s) || p.s[p.i] != '\\' {
		return ""
	}
	k := p.i + 1
	for k < len(p.s) && isLetter(p.s[k]) {
		k++
	}
	return p.s[p.i+1 : k]
}

func (p *parser) startsPrimary() bool {
	if p.i >= len(p.s) {
		return false
	}
	c := p.s[p.i]
	if isDigit(c) || c == '.' || isLetter(c) || c == '(' || c == '{' {
		return true
	}
	switch p.command() {
	case "frac", "sqrt", "pi", "binom":
		return true
	}
	return false
}

// group parses open expr close.
func (p *parser) group(open, close byte) *node {
	p.skip()
	if p.i >= len(p.s) || p.s[p.i] != open {
		p.bad = true
		return nil
	}
	p.i++
	n := p.sum()
	p.skip()
	if p.i >= len(p.s) || p.s[p.i] != close {
		p.bad = true
		return nil
	}
	p.i++
	return n
}

func (p *parser) literal() *node {
	start := p.i
	for p.i < len(p.s) && isDigit(p.s[p.i]) {
		p.i++
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		for p.i < len(p.s) && isDigit(p.s[p.i]) {
			p.i++
		}
	}
	text := p.s[start:p.i]
	if text == "." {
		p.bad = true
		return nil
	}
	n := p.mk('n', nil, nil)
	if n == nil {
		return nil
	}
	if len(text) <= maxLiteral {
		r, ok := new(big.Rat).SetString(strings.TrimSuffix(text, "."))
		if !ok {
			p.bad = true
			return nil
		}
		n.lit = r
		return n
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil {
		p.bad = true
		return nil
	}
	n.flit = f
	return n
}

// mixedFrac reports whether a \frac{digits}{digits} starts at i.
func mixedFrac(s string, i int) bool {
	for i < len(s) && s[i] == ' ' {
		i++
	}
	if !strings.HasPrefix(s[i:], `\frac{`) {
		return false
	}
	i += len(`\frac{`)
	for g := 0; g < 2; g++ {
		j := i
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i || j >= len(s) || s[j] != '}' {
			return false
		}
		i = j + 1
		if g == 0 {
			if i >= len(s) || s[i] != '{' {
				return false
			}
			i++
		}
	}
	return true
}

func (p *parser) primary() *node {
	if !p.enter() {
		return nil
	}
	defer p.leave()
	p.skip()
	if p.i >= len(p.s) {
		p.bad = true
		return nil
	}
	c := p.s[p.i]
	switch {
	case isDigit(c) || c == '.':
		start := p.i
		n := p.literal()
		// A whole number directly followed by a fraction of whole numbers is
		// a mixed number: 1\frac{4}{5} is 9/5, not 4/5.
		if n != nil && n.lit != nil && !strings.Contains(p.s[start:p.i], ".") && mixedFrac(p.s, p.i) {
			f := p.primary()
			return p.mk('+', n, f)
		}
		return n
	case isLetter(c):
		if p.i+1 < len(p.s) && isLetter(p.s[p.i+1]) {
			// A run of letters is a word, not a product of variables.
			p.bad = true
			return nil
		}
		n := p.mk('v', nil, nil)
		if n != nil {
			n.v = varIndex(c)
			p.vars |= 1 << uint(n.v)
		}
		p.i++
		return n
	case c == '(':
		return p.group('(', ')')
	case c == '{':
		return p.group('{', '}')
	case c == '\\':
		name := p.command()
		p.i += 1 + len(name)
		switch name {
		case "pi":
			return p.mk('p', nil, nil)
		case "frac":
			a := p.group('{', '}')
			b := p.group('{', '}')
			return p.mk('/', a, b)
		case "binom":
			a := p.group('{', '}')
			b := p.group('{', '}')
			return p.mk('b', a, b)
		case "sqrt":
			p.skip()
			if p.i < len(p.s) && p.s[p.i] == '[' {
				idx := p.group('[', ']')
				x := p.group('{', '}')
				return p.mk('r', idx, x)
			}
			return p.mk('s', p.group('{', '}'), nil)
		}
	}
	p.bad = true
	return nil
}

// tooBig reports whether an exact rational has grown past maxRatBits.
func tooBig(r *big.Rat) bool {
	return r.Num().BitLen()+r.Denom().BitLen() > maxRatBits
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// evalConst evaluates an expression without variables, exactly when it
// only involves rationals and whole powers, else in float64. It reports
// false for division by zero, non-finite or non-real results.
func evalConst(n *node) (number, bool) {
	if n == nil {
		return number{}, false
	}
	switch n.op {
	case 'n':
		if n.lit != nil {
			return number{r: n.lit}, true
		}
		return number{f: n.flit}, finite(n.flit)
	case 'p':
		return number{f: math.Pi}, true
	case 'v':
		return number{}, false
	case 'u':
		x, ok := evalConst(n.a)
		if !ok {
			return number{}, false
		}
		if x.r != nil {
			return number{r: new(big.Rat).Neg(x.r)}, true
		}
		return number{f: -x.f}, true
	case 's':
		x, ok := evalConst(n.a)
		if !ok {
			return number{}, false
		}
		if x.r != nil {
			if x.r.Sign() < 0 {
				return number{}, false
			}
			num, den := x.r.Num(), x.r.Denom()
			sn, sd := new(big.Int).Sqrt(num), new(big.Int).Sqrt(den)
			if new(big.Int).Mul(sn, sn).Cmp(num) == 0 && new(big.Int).Mul(sd, sd).Cmp(den) == 0 {
				return number{r: new(big.Rat).SetFrac(sn, sd)}, true
			}
		}
		f := x.float()
		if f < 0 {
			return number{}, false
		}
		return number{f: math.Sqrt(f)}, true
	case 'r':
		idx, ok1 := evalConst(n.a)
		x, ok2 := evalConst(n.b)
		if !ok1 || !ok2 {
			return number{}, false
		}
		return floatResult(root(idx.float(), x.float()))
	}
	x, ok1 := evalConst(n.a)
	y, ok2 := evalConst(n.b)
	if !ok1 || !ok2 {
		return number{}, false
	}
	if x.r != nil && y.r != nil {
		if r, ok, done := exactOp(n.op, x.r, y.r); done {
			if !ok {
				return number{}, false
			}
			if !tooBig(r) {
				return number{r: r}, true
			}
			f, _ := r.Float64()
			return floatResult(f)
		}
	}
	return floatResult(floatOp(n.op, x.float(), y.float()))
}

func floatResult(f float64) (number, bool) {
	if !finite(f) {
		return number{}, false
	}
	return number{f: f}, true
}

// exactOp applies a binary operator to rationals. done is false when the
// operation must be done in float64 instead (fractional or huge powers); ok
// is false when it has no value (division by zero).
func exactOp(op byte, x, y *big.Rat) (r *big.Rat, ok, done bool) {
	switch op {
	case '+':
		return new(big.Rat).Add(x, y), true, true
	case '-':
		return new(big.Rat).Sub(x, y), true, true
	case '*':
		return new(big.Rat).Mul(x, y), true, true
	case '/':
		if y.Sign() == 0 {
			return nil, false, true
		}
		return new(big.Rat).Quo(x, y), true, true
	case 'b':
		if !x.IsInt() || !y.IsInt() || !x.Num().IsInt64() || !y.Num().IsInt64() {
			return nil, false, true
		}
		n, k := x.Num().Int64(), y.Num().Int64()
		if n < 0 || n > maxBinom {
			return nil, false, true
		}
		if k < 0 || k > n {
			return new(big.Rat), true, true
		}
		return new(big.Rat).SetInt(new(big.Int).Binomial(n, k)), true, true
	case '^':
		if !y.IsInt() || !y.Num().IsInt64() {
			return nil, false, false
		}
		e := y.Num().Int64()
		if x.Sign() == 0 {
			if e < 0 {
				return nil, false, true
			}
			if e == 0 {
				return big.NewRat(1, 1), true, true
			}
			return new(big.Rat), true, true
		}
		abs := e
		if abs < 0 {
			abs = -abs
		}
		bits := int64(x.Num().BitLen() + x.Denom().BitLen())
		if abs > 1<<20 || bits*abs > 2*maxRatBits {
			return nil, false, false
		}
		num := new(big.Int).Exp(x.Num(), big.NewInt(abs), nil)
		den := new(big.Int).Exp(x.Denom(), big.NewInt(abs), nil)
		if e < 0 {
			num, den = den, num
		}
		return new(big.Rat).SetFrac(num, den), true, true
	}
	return nil, false, true
}

func floatOp(op byte, x, y float64) float64 {
	switch op {
	case '+':
		return x + y
	case '-':
		return x - y
	case '*':
		return x * y
	case '/':
		if y == 0 {
			return math.NaN()
		}
		return x / y
	case '^':
		return math.Pow(x, y)
	}
	return math.NaN()
}

// root is the real n-th root of x, NaN when there is none.
func root(n, x float64) float64 {
	if n == 0 {
		return math.NaN()
	}
	if x < 0 {
		if n == math.Trunc(n) && math.Mod(n, 2) != 0 {
			return -math.Pow(-x, 1/n)
		}
		return math.NaN()
	}
	return math.Pow(x, 1/n)
}

// evalAt evaluates an expression in float64 with the variables set to env.
// It returns NaN when the expression has no real value there.
func evalAt(n *node, env *[52]float64) float64 {
	if n == nil {
		return math.NaN()
	}
	switch n.op {
	case 'n':
		if n.lit != nil {
			f, _ := n.lit.Float64()
			return f
		}
		return n.flit
	case 'p':
		return math.Pi
	case 'v':
		return env[n.v]
	case 'u':
		return -evalAt(n.a, env)
	case 's':
		x := evalAt(n.a, env)
		if x < 0 {
			return math.NaN()
		}
		return math.Sqrt(x)
	case 'r':
		return root(evalAt(n.a, env), evalAt(n.b, env))
	}
	return floatOp(n.op, evalAt(n.a, env), evalAt(n.b, env))
}

// sampleEnv returns the deterministic variable values of sample k: distinct,
// irrational-looking values in [0.3, 2.5) so that different expressions
// almost never agree on all samples.
func sampleEnv(k int) *[52]float64 {
	var env [52]float64
	for v := range env {
		u := uint64(v*numSamples+k+1) * 0x9E3779B97F4A7C15
		u ^= u >> 29
		u *= 0xBF58476D1CE4E5B9
		u ^= u >> 32
		env[v] = 0.3 + 2.2*float64(u>>11)/float64(1<<53)
	}
	return &env
}

var sampleEnvs = func() [numSamples]*[52]float64 {
	var e [numSamples]*[52]float64
	for k := range e {
		e[k] = sampleEnv(k)
	}
	return e
}()

// samples evaluates an expression at the sample points.
func (e expr) samples() [numSamples]float64 {
	var out [numSamples]float64
	for k := range out {
		out[k] = evalAt(e.root, sampleEnvs[k])
	}
	return out
}

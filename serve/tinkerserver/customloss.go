package tinkerserver

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"rlvr/api/tinker"
)

// Server-side custom losses: the SDK's create_custom_loss traces a loss
// with torch.fx on the client and, since client/config answers
// custom_loss_server_side, uploads the graph (create_custom_loss); a
// forward_backward with loss_fn "custom" and loss_fn_config {loss_id}
// then runs it here. The loss is a function of one datum: its logprobs
// (rank 1, [T]) and the loss_fn_inputs it names (rank 0 or 1), returning
// a scalar loss and scalar metrics named custom/<name>:sum or :mean. The
// per-datum losses are summed, as the SDK sums them on the client.
//
// The graph is not code: each node is read into one of the operations
// below, with its gradient written beside its value, and a graph with any
// other operation is refused when it is created, naming the node. Values
// are float64 scalars and vectors; a scalar combines with a vector
// element by element, as torch broadcasts it. The gradient with respect
// to the logprobs is then the weight of an NLL backward pass, as for gspo
// (sequenceForwardBackward).

// customLoss is an uploaded loss, compiled.
type customLoss struct {
	id, name string
	inputs   []customInput // logprobs first
	steps    []step        // in the graph's order
	loss     int           // the step whose value is the loss
	metrics  map[string]int
}

type customInput struct {
	Name string `json:"name"`
	Rank int    `json:"rank"`
}

// operand is a step's argument: another step's value, or a constant.
type operand struct {
	ref   int // the step, or -1 for a constant
	value float64
}

// step is one node of the graph.
type step struct {
	name   string
	op     string // the operation (ops), or "input"
	input  int    // for "input": the index in customLoss.inputs
	args   []operand
	lo, hi *float64 // clamp's bounds
}

// ops are the operations a graph may use, by the name step.op takes;
// aliases maps the graph's call_function targets and call_method names to
// them.
var ops = map[string]int{ // the number of tensor arguments
	"add": 2, "sub": 2, "mul": 2, "div": 2, "neg": 1, "pow": 2,
	"exp": 1, "log": 1, "abs": 1, "sigmoid": 1, "tanh": 1, "sqrt": 1,
	"clamp": 1, "minimum": 2, "maximum": 2, "where": 3,
	"sum": 1, "mean": 1, "max": 1, "min": 1,
	"detach": 1, "identity": 1, "float32": 1, "zeros_like": 1, "ones_like": 1,
	"gt": 2, "lt": 2, "ge": 2, "le": 2,
}

var aliases = map[string]string{
	"operator.add": "add", "operator.sub": "sub", "operator.mul": "mul", "operator.truediv": "div",
	"operator.neg": "neg", "operator.pow": "pow", "operator.gt": "gt", "operator.lt": "lt", "operator.ge": "ge", "operator.le": "le",
	"torch.add": "add", "torch.sub": "sub", "torch.mul": "mul", "torch.div": "div", "torch.neg": "neg", "torch.pow": "pow",
	"torch.exp": "exp", "torch.log": "log", "torch.abs": "abs", "torch.sigmoid": "sigmoid", "torch.tanh": "tanh", "torch.sqrt": "sqrt",
	"torch.clamp": "clamp", "torch.clip": "clamp", "torch.minimum": "minimum", "torch.maximum": "maximum", "torch.where": "where",
	"torch.sum": "sum", "torch.mean": "mean", "torch.zeros_like": "zeros_like", "torch.ones_like": "ones_like",
	"torch.gt": "gt", "torch.lt": "lt", "torch.ge": "ge", "torch.le": "le",
	// Tensor methods.
	"add": "add", "sub": "sub", "mul": "mul", "div": "div", "neg": "neg", "pow": "pow",
	"exp": "exp", "log": "log", "abs": "abs", "sigmoid": "sigmoid", "tanh": "tanh", "sqrt": "sqrt",
	"clamp": "clamp", "clip": "clamp", "minimum": "minimum", "maximum": "maximum",
	"sum": "sum", "mean": "mean", "max": "max", "min": "min",
	"detach": "detach", "float": "float32", "clone": "identity", "contiguous": "identity",
	"gt": "gt", "lt": "lt", "ge": "ge", "le": "le",
}

// graphNode is one node of a create_custom_loss graph, as the SDK encodes
// it (tinker.types.CustomLossNode).
type graphNode struct {
	Op     string                     `json:"op"`
	Name   string                     `json:"name"`
	Target string                     `json:"target"`
	Args   []json.RawMessage          `json:"args"`
	Kwargs map[string]json.RawMessage `json:"kwargs"`
}

// metricKey is what a metric's name may be, as the SDK checks it.
var metricKey = regexp.MustCompile(`^custom/[a-z0-9_./-]{1,64}:(sum|mean)$`)

// maxGraphNodes bounds a graph.
const maxGraphNodes = 4096

// compileLoss reads a graph into a customLoss; an error names the node.
func compileLoss(name string, inputs []customInput, nodes []graphNode) (*customLoss, error) {
	if len(inputs) == 0 || inputs[0].Name != "logprobs" || inputs[0].Rank != 1 {
		return nil, fmt.Errorf("inputs: the first must be logprobs of rank 1 ([T]); rank 2 ([T, K]) needs top-k logprobs, which this server does not compute")
	}
	for i, in := range inputs[1:] {
		if in.Rank != 0 && in.Rank != 1 {
			return nil, fmt.Errorf("inputs[%d]: %s has rank %d: this server reads inputs of rank 0 or 1", i+1, in.Name, in.Rank)
		}
	}
	if len(nodes) > maxGraphNodes {
		return nil, fmt.Errorf("graph.nodes: %d nodes, more than the server's limit of %d", len(nodes), maxGraphNodes)
	}
	c := &customLoss{name: name, inputs: inputs, loss: -1}
	byName := map[string]int{}
	output := false
	for i, n := range nodes {
		where := fmt.Sprintf("graph.nodes[%d] (%s)", i, n.Name)
		if output {
			return nil, fmt.Errorf("%s: a node after the output", where)
		}
		if _, dup := byName[n.Name]; dup || n.Name == "" {
			return nil, fmt.Errorf("%s: the name is empty or taken by an earlier node", where)
		}
		st := step{name: n.Name}
		switch n.Op {
		case "placeholder":
			k := slices.IndexFunc(inputs, func(in customInput) bool { return in.Name == n.Target })
			if k < 0 {
				return nil, fmt.Errorf("%s: placeholder %q is not among the loss's inputs", where, n.Target)
			}
			if slices.ContainsFunc(c.steps, func(s step) bool { return s.op == "input" && s.input == k }) {
				return nil, fmt.Errorf("%s: a second placeholder for %s", where, n.Target)
			}
			st.op, st.input = "input", k
		case "call_function", "call_method":
			op, ok := aliases[n.Target]
			if !ok || (n.Op == "call_function") != strings.Contains(n.Target, ".") {
				return nil, fmt.Errorf("%s: %s %q is not an operation this server runs (it runs %s)", where, n.Op, n.Target, opList())
			}
			st.op = op
			if err := c.readArgs(&st, n, byName); err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
		case "output":
			if err := c.readOutput(n, byName); err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			output = true
			continue
		default:
			return nil, fmt.Errorf("%s: op %q is not run here (placeholder, call_function, call_method, output)", where, n.Op)
		}
		byName[n.Name] = len(c.steps)
		c.steps = append(c.steps, st)
	}
	if !output {
		return nil, fmt.Errorf("graph.nodes: no output node")
	}
	return c, nil
}

func opList() string {
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// readArgs reads a call's arguments: its tensors (references or numbers)
// and, for clamp and the reductions, the keyword arguments they take.
func (c *customLoss) readArgs(st *step, n graphNode, byName map[string]int) error {
	want := ops[st.op]
	vals := n.Args
	if st.op == "clamp" {
		// clamp(x, min, max), either bound by keyword or null.
		bounds := []json.RawMessage{nil, nil}
		for i := 1; i < len(vals) && i < 3; i++ {
			bounds[i-1] = vals[i]
		}
		if len(vals) > 3 {
			return fmt.Errorf("clamp takes a tensor and two bounds, got %d arguments", len(vals))
		}
		vals = vals[:min(1, len(vals))]
		for k, raw := range n.Kwargs {
			switch k {
			case "min":
				bounds[0] = raw
			case "max":
				bounds[1] = raw
			default:
				return fmt.Errorf("clamp: keyword %q is not read (min, max)", k)
			}
		}
		for i, raw := range bounds {
			if raw == nil || string(raw) == "null" {
				continue
			}
			v, err := number(raw)
			if err != nil {
				return fmt.Errorf("clamp's %s bound: %v", []string{"min", "max"}[i], err)
			}
			if i == 0 {
				st.lo = &v
			} else {
				st.hi = &v
			}
		}
	} else {
		for k, raw := range n.Kwargs {
			reduce := st.op == "sum" || st.op == "mean"
			switch {
			case reduce && k == "dim" && (string(raw) == "0" || string(raw) == "-1" || string(raw) == "null"):
			case reduce && k == "keepdim" && string(raw) == "false":
			case reduce && k == "dtype" && string(raw) == "null":
			default:
				return fmt.Errorf("%s: keyword %s=%s is not read (values here are scalars and vectors: a reduction takes dim 0 or -1 at most)", n.Target, k, raw)
			}
		}
		if (st.op == "sum" || st.op == "mean") && len(vals) == 2 && (string(vals[1]) == "0" || string(vals[1]) == "-1") {
			vals = vals[:1] // the dimension, positionally
		}
	}
	if len(vals) != want {
		return fmt.Errorf("%s takes %d tensor arguments here, got %d", n.Target, want, len(vals))
	}
	for _, raw := range vals {
		var ref struct {
			Ref *string `json:"ref"`
		}
		if json.Unmarshal(raw, &ref) == nil && ref.Ref != nil {
			k, ok := byName[*ref.Ref]
			if !ok {
				return fmt.Errorf("argument %s names no earlier node", *ref.Ref)
			}
			st.args = append(st.args, operand{ref: k})
			continue
		}
		v, err := number(raw)
		if err != nil {
			return err
		}
		st.args = append(st.args, operand{ref: -1, value: v})
	}
	if st.op == "pow" && st.args[1].ref >= 0 {
		return fmt.Errorf("pow's exponent must be a number, not a tensor")
	}
	if st.args[0].ref < 0 && (st.op != "add" && st.op != "sub" && st.op != "mul" && st.op != "div" && st.op != "minimum" && st.op != "maximum" && st.op != "gt" && st.op != "lt" && st.op != "ge" && st.op != "le") {
		return fmt.Errorf("%s's first argument must be a tensor", n.Target)
	}
	return nil
}

// number reads a constant argument: a JSON number, a boolean, or
// {"float": "inf" | "-inf" | "nan"}.
func number(raw json.RawMessage) (float64, error) {
	var v float64
	if json.Unmarshal(raw, &v) == nil {
		return v, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		if b {
			return 1, nil
		}
		return 0, nil
	}
	var f struct {
		Float string `json:"float"`
	}
	if json.Unmarshal(raw, &f) == nil {
		switch f.Float {
		case "inf":
			return math.Inf(1), nil
		case "-inf":
			return math.Inf(-1), nil
		case "nan":
			return math.NaN(), nil
		}
	}
	return 0, fmt.Errorf("argument %s is neither a node nor a number", shorten(string(raw), 80))
}

// readOutput reads the output node: (loss, {metric: node}).
func (c *customLoss) readOutput(n graphNode, byName map[string]int) error {
	var out struct {
		Tuple []json.RawMessage `json:"tuple"`
	}
	if len(n.Args) != 1 || json.Unmarshal(n.Args[0], &out) != nil || len(out.Tuple) != 2 {
		return fmt.Errorf("the output must be (loss, metrics)")
	}
	ref := func(raw json.RawMessage) (int, bool) {
		var r struct {
			Ref string `json:"ref"`
		}
		if json.Unmarshal(raw, &r) != nil {
			return 0, false
		}
		k, ok := byName[r.Ref]
		return k, ok
	}
	k, ok := ref(out.Tuple[0])
	if !ok {
		return fmt.Errorf("the loss is not a node")
	}
	c.loss = k
	var metrics struct {
		Dict map[string]json.RawMessage `json:"dict"`
	}
	if json.Unmarshal(out.Tuple[1], &metrics) != nil || metrics.Dict == nil {
		return fmt.Errorf("the metrics are not a dict")
	}
	c.metrics = map[string]int{}
	for key, raw := range metrics.Dict {
		if !metricKey.MatchString(key) {
			return fmt.Errorf("metric %q is not named custom/<name>:sum or :mean", key)
		}
		k, ok := ref(raw)
		if !ok {
			return fmt.Errorf("metric %s is not a node", key)
		}
		c.metrics[key] = k
	}
	return nil
}

// tensor is a value: a scalar (vector false, one element) or a vector.
type tensor struct {
	x      []float64
	vector bool
}

func (t tensor) at(i int) float64 {
	if !t.vector {
		return t.x[0]
	}
	return t.x[i]
}

// run evaluates the loss on one datum's inputs (inputs[0] the logprobs)
// and returns the loss, the metrics, and the loss's derivative with
// respect to each logprob.
func (c *customLoss) run(inputs []tensor) (loss float64, metrics map[string]float64, dlogp []float64, err error) {
	vals := make([]tensor, len(c.steps))
	val := func(o operand) tensor {
		if o.ref < 0 {
			return tensor{x: []float64{o.value}}
		}
		return vals[o.ref]
	}
	for i, st := range c.steps {
		if st.op == "input" {
			vals[i] = inputs[st.input]
			continue
		}
		args := make([]tensor, len(st.args))
		for k, o := range st.args {
			args[k] = val(o)
		}
		v, err := forwardOp(st, args)
		if err != nil {
			return 0, nil, nil, fmt.Errorf("node %s: %v", st.name, err)
		}
		vals[i] = v
	}
	if vals[c.loss].vector {
		return 0, nil, nil, fmt.Errorf("the loss (node %s) is a vector of %d, not a scalar", c.steps[c.loss].name, len(vals[c.loss].x))
	}
	metrics = map[string]float64{}
	for key, k := range c.metrics {
		if vals[k].vector {
			return 0, nil, nil, fmt.Errorf("metric %s (node %s) is a vector, not a scalar", key, c.steps[k].name)
		}
		metrics[key] = vals[k].x[0]
	}
	// Reverse mode: each step adds its gradient into its arguments'.
	grads := make([][]float64, len(c.steps))
	grads[c.loss] = []float64{1}
	for i := len(c.steps) - 1; i >= 0; i-- {
		g := grads[i]
		st := c.steps[i]
		if g == nil || st.op == "input" {
			continue
		}
		args := make([]tensor, len(st.args))
		for k, o := range st.args {
			args[k] = val(o)
		}
		for k, o := range st.args {
			if o.ref < 0 {
				continue
			}
			d := backwardOp(st, args, vals[i], g, k)
			if d == nil {
				continue
			}
			grads[o.ref] = addInto(grads[o.ref], d, vals[o.ref])
		}
	}
	dlogp = make([]float64, len(inputs[0].x))
	for i, st := range c.steps {
		if st.op == "input" && st.input == 0 && grads[i] != nil {
			dlogp = grads[i] // addInto made it the logprobs' size
		}
	}
	return vals[c.loss].x[0], metrics, dlogp, nil
}

// addInto adds gradient d (the size of a step's output, broadcast) into
// acc, the gradient of a value v: a vector gradient into a scalar value
// is summed, as torch reduces a broadcast's gradient.
func addInto(acc, d []float64, v tensor) []float64 {
	if acc == nil {
		acc = make([]float64, len(v.x))
	}
	switch {
	case len(d) == len(acc):
		for j := range acc {
			acc[j] += d[j]
		}
	case len(acc) == 1:
		for _, x := range d {
			acc[0] += x
		}
	default: // a scalar gradient into a vector
		for j := range acc {
			acc[j] += d[0]
		}
	}
	return acc
}

// shape is the shape of an element-wise result of args: a vector if any
// is, of its length; an error for vectors of two lengths.
func shape(args []tensor) (n int, vector bool, err error) {
	n = 1
	for _, a := range args {
		if a.vector {
			if vector && len(a.x) != n {
				return 0, false, fmt.Errorf("vectors of %d and %d elements", n, len(a.x))
			}
			n, vector = len(a.x), true
		}
	}
	return n, vector, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// forwardOp is a step's value.
func forwardOp(st step, args []tensor) (tensor, error) {
	switch st.op {
	case "sum", "mean", "max", "min":
		a := args[0]
		if len(a.x) == 0 {
			return tensor{}, fmt.Errorf("%s of an empty vector", st.op)
		}
		r := a.x[0]
		if st.op == "sum" || st.op == "mean" {
			r = 0
		}
		for _, x := range a.x {
			switch st.op {
			case "sum", "mean":
				r += x
			case "max":
				r = math.Max(r, x)
			case "min":
				r = math.Min(r, x)
			}
		}
		if st.op == "mean" {
			r /= float64(len(a.x))
		}
		return tensor{x: []float64{r}}, nil
	}
	n, vector, err := shape(args)
	if err != nil {
		return tensor{}, err
	}
	out := tensor{x: make([]float64, n), vector: vector}
	for j := range out.x {
		a := args[0].at(j)
		var b float64
		if len(args) > 1 {
			b = args[1].at(j)
		}
		var r float64
		switch st.op {
		case "add":
			r = a + b
		case "sub":
			r = a - b
		case "mul":
			r = a * b
		case "div":
			r = a / b
		case "neg":
			r = -a
		case "pow":
			r = math.Pow(a, b)
		case "exp":
			r = math.Exp(a)
		case "log":
			r = math.Log(a)
		case "abs":
			r = math.Abs(a)
		case "sigmoid":
			r = 1 / (1 + math.Exp(-a))
		case "tanh":
			r = math.Tanh(a)
		case "sqrt":
			r = math.Sqrt(a)
		case "clamp":
			r = a
			if st.lo != nil && r < *st.lo {
				r = *st.lo
			}
			if st.hi != nil && r > *st.hi {
				r = *st.hi
			}
		case "minimum":
			r = math.Min(a, b)
		case "maximum":
			r = math.Max(a, b)
		case "where":
			r = args[2].at(j)
			if a != 0 {
				r = b
			}
		case "detach", "identity":
			r = a
		case "float32":
			r = float64(float32(a)) // torch's .float(): float32, promoted back where it meets float64
		case "zeros_like":
			r = 0
		case "ones_like":
			r = 1
		case "gt":
			r = b2f(a > b)
		case "lt":
			r = b2f(a < b)
		case "ge":
			r = b2f(a >= b)
		case "le":
			r = b2f(a <= b)
		}
		out.x[j] = r
	}
	return out, nil
}

// backwardOp is the gradient a step sends to its argument k, given its
// output's gradient g (the output's size); nil for none.
func backwardOp(st step, args []tensor, out tensor, g []float64, k int) []float64 {
	switch st.op {
	case "detach", "zeros_like", "ones_like", "gt", "lt", "ge", "le":
		return nil
	case "where":
		if k == 0 {
			return nil
		}
	case "sum", "mean", "max", "min":
		a := args[0]
		d := make([]float64, len(a.x))
		switch st.op {
		case "sum":
			for j := range d {
				d[j] = g[0]
			}
		case "mean":
			for j := range d {
				d[j] = g[0] / float64(len(d))
			}
		default: // max, min: shared evenly among the elements that reach it
			ties := 0.0
			for _, x := range a.x {
				ties += b2f(x == out.x[0])
			}
			for j, x := range a.x {
				if x == out.x[0] {
					d[j] = g[0] / ties
				}
			}
		}
		return d
	}
	d := make([]float64, len(g))
	at := func(t tensor, j int) float64 {
		if !t.vector {
			return t.x[0]
		}
		return t.x[j]
	}
	for j := range d {
		a := at(args[0], j)
		var b float64
		if len(args) > 1 {
			b = at(args[1], j)
		}
		y := at(out, j)
		var dy float64 // d out / d arg k
		switch st.op {
		case "add", "identity", "float32":
			dy = 1
		case "sub":
			dy = 1 - 2*float64(k)
		case "mul":
			dy = []float64{b, a}[k]
		case "div":
			dy = []float64{1 / b, -a / (b * b)}[k]
		case "neg":
			dy = -1
		case "pow":
			if b != 0 { // torch's: an exponent of 0 has no gradient
				dy = b * math.Pow(a, b-1)
			}
		case "exp":
			dy = y
		case "log":
			dy = 1 / a
		case "abs":
			dy = math.Copysign(1, a)
			if a == 0 {
				dy = 0
			}
		case "sigmoid":
			dy = y * (1 - y)
		case "tanh":
			dy = 1 - y*y
		case "sqrt":
			dy = 0.5 / y
		case "clamp":
			dy = b2f((st.lo == nil || a >= *st.lo) && (st.hi == nil || a <= *st.hi))
		case "minimum", "maximum":
			// To the smaller (larger) argument; a tie shares it evenly.
			pick := a < b
			if st.op == "maximum" {
				pick = a > b
			}
			switch {
			case a == b:
				dy = 0.5
			case (k == 0) == pick:
				dy = 1
			}
		case "where":
			c := at(args[0], j) != 0
			dy = b2f(c == (k == 1))
		}
		d[j] = g[j] * dy
		if st.op == "float32" {
			d[j] = float64(float32(d[j])) // the gradient of a float32 value is float32
		}
	}
	return d
}

// maxCustomLosses bounds the losses one session uploads.
const maxCustomLosses = 256

// createCustomLossRequest is create_custom_loss's body.
type createCustomLossRequest struct {
	SessionID       string        `json:"session_id"`
	CustomLossSeqID *int64        `json:"custom_loss_seq_id"`
	Name            string        `json:"name"`
	Inputs          []customInput `json:"inputs"`
	Graph           lossGraph     `json:"graph"`
}

// lossGraph is a traced loss as the SDK uploads it
// (tinker.types.CustomLossGraph).
type lossGraph struct {
	Format int         `json:"format"`
	Nodes  []graphNode `json:"nodes"`
}

// createCustomLoss answers POST create_custom_loss with a future, settled
// at once with {loss_id}: the loss's graph is compiled, or refused (400)
// naming the node. A retry (the same custom_loss_seq_id) finds the same
// loss.
func (s *Server) createCustomLoss(w http.ResponseWriter, r *http.Request) {
	const kind = "create_custom_loss"
	var req createCustomLossRequest
	if _, err := s.decode(w, r, kind, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.CustomLossSeqID == nil {
		writeError(w, errorf(http.StatusBadRequest, "%s: custom_loss_seq_id is missing", kind))
		return
	}
	if req.Graph.Format != 1 {
		writeError(w, errorf(http.StatusBadRequest, "%s: graph.format is %d; this server reads format 1", kind, req.Graph.Format))
		return
	}
	loss, err := compileLoss(req.Name, req.Inputs, req.Graph.Nodes)
	if err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%s: %v", kind, err))
		return
	}
	s.mu.Lock()
	sess, err := s.sessionLocked(req.SessionID, time.Now())
	if err == nil {
		if old := sess.lossSeqs[*req.CustomLossSeqID]; old != nil {
			loss = old
		} else if len(sess.lossSeqs) >= maxCustomLosses {
			err = errorf(http.StatusBadRequest, "session %s has %d custom losses, the server's limit", sess.id, maxCustomLosses)
		} else {
			loss.id = randomID("loss_")
			if sess.lossSeqs == nil {
				sess.lossSeqs, sess.losses = map[int64]*customLoss{}, map[string]*customLoss{}
			}
			sess.lossSeqs[*req.CustomLossSeqID], sess.losses[loss.id] = loss, loss
		}
	}
	var f *future
	if err == nil {
		f = s.newFutureLocked()
	}
	s.mu.Unlock()
	if err != nil {
		writeError(w, errorf(statusOf(err), "%s: %v", kind, err))
		return
	}
	s.finish(f, map[string]string{"loss_id": loss.id, "type": kind})
	writeJSON(w, http.StatusOK, tinker.Future{RequestID: f.id})
}

// customLossOf is the uploaded loss a forward_backward with loss_fn
// custom names in loss_fn_config's loss_id, among model m's session's.
func (s *Server) customLossOf(m *trainModel, cfg map[string]float64, text map[string]string) (*customLoss, error) {
	for k := range cfg {
		return nil, userErr("loss_fn_config: loss_fn custom takes loss_id (text) only, got %s", k)
	}
	for k := range text {
		if k != "loss_id" {
			return nil, userErr("loss_fn_config: loss_fn custom takes loss_id only, got %s", k)
		}
	}
	id := text["loss_id"]
	if id == "" {
		return nil, userErr("loss_fn_config.loss_id is missing: loss_fn custom runs a loss create_custom_loss uploaded (" + customLossHow + ")")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := m.sess.losses[id]; l != nil {
		return l, nil
	}
	return nil, userErr("loss_fn_config.loss_id %q names no loss of session %s (a loss serves the clients of the session that created it)", shorten(id, 64), m.sess.id)
}

// customLossHow says how a custom loss reaches the server.
const customLossHow = "the SDK's ServiceClient.create_custom_loss, then forward_backward_custom with its handle"

// customInputs reads datum td's inputs of loss l, logprobs aside: each a
// scalar (rank 0, one value) or a vector of n values (rank 1).
func customInputs(td *tinker.Datum, l *customLoss, n int) ([]tensor, error) {
	out := make([]tensor, len(l.inputs))
	for k, in := range l.inputs[1:] {
		v, ok := td.LossFnInputs[in.Name]
		if !ok {
			return nil, fmt.Errorf("loss_fn_inputs.%s is missing (loss %s reads it)", in.Name, l.name)
		}
		x, err := v.Float32s()
		if err != nil {
			return nil, fmt.Errorf("loss_fn_inputs.%s: %v", in.Name, err)
		}
		want := n
		if in.Rank == 0 {
			want = 1
		}
		if len(x) != want {
			return nil, fmt.Errorf("loss_fn_inputs.%s has %d values; loss %s reads it with rank %d, so %d", in.Name, len(x), l.name, in.Rank, want)
		}
		t := tensor{x: make([]float64, len(x)), vector: in.Rank == 1}
		for j, f := range x {
			t.x[j] = float64(f)
		}
		out[k+1] = t
	}
	return out, nil
}

// customOutput runs the loss on each datum from the learner's logprobs:
// the result (each datum's logprobs; loss:sum, the per-datum losses'
// sum; the loss's metrics, summed or averaged over the datums as their
// names say) and each datum's derivative with respect to its logprobs.
func customOutput(b batch, l *customLoss, lps [][]float32) (*tinker.ForwardBackwardOutput, [][]float64, error) {
	out := &tinker.ForwardBackwardOutput{LossFnOutputType: "TensorData", Metrics: map[string]float64{}}
	grads := make([][]float64, len(b.datums))
	total := 0.0
	for i := range b.datums {
		in := slices.Clone(b.custom[i])
		lp := tensor{x: make([]float64, len(lps[i])), vector: true}
		for j, x := range lps[i] {
			lp.x[j] = float64(x)
		}
		in[0] = lp
		loss, metrics, dlogp, err := l.run(in)
		if err != nil {
			return nil, nil, userErr("data[%d]: loss %s: %v", i, l.name, err)
		}
		if math.IsNaN(loss) || math.IsInf(loss, 0) {
			return nil, nil, userErr("data[%d]: loss %s is %v", i, l.name, loss)
		}
		for j, g := range dlogp {
			if math.IsNaN(g) || math.IsInf(g, 0) {
				return nil, nil, userErr("data[%d]: loss %s's derivative at position %d is %v", i, l.name, j, g)
			}
		}
		total += loss
		for k, v := range metrics {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, nil, userErr("data[%d]: loss %s's metric %s is %v", i, l.name, k, v)
			}
			out.Metrics[k] += v
		}
		grads[i] = dlogp
		out.LossFnOutputs = append(out.LossFnOutputs, map[string]tinker.TensorData{"logprobs": tinker.Floats(lps[i])})
	}
	for k := range out.Metrics {
		if strings.HasSuffix(k, ":mean") {
			out.Metrics[k] /= float64(len(b.datums))
		}
	}
	out.Metrics["loss:sum"] = total
	return out, grads, nil
}

package tinkerserver

import (
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"rlvr/api/tinker"
	"rlvr/api/tinker/tinkerpb"
)

// lossFixture is one loss of testdata/custom_losses.json: a graph the
// SDK traced and encoded, and what torch computed of it (float64) for
// some inputs. python/tinker_custom_loss_fixtures.py writes the file.
type lossFixture struct {
	Name   string        `json:"name"`
	Inputs []customInput `json:"inputs"`
	Graph  lossGraph     `json:"graph"`
	Cases  []struct {
		Inputs  map[string]json.RawMessage `json:"inputs"`
		Loss    float64                    `json:"loss"`
		Metrics map[string]float64         `json:"metrics"`
		DLogp   []float64                  `json:"dlogp"`
	} `json:"cases"`
}

func lossFixtures(t *testing.T) []lossFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "custom_losses.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []lossFixture
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCustomLossMatchesTorch runs each traced loss on its inputs: the
// loss, the metrics and the gradient with respect to the logprobs agree
// with torch's to 1e-12, relative.
func TestCustomLossMatchesTorch(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
	for _, fx := range lossFixtures(t) {
		l, err := compileLoss(fx.Name, fx.Inputs, fx.Graph.Nodes)
		if err != nil {
			t.Fatalf("%s: %v", fx.Name, err)
		}
		for c, tc := range fx.Cases {
			in := make([]tensor, len(fx.Inputs))
			for k, inp := range fx.Inputs {
				raw := tc.Inputs[inp.Name]
				if inp.Rank == 0 {
					var x float64
					json.Unmarshal(raw, &x)
					in[k] = tensor{x: []float64{x}}
				} else {
					in[k] = tensor{vector: true}
					json.Unmarshal(raw, &in[k].x)
				}
			}
			loss, metrics, dlogp, err := l.run(in)
			if err != nil {
				t.Fatalf("%s case %d: %v", fx.Name, c, err)
			}
			if !near(loss, tc.Loss) {
				t.Errorf("%s case %d: loss %v, torch %v", fx.Name, c, loss, tc.Loss)
			}
			if len(metrics) != len(tc.Metrics) {
				t.Errorf("%s case %d: metrics %v, torch %v", fx.Name, c, metrics, tc.Metrics)
			}
			for k, v := range tc.Metrics {
				if !near(metrics[k], v) {
					t.Errorf("%s case %d: metric %s %v, torch %v", fx.Name, c, k, metrics[k], v)
				}
			}
			if len(dlogp) != len(tc.DLogp) {
				t.Fatalf("%s case %d: %d derivatives, torch %d", fx.Name, c, len(dlogp), len(tc.DLogp))
			}
			for j := range dlogp {
				if !near(dlogp[j], tc.DLogp[j]) {
					t.Errorf("%s case %d: d/dlogp[%d] %v, torch %v", fx.Name, c, j, dlogp[j], tc.DLogp[j])
				}
			}
		}
	}
}

// TestCustomLossRefusals: graphs this server cannot run are refused when
// created, naming the node or the input.
func TestCustomLossRefusals(t *testing.T) {
	fx := lossFixtures(t)[0] // neg_ll: logprobs, weights; mul, sum, neg
	nodes := func(change func([]graphNode) []graphNode) []graphNode {
		b, _ := json.Marshal(fx.Graph.Nodes)
		var n []graphNode
		json.Unmarshal(b, &n)
		return change(n)
	}
	for _, tc := range []struct {
		inputs []customInput
		nodes  []graphNode
		want   string
	}{
		{[]customInput{{"logprobs", 2}, {"weights", 1}}, fx.Graph.Nodes, "rank 2 ([T, K]) needs top-k logprobs"},
		{[]customInput{{"logprobs", 1}, {"weights", 2}}, fx.Graph.Nodes, "inputs[1]: weights has rank 2"},
		{fx.Inputs, nodes(func(n []graphNode) []graphNode { n[2].Target = "torch.nn.functional.softmax"; return n }),
			`graph.nodes[2] (mul): call_function "torch.nn.functional.softmax" is not an operation this server runs`},
		{fx.Inputs, nodes(func(n []graphNode) []graphNode { n[3].Op = "call_module"; return n }), `graph.nodes[3] (sum_1): op "call_module" is not run here`},
		{fx.Inputs, nodes(func(n []graphNode) []graphNode { n[1].Target = "values"; return n }), `placeholder "values" is not among the loss's inputs`},
		{fx.Inputs, nodes(func(n []graphNode) []graphNode { n[2].Args[1] = json.RawMessage(`{"ref": "later"}`); return n }), "argument later names no earlier node"},
		{fx.Inputs, nodes(func(n []graphNode) []graphNode {
			n[3].Kwargs = map[string]json.RawMessage{"dim": []byte("1")}
			return n
		}), "keyword dim=1 is not read"},
		{fx.Inputs, nodes(func(n []graphNode) []graphNode { return n[:len(n)-1] }), "graph.nodes: no output node"},
	} {
		_, err := compileLoss("neg_ll", tc.inputs, tc.nodes)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

// TestCustomLossServed uploads neg_ll, −Σ w·logp, through
// create_custom_loss and runs it as the SDK does (protobuf
// forward_backward, loss_fn custom, loss_fn_config_v2 {loss_id}): its
// loss:sum and metric are cross_entropy's loss with the same weights, and
// so is its gradient (the two models' steps agree). A retried upload finds
// the same loss; a loss_id of another session, or none, fails the call.
func TestCustomLossServed(t *testing.T) {
	h := newHarness(t, Config{})
	sess, custom := h.newModel()
	_, ce := h.newModel()
	fx := lossFixtures(t)[0]
	upload := func(seq int64) string {
		var f tinker.Future
		strict(t, h.post(tinker.PathCreateCustomLoss, map[string]any{"session_id": sess, "custom_loss_seq_id": seq, "name": fx.Name,
			"inputs": fx.Inputs, "graph": fx.Graph, "type": "create_custom_loss"}), &f)
		var res struct {
			LossID string `json:"loss_id"`
			Type   string `json:"type"`
		}
		strict(t, h.wait(f.RequestID), &res)
		return res.LossID
	}
	id := upload(0)
	if again := upload(0); again != id || !strings.HasPrefix(id, "loss_") {
		t.Fatalf("loss ids %q then %q", id, again)
	}
	tokens, targets := []int32{72, 105, 33, 10}, []int32{105, 33, 10, 72}
	weights := map[string][]float32{"weights": {0, 1, 0.5, 1}}
	var want tinker.ForwardBackwardOutput
	h.call(tinker.PathForwardBackward, tinker.ForwardBackwardRequest{ModelID: ce,
		Input: tinker.ForwardBackwardInput{Data: []tinker.Datum{jsonDatum(tokens, targets, weights)}, LossFn: tinker.CrossEntropy}}, &want)
	run := func(model, lossID string) (int, []byte) {
		m := &tinkerpb.ForwardBackwardRequest{ModelId: model, LossFn: "custom", Data: []*tinkerpb.Datum{protoDatum(tokens, targets, weights)}}
		if lossID != "" {
			m.LossFnConfigV2 = map[string]*tinkerpb.LossConfigValue{"loss_id": {Value: &tinkerpb.LossConfigValue_Text{Text: lossID}}}
		}
		status, b := h.sdkPost(tinker.PathForwardBackward, m, true)
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, b)
		}
		var f tinker.Future
		strict(t, b, &f)
		res, isProto := h.waitProto(f.RequestID)
		if isProto {
			return 0, res
		}
		return 1, res
	}
	kind, res := run(custom, id)
	if kind != 0 {
		t.Fatalf("the custom loss failed: %s", res)
	}
	var m tinkerpb.ForwardBackwardOutput
	if err := proto.Unmarshal(res, &m); err != nil {
		t.Fatal(err)
	}
	if d := m.Metrics["loss:sum"] - want.Metrics["loss:sum"]; math.Abs(d) > 1e-5 || m.Metrics["custom/neg_ll:sum"] != m.Metrics["loss:sum"] {
		t.Errorf("metrics %v, cross_entropy's loss:sum %v", m.Metrics, want.Metrics["loss:sum"])
	}
	adam := tinker.AdamParams{LearningRate: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-12}
	var a, b tinker.OptimStepResponse
	h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: custom, AdamParams: adam}, &a)
	h.call(tinker.PathOptimStep, tinker.OptimStepRequest{ModelID: ce, AdamParams: adam}, &b)
	if a.Metrics["grad_norm"] == 0 || math.Abs(a.Metrics["grad_norm"]-b.Metrics["grad_norm"]) > 1e-6*b.Metrics["grad_norm"] {
		t.Errorf("grad norms %v (custom) and %v (cross_entropy)", a.Metrics, b.Metrics)
	}

	_, other := h.newModel() // another session
	for _, tc := range []struct {
		model, lossID, want string
	}{
		{other, id, "names no loss of session"},
		{custom, "", "loss_fn_config.loss_id is missing"},
	} {
		kind, res := run(tc.model, tc.lossID)
		var rf tinker.RequestFailed
		strict(t, res, &rf)
		if kind != 1 || rf.Category != "user" || !strings.Contains(rf.Message, tc.want) {
			t.Errorf("failure %s, want %q", res, tc.want)
		}
	}
}

// FuzzCustomLoss compiles arbitrary graphs and runs what compiles on
// inputs of several lengths: an error or a result, never a panic.
func FuzzCustomLoss(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("testdata", "custom_losses.json"))
	if err != nil {
		f.Fatal(err)
	}
	var losses []json.RawMessage
	json.Unmarshal(b, &losses)
	for _, l := range losses {
		var fx struct {
			Inputs json.RawMessage `json:"inputs"`
			Graph  struct {
				Nodes json.RawMessage `json:"nodes"`
			} `json:"graph"`
		}
		json.Unmarshal(l, &fx)
		f.Add([]byte(fx.Inputs), []byte(fx.Graph.Nodes))
	}
	f.Fuzz(func(t *testing.T, inputs, nodes []byte) {
		var in []customInput
		var n []graphNode
		if json.Unmarshal(inputs, &in) != nil || json.Unmarshal(nodes, &n) != nil {
			return
		}
		l, err := compileLoss("fuzz", in, n)
		if err != nil {
			return
		}
		for _, size := range []int{1, 3} {
			vals := make([]tensor, len(in))
			for k, inp := range in {
				vals[k] = tensor{x: make([]float64, size), vector: inp.Rank == 1}
				if inp.Rank == 0 {
					vals[k].x = []float64{0.5}
				}
				for j := range vals[k].x {
					vals[k].x[j] = -0.5 * float64(j+k+1)
				}
			}
			l.run(vals)
		}
	})
}

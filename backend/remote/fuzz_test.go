package remote

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/backend"
	"rlvr/sample"
)

// FuzzResults feeds arbitrary retrieve_future bodies to the learner and
// the sampler: each is a result, a clear error, or a poll again — never a
// panic, and never a result whose shapes do not fit the request.
func FuzzResults(f *testing.F) {
	for _, s := range []string{
		`{"loss_fn_outputs":[{"logprobs":{"data":[-1,-2,-3],"dtype":"float32"}}]}`,
		`{"sequences":[{"stop_reason":"stop","tokens":[5,6],"logprobs":[-0.5,-0.25]}]}`,
		`{"sequences":[{"stop_reason":"length","tokens":[5],"logprobs":[]}]}`,
		`{"error":"boom","category":"server"}`,
		`{"type":"try_again"}`,
		`{"loss_fn_outputs":[{"logprobs":{"data":[-1],"dtype":"int64","shape":[3]}}]}`,
		`null`, `[]`, `{"sequences":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var polls atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case tinker.PathCreateSession:
				w.Write([]byte(`{"session_id":"s"}`))
			case tinker.PathCreateModel:
				w.Write([]byte(`{"model_id":"m"}`))
			case tinker.PathRetrieveFuture:
				if polls.Add(1) > 3 { // a try_again forever ends at the deadline
					w.Write([]byte(`{"error":"gave up"}`))
					return
				}
				w.Write([]byte(body))
			default:
				w.Write([]byte(`{"request_id":"r"}`))
			}
		}))
		defer srv.Close()
		ctx := context.Background()
		m, err := Open(ctx, Config{Client: Client{BaseURL: srv.URL, Retries: 1, Backoff: time.Millisecond, Deadline: 5 * time.Second}, BaseModel: "b", Reduction: Sum, Adam: adam()})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		batch := []backend.Datum{{Tokens: []int32{1, 2, 3}, Targets: []int32{2, 3, 4}, Weights: []float32{1, 1, 1}}}
		res, err := m.ForwardBackward(ctx, batch, backend.Loss{NLL: 1})
		if err == nil && (len(res.Logprobs) != 1 || len(res.Logprobs[0]) != 3) {
			t.Fatalf("logprobs %v do not fit the batch", res.Logprobs)
		}
		polls.Store(0)
		s := &Sampler{Model: m, Decoder: byteDecoder{}}
		out, err := s.Sample(ctx, []sample.Request{{Prompt: []int32{1}, Params: sample.Params{MaxTokens: 4, Stop: []string{"x"}}}})
		if err == nil {
			if len(out) != 1 || len(out[0]) != 1 {
				t.Fatalf("completions %v do not fit the request", out)
			}
			c := out[0][0]
			if len(c.Tokens) != len(c.Logprobs) || len(c.Tokens) > 4 || strings.Contains(c.Text, "x") {
				t.Fatalf("completion %+v breaks the request's rules", c)
			}
		}
	})
}

type byteDecoder struct{}

func (byteDecoder) Decode(ids []int32) string {
	b := make([]byte, len(ids))
	for i, id := range ids {
		b[i] = byte(id)
	}
	return string(b)
}

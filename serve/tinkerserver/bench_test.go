package tinkerserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"rlvr/api/tinker"
	"rlvr/checkpoint"
)

// BenchmarkServingUnderLoad runs one bounded load of asample calls on
// loopback against the server with its decoding loops and under
// WholeBatches: 8 clients, each sending its next call when its last
// result arrives (asample, then retrieve_future), 48 calls in all, each
// at temperature 1 with its own seed and a max_tokens drawn from 8–96.
// A call's draws are the same in both modes, so both do the same work.
// It reports the time from asample to the result (median and 95th
// percentile) and the sampled tokens per second. The model is
// $RLVR_BENCH_MODEL (a model directory, such as the built-in world's in
// rlvr's cache), else the tests' tiny model. Run it with -benchtime=1x;
// $RLVR_BENCH_ROUNDS (default 1) alternates the modes that many times,
// so that a change in the machine's load falls on both.
func BenchmarkServingUnderLoad(b *testing.B) {
	dir := os.Getenv("RLVR_BENCH_MODEL")
	if dir == "" {
		dir = testModelDir(b)
	}
	l, err := checkpoint.Open(dir, "")
	if err != nil {
		b.Fatal(err)
	}
	var prompts [][]int32
	for _, p := range []string{"Q: What is 12 + 30?\nA:", "Q: Tom has 7 apples and eats 3. How many are left?\nA:", "Once upon a time", "Q: 8 * 9 = ?\nA:"} {
		prompts = append(prompts, l.Tokenizer.Encode(p))
	}
	const calls, minTok, maxTok = 48, 8, 96
	r := rand.New(rand.NewPCG(1, 0))
	budgets := make([]int, calls)
	for i := range budgets {
		budgets[i] = minTok + r.IntN(maxTok-minTok+1)
	}
	rounds, _ := strconv.Atoi(os.Getenv("RLVR_BENCH_ROUNDS"))
	for round := range max(rounds, 1) {
		for _, whole := range []bool{true, false} {
			benchServing(b, fmt.Sprintf("round%d/", round), dir, whole, prompts, budgets)
		}
	}
}

// benchServing runs BenchmarkServingUnderLoad's load against one server.
func benchServing(b *testing.B, prefix, dir string, whole bool, prompts [][]int32, budgets []int) {
	const clients = 8
	calls := len(budgets)
	name := prefix + "loop"
	if whole {
		name = prefix + "whole"
	}
	{
		b.Run(name, func(b *testing.B) {
			h := newHarness(b, Config{Models: map[string]string{"bench": dir}, WholeBatches: whole, MaxBatch: 64, MaxQueue: calls})
			for range b.N {
				lat := make([]time.Duration, calls)
				toks := make([]int, calls)
				errs := make([]error, calls)
				next := make(chan int, calls)
				for i := range calls {
					next <- i
				}
				close(next)
				start := time.Now()
				var wg sync.WaitGroup
				for range clients {
					wg.Go(func() {
						for i := range next {
							t0 := time.Now()
							seed := int64(i)
							req := tinker.SampleRequest{NumSamples: 1, Prompt: tinker.Text(prompts[i%len(prompts)]), BaseModel: "bench", Type: "sample",
								SamplingParams: tinker.SamplingParams{MaxTokens: budgets[i], Seed: &seed, Temperature: 1, TopK: -1, TopP: 1}}
							var res tinker.SampleResponse
							errs[i] = sampleOnce(h.url, req, &res)
							lat[i] = time.Since(t0)
							for _, s := range res.Sequences {
								toks[i] += len(s.Tokens)
							}
						}
					})
				}
				wg.Wait()
				secs := time.Since(start).Seconds()
				total := 0
				for i, err := range errs {
					if err != nil {
						b.Fatalf("call %d: %v", i, err)
					}
					total += toks[i]
				}
				slices.Sort(lat)
				b.ReportMetric(float64(lat[calls/2].Milliseconds()), "p50-ms")
				b.ReportMetric(float64(lat[(calls*95+99)/100-1].Milliseconds()), "p95-ms")
				b.ReportMetric(float64(total)/secs, "tokens/s")
			}
		})
	}
}

// sampleOnce sends an asample call and long-polls its result into out.
func sampleOnce(url string, req tinker.SampleRequest, out *tinker.SampleResponse) error {
	post := func(path string, body any) (int, []byte, error) {
		data, _ := json.Marshal(body)
		resp, err := http.Post(url+path, "application/json", bytes.NewReader(data))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		_, err = buf.ReadFrom(resp.Body)
		return resp.StatusCode, buf.Bytes(), err
	}
	status, body, err := post(tinker.PathSample, req)
	if err != nil || status != http.StatusOK {
		return fmt.Errorf("asample: status %d: %s %v", status, body, err)
	}
	var f tinker.Future
	if err := json.Unmarshal(body, &f); err != nil {
		return err
	}
	for {
		status, body, err = post(tinker.PathRetrieveFuture, tinker.RetrieveFutureRequest{RequestID: f.RequestID})
		switch {
		case err != nil:
			return err
		case status == http.StatusRequestTimeout:
			continue
		case status != http.StatusOK:
			return fmt.Errorf("retrieve_future: status %d: %s", status, body)
		}
		if err := json.Unmarshal(body, out); err != nil || len(out.Sequences) == 0 {
			return fmt.Errorf("retrieve_future: %s", body)
		}
		return nil
	}
}

package servetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	api "rlvr/api/openai"
	client "rlvr/client/openai"
	"rlvr/expert"
	"rlvr/serve"
	"rlvr/task/world"
)

// startWorld serves the world's scripted experts behind f.
func startWorld(t testing.TB, f *Faults) string {
	t.Helper()
	return StartFaults(t, f, serve.Config{}, expert.WorldModels()...)
}

// solution is the reference solution to question q ("1+2").
func solution(t testing.TB, q string) string {
	t.Helper()
	p, err := world.ParseQuestion(q)
	if err != nil {
		t.Fatal(err)
	}
	return p.Solution()
}

// ask sends question q to model E0 through api ("completion", "chat" or
// "stream") and returns the answer's text.
func ask(ctx context.Context, cl *client.Client, apiName, q string) (string, error) {
	prompt := "Q:" + q + "\n"
	zero, maxTokens := 0.0, 256
	switch apiName {
	case "completion":
		res, err := cl.Complete(ctx, &api.CompletionRequest{Model: "E0", Prompt: api.Prompt{Texts: []string{prompt}}, Temperature: &zero, MaxTokens: &maxTokens})
		if err != nil {
			return "", err
		}
		return res.Choices[0].Text, nil
	case "chat":
		res, err := cl.Chat(ctx, &api.ChatCompletionRequest{Model: "E0", Messages: []api.Message{{Role: "user", Content: prompt}}, Temperature: &zero, MaxTokens: &maxTokens})
		if err != nil {
			return "", err
		}
		return res.Choices[0].Message.Content, nil
	}
	res, err := cl.ChatStream(ctx, &api.ChatCompletionRequest{Model: "E0", Messages: []api.Message{{Role: "user", Content: prompt}}, Temperature: &zero, MaxTokens: &maxTokens}, nil)
	if err != nil {
		return "", err
	}
	if len(res.Choices) == 0 {
		return "", errors.New("no choices")
	}
	return res.Choices[0].Message.Content, nil
}

// waitIdle waits for f to have no request in flight.
func waitIdle(t testing.TB, f *Faults) {
	t.Helper()
	for start := time.Now(); f.InFlight() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 3*time.Second {
			t.Fatalf("%d requests still held", f.InFlight())
		}
	}
}

// TestFaultKinds produces each fault on every endpoint shape and checks
// what the client sees, without retries: the error of each kind, an empty
// text, and for a flaky question a 502 then the right answer.
func TestFaultKinds(t *testing.T) {
	const timeout = 200 * time.Millisecond
	apis := []string{"completion", "chat", "stream"}
	for _, kind := range append(append([]string{""}, FaultKinds...), FaultFlaky) {
		name := kind
		if name == "" {
			name = "none"
		}
		t.Run(name, func(t *testing.T) {
			f := &Faults{Rate: 1, Kinds: []string{kind}, Hold: 5 * time.Second}
			if kind == "" {
				f.Rate = 0
			}
			base := startWorld(t, f)
			cl := client.New(client.Config{BaseURL: base, Timeout: timeout, MaxRetries: -1})
			for i, apiName := range apis {
				q := fmt.Sprintf("%d+%d", i+1, 7)
				start := time.Now()
				text, err := ask(context.Background(), cl, apiName, q)
				el := time.Since(start)
				apiErr, _ := errors.AsType[*client.APIError](err)
				switch kind {
				case "":
					if err != nil || text != solution(t, q) {
						t.Errorf("%s: %q, %v; want the solution", apiName, text, err)
					}
				case FaultTimeout, FaultEndless:
					if !errors.Is(err, context.DeadlineExceeded) || el < timeout || el > timeout+2*time.Second {
						t.Errorf("%s: error %v after %v; want the attempt's timeout", apiName, err, el)
					}
				case FaultConnection:
					if !errors.Is(err, syscall.ECONNRESET) {
						t.Errorf("%s: error %v; want a reset connection", apiName, err)
					}
				case FaultServer:
					if apiErr == nil || apiErr.StatusCode != 500 || apiErr.Type != api.ErrorTypeServer {
						t.Errorf("%s: error %v; want a 500 envelope", apiName, err)
					}
				case FaultRateLimited:
					if apiErr == nil || apiErr.StatusCode != 429 {
						t.Errorf("%s: error %v; want 429", apiName, err)
					}
				case FaultMalformed:
					if !errors.Is(err, client.ErrMalformedResponse) {
						t.Errorf("%s: error %v; want a malformed response", apiName, err)
					}
				case FaultEmpty:
					if err != nil || text != "" {
						t.Errorf("%s: %q, %v; want an empty answer", apiName, text, err)
					}
				case FaultFlaky:
					if apiErr == nil || apiErr.StatusCode != 502 {
						t.Errorf("%s: error %v; want 502", apiName, err)
					}
					if text, err := ask(context.Background(), cl, apiName, q); err != nil || text != solution(t, q) {
						t.Errorf("%s, second attempt: %q, %v; want the solution", apiName, text, err)
					}
				}
				waitIdle(t, f) // a client that gave up released its request
			}
			wantCalls, wantInjected := len(apis), len(apis)
			switch kind {
			case "":
				wantInjected = 0
			case FaultFlaky:
				wantCalls *= 2
			}
			if got := f.Injected(); got[kind] != wantInjected || len(got) > 1 {
				t.Errorf("injected %v, want %d %q", got, wantInjected, kind)
			}
			if f.Calls() != wantCalls {
				t.Errorf("%d calls, want %d", f.Calls(), wantCalls)
			}
			if got := f.Attempts()[RequestText([]byte(`{"prompt":"Q:1+7\n"}`))]; got != wantCalls/len(apis) {
				t.Errorf("%d attempts of the completion, want %d (attempts %v)", got, wantCalls/len(apis), f.Attempts())
			}
		})
	}
}

// TestFaultRetryAfter: a 429 carries Retry-After, which the client
// honours over a long backoff; a passed-through GET is not counted.
func TestFaultRetryAfter(t *testing.T) {
	f := &Faults{Rate: 1, Kinds: []string{FaultRateLimited}, RetryAfter: 50 * time.Millisecond}
	base := startWorld(t, f)
	resp, err := http.Post(base+"/completions", "application/json", strings.NewReader(`{"model":"E0","prompt":"Q:1+2\n"}`))
	if err != nil {
		t.Fatal(err)
	}
	var env api.ErrorResponse
	err = json.NewDecoder(resp.Body).Decode(&env)
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "0.05" || err != nil || env.Error.Type != api.ErrorTypeServer {
		t.Errorf("status %d, Retry-After %q, envelope %+v (%v)", resp.StatusCode, resp.Header.Get("Retry-After"), env, err)
	}
	resp, err = http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || f.Calls() != 1 {
		t.Errorf("GET /models: %d; %d calls counted", resp.StatusCode, f.Calls())
	}

	cl := client.New(client.Config{BaseURL: base, MaxRetries: 1, BackoffBase: 10 * time.Second, BackoffMax: 10 * time.Second})
	start := time.Now()
	_, err = ask(context.Background(), cl, "completion", "3+4")
	apiErr, _ := errors.AsType[*client.APIError](err)
	if apiErr == nil || apiErr.StatusCode != 429 || apiErr.Attempts != 2 {
		t.Errorf("error %v; want 429 after 2 attempts", err)
	}
	if el := time.Since(start); el < 50*time.Millisecond || el > 3*time.Second {
		t.Errorf("two attempts took %v; want about Retry-After", el)
	}
}

// TestFaultEndless: an endless reply is a 200 whose body keeps coming
// until the client goes away.
func TestFaultEndless(t *testing.T) {
	f := &Faults{Rate: 1, Kinds: []string{FaultEndless}, Hold: 5 * time.Second}
	base := startWorld(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/completions", strings.NewReader(`{"model":"E0","prompt":"Q:1+2\n"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 || !errors.Is(err, context.DeadlineExceeded) || n < 16<<10 {
		t.Errorf("status %d, %d bytes, then %v; want 200 and bytes until the deadline", resp.StatusCode, n, err)
	}
	waitIdle(t, f)
}

// binomial fails unless k of n is within 4.5 standard deviations of rate.
func binomial(t *testing.T, what string, k, n int, rate float64) {
	t.Helper()
	mean, sd := float64(n)*rate, math.Sqrt(float64(n)*rate*(1-rate))
	if math.Abs(float64(k)-mean) > 4.5*sd {
		t.Errorf("%s: %d of %d, want %.0f ± %.0f", what, k, n, mean, 4.5*sd)
	}
}

// TestFaultRate: over many calls, the share faulted and each kind's share
// are within binomial bounds, and the client sees every fault injected.
func TestFaultRate(t *testing.T) {
	const rate = 0.3
	kinds := []string{FaultServer, FaultRateLimited, FaultMalformed, FaultEmpty}

	// Per question, without HTTP.
	f := &Faults{Rate: rate, Kinds: kinds, Seed: 7}
	const texts = 20000
	byKind := map[string]int{}
	for i := range texts {
		byKind[f.KindOf(fmt.Sprintf("Q:%d+%d\n@E1\n", i, i%13))]++
	}
	binomial(t, "questions faulted", texts-byKind[""], texts, rate)
	for _, k := range kinds {
		binomial(t, k, byKind[k], texts, rate/float64(len(kinds)))
	}

	// Per call, over HTTP.
	f = &Faults{Rate: rate, Kinds: kinds, PerCall: true, Seed: 7}
	base := startWorld(t, f)
	cl := client.New(client.Config{BaseURL: base, MaxRetries: -1, MaxConcurrent: 8})
	const calls = 400
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				q := fmt.Sprintf("%d+%d", i, i%7)
				text, err := ask(context.Background(), cl, "completion", q)
				apiErr, _ := errors.AsType[*client.APIError](err)
				kind := "?"
				switch {
				case err == nil && text == solution(t, q):
					kind = ""
				case err == nil && text == "":
					kind = FaultEmpty
				case apiErr != nil && apiErr.StatusCode == 500:
					kind = FaultServer
				case apiErr != nil && apiErr.StatusCode == 429:
					kind = FaultRateLimited
				case errors.Is(err, client.ErrMalformedResponse):
					kind = FaultMalformed
				default:
					t.Errorf("%s: %q, %v", q, text, err)
				}
				mu.Lock()
				seen[kind]++
				mu.Unlock()
			}
		})
	}
	for i := range calls {
		next <- i
	}
	close(next)
	wg.Wait()
	injected := f.Injected()
	total := 0
	for _, k := range kinds {
		total += injected[k]
		if seen[k] != injected[k] || injected[k] == 0 {
			t.Errorf("%s: injected %d, the client saw %d", k, injected[k], seen[k])
		}
	}
	if f.Calls() != calls || seen[""]+total != calls {
		t.Errorf("%d calls, %d passed, %d faulted; want %d calls", f.Calls(), seen[""], total, calls)
	}
	binomial(t, "calls faulted", total, calls, rate)
}

// completionBody is the body the client sends for question q through
// ask.
func completionBody(t testing.TB, q string) []byte {
	zero, maxTokens := 0.0, 256
	body, err := json.Marshal(&api.CompletionRequest{Model: "E0", Prompt: api.Prompt{Texts: []string{"Q:" + q + "\n"}}, Temperature: &zero, MaxTokens: &maxTokens})
	if err != nil {
		t.Fatal(err)
	}
	return body
}

// TestFaultDeterministic: per question, each question's outcome and
// attempts follow KindOf, the same on every run and every attempt; per
// call, each attempt follows KindOfCall, so a retry can cure any fault;
// another seed draws otherwise.
func TestFaultDeterministic(t *testing.T) {
	kinds := []string{FaultConnection, FaultServer, FaultRateLimited, FaultMalformed, FaultEmpty, FaultFlaky}
	const maxRetries = 2
	questions := make([]string, 60)
	for i := range questions {
		questions[i] = fmt.Sprintf("(%d+%d)*2", i, 3*i%11)
	}
	run := func(t *testing.T, perCall bool) (*Faults, map[string]error) {
		f := &Faults{Rate: 0.5, Kinds: kinds, PerCall: perCall, Seed: 1}
		base := startWorld(t, f)
		cl := client.New(client.Config{BaseURL: base, MaxRetries: maxRetries, BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
		errs := map[string]error{}
		for _, q := range questions {
			text, err := ask(context.Background(), cl, "completion", q)
			if err == nil && text != solution(t, q) && text != "" {
				t.Errorf("%s: %q", q, text)
			}
			errs[q] = err
		}
		return f, errs
	}

	t.Run("question", func(t *testing.T) {
		f, errs := run(t, false)
		byKind := map[string]int{}
		for _, q := range questions {
			text := "Q:" + q + "\n"
			kind := f.KindOf(text)
			byKind[kind]++
			want := 1
			switch kind {
			case FaultConnection, FaultServer, FaultRateLimited:
				want = 1 + maxRetries
			case FaultFlaky:
				want = 2
			}
			if got := f.Attempts()[text]; got != want {
				t.Errorf("%s (%q): %d attempts, want %d", q, kind, got, want)
			}
			if failed := errs[q] != nil; failed != (want == 1+maxRetries || kind == FaultMalformed) {
				t.Errorf("%s (%q): error %v", q, kind, errs[q])
			}
		}
		for _, k := range append(kinds, "") {
			if byKind[k] == 0 {
				t.Errorf("no question draws %q", k)
			}
		}
		f2, errs2 := run(t, false)
		if fmt.Sprint(f.Attempts()) != fmt.Sprint(f2.Attempts()) || fmt.Sprint(f.Injected()) != fmt.Sprint(f2.Injected()) {
			t.Errorf("runs differ: %v %v, then %v %v", f.Attempts(), f.Injected(), f2.Attempts(), f2.Injected())
		}
		for _, q := range questions {
			if (errs[q] == nil) != (errs2[q] == nil) {
				t.Errorf("%s: %v, then %v", q, errs[q], errs2[q])
			}
		}
		other := &Faults{Rate: 0.5, Kinds: kinds, Seed: 2}
		same := 0
		for _, q := range questions {
			if other.KindOf("Q:"+q+"\n") == f.KindOf("Q:"+q+"\n") {
				same++
			}
		}
		if same == len(questions) {
			t.Error("another seed draws the same faults")
		}
	})

	t.Run("call", func(t *testing.T) {
		f, errs := run(t, true)
		cured := 0
		for _, q := range questions {
			text := "Q:" + q + "\n"
			body := completionBody(t, q)
			want := 0 // the attempts until one passes, or all allowed
			var kind string
			for want = 1; want <= 1+maxRetries; want++ {
				kind = f.KindOfCall(body, want)
				if kind == "" || kind == FaultMalformed || kind == FaultEmpty || kind == FaultFlaky && want > 1 {
					break
				}
			}
			want = min(want, 1+maxRetries)
			if got := f.Attempts()[text]; got != want {
				t.Errorf("%s: %d attempts, want %d", q, got, want)
			}
			if want > 1 && errs[q] == nil && kind == "" {
				cured++
			}
		}
		if cured == 0 {
			t.Error("no retry cured a fault")
		}
		f2, _ := run(t, true)
		if fmt.Sprint(f.Attempts()) != fmt.Sprint(f2.Attempts()) || fmt.Sprint(f.Injected()) != fmt.Sprint(f2.Injected()) {
			t.Errorf("runs differ: %v %v, then %v %v", f.Attempts(), f.Injected(), f2.Attempts(), f2.Injected())
		}
	})
}

// TestFaultClose: Close ends a hold the client would wait out, and waits
// for it; the client sees 504.
func TestFaultClose(t *testing.T) {
	f := &Faults{Rate: 1, Kinds: []string{FaultTimeout}, Hold: time.Minute}
	base := startWorld(t, f)
	cl := client.New(client.Config{BaseURL: base, Timeout: time.Minute, MaxRetries: -1})
	done := make(chan error, 1)
	go func() {
		_, err := ask(context.Background(), cl, "chat", "1+1")
		done <- err
	}()
	for start := time.Now(); f.InFlight() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the request never arrived")
		}
	}
	f.Close()
	if n := f.InFlight(); n != 0 {
		t.Errorf("%d in flight after Close", n)
	}
	select {
	case err := <-done:
		if apiErr, _ := errors.AsType[*client.APIError](err); apiErr == nil || apiErr.StatusCode != http.StatusGatewayTimeout {
			t.Errorf("error %v; want 504", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the held request outlived Close")
	}
	f.Close() // again: only waits
}

// TestFaultNoLeaks: after a burst of every fault, retries included, and
// the end of the server, no goroutine is left.
func TestFaultNoLeaks(t *testing.T) {
	before := runtime.NumGoroutine()
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Run("burst", func(t *testing.T) {
		f := &Faults{Rate: 0.7, Hold: 5 * time.Second}
		base := startWorld(t, f)
		cl := client.New(client.Config{BaseURL: base, Timeout: 150 * time.Millisecond, MaxRetries: 1, BackoffBase: time.Millisecond,
			BackoffMax: 5 * time.Millisecond, HTTPClient: &http.Client{Transport: transport}})
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				ask(context.Background(), cl, []string{"completion", "chat", "stream"}[i%3], fmt.Sprintf("%d*3", i))
			})
		}
		wg.Wait()
		for _, k := range FaultKinds {
			if f.Injected()[k] == 0 {
				t.Errorf("no %s injected: %v", k, f.Injected())
			}
		}
	})
	transport.CloseIdleConnections()
	var now int
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(20 * time.Millisecond) {
		if now = runtime.NumGoroutine(); now <= before {
			return
		}
	}
	buf := make([]byte, 1<<16)
	t.Errorf("%d goroutines, %d before:\n%s", now, before, buf[:runtime.Stack(buf, true)])
}

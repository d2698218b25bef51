package sampler

import (
	"context"
	"errors"
	"slices"
	"testing"

	"rlvr/engine/model"
)

// loopModel is the grouped-query model of TestMaxStreamsIsTheSame.
func loopModel(t *testing.T) *model.Model {
	t.Helper()
	m, err := model.New(model.Config{Vocab: 300, Dim: 64, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 96, MaxSeq: 64, AttentionBias: true, TiedEmbeddings: true}, 5)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// loopRequests are requests of several widths, lengths and temperatures,
// whose continuations end at tokens below 30 (about one draw in ten) or
// at their budget.
func loopRequests() ([]Request, []*drawn) {
	reqs := []Request{
		{Prompt: []int32{5, 17, 42}, MaxNew: 20, Temperature: 1, N: 3, Seed: 11},
		{Prompt: []int32{1, 2, 3, 4, 5, 6, 7}, MaxNew: 40, Temperature: 0.7, N: 2, Seed: 3},
		{Prompt: []int32{9}, MaxNew: 6, N: 1, Seed: 4}, // greedy
		{Prompt: []int32{8, 8, 8, 8}, MaxNew: 30, Temperature: 1.3, TopK: 50, N: 4, Seed: 5},
		{Prompt: []int32{250, 3}, MaxNew: 12, Temperature: 1, N: 1, Seed: 6},
	}
	stop := make([]int32, 30)
	for i := range stop {
		stop[i] = int32(i)
	}
	out := make([]*drawn, len(reqs))
	for i := range reqs {
		out[i] = record(&reqs[i], stop...)
	}
	return reqs, out
}

// TestLoopAdmissionIsTheSame checks that requests submitted to a running
// Loop — into a batch already decoding, each at a different step of it,
// and into an idle loop — draw bitwise the same tokens and logprobs as
// one Sample call of all, and that each request is told it ended when
// its own continuations end, before the batch does.
func TestLoopAdmissionIsTheSame(t *testing.T) {
	m := loopModel(t)
	reqs, want := loopRequests()
	if err := New(m).Sample(ctx, reqs); err != nil {
		t.Fatal(err)
	}

	s := New(m)
	loop, err := s.NewLoop(6, m.Config.MaxSeq)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- loop.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-ran; !errors.Is(err, ErrLoopStopped) {
			t.Errorf("Run returned %v, want ErrLoopStopped", err)
		}
	}()

	reqs, got := loopRequests()
	ended := make(chan int, len(reqs))
	var order []int // requests in the order they ended, as Run saw them
	job := func(i int) *Job {
		return &Job{Request: reqs[i], Done: func(err error) {
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			order = append(order, i)
			ended <- i
		}}
	}
	submit := func(i int) {
		if err := loop.Submit(ctx, job(i)); err != nil {
			t.Error(err)
		}
	}
	// Request 0 starts alone; each later one is submitted from inside
	// the running batch, after the one before it has drawn i+2 tokens
	// (or a continuation of it ended, if sooner), so it joins mid-batch
	// at a step of its own.
	for i := range len(reqs) - 1 {
		accept, drawnBy, submitted := reqs[i].Accept, 0, false
		reqs[i].Accept = func(k int, tok int32, lp float32, last bool) bool {
			drawnBy++
			done := accept(k, tok, lp, last)
			if !submitted && (drawnBy == i+2 || done || last) {
				submitted = true
				submit(i + 1)
			}
			return done
		}
	}
	submit(0)
	for range reqs {
		<-ended
	}
	if slices.Equal(order, []int{0, 1, 2, 3, 4}) && len(want[1].tokens[0]) > len(want[2].tokens[0]) {
		t.Errorf("requests ended in submission order %v, though request 2 is shorter than 1: they wait for the batch", order)
	}
	for i := range want {
		for k := range want[i].tokens {
			if !slices.Equal(want[i].tokens[k], got[i].tokens[k]) || !sameBits(want[i].logprobs[k], got[i].logprobs[k]) {
				t.Fatalf("request %d's continuation %d differs from one batch of all:\n%v\n%v", i, k, want[i].tokens[k], got[i].tokens[k])
			}
		}
	}

	// An idle loop takes a request again, the same.
	reqs, got = loopRequests()
	done := make(chan error, 1)
	if err := loop.Submit(ctx, &Job{Request: reqs[3], Done: func(err error) { done <- err }}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for k := range want[3].tokens {
		if !slices.Equal(want[3].tokens[k], got[3].tokens[k]) {
			t.Fatalf("request 3 in an idle loop: continuation %d differs:\n%v\n%v", k, want[3].tokens[k], got[3].tokens[k])
		}
	}
}

// TestLoopCancelFreesSlots checks that a request whose context ends is
// dropped at the next step with the context's cause, and that its slots
// go to the request waiting for them, which then draws what it draws
// alone.
func TestLoopCancelFreesSlots(t *testing.T) {
	m := loopModel(t)
	long := Request{Prompt: []int32{1, 2, 3}, MaxNew: 60, Temperature: 1, N: 4, Seed: 9}
	next := Request{Prompt: []int32{7, 7}, MaxNew: 25, Temperature: 1, N: 4, Seed: 2}
	alone := sampleAll(t, New(m), next)[0]

	s := New(m)
	loop, err := s.NewLoop(4, m.Config.MaxSeq)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go loop.Run(runCtx)

	longCtx, cancel := context.WithCancel(ctx)
	drawnLong := 0
	long.Accept = func(int, int32, float32, bool) bool {
		if drawnLong++; drawnLong == 8 {
			cancel() // the client goes away mid-stream
		}
		return false
	}
	longDone, nextDone := make(chan error, 1), make(chan error, 1)
	if err := loop.Submit(longCtx, &Job{Request: long, Done: func(err error) { longDone <- err }}); err != nil {
		t.Fatal(err)
	}
	got := record(&next)
	// next needs every slot: it can start only when long's are freed.
	if err := loop.Submit(ctx, &Job{Request: next, Done: func(err error) { nextDone <- err }}); err != nil {
		t.Fatal(err)
	}
	if err := <-longDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled request ended with %v, want context.Canceled", err)
	}
	if drawnLong >= 4*60 {
		t.Fatalf("the cancelled request drew all of its %d tokens", drawnLong)
	}
	if err := <-nextDone; err != nil {
		t.Fatal(err)
	}
	for k := range alone.tokens {
		if !slices.Equal(alone.tokens[k], got.tokens[k]) || !sameBits(alone.logprobs[k], got.logprobs[k]) {
			t.Fatalf("continuation %d after a cancelled request differs from alone:\n%v\n%v", k, alone.tokens[k], got.tokens[k])
		}
	}
}

// TestLoopRefuses checks what Submit refuses: a request wider than the
// loop, one longer than a slot holds, a malformed one, and any after Run
// has stopped, which also ends the requests still waiting.
func TestLoopRefuses(t *testing.T) {
	m := loopModel(t)
	loop, err := New(m).NewLoop(2, 16)
	if err != nil {
		t.Fatal(err)
	}
	nop := func(error) {}
	for name, j := range map[string]*Job{
		"wider than the loop":  {Request: Request{Prompt: []int32{1}, MaxNew: 4, N: 3}, Done: nop},
		"longer than a slot":   {Request: Request{Prompt: []int32{1, 2, 3}, MaxNew: 14}, Done: nop},
		"empty prompt":         {Request: Request{MaxNew: 4}, Done: nop},
		"no Done":              {Request: Request{Prompt: []int32{1}, MaxNew: 4}},
		"Weights without Load": {Request: Request{Prompt: []int32{1}, MaxNew: 4}, Weights: 1, Done: nop},
	} {
		if err := loop.Submit(ctx, j); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(m).NewLoop(2, m.Config.MaxSeq+1); err == nil {
		t.Error("a loop beyond the model's context was made")
	}
	// Submitted before Run and never started: Run's end ends it.
	waited := make(chan error, 1)
	if err := loop.Submit(ctx, &Job{Request: Request{Prompt: []int32{1}, MaxNew: 4}, Done: func(err error) { waited <- err }}); err != nil {
		t.Fatal(err)
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	if err := loop.Run(stopped); !errors.Is(err, ErrLoopStopped) {
		t.Fatalf("Run on an ended context returned %v", err)
	}
	if err := <-waited; !errors.Is(err, ErrLoopStopped) {
		t.Fatalf("a waiting request ended with %v, want ErrLoopStopped", err)
	}
	if err := loop.Submit(ctx, &Job{Request: Request{Prompt: []int32{1}, MaxNew: 4}, Done: nop}); !errors.Is(err, ErrLoopStopped) {
		t.Fatalf("Submit after Run returned %v, want ErrLoopStopped", err)
	}
}

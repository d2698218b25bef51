package sampler

import (
	"context"
	"errors"
	"runtime"
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

// startLoop returns s's loop of slots continuations of capacity tokens,
// running until the test ends, when its Run must return ErrLoopStopped.
func startLoop(t *testing.T, s *Sampler, slots, capacity int) *Loop {
	t.Helper()
	loop, err := s.NewLoop(slots, capacity)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- loop.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-ran; !errors.Is(err, ErrLoopStopped) {
			t.Errorf("Run returned %v, want ErrLoopStopped", err)
		}
	})
	return loop
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
	loop := startLoop(t, s, 6, m.Config.MaxSeq)

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
	loop := startLoop(t, s, 4, m.Config.MaxSeq)

	longCtx, cancel := context.WithCancel(ctx)
	longDone, nextDone := make(chan error, 1), make(chan error, 1)
	got := record(&next)
	drawnLong := 0
	long.Accept = func(int, int32, float32, bool) bool {
		if drawnLong++; drawnLong == 8 {
			// next needs every slot: it can start only when long's are
			// freed.
			if err := loop.Submit(ctx, &Job{Request: next, Done: func(err error) { nextDone <- err }}); err != nil {
				t.Error(err)
			}
			// The client goes away mid-stream. Run's goroutine, here,
			// alone receives the loop's wake-ups: the next one is
			// Submit's context.AfterFunc marking long gone, which the
			// loop then sees before the next step.
			select {
			case <-loop.wake:
			default:
			}
			cancel()
			<-loop.wake
		}
		return false
	}
	if err := loop.Submit(longCtx, &Job{Request: long, Done: func(err error) { longDone <- err }}); err != nil {
		t.Fatal(err)
	}
	if err := <-longDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled request ended with %v, want context.Canceled", err)
	}
	if drawnLong != 8 {
		t.Fatalf("the cancelled request drew %d tokens, want the 8 before it was cancelled", drawnLong)
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

// TestLoopRunsLongRequestsAlone submits, to a loop of 4 slots of 12
// tokens, two requests that fit a slot and, while they run, two that do
// not (spans of 20 and 16, for other weights), and two more that fit.
// It checks that every request draws bitwise what one Sample call over
// its weights draws; that the long ones start once the first two have
// ended, together, in a cache of 2 slots of 20 tokens (the 48 positions
// of the slots), drawing their 5 continuations in turns; that the last
// two start once they have ended, in the slots again; and that each
// change of weights was loaded once.
func TestLoopRunsLongRequestsAlone(t *testing.T) {
	ma := loopModel(t)
	mb, err := model.New(ma.Config, 6)
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]*model.Model{"a": ma, "b": mb}
	long := []bool{false, false, true, true, false, false}
	weights := []string{"a", "a", "b", "b", "a", "a"}
	requests := func() ([]Request, []*drawn) {
		reqs := []Request{
			{Prompt: []int32{5, 17, 42}, MaxNew: 8, Temperature: 1, N: 2, Seed: 21},
			{Prompt: []int32{9, 9}, MaxNew: 10, Temperature: 0.8, TopK: 40, N: 2, Seed: 22},
			{Prompt: []int32{1, 2, 3, 4}, MaxNew: 16, Temperature: 1, N: 3, Seed: 23},
			{Prompt: []int32{7, 1}, MaxNew: 14, Temperature: 1.2, N: 2, Seed: 24},
			{Prompt: []int32{3, 3, 3}, MaxNew: 9, Temperature: 1, N: 4, Seed: 25},
			{Prompt: []int32{250}, MaxNew: 6, N: 1, Seed: 26}, // greedy
		}
		out := make([]*drawn, len(reqs))
		for i := range reqs {
			if long[i] {
				out[i] = record(&reqs[i]) // to MaxNew, the end of its span
			} else {
				out[i] = record(&reqs[i], 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)
			}
		}
		return reqs, out
	}
	reqs, want := requests()
	for w, m := range sources {
		var some []Request
		for i := range reqs {
			if weights[i] == w {
				some = append(some, reqs[i])
			}
		}
		if err := New(m).Sample(ctx, some); err != nil {
			t.Fatal(err)
		}
	}

	m, err := model.NewEmpty(ma.Config)
	if err != nil {
		t.Fatal(err)
	}
	s := New(m)
	loop := startLoop(t, s, 4, 12)

	// Run's goroutine alone writes these, until every request has ended.
	var loads []string
	var events []int                    // the request of each drawn token, in order
	shapes := make([][2]int, len(reqs)) // per request, the cache (slots, capacity) it drew in
	reqs, got := requests()
	ended := make(chan int, len(reqs))
	submit := func(i int) {
		load := func() {
			copy(m.Params, sources[weights[i]].Params)
			loads = append(loads, weights[i])
		}
		j := &Job{Request: reqs[i], Weights: weights[i], Load: load, Done: func(err error) {
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
			ended <- i
		}}
		if err := loop.Submit(ctx, j); err != nil {
			t.Error(err)
		}
	}
	for i := range reqs {
		accept := reqs[i].Accept
		reqs[i].Accept = func(k int, tok int32, lp float32, last bool) bool {
			events = append(events, i)
			shape := [2]int{s.cache.Slots, s.cache.Capacity}
			if shapes[i] != ([2]int{}) && shapes[i] != shape {
				t.Errorf("request %d drew in caches of %v and %v", i, shapes[i], shape)
			}
			shapes[i] = shape
			return accept(k, tok, lp, last)
		}
	}
	// The others are submitted once request 0 has drawn 3 tokens, with
	// requests 0 and 1 in flight.
	accept0, submitted := reqs[0].Accept, false
	reqs[0].Accept = func(k int, tok int32, lp float32, last bool) bool {
		done := accept0(k, tok, lp, last)
		if !submitted && len(events) >= 3 {
			submitted = true
			for i := 2; i < len(reqs); i++ {
				submit(i)
			}
		}
		return done
	}
	submit(0)
	submit(1)
	for range reqs {
		<-ended
	}

	for i := range want {
		for k := range want[i].tokens {
			if !slices.Equal(want[i].tokens[k], got[i].tokens[k]) || !sameBits(want[i].logprobs[k], got[i].logprobs[k]) {
				t.Fatalf("request %d's continuation %d differs from one batch over its weights:\n%v\n%v", i, k, want[i].tokens[k], got[i].tokens[k])
			}
		}
		if wantShape := map[bool][2]int{false: {4, 12}, true: {2, 20}}[long[i]]; shapes[i] != wantShape {
			t.Errorf("request %d drew in a cache of %v (slots, capacity), want %v", i, shapes[i], wantShape)
		}
	}
	// Requests 0 and 1, then 2 and 3, then 4 and 5: no pair draws before
	// the pair ahead of it has ended.
	for e := 1; e < len(events); e++ {
		if events[e]/2 < events[e-1]/2 {
			t.Fatalf("request %d drew after request %d: the long requests did not run alone (%v)", events[e], events[e-1], events)
		}
	}
	if !slices.Equal(loads, []string{"a", "b", "a"}) {
		t.Errorf("weights loaded %v, want [a b a]", loads)
	}
}

// TestLoopCancelLongRequest checks that a request longer than a slot,
// whose continuations draw one at a time in the whole cache, ends with
// its context's cause when that ends, at the next step; that the
// continuations it had not started never draw; and that the request
// behind it draws in the slots what it draws alone.
func TestLoopCancelLongRequest(t *testing.T) {
	m := loopModel(t)
	long := Request{Prompt: []int32{1, 2, 3}, MaxNew: 25, Temperature: 1, N: 3, Seed: 9}
	next := Request{Prompt: []int32{7, 7}, MaxNew: 8, Temperature: 1, N: 2, Seed: 2}
	alone := sampleAll(t, New(m), next)[0]

	s := New(m)
	loop := startLoop(t, s, 3, 10)

	longCtx, cancel := context.WithCancel(ctx)
	drawnLong := make([]int, 3)
	long.Accept = func(k int, _ int32, _ float32, _ bool) bool {
		if drawnLong[k]++; k == 0 && drawnLong[k] == 8 {
			cancel()
			// Wait for the loop to see it (Submit's context.AfterFunc),
			// so that it is seen before the next draw.
			for t := loop.rest[0].t; !t.gone.Load(); {
				runtime.Gosched()
			}
		}
		return false
	}
	longDone, nextDone := make(chan error, 1), make(chan error, 1)
	if err := loop.Submit(longCtx, &Job{Request: long, Done: func(err error) { longDone <- err }}); err != nil {
		t.Fatal(err)
	}
	got := record(&next)
	var shape [2]int
	accept := next.Accept
	next.Accept = func(k int, tok int32, lp float32, last bool) bool {
		shape = [2]int{s.cache.Slots, s.cache.Capacity}
		return accept(k, tok, lp, last)
	}
	if err := loop.Submit(ctx, &Job{Request: next, Done: func(err error) { nextDone <- err }}); err != nil {
		t.Fatal(err)
	}
	if err := <-longDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled request ended with %v, want context.Canceled", err)
	}
	if err := <-nextDone; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(drawnLong, []int{8, 0, 0}) {
		t.Fatalf("the cancelled request drew %v tokens per continuation", drawnLong)
	}
	if shape != [2]int{3, 10} {
		t.Errorf("the request after drew in a cache of %v (slots, capacity), want the slots [3 10]", shape)
	}
	for k := range alone.tokens {
		if !slices.Equal(alone.tokens[k], got.tokens[k]) || !sameBits(alone.logprobs[k], got.logprobs[k]) {
			t.Fatalf("continuation %d after a cancelled long request differs from alone:\n%v\n%v", k, alone.tokens[k], got.tokens[k])
		}
	}
}

// TestLoopRefuses checks what Submit refuses: a request wider than the
// loop, one longer than its whole cache holds, a malformed one, and any after Run
// has stopped, which also ends the requests still waiting.
func TestLoopRefuses(t *testing.T) {
	m := loopModel(t)
	loop, err := New(m).NewLoop(2, 16)
	if err != nil {
		t.Fatal(err)
	}
	nop := func(error) {}
	for name, j := range map[string]*Job{
		"wider than the loop":   {Request: Request{Prompt: []int32{1}, MaxNew: 4, N: 3}, Done: nop},
		"longer than the cache": {Request: Request{Prompt: []int32{1, 2, 3}, MaxNew: 30}, Done: nop},
		"empty prompt":          {Request: Request{MaxNew: 4}, Done: nop},
		"no Done":               {Request: Request{Prompt: []int32{1}, MaxNew: 4}},
		"Weights without Load":  {Request: Request{Prompt: []int32{1}, MaxNew: 4}, Weights: 1, Done: nop},
	} {
		if err := loop.Submit(ctx, j); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(m).NewLoop(2, m.Config.MaxSeq+1); err == nil {
		t.Error("a loop beyond the model's context was made")
	}
	// Submitted before Run and never started: Run's end ends them. The
	// second is longer than a slot, and fits the whole cache.
	waited := make(chan error, 2)
	for _, r := range []Request{{Prompt: []int32{1}, MaxNew: 4}, {Prompt: []int32{1, 2, 3}, MaxNew: 29}} {
		if err := loop.Submit(ctx, &Job{Request: r, Done: func(err error) { waited <- err }}); err != nil {
			t.Fatal(err)
		}
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	if err := loop.Run(stopped); !errors.Is(err, ErrLoopStopped) {
		t.Fatalf("Run on an ended context returned %v", err)
	}
	for range 2 {
		if err := <-waited; !errors.Is(err, ErrLoopStopped) {
			t.Fatalf("a waiting request ended with %v, want ErrLoopStopped", err)
		}
	}
	if err := loop.Submit(ctx, &Job{Request: Request{Prompt: []int32{1}, MaxNew: 4}, Done: nop}); !errors.Is(err, ErrLoopStopped) {
		t.Fatalf("Submit after Run returned %v, want ErrLoopStopped", err)
	}
}

package eapo

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"rlvr/engine/optim"
	"rlvr/expert"
	"rlvr/method"
	"rlvr/method/methodtest"
	"rlvr/serve"
	"rlvr/serve/servetest"
	"rlvr/task"
)

// TestConsultationSurvivesFaultyExperts consults the world's scripted
// experts through a server that injects a fault into 30% of calls
// (timeouts, resets, 500, 429 with Retry-After, malformed JSON, empty and
// endless replies): the steps finish within the experts' deadlines, every
// injected fault is counted as a failure of its kind, every other reply is
// written into the history, and no goroutine outlives the servers.
func TestConsultationSurvivesFaultyExperts(t *testing.T) {
	// The kind of failure each fault is seen as, without retries.
	seenAs := map[string]string{
		servetest.FaultTimeout: expert.FailTimeout, servetest.FaultConnection: expert.FailConnection,
		servetest.FaultServer: expert.FailServer, servetest.FaultRateLimited: expert.FailRateLimited,
		servetest.FaultMalformed: expert.FailMalformed, servetest.FaultEmpty: expert.FailEmpty,
		servetest.FaultEndless: expert.FailTimeout,
	}
	before := runtime.NumGoroutine()
	t.Run("steps", func(t *testing.T) {
		faults := &servetest.Faults{Rate: 0.3, PerCall: true, Seed: 5, Hold: 30 * time.Second}
		base := servetest.StartFaults(t, faults, serve.Config{}, expert.WorldModels()...)
		var experts []expert.Config
		for i := range 3 {
			e := expert.Config{Name: fmt.Sprintf("E%d", i+1), URL: base, Retries: -1,
				// Far above a healthy call's time even on a loaded machine, far
				// below the server's 30 s hold.
				Timeout: 2 * time.Second, Deadline: 3 * time.Second, Concurrency: 16}
			if err := e.Check("experts", i, false); err != nil {
				t.Fatal(err)
			}
			experts = append(experts, e)
		}
		pool, err := expert.Open(experts, expert.Options{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		c := &Consultation{Format: World{}, Pool: pool, Accept: Schedule{Kind: optim.Constant, Start: 1},
			Turns: Schedule{Kind: optim.Constant, Start: 2}, RunSteps: 2, MaxQueries: 3, MaxTokens: 200}
		r := &method.RL{Objective: methodtest.Family(t, method.DAPO), GroupSize: 4, Rollout: c, Shapers: []method.Shaper{c}}
		failed, accepted, asked := map[string]float64{}, 0.0, 0.0
		start := time.Now()
		for step := range 2 {
			sc := policyStepContext(&consulter{Action: "?E1:(12+7)*3;E2:5+8;E3:40-3?\n", Own: "0"})
			sc.Step, sc.Seed = step, uint64(step)
			var examples []task.Example
			for i := range 10 {
				examples = append(examples, methodtest.Example(fmt.Sprint(step, "q", i), "7"))
			}
			if _, err := r.Step(context.Background(), sc, examples); err != nil {
				t.Fatal(err)
			}
			for _, k := range FailureKinds {
				failed[k] += sc.Metrics[MetricFail+k]
			}
			accepted += sc.Metrics[MetricAcceptanceRate] * sc.Metrics[MetricQueriesPerEpisode] * 40
		}
		// Two steps of one consulting turn, each about one 3 s deadline
		// long; a call waiting for the server's 30 s hold would show.
		if el := time.Since(start); el > 15*time.Second {
			t.Errorf("two steps took %v: something waited past its deadline", el)
		}
		want := map[string]float64{}
		var injected float64
		for kind, n := range faults.Injected() {
			want[seenAs[kind]] += float64(n)
			injected += float64(n)
		}
		for _, k := range FailureKinds {
			if failed[k] != want[k] {
				t.Errorf("%v failures %s counted, %v injected", failed[k], k, want[k])
			}
		}
		asked = float64(faults.Calls())
		if asked != 240 || injected == 0 || injected > asked/2 {
			t.Fatalf("%v calls with %v faults: want 240 calls (2 steps × 40 episodes × 3 queries), about 30%% faulty", asked, injected)
		}
		if got := accepted; got < asked-injected-1e-6 || got > asked-injected+1e-6 {
			t.Errorf("%v replies written, want the %v calls without a fault", got, asked-injected)
		}
		for _, k := range []string{servetest.FaultTimeout, servetest.FaultConnection, servetest.FaultServer, servetest.FaultRateLimited,
			servetest.FaultMalformed, servetest.FaultEmpty, servetest.FaultEndless} {
			if faults.Injected()[k] == 0 {
				t.Errorf("no call drew %s: the test does not cover it", k)
			}
		}
	})
	// Servers and clients are gone: so must be their goroutines.
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines before, %d after:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}

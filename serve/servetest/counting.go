package servetest

import (
	"context"
	"maps"
	"sync"
	"time"

	"rlvr/format/tokenizer"
	"rlvr/sample"
	"rlvr/serve"
)

// Counting wraps a served model's generator: it counts the requests it
// gets by prompt, decoded with the byte tokenizer of the built-in world,
// and takes Delay over each call (returning early when the call is
// cancelled). It is safe for concurrent use.
type Counting struct {
	serve.Generator
	Delay time.Duration

	mu sync.Mutex
	n  map[string]int
}

// Count wraps every model's generator in a Counting taking delay, and
// returns them by model name.
func Count(models []serve.Model, delay time.Duration) map[string]*Counting {
	byName := map[string]*Counting{}
	for i := range models {
		c := &Counting{Generator: models[i].Generator, Delay: delay}
		models[i].Generator = c
		byName[models[i].Name] = c
	}
	return byName
}

// Sample implements serve.Generator.
func (g *Counting) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	g.mu.Lock()
	if g.n == nil {
		g.n = map[string]int{}
	}
	for _, r := range reqs {
		g.n[tokenizer.NewByteTokenizer().Decode(r.Prompt)]++
	}
	g.mu.Unlock()
	select {
	case <-time.After(g.Delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Generator.Sample(ctx, reqs)
}

// Counts returns the requests so far by prompt.
func (g *Counting) Counts() map[string]int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.n)
}

package optim

import "sync"

// pool is a fixed set of goroutines that run chunk functions. It exists
// because a go statement allocates, and AdamW.Step must not; handing work to
// goroutines started once costs only channel operations.
type pool struct {
	tasks chan task
	wg    sync.WaitGroup
	once  sync.Once
}

type task struct {
	fn            func(chunk, lo, hi int)
	chunk, lo, hi int
}

func newPool(workers int) *pool {
	p := &pool{tasks: make(chan task, workers)}
	for range workers {
		go p.work()
	}
	return p
}

func (p *pool) work() {
	for t := range p.tasks {
		t.fn(t.chunk, t.lo, t.hi)
		p.wg.Done()
	}
}

// submit queues t; the buffer holds one task per worker, so it never blocks
// when called at most once per worker between waits.
func (p *pool) submit(t task) {
	p.wg.Add(1)
	p.tasks <- t
}

// wait blocks until every submitted task has finished.
func (p *pool) wait() { p.wg.Wait() }

// close stops the workers once they finish queued tasks. It is safe to call
// more than once, since both Close and the GC cleanup may call it.
func (p *pool) close() { p.once.Do(func() { close(p.tasks) }) }

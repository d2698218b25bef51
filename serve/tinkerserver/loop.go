package tinkerserver

import (
	"errors"
	"runtime/debug"

	"rlvr/api/tinker"
	"rlvr/engine/sampler"
	"rlvr/sample"
)

// runLoop runs b's decoding loop until the server closes. A model error
// stops the loop: the calls in it fail, and so does every later one for
// b, with that error.
func (s *Server) runLoop(b *base) {
	err := b.loop.Run(s.ctx)
	if s.ctx.Err() == nil {
		s.log.Error("tinkerserver: a decoding loop stopped", "base_model", b.name, "err", err)
	}
}

// submitLocked puts job into its base model's decoding loop, which
// settles its future when the job's samples end. A job the loop refuses
// (a prompt and max_tokens beyond what its whole cache holds, for one
// sample alone) fails at once, as the user's. s.mu is held.
func (s *Server) submitLocked(job *sampleJob) {
	b := job.w.base
	load := func() {
		// Run's goroutine, no sample in flight: the loop repacks.
		copy(b.sampModel.Params, job.w.params)
		b.current = job.w
	}
	err := b.loop.Submit(s.ctx, job.req, job.w, load, func(out []sample.Completion, err error) { s.loopDone(job, out, err) })
	if err != nil {
		if errors.Is(err, sampler.ErrLoopStopped) {
			s.settleLocked(job.fut, failureBody(serverErr("sampling: %v", err)), true)
			return
		}
		s.settleLocked(job.fut, failureBody(userErr("asample: %v", err)), true)
		return
	}
	s.sampling.inLoops++
}

// loopDone settles a job the decoding loop ended: on the loop's
// goroutine, where the model holds the job's weights (the loop loads
// others only once every sample in flight has ended), so that its prompt
// logprobs run there, between two decode steps.
func (s *Server) loopDone(job *sampleJob, out []sample.Completion, err error) {
	defer func() {
		s.mu.Lock()
		s.sampling.inLoops--
		s.mu.Unlock()
	}()
	if h := s.hook.Load(); h != nil {
		(*h)("asample")
	}
	if s.ctx.Err() != nil {
		s.fail(job.fut, serverErr("the server is shutting down"))
		return
	}
	if err != nil {
		s.log.Warn("tinkerserver: sampling failed", "weights", job.w.path, "err", err)
		s.fail(job.fut, serverErr("sampling: %v", err))
		return
	}
	res := []tinker.SampleResponse{sampleResponse(out)}
	err = func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("tinkerserver: panic while computing prompt logprobs", "panic", p, "stack", string(debug.Stack()))
				err = serverErr("internal error: %v", p)
			}
		}()
		if job.w.base.current != job.w {
			panic("the decoding loop ended a job whose weights the model does not hold")
		}
		return promptLogprobs(s.ctx, job.w.base.sampModel, []*sampleJob{job}, res)
	}()
	if err != nil {
		s.fail(job.fut, serverErr("prompt logprobs: %v", err))
		return
	}
	s.finish(job.fut, res[0])
}

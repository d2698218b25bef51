package tinkerserver

import (
	"math"
	"net/http"
	"time"
)

// Batched futures: client/config answers sample_use_retrieve_futures, so
// the SDK's sampling client runs one poller per sampling session (and per
// clone of it) that long-polls POST retrieve_futures for the requests of
// that session which have finished, instead of a retrieve_future per
// request; it then fetches each result with retrieve_future, at once.
// And sample_join_sampling_session: a sampling client unpickled in another
// process asks POST join_sampling_session for its clone number, which
// numbers its seq_ids (seq_id / cloneSeqSpan) apart from every other
// clone's.
//
// Each sampling session keeps, per clone, a log of its requests'
// completions, numbered by a cursor from 1. A poll names the cursor it
// has seen (prev_cursor): what is at or before it is dropped, and what is
// after it is answered, at once, or as soon as there is any, or empty
// after the poll's timeout (at most Config.PollTimeout and 30 s; 0 answers
// at once).

// maxFuturesPoll bounds how long a retrieve_futures poll waits, whatever
// Config.PollTimeout says.
const maxFuturesPoll = 30 * time.Second

// cloneSeqSpan is the span of seq_ids each clone of a sampling client
// numbers its requests in, as the SDK does.
const cloneSeqSpan = 1_000_000_000

// completionLog is one clone's completions, guarded by s.mu.
type completionLog struct {
	events []completion
	last   int64         // the cursor of the newest completion
	wake   chan struct{} // closed (and replaced) when a completion is added
}

// completion is one request's completion, as retrieve_futures reports it.
type completion struct {
	cursor int64
	fut    *future
	failed bool
}

// logLocked is the completion log of a clone of ss, made if need be. s.mu
// is held.
func (ss *samplingSession) logLocked(clone int64) *completionLog {
	if ss.logs == nil {
		ss.logs = map[int64]*completionLog{}
	}
	l := ss.logs[clone]
	if l == nil {
		l = &completionLog{wake: make(chan struct{})}
		ss.logs[clone] = l
	}
	return l
}

// watch makes f's completion an event of the clone of ss its seq_id
// names. s.mu is held.
func (ss *samplingSession) watch(f *future, seqID *int64) {
	clone := int64(0)
	if seqID != nil && *seqID > 0 {
		clone = *seqID / cloneSeqSpan
	}
	f.onSettle = func(failed bool) {
		l := ss.logLocked(clone)
		l.last++
		l.events = append(l.events, completion{cursor: l.last, fut: f, failed: failed})
		close(l.wake)
		l.wake = make(chan struct{})
	}
}

// retrieveFuturesRequest is retrieve_futures' body.
type retrieveFuturesRequest struct {
	Target struct {
		Type              string `json:"type"`
		SamplingSessionID string `json:"sampling_session_id"`
		ClonedSamplerID   int64  `json:"cloned_sampler_id"`
	} `json:"target"`
	PrevCursor          int64    `json:"prev_cursor"`
	Timeout             *float64 `json:"timeout"`
	RetrievedRequestIDs []string `json:"retrieved_request_ids"`
}

// futureCompletion is one entry of retrieve_futures' answer.
type futureCompletion struct {
	State     string `json:"state"` // "finished" or "failed"
	RequestID string `json:"request_id"`
}

func (s *Server) retrieveFutures(w http.ResponseWriter, r *http.Request) {
	const kind = "retrieve_futures"
	var req retrieveFuturesRequest
	if _, err := s.decode(w, r, kind, &req); err != nil {
		writeError(w, err)
		return
	}
	switch {
	case req.Target.Type != "" && req.Target.Type != "sampling_session":
		writeError(w, errorf(http.StatusBadRequest, "%s: target.type %q is not sampling_session", kind, req.Target.Type))
		return
	case req.Target.SamplingSessionID == "":
		writeError(w, errorf(http.StatusBadRequest, "%s: target.sampling_session_id is missing", kind))
		return
	case req.Target.ClonedSamplerID < 0:
		writeError(w, errorf(http.StatusBadRequest, "%s: target.cloned_sampler_id is %d, want 0 or more", kind, req.Target.ClonedSamplerID))
		return
	case req.PrevCursor < 0:
		writeError(w, errorf(http.StatusBadRequest, "%s: prev_cursor is %d, want 0 or more", kind, req.PrevCursor))
		return
	case req.Timeout != nil && !(*req.Timeout >= 0 && *req.Timeout <= math.MaxInt32):
		writeError(w, errorf(http.StatusBadRequest, "%s: timeout is %v, want seconds, 0 or more", kind, *req.Timeout))
		return
	}
	// The SDK's poller gives up on a poll after 45 s, expecting the server
	// to answer within about 30.
	wait := min(s.cfg.PollTimeout, maxFuturesPoll)
	if req.Timeout != nil {
		wait = min(wait, time.Duration(*req.Timeout*float64(time.Second)))
	}
	ss, err := s.samplingSessionByID(req.Target.SamplingSessionID)
	if err != nil {
		writeError(w, errorf(statusOf(err), "%s: %v", kind, err))
		return
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		for _, id := range req.RetrievedRequestIDs {
			// Its result is kept a minute more, for a retry (sweep).
			if f := s.futures[id]; f != nil && f.body != nil && f.retrieved.IsZero() {
				f.retrieved = now
			}
		}
		l := ss.logLocked(req.Target.ClonedSamplerID)
		drop := 0
		for drop < len(l.events) && l.events[drop].cursor <= req.PrevCursor {
			drop++
		}
		clear(l.events[:drop])
		l.events = l.events[drop:]
		out := make([]futureCompletion, 0, len(l.events))
		for _, c := range l.events {
			state := "finished"
			if c.failed {
				state = "failed"
			}
			out = append(out, futureCompletion{State: state, RequestID: c.fut.id})
		}
		cursor, wake := max(req.PrevCursor, l.last), l.wake
		s.mu.Unlock()
		if len(out) > 0 || wait <= 0 {
			writeJSON(w, http.StatusOK, map[string]any{"completions": out, "cursor": cursor})
			return
		}
		select {
		case <-wake:
		case <-timer.C:
			wait = 0 // answer what there is, if anything
		case <-r.Context().Done():
			return
		case <-s.ctx.Done():
			wait = 0
		}
	}
}

// joinSamplingSession answers POST join_sampling_session: a new clone
// number of the sampling session, from 1 (its first client is 0).
func (s *Server) joinSamplingSession(w http.ResponseWriter, r *http.Request) {
	const kind = "join_sampling_session"
	var req struct {
		SamplingSessionID string `json:"sampling_session_id"`
	}
	if _, err := s.decode(w, r, kind, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.SamplingSessionID == "" {
		writeError(w, errorf(http.StatusBadRequest, "%s: sampling_session_id is missing", kind))
		return
	}
	ss, err := s.samplingSessionByID(req.SamplingSessionID)
	if err != nil {
		writeError(w, errorf(statusOf(err), "%s: %v", kind, err))
		return
	}
	s.mu.Lock()
	ss.clones++
	n := ss.clones
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"type": kind, "client_counter": n})
}

// dropSettledLocked drops from every completion log the completions
// whose results are no longer kept. s.mu is held.
func (s *Server) dropSettledLocked() {
	for _, ss := range s.samplingSessions {
		for clone, l := range ss.logs {
			kept := l.events[:0]
			for _, c := range l.events {
				if s.futures[c.fut.id] == c.fut {
					kept = append(kept, c)
				}
			}
			clear(l.events[len(kept):])
			l.events = kept
			if len(kept) == 0 && l.last == 0 {
				delete(ss.logs, clone)
			}
		}
	}
}

package expert

import (
	"context"
	"errors"
	"net"
	"net/http"

	client "rlvr/client/openai"
	"rlvr/internal/httpretry"
	"rlvr/task"
)

// How an expert is asked.
const (
	// APICompletion sends the question as a plain completion prompt
	// (POST /v1/completions, or a local model's continuation).
	APICompletion = "completion"
	// APIChat sends the question as a chat (POST /v1/chat/completions,
	// or a local model's chat template).
	APIChat = "chat"
)

// The kinds of failure: an expert gave no usable answer. Whoever asked
// records the failure and goes on.
const (
	FailTimeout     = "timeout"      // no answer in time: an attempt's timeout, the answer's deadline, a 408 or 504
	FailConnection  = "connection"   // connection refused, reset or closed early
	FailRateLimited = "rate-limited" // 429 after every retry
	FailServer      = "server-error" // 5xx after every retry
	FailRefused     = "refused"      // another 4xx, or a prompt too long for a local model
	FailMalformed   = "malformed"    // a response body that is not the API's JSON
	FailEmpty       = "empty"        // an answer with no text
	FailNoSolution  = "no-solution"  // D_ME's Expert0 or a reference expert on a question without a reference solution
	FailOther       = "error"        // anything else, such as a local model's error
)

// FailureKinds lists every kind of failure, in the order summaries and
// metrics name them.
var FailureKinds = []string{FailTimeout, FailConnection, FailRateLimited, FailServer, FailRefused, FailMalformed, FailEmpty, FailNoSolution, FailOther}

// Request is one question put to an expert, in the form of the expert's
// API: Prompt for a completion, Messages for a chat. Exactly one is set.
// A sampled reply is seeded by the expert's seed, the question and Seed,
// which the asker varies between calls that ask the same question (0 for
// none: the same question, the same reply).
type Request struct {
	Prompt   string
	Messages []task.Message
	Seed     uint64
	// Example is the dataset example the question comes from, whose
	// reference solution a Reference answers with; nil when the asker
	// has none. Model experts never see it.
	Example *task.Example
}

// hash is an FNV-1a hash of the request's text.
func (r Request) hash() uint64 { return task.TextHash(r.Prompt, r.Messages) }

// An Answerer asks an expert for answers.
type Answerer interface {
	// Answer asks for every request and calls done exactly once per
	// request, with its index in reqs and the answer's text or the error
	// that prevented it, before it returns. done may be called from
	// several goroutines at once. Once ctx ends, the requests not yet
	// answered get ctx's error.
	Answer(ctx context.Context, reqs []Request, done func(i int, text string, err error))
}

// ErrRefused is wrapped by the errors of prompts an expert refuses
// without asking its model: too long for its context, or a chat for a
// model without a chat template.
var ErrRefused = errors.New("refused")

// ErrNoSolution is wrapped by the errors of a Reference asked about an
// example without a reference solution (FailNoSolution).
var ErrNoSolution = errors.New("no reference solution")

// Classify returns the kind of failure an Answerer's error is (one of
// FailureKinds).
func Classify(err error) string {
	if apiErr, ok := errors.AsType[*client.APIError](err); ok {
		switch s := apiErr.StatusCode; {
		case s == http.StatusTooManyRequests:
			return FailRateLimited
		case s == http.StatusRequestTimeout || s == http.StatusGatewayTimeout:
			return FailTimeout
		case s >= 500:
			return FailServer
		case s >= 400:
			return FailRefused
		}
		return FailOther // an error envelope in a 2xx answer
	}
	switch {
	case errors.Is(err, ErrRefused):
		return FailRefused
	case errors.Is(err, ErrNoSolution):
		return FailNoSolution
	case errors.Is(err, client.ErrMalformedResponse):
		return FailMalformed
	case errors.Is(err, context.DeadlineExceeded):
		return FailTimeout
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return FailTimeout
	}
	if httpretry.ConnectionLost(err) {
		return FailConnection
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return FailConnection
	}
	return FailOther
}

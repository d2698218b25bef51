// Package httpretry holds what rlvr's HTTP clients (the OpenAI client and
// the Tinker client) agree on about retrying: which transport failures may
// pass, how long to wait before the next try, and how much of a body an
// error message quotes.
package httpretry

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Transient reports whether a transport error may pass: a timeout, a
// refused, reset or aborted connection, or a connection closed early. A
// bad URL, a TLS failure or an unknown host will not.
func Transient(err error) bool {
	if de, ok := errors.AsType[*net.DNSError](err); ok {
		return de.IsTimeout || de.IsTemporary
	}
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return true
	}
	if ConnectionLost(err) {
		return true
	}
	oe, ok := errors.AsType[*net.OpError](err)
	return ok && oe.Op == "dial"
}

// ConnectionLost reports whether err is a refused, reset or aborted
// connection, a broken pipe, or a connection closed early.
func ConnectionLost(err error) bool {
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE, io.EOF, io.ErrUnexpectedEOF} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// Backoff is the sleep before retry n (1 for the first): what the server
// asked for in Retry-After (retryAfter > 0), else "full jitter" — uniform
// below a cap of base doubled per retry — both at most limit. jitter is a
// draw uniform in [0, 1).
func Backoff(n int, base, limit, retryAfter time.Duration, jitter float64) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, limit)
	}
	if n <= 30 {
		limit = min(limit, base<<(n-1))
	}
	return time.Duration(jitter * float64(limit))
}

// RetryAfter reads a Retry-After header: seconds or an HTTP date; 0 when
// absent or unreadable.
func RetryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(h, 64); err == nil {
		if s > 0 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(h); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// Excerpt returns the start of a body, for error messages.
func Excerpt(data []byte) string {
	const n = 200
	s := strings.TrimSpace(string(data))
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

package httpretry

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		n          int
		retryAfter time.Duration
		jitter     float64
		want       time.Duration
	}{
		{1, 0, 0.5, 50 * time.Millisecond},     // half of the first cap, 100 ms
		{3, 0, 0.5, 200 * time.Millisecond},    // the cap doubles per retry
		{20, 0, 0.999, 999 * time.Millisecond}, // up to the limit
		{1, 3 * time.Second, 0.1, time.Second}, // Retry-After, bounded by the limit
		{1, 300 * time.Millisecond, 0.1, 300 * time.Millisecond},
	} {
		if got := Backoff(tc.n, 100*time.Millisecond, time.Second, tc.retryAfter, tc.jitter); got != tc.want {
			t.Errorf("Backoff(%d, retry-after %v, jitter %v) = %v, want %v", tc.n, tc.retryAfter, tc.jitter, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	for h, want := range map[string]time.Duration{"": 0, "2": 2 * time.Second, "0.5": 500 * time.Millisecond, "-1": 0, "soon": 0,
		"Mon, 02 Jan 2006 15:04:05 GMT": 0} {
		if got := RetryAfter(h); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", h, got, want)
		}
	}
	if got := RetryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); got < 59*time.Minute {
		t.Errorf("an HTTP date an hour away gives %v", got)
	}
}

func TestTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("post: %w", syscall.ECONNRESET), true},
		{io.ErrUnexpectedEOF, true},
		{&net.OpError{Op: "dial", Err: errors.New("no route")}, true},
		{&net.DNSError{Err: "no such host", IsNotFound: true}, false},
		{&net.DNSError{Err: "timeout", IsTimeout: true}, true},
		{errors.New("x509: certificate signed by unknown authority"), false},
	} {
		if got := Transient(tc.err); got != tc.want {
			t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	long := make([]byte, 500)
	for i := range long {
		long[i] = 'a'
	}
	if got := Excerpt(long); len(got) != 200+len("…") {
		t.Errorf("excerpt of 500 bytes has %d", len(got))
	}
	if got := Excerpt([]byte("  short \n")); got != "short" {
		t.Errorf("excerpt %q", got)
	}
}

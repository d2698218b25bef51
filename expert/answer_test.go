package expert

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	client "rlvr/client/openai"
)

// TestClassify names the kind of failure of each error an Answerer
// returns.
func TestClassify(t *testing.T) {
	apiErr := func(status int) error { return fmt.Errorf("wrapped: %w", &client.APIError{StatusCode: status}) }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{apiErr(429), FailRateLimited},
		{apiErr(500), FailServer},
		{apiErr(503), FailServer},
		{apiErr(408), FailTimeout},
		{apiErr(504), FailTimeout},
		{apiErr(400), FailRefused},
		{apiErr(404), FailRefused},
		{apiErr(200), FailOther},
		{fmt.Errorf("%w from POST x: unexpected end", client.ErrMalformedResponse), FailMalformed},
		{fmt.Errorf("openai: POST x: %w", context.DeadlineExceeded), FailTimeout},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), FailConnection},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), FailConnection},
		{fmt.Errorf("openai: POST x: %w", io.EOF), FailConnection},
		{&net.OpError{Op: "read", Err: errors.New("broken")}, FailConnection},
		{fmt.Errorf("%w: too long", ErrRefused), FailRefused},
		{errors.New("the model blew up"), FailOther},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	api "rlvr/api/openai"
	"rlvr/serve"
)

// TestServeTokenFromEnvironment serves the world's experts over loopback
// with the API key given by --api-key (or its old name --token), by
// $RLVR_SERVE_TOKEN, by both (the flag wins) or by neither, and checks
// which requests are let in: the others get OpenAI's 401 envelope.
func TestServeTokenFromEnvironment(t *testing.T) {
	cliFixture(t)
	for _, tc := range []struct {
		name, env string
		flag      []string
		accepted  string // the token that gets in; "" means none is needed
		refused   []string
	}{
		{"environment", "from-env", nil, "from-env", []string{"", "wrong"}},
		{"flag", "", []string{"--api-key", "from-flag"}, "from-flag", []string{"", "wrong"}},
		{"old flag", "", []string{"--token", "from-flag"}, "from-flag", []string{"", "wrong"}},
		{"flag wins", "from-env", []string{"--api-key", "from-flag"}, "from-flag", []string{"", "from-env"}},
		{"neither", "", nil, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(serve.TokenEnv, tc.env)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			base, done := startServe(t, ctx, append([]string{"serve", "--world-experts", "--addr", "127.0.0.1:0"}, tc.flag...), `serving E0 on (http://\S+/v1)`)
			status := func(token string) (int, []byte) {
				req, err := http.NewRequest("GET", base+"/models", nil)
				if err != nil {
					t.Fatal(err)
				}
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, b
			}
			if got, _ := status(tc.accepted); got != http.StatusOK {
				t.Errorf("token %q: status %d, want 200", tc.accepted, got)
			}
			for _, tok := range tc.refused {
				got, b := status(tok)
				var e api.ErrorResponse
				if err := json.Unmarshal(b, &e); got != http.StatusUnauthorized || err != nil || e.Error.Code == nil || *e.Error.Code != api.CodeInvalidAPIKey {
					t.Errorf("token %q: status %d %s, want 401 with code %s", tok, got, b, api.CodeInvalidAPIKey)
				}
			}
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("serve did not stop")
			}
		})
	}
}

// TestServeAddrNeedsAKey: an --addr other machines reach is refused
// without an API key, and let through with one (from the flag or the
// environment) or with --insecure. Nothing listens: each command line
// also has a bad --max-n, so it stops at the flag check.
func TestServeAddrNeedsAKey(t *testing.T) {
	dir := cliFixture(t)
	t.Setenv(serve.TokenEnv, "")
	refused(t, dir, []string{"serve", "--world-experts", "--addr", "0.0.0.0:8000"},
		[]string{`--addr "0.0.0.0:8000" accepts connections from other machines: give --api-key (or $` + serve.TokenEnv + `)`, "--insecure"})
	refused(t, dir, []string{"serve", "--world-experts", "--api-key", "a", "--token", "b"}, []string{"--token is the old name of --api-key"})
	for _, tc := range []struct {
		env  string
		args []string
	}{
		{"", []string{"--addr", "0.0.0.0:8000", "--api-key", "k"}},
		{"", []string{"--addr", ":8000", "--insecure"}},
		{"k", []string{"--addr", "[::]:8000"}},
		{"", []string{"--addr", "localhost:8000"}},
	} {
		t.Setenv(serve.TokenEnv, tc.env)
		args := append([]string{"serve", "--world-experts", "--max-n", "200"}, tc.args...)
		_, _, err := execute(t, context.Background(), args...)
		if err == nil || !strings.Contains(err.Error(), "--max-n 200") || strings.Contains(err.Error(), "--addr") {
			t.Errorf("%v: error %v, want one about --max-n only", args, err)
		}
	}
}

// startServe runs rlvr serve with args until ctx ends, and returns the base
// URL that the first match of serving (a pattern with one group) finds in
// its log, and the channel its result arrives on.
func startServe(t *testing.T, ctx context.Context, args []string, serving string) (string, chan error) {
	t.Helper()
	root := rootCmd()
	var stderr syncBuffer
	root.SetOut(&stderr)
	root.SetErr(&stderr)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("panic: %v", r)
				done <- nil
			}
		}()
		done <- root.ExecuteContext(ctx)
	}()
	re := regexp.MustCompile(serving)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			return m[1], done
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned %v before listening:\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start:\n%s", stderr.String())
		}
	}
}

// TestServeUnderExpert: rlvr serve --expert 1 answers a world prompt as the
// plain server answers the prompt followed by @E1, over real HTTP, on the
// world model (whose answers under @E1 are in that expert's style).
func TestServeUnderExpert(t *testing.T) {
	cliFixture(t) // the world model, from a fresh cache
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	complete := func(base, prompt string) string {
		body := `{"model":"m","prompt":` + strconv.Quote(prompt) + `,"max_tokens":12,"temperature":0}`
		resp, err := http.Post(base+"/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("status %d: %v %+v", resp.StatusCode, err, out)
		}
		return out.Choices[0].Text
	}
	serving := `serving m on (http://\S+/v1)`
	plain, _ := startServe(t, ctx, []string{"serve", "--name", "m", "--addr", "127.0.0.1:0"}, serving)
	expert, _ := startServe(t, ctx, []string{"serve", "--name", "m", "--addr", "127.0.0.1:0", "--expert", "1"}, serving)
	suffixed, _ := startServe(t, ctx, []string{"serve", "--name", "m", "--addr", "127.0.0.1:0", "--prompt-suffix", `@E1\n`}, serving)
	for _, q := range []string{"Q:12+7\n", "Q:(3*4)-5\n", "Q:9*9\n"} {
		want := complete(plain, q+"@E1\n")
		if got := complete(expert, q); got != want {
			t.Errorf("--expert 1 on %q: %q, want %q (the plain server on the prompt with @E1)", q, got, want)
		}
		if got := complete(suffixed, q); got != want {
			t.Errorf(`--prompt-suffix '@E1\n' on %q: %q, want %q`, q, got, want)
		}
	}
	if different := complete(plain, "Q:12+7\n") != complete(plain, "Q:12+7\n@E1\n") || complete(plain, "Q:9*9\n") != complete(plain, "Q:9*9\n@E1\n"); !different {
		t.Error("the model answers the same with and without @E1: the test cannot tell whether --expert does anything")
	}
}

package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"rlvr/format/tokenizer"
	"rlvr/serve"
)

// TestServeTokenFromEnvironment serves the world's experts over loopback
// with the bearer token given by --token, by $RLVR_SERVE_TOKEN, by both
// (the flag wins) or by neither, and checks which requests are let in.
func TestServeTokenFromEnvironment(t *testing.T) {
	cliFixture(t)
	for _, tc := range []struct {
		name, env string
		flag      []string
		accepted  string // the token that gets in; "" means none is needed
		refused   []string
	}{
		{"environment", "from-env", nil, "from-env", []string{"", "wrong"}},
		{"flag", "", []string{"--token", "from-flag"}, "from-flag", []string{"", "wrong"}},
		{"flag wins", "from-env", []string{"--token", "from-flag"}, "from-flag", []string{"", "from-env"}},
		{"neither", "", nil, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tokenEnv, tc.env)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			root := rootCmd()
			var stderr syncBuffer
			root.SetOut(&stderr)
			root.SetErr(&stderr)
			root.SetArgs(append([]string{"serve", "--world-experts", "--addr", "127.0.0.1:0"}, tc.flag...))
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
			serving := regexp.MustCompile(`serving E0 on (http://\S+/v1)`)
			var base string
			for deadline := time.Now().Add(10 * time.Second); base == ""; {
				if m := serving.FindStringSubmatch(stderr.String()); m != nil {
					base = m[1]
					break
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
			status := func(token string) int {
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
				resp.Body.Close()
				return resp.StatusCode
			}
			if got := status(tc.accepted); got != http.StatusOK {
				t.Errorf("token %q: status %d, want 200", tc.accepted, got)
			}
			for _, tok := range tc.refused {
				if got := status(tok); got != http.StatusUnauthorized {
					t.Errorf("token %q: status %d, want 401", tok, got)
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

// TestUnderPrompt serves a model under an expert prompt: a system message
// before chats that have none, a suffix after completion prompts.
func TestUnderPrompt(t *testing.T) {
	var rendered []tokenizer.Message
	m := serve.Model{Chat: func(msgs []tokenizer.Message) (string, error) { rendered = msgs; return "x", nil },
		Encode: func(text string) []int32 { return []int32{int32(len(text))} }}
	u := underPrompt(m, "You are Expert 2, please provide an answer to the above question.", "@E2\n")
	u.Chat([]tokenizer.Message{{Role: "user", Content: "2+2?"}})
	if len(rendered) != 2 || rendered[0].Role != "system" || !strings.Contains(rendered[0].Content, "Expert 2") {
		t.Fatalf("rendered %+v", rendered)
	}
	u.Chat([]tokenizer.Message{{Role: "system", Content: "mine"}, {Role: "user", Content: "2+2?"}})
	if len(rendered) != 2 || rendered[0].Content != "mine" {
		t.Fatalf("a chat's own system message was replaced: %+v", rendered)
	}
	if got := u.Encode("Q:1+1\n"); got[0] != int32(len("Q:1+1\n@E2\n")) {
		t.Fatalf("encoded length %d", got[0])
	}
}

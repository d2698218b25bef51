package openai_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	api "rlvr/api/openai"
	client "rlvr/client/openai"
	"rlvr/format/tokenizer"
	"rlvr/serve"
	"rlvr/serve/servetest"
)

// A toy model served by rlvr's own server, called as any expert is.
func ExampleClient_Chat() {
	tok := tokenizer.NewByteTokenizer()
	srv, _ := serve.New(serve.Config{Logger: slog.New(slog.DiscardHandler)}, serve.Model{
		Name:      "toy",
		Generator: &servetest.Generator{Decoder: tok, EOS: tokenizer.ByteEOS},
		Tokenizer: tok,
		Chat:      serve.ChatFunc(tokenizer.ChatML()),
	})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())

	c := client.New(client.Config{BaseURL: "http://" + ln.Addr().String() + "/v1", Model: "toy"})
	temperature, maxTokens := 0.0, 12
	resp, err := c.Chat(context.Background(), &api.ChatCompletionRequest{
		Messages:    []api.Message{{Role: "user", Content: "What is 2+2?"}},
		Temperature: &temperature,
		MaxTokens:   &maxTokens,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%q %s\n", resp.Choices[0].Message.Content, resp.Choices[0].FinishReason)
	fmt.Printf("%+v\n", c.Usage())
	// Output:
	// "si\naoéék.f" length
	// {Requests:1 Retries:0 Failures:0 PromptTokens:62 CompletionTokens:12}
}

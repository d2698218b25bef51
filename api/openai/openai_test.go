package openai

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"rlvr/sample"
)

func TestStopForms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Stop
	}{
		{`{}`, nil},
		{`{"stop": null}`, nil},
		{`{"stop": "\n"}`, Stop{"\n"}},
		{`{"stop": ["a", "bc"]}`, Stop{"a", "bc"}},
		{`{"stop": []}`, Stop{}},
	} {
		var r ChatCompletionRequest
		if err := json.Unmarshal([]byte(tc.in), &r); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if !reflect.DeepEqual(r.Stop, tc.want) {
			t.Errorf("%s: stop = %#v, want %#v", tc.in, r.Stop, tc.want)
		}
	}
	var r ChatCompletionRequest
	if err := json.Unmarshal([]byte(`{"stop": 5}`), &r); err == nil || !strings.Contains(err.Error(), "stop") {
		t.Errorf("stop 5: err = %v, want one naming stop", err)
	}
}

func TestPromptForms(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Prompt
	}{
		{`"hi"`, Prompt{Texts: []string{"hi"}}},
		{`["a", "b"]`, Prompt{Texts: []string{"a", "b"}}},
		{`[1, 2, 3]`, Prompt{Tokens: [][]int32{{1, 2, 3}}}},
		{`[[1], [2, 3]]`, Prompt{Tokens: [][]int32{{1}, {2, 3}}}},
		{`[]`, Prompt{}},
		{`null`, Prompt{}},
	} {
		var p Prompt
		if err := json.Unmarshal([]byte(tc.in), &p); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if !reflect.DeepEqual(p, tc.want) {
			t.Errorf("%s: got %#v, want %#v", tc.in, p, tc.want)
		}
		if p.Len() == 0 {
			continue
		}
		out, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.ReplaceAll(tc.in, " ", ""); string(out) != got {
			t.Errorf("marshal %s = %s, want %s", tc.in, out, got)
		}
	}
	for _, bad := range []string{`["a", 1]`, `[1, "a"]`, `[1.5]`, `{}`, `true`, `[[1], "a"]`} {
		var p Prompt
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s: no error, got %#v", bad, p)
		}
	}
}

func TestMessageContent(t *testing.T) {
	in := `{"messages": [
		{"role": "system", "content": "be brief"},
		{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
		{"role": "assistant", "content": null},
		{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
		{"role": "user", "content": 7}
	]}`
	var r ChatCompletionRequest
	if err := json.Unmarshal([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	got := []string{r.Messages[0].Content, r.Messages[1].Content, r.Messages[2].Content}
	if want := []string{"be brief", "a\nb", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("contents = %q, want %q", got, want)
	}
	var ve *ValidationError
	if err := r.Validate(); !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want a *ValidationError", err)
	}
	if params := paramsOf(ve); !reflect.DeepEqual(params, []string{"messages[3].content", "messages[4].content"}) {
		t.Errorf("params = %q", params)
	}
	if !strings.Contains(ve.Error(), `"image_url"`) {
		t.Errorf("error %q does not name the part type", ve)
	}
}

func paramsOf(ve *ValidationError) []string {
	var p []string
	for _, f := range ve.Fields {
		p = append(p, f.Param)
	}
	return p
}

func ptr[T any](v T) *T { return &v }

func TestValidateChatReportsEveryField(t *testing.T) {
	r := ChatCompletionRequest{
		Messages:        []Message{{Role: "user", Content: "x"}, {Role: "robot", Content: "y"}, {Role: "tool"}},
		N:               ptr(0),
		Temperature:     ptr(2.5),
		TopP:            ptr(0.0),
		TopK:            ptr(-2),
		MaxTokens:       ptr(-1),
		Stop:            Stop{"ok", ""},
		TopLogprobs:     ptr(3),
		PresencePenalty: ptr(0.5),
		Tools:           json.RawMessage(`[{"type":"function"}]`),
		ResponseFormat:  &ResponseFormat{Type: "json_object"},
	}
	err := r.Validate()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Validate = %v, want a *ValidationError", err)
	}
	want := []string{"messages[1].role", "messages[2].role", "n", "temperature", "top_p", "top_k", "stop[1]",
		"max_tokens", "top_logprobs", "presence_penalty", "tools", "response_format"}
	if got := paramsOf(ve); !reflect.DeepEqual(got, want) {
		t.Errorf("params = %q\nwant %q", got, want)
	}
	if ve.Param() != "messages[1].role" || ve.Code() != "" {
		t.Errorf("Param, Code = %q, %q", ve.Param(), ve.Code())
	}
	if !strings.HasPrefix(err.Error(), "openai: ") {
		t.Errorf("error %q lacks the package prefix", err)
	}

	if err := (&ChatCompletionRequest{}).Validate(); err == nil || !strings.Contains(err.Error(), "messages") {
		t.Errorf("empty messages: %v", err)
	}
	ok := ChatCompletionRequest{
		Messages:    []Message{{Role: "developer", Content: "x"}, {Role: "user", Content: "y"}},
		N:           ptr(2),
		Temperature: ptr(0.0),
		TopP:        ptr(1.0),
		TopK:        ptr(-1),
		MaxTokens:   ptr(1),
		TopLogprobs: ptr(0),
		Tools:       json.RawMessage(`[]`),
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("valid request: %v", err)
	}
}

func TestValidateCompletion(t *testing.T) {
	r := CompletionRequest{Prompt: Prompt{Texts: []string{"a", ""}}, Logprobs: ptr(1), Echo: true, BestOf: ptr(2), MaxTokens: ptr(0)}
	var ve *ValidationError
	if err := r.Validate(); !errors.As(err, &ve) {
		t.Fatalf("Validate = %v", err)
	}
	want := []string{"prompt[1]", "max_tokens", "logprobs", "echo", "best_of"}
	if got := paramsOf(ve); !reflect.DeepEqual(got, want) {
		t.Errorf("params = %q, want %q", got, want)
	}
	if err := (&CompletionRequest{}).Validate(); err == nil || !strings.Contains(err.Error(), "prompt") {
		t.Errorf("missing prompt: %v", err)
	}
	tok := CompletionRequest{Prompt: Prompt{Tokens: [][]int32{{1, -2}}}, Logprobs: ptr(0)}
	if err := tok.Validate(); err == nil || !strings.Contains(err.Error(), "negative") {
		t.Errorf("negative token id: %v", err)
	}
	lp := CompletionRequest{Prompt: Prompt{Texts: []string{"a"}}, Logprobs: ptr(1)}
	if err := lp.Validate(); !errors.As(err, &ve) || ve.Code() != CodeUnsupported {
		t.Errorf("logprobs 1: %v, want code %s", err, CodeUnsupported)
	}
}

func TestSampleParams(t *testing.T) {
	r := ChatCompletionRequest{}
	want := sample.Params{N: 1, Temperature: 1}
	if got := r.SampleParams(); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults = %+v, want %+v", got, want)
	}
	r = ChatCompletionRequest{N: ptr(3), Temperature: ptr(0.0), TopP: ptr(0.9), TopK: ptr(5), MaxTokens: ptr(7),
		MaxCompletionTokens: ptr(9), Stop: Stop{"x"}, Seed: ptr(int64(-1))}
	want = sample.Params{N: 3, Temperature: 0, TopP: 0.9, TopK: 5, MaxTokens: 9, Stop: []string{"x"}, Seed: 1<<64 - 1}
	if got := r.SampleParams(); !reflect.DeepEqual(got, want) {
		t.Errorf("explicit = %+v, want %+v", got, want)
	}
	if n, p := r.MaxNewTokens(); n != 9 || p != "max_completion_tokens" {
		t.Errorf("MaxNewTokens = %d, %q", n, p)
	}
	c := CompletionRequest{Prompt: Prompt{Texts: []string{"a"}}}
	if got := c.SampleParams(); got.MaxTokens != DefaultCompletionMaxTokens || got.N != 1 || got.Temperature != 1 {
		t.Errorf("completion defaults = %+v", got)
	}
	msgs := (&ChatCompletionRequest{Messages: []Message{{Role: "developer", Content: "a"}, {Role: "user", Content: "b"}}}).ChatMessages()
	if msgs[0].Role != "system" || msgs[1].Role != "user" || msgs[1].Content != "b" {
		t.Errorf("ChatMessages = %+v", msgs)
	}
	if FinishReasonOf(sample.FinishLength) != FinishLength || FinishReasonOf(sample.FinishStop) != FinishStop {
		t.Error("FinishReasonOf")
	}
}

func TestResponseJSON(t *testing.T) {
	resp := ChatCompletionResponse{
		ID: "chatcmpl-1", Object: ObjectChatCompletion, Created: 1, Model: "m",
		Choices: []ChatChoice{{Message: Message{Role: "assistant", Content: "é"}, FinishReason: FinishStop,
			Logprobs: &ChatLogprobs{Content: []TokenLogprob{{Token: "é", Logprob: -0.5, Bytes: BytesOf([]byte("é")), TopLogprobs: []TopLogprob{}}}}}},
		Usage: &Usage{PromptTokens: 2, CompletionTokens: 1, TotalTokens: 3},
	}
	out, _ := json.Marshal(resp)
	for _, want := range []string{`"bytes":[195,169]`, `"top_logprobs":[]`, `"finish_reason":"stop"`, `"object":"chat.completion"`, `"total_tokens":3`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%s lacks %s", out, want)
		}
	}
	var back ChatCompletionResponse
	if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, resp) {
		t.Errorf("round trip: %v\n%+v\n%+v", err, back, resp)
	}

	chunk, _ := json.Marshal(ChatCompletionChunk{Object: ObjectChatCompletionChunk, Choices: []ChatChunkChoice{{Index: 1, Delta: Delta{Content: "x"}}}})
	if !strings.Contains(string(chunk), `"finish_reason":null`) || strings.Contains(string(chunk), `"usage"`) {
		t.Errorf("chunk = %s", chunk)
	}
	legacy, _ := json.Marshal(CompletionChoice{Text: "a", Logprobs: &CompletionLogprobs{Tokens: []string{"a"}, TokenLogprobs: []float64{-1}, TextOffset: []int{0}}})
	if !strings.Contains(string(legacy), `"top_logprobs":null`) {
		t.Errorf("legacy logprobs = %s", legacy)
	}

	env, _ := json.Marshal(NewError(ErrorTypeInvalidRequest, "", "", "bad"))
	if string(env) != `{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}` {
		t.Errorf("envelope = %s", env)
	}
	env, _ = json.Marshal(NewError(ErrorTypeInvalidRequest, CodeModelNotFound, "model", "no"))
	if !strings.Contains(string(env), `"param":"model","code":"model_not_found"`) {
		t.Errorf("envelope = %s", env)
	}
}

func ExampleChatCompletionRequest_Validate() {
	var r ChatCompletionRequest
	body := `{"model": "m", "messages": [{"role": "user", "content": "hi"}], "n": 0, "top_p": 2}`
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		panic(err)
	}
	err := r.Validate()
	fmt.Println(err)
	var ve *ValidationError
	if errors.As(err, &ve) {
		fmt.Println("param:", ve.Param())
	}
	// Output:
	// openai: invalid request: n: 0 is outside [1, 128]; top_p: 2 is outside (0, 1]
	// param: n
}

func FuzzChatRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stop":"x","n":2}`))
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"stop":["a",""]}`))
	f.Add([]byte(`{"prompt":[[1,2],[3]],"logprobs":0,"max_tokens":5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c ChatCompletionRequest
		if json.Unmarshal(data, &c) == nil {
			if c.Validate() == nil {
				_ = c.SampleParams()
				_ = c.ChatMessages()
			}
		}
		var p CompletionRequest
		if json.Unmarshal(data, &p) == nil {
			if p.Validate() == nil {
				_ = p.SampleParams()
				if _, err := json.Marshal(p); err != nil {
					t.Errorf("marshal of a valid request: %v", err)
				}
			}
		}
	})
}

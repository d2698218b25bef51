package tokenizer

import (
	"errors"
	"strings"
	"testing"
)

// A Qwen2.5-style template (the system handling of Qwen2.5 Instruct's,
// without its tool-call branches) and Llama-3 Instruct's template.
const (
	qwen25Source = `{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\n<tools>" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
`
	llama3Source = `{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}`
)

var chatConversations = map[string][]Message{
	"user":     {{Role: "user", Content: "What is 2+3?"}},
	"sys_user": {{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 2+3?"}},
	"multi": {
		{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is 2+3?"},
		{Role: "assistant", Content: "5"}, {Role: "user", Content: " And 4*4? \n"},
	},
	"last_assistant": {{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello!"}},
	"think": {
		{Role: "user", Content: "Q1"}, {Role: "assistant", Content: "<think>\nstep\n</think>\n\nA1"},
		{Role: "user", Content: "Q2"}, {Role: "assistant", Content: "<think>\nmore\n</think>\n\nA2"},
	},
}

// chatWant holds the output of the Jinja templates, rendered with
// transformers' settings (trim_blocks, lstrip_blocks), for each template,
// conversation, add_generation_prompt and enable_thinking=false.
var chatWant = []struct {
	template, conv  string
	gen, noThinking bool
	want            string
}{
	{"qwen3", "user", false, false,
		"<|im_start|>user\nWhat is 2+3?<|im_end|>\n"},
	{"qwen3", "user", true, false,
		"<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen3", "sys_user", false, false,
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"},
	{"qwen3", "sys_user", true, false,
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen3", "multi", false, false,
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n5<|im_end|>\n<|im_start|>user\n And 4*4? \n<|im_end|>\n"},
	{"qwen3", "multi", true, false,
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n5<|im_end|>\n<|im_start|>user\n And 4*4? \n<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen3", "last_assistant", false, false,
		"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n"},
	{"qwen3", "last_assistant", true, false,
		"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen3", "think", false, false,
		"<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nmore\n</think>\n\nA2<|im_end|>\n"},
	{"qwen3", "think", true, false,
		"<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nmore\n</think>\n\nA2<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen3", "user", true, true,
		"<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
	{"qwen25", "user", false, false,
		"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"},
	{"qwen25", "user", true, false,
		"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen25", "sys_user", false, false,
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"},
	{"qwen25", "sys_user", true, false,
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen25", "multi", false, false,
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n5<|im_end|>\n<|im_start|>user\n And 4*4? \n<|im_end|>\n"},
	{"qwen25", "multi", true, false,
		"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n5<|im_end|>\n<|im_start|>user\n And 4*4? \n<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen25", "last_assistant", false, false,
		"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"},
	{"qwen25", "last_assistant", true, false,
		"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>assistant\n"},
	{"qwen25", "think", false, false,
		"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nstep\n</think>\n\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nmore\n</think>\n\nA2<|im_end|>\n"},
	{"qwen25", "think", true, false,
		"<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\n<think>\nstep\n</think>\n\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n<|im_start|>assistant\n<think>\nmore\n</think>\n\nA2<|im_end|>\n<|im_start|>assistant\n"},
	{"llama3", "user", false, false,
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|>"},
	{"llama3", "user", true, false,
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	{"llama3", "sys_user", false, false,
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|>"},
	{"llama3", "sys_user", true, false,
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	{"llama3", "multi", false, false,
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n5<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd 4*4?<|eot_id|>"},
	{"llama3", "multi", true, false,
		"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n5<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnd 4*4?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	{"llama3", "last_assistant", false, false,
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"},
	{"llama3", "last_assistant", true, false,
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	{"llama3", "think", false, false,
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nstep\n</think>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nmore\n</think>\n\nA2<|eot_id|>"},
	{"llama3", "think", true, false,
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ1<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nstep\n</think>\n\nA1<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nQ2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nmore\n</think>\n\nA2<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
}

func TestRenderChat(t *testing.T) {
	templates := map[string]ChatTemplate{}
	qwen3Tok := qwen3(t)
	q3, err := qwen3Tok.ChatTemplate()
	if err != nil {
		t.Fatal(err)
	}
	templates["qwen3"] = q3
	for name, src := range map[string]string{"qwen25": qwen25Source, "llama3": llama3Source} {
		tpl, err := ParseChatTemplate(src)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		templates[name] = tpl
	}
	if templates["qwen3"].Kind != Qwen3 || templates["qwen25"].Kind != ChatML || templates["llama3"].Kind != Llama3 {
		t.Fatalf("kinds: %v", templates)
	}
	if got := templates["qwen25"].DefaultSystem; got != "You are Qwen, created by Alibaba Cloud. You are a helpful assistant." {
		t.Errorf("DefaultSystem = %q", got)
	}
	for _, c := range chatWant {
		tpl := templates[c.template]
		tpl.DisableThinking = c.noThinking
		got, err := RenderChat(tpl, chatConversations[c.conv], c.gen)
		if err != nil {
			t.Errorf("%s/%s: %v", c.template, c.conv, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s/%s gen=%v nothink=%v:\n got %q\nwant %q", c.template, c.conv, c.gen, c.noThinking, got, c.want)
		}
	}
}

func TestRenderChatTokens(t *testing.T) {
	tok := qwen3(t)
	tpl, err := tok.ChatTemplate()
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := RenderChat(tpl, []Message{{Role: "user", Content: "Hi"}}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := []int{151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198}
	if got := tok.Encode(prompt); !equalInts(got, want) {
		t.Errorf("Encode(%q) = %v, want %v", prompt, got, want)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseChatTemplate(t *testing.T) {
	for _, c := range []struct {
		src, system string
		kind        TemplateKind
		err         bool
	}{
		{src: "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}", system: "You are a helpful assistant.", kind: ChatML},
		{src: `{{- '<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n' }}`, system: "Please reason step by step, and put your final answer within \\boxed{}.", kind: ChatML},
		{src: `{{- "<|im_start|>system\nIt's me.<|im_end|>\n" }}`, system: "It's me.", kind: ChatML},
		{src: "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n'}}", kind: ChatML},
		{src: "<|im_start|> reasoning_content", err: true},
		{src: "<|im_start|> enable_thinking reasoning_content {{- '<|im_start|>assistant\\n<think>\\n' }}", err: true},
		{src: "<|start_header_id|> Cutting Knowledge Date", err: true},
		{src: "[INST] {{ message['content'] }} [/INST]", err: true},
	} {
		tpl, err := ParseChatTemplate(c.src)
		if c.err {
			if !errors.Is(err, ErrUnsupportedTemplate) {
				t.Errorf("ParseChatTemplate(%q) error = %v, want ErrUnsupportedTemplate", c.src, err)
			}
			continue
		}
		if err != nil || tpl.Kind != c.kind || tpl.DefaultSystem != c.system {
			t.Errorf("ParseChatTemplate(%q) = %+v, %v; want kind %v system %q", c.src, tpl, err, c.kind, c.system)
		}
	}
}

func TestRenderChatErrors(t *testing.T) {
	tpl := ChatTemplate{Kind: ChatML}
	if _, err := RenderChat(tpl, nil, true); err == nil {
		t.Error("no error for an empty conversation")
	}
	if _, err := RenderChat(tpl, []Message{{Role: "tool", Content: "x"}}, true); err == nil || !strings.Contains(err.Error(), "tool") {
		t.Errorf("tool role: %v", err)
	}
	if _, err := RenderChat(ChatTemplate{}, []Message{{Role: "user"}}, true); err == nil {
		t.Error("no error for the zero ChatTemplate")
	}
}

func TestLlama3Trim(t *testing.T) {
	got, err := RenderChat(ChatTemplate{Kind: Llama3, BOS: "<s>"}, []Message{{Role: "user", Content: "\x1f\u00a0 hi \n"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<s><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

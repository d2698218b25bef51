package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"rlvr/internal/gzjson"
	"rlvr/internal/shareddata"
)

// pinnedDate is the date python/chat_ref.py gives strftime_now.
var pinnedDate = time.Date(2024, 7, 26, 12, 0, 0, 0, time.UTC)

// chatReference is one testdata/chat/<name>.want.json.gz file, written by
// python/chat_ref.py from transformers' render_jinja_template.
type chatReference struct {
	Template string  `json:"template"`
	Source   string  `json:"source"`
	BOS      *string `json:"bos_token"`
	EOS      *string `json:"eos_token"`
	Cases    []struct {
		Messages            []Message      `json:"messages"`
		AddGenerationPrompt bool           `json:"add_generation_prompt"`
		Kwargs              map[string]any `json:"kwargs"`
		Want                *string        `json:"want"`
		Error               *string        `json:"error"`
	} `json:"cases"`
}

func loadChatReference(t *testing.T, path string) chatReference {
	t.Helper()
	var ref chatReference
	gzjson.Read(t, path, &ref)
	return ref
}

// referenceTemplate loads the template a reference file was rendered from:
// a tokenizer_config.json (in testdata, or the shared data for Qwen3) or a
// bare .jinja file with the reference's special tokens.
func referenceTemplate(t *testing.T, ref chatReference) ChatTemplate {
	t.Helper()
	dir := filepath.Join("testdata", "chat")
	var tpl ChatTemplate
	if strings.HasSuffix(ref.Source, ".jinja") {
		src, err := os.ReadFile(filepath.Join(dir, ref.Source))
		if err != nil {
			t.Fatal(err)
		}
		if tpl, err = ParseChatTemplateFile(ref.Source, string(src)); err != nil {
			t.Fatal(err)
		}
		if ref.BOS != nil {
			tpl.BOSToken = *ref.BOS
		}
		if ref.EOS != nil {
			tpl.EOSToken = *ref.EOS
		}
	} else {
		path := filepath.Join(dir, ref.Source)
		if ref.Template == "qwen3" {
			path = shareddata.Path(t, ref.Source)
		}
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if tpl, err = cfg.ChatTemplate(); err != nil {
			t.Fatal(err)
		}
	}
	tpl.Now = func() time.Time { return pinnedDate }
	return tpl
}

// chatEngineGaps are the reference templates the Jinja engine cannot yet
// render, and why: none at present.
var chatEngineGaps = map[string]string{}

// TestChatTemplatesMatchTransformers renders every conversation of every
// reference file and requires transformers' exact bytes, or an error where
// the template raised.
func TestChatTemplatesMatchTransformers(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "chat", "*.want.json.gz"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no reference renders in testdata/chat: %v", err)
	}
	for _, file := range files {
		ref := loadChatReference(t, file)
		t.Run(ref.Template, func(t *testing.T) {
			if gap, ok := chatEngineGaps[ref.Template]; ok {
				t.Skipf("%s: 0/%d renders compared: %s", ref.Template, len(ref.Cases), gap)
			}
			tpl := referenceTemplate(t, ref)
			agree, shown := 0, 0
			for i, c := range ref.Cases {
				got, err := tpl.Render(c.Messages, c.AddGenerationPrompt, c.Kwargs)
				switch {
				case c.Error != nil && err != nil:
					if !strings.Contains(err.Error(), *c.Error) {
						t.Errorf("case %d: error %q does not quote the template's %q", i, err, *c.Error)
						continue
					}
					agree++
				case c.Error == nil && err == nil && got == *c.Want:
					agree++
				default:
					if shown++; shown <= 3 {
						want := ""
						if c.Want != nil {
							want = *c.Want
						}
						t.Errorf("case %d %+v gen=%v kwargs=%v:\n got %q (err %v)\nwant %q (err %v)",
							i, c.Messages, c.AddGenerationPrompt, c.Kwargs, got, err, want, c.Error)
					}
				}
			}
			t.Logf("%s: %d/%d renders agree with transformers", ref.Template, agree, len(ref.Cases))
			if agree != len(ref.Cases) {
				t.Errorf("%s: %d of %d renders differ", ref.Template, len(ref.Cases)-agree, len(ref.Cases))
			}
		})
	}
}

// TestConditionalExpressions covers the conditional expressions that the
// patched gonja (third_party/gonja) reads where Jinja allows them: in
// parentheses, as Gemma 3's template writes one, in list, tuple and dict
// literals, and in the arguments of calls and filters, with the else part
// left out or chained. The wants are Jinja2 3.1's renders, with
// trim_blocks and lstrip_blocks, of role="user", prefix="P\n\n",
// loop_first=True and one user message "hi".
func TestConditionalExpressions(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"{{ '<start_of_turn>' + role + '\\n' + (prefix if loop_first else \"\") }}", "<start_of_turn>user\nP\n\n"},
		{"{{ '<start_of_turn>' + role + '\\n' + (prefix if not loop_first else \"\") }}", "<start_of_turn>user\n"},
		{"{{ ('y' if false else 'z') }}", "z"},
		{"[{{ ('y' if false) }}]", "[]"},
		{"{{ (1 if false else 2 if false else 3) }}", "3"},
		{"{{ (1 if true else 2) + 1 }}", "2"},
		{"{{ ('a' if true else 'b', 'c' if false else 'd') | join(',') }}", "a,d"},
		{"{{ ['a' if false else 'b', 'c'] | join }}", "bc"},
		{"{{ {'k': 'v' if true else 'w'}['k'] }}", "v"},
		{"{{ {('k' if false else 'j'): 1} | list | first }}", "j"},
		{"{{ range(3 if true else 5) | list | length }}", "3"},
		{"{{ [3, 1, 2] | sort(reverse=(true if role == 'user' else false)) | join }}", "321"},
		{"{{ [3, 1, 2] | sort(reverse=true if role == 'user' else false) | join }}", "321"},
		{"{{ [' a ', 'b'] | join(',' if false else '|') }}", " a |b"},
		{"{{ (' a ' | trim if true else 'b') }}", "a"},
		{"{{ (messages[0].content if messages else '') | upper }}", "HI"},
		{"{{ (messages[5].content if messages | length > 5 else 'none') }}", "none"},
		{"{{ ('a' if true else 'b') ~ ('c' if false) ~ ['d' if true][0] }}", "ad"},
		{"{{ 'a' if false else 'b' }}", "b"},
		{"{% set x = ('p' if true else 'q') %}{{ x }}", "p"},
		{"{% for m in [1, 2, 3] if m > 1 %}{{ m }}{% endfor %}", "23"},
		{"{{ ((1 if true else 2) if false else (3 if false else 4)) }}", "4"},
	} {
		tpl, err := ParseChatTemplate(c.src)
		if err != nil {
			t.Errorf("%s: %v", c.src, err)
			continue
		}
		got, err := tpl.Render([]Message{{Role: "user", Content: "hi"}}, false,
			map[string]any{"role": "user", "prefix": "P\n\n", "loop_first": true})
		if err != nil || got != c.want {
			t.Errorf("%s: got %q, %v; want %q", c.src, got, err, c.want)
		}
	}
	for _, src := range []string{"{{ (1 if) }}", "{{ (1 if true else) }}", "{{ [1 if true else 2 }}", "{{ (1 if true 2) }}"} {
		if _, err := ParseChatTemplate(src); err == nil {
			t.Errorf("%s parsed", src)
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
	want := []int32{151644, 872, 198, 13048, 151645, 198, 151644, 77091, 198}
	if got := tok.Encode(prompt); !equalInts(got, want) {
		t.Errorf("Encode(%q) = %v, want %v", prompt, got, want)
	}
}

func equalInts(a, b []int32) bool {
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

func TestChatTemplateStopStrings(t *testing.T) {
	for _, c := range []struct {
		config string
		want   []string
	}{
		{"smollm2", []string{"<|im_end|>"}},
		{"qwen2.5", []string{"<|im_end|>"}},
		{"llama3.1", []string{"<|eot_id|>"}},
		{"deepseek-r1-distill-qwen", []string{"<｜end▁of▁sentence｜>"}},
	} {
		cfg, err := LoadConfig(filepath.Join("testdata", "chat", c.config+".tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := cfg.ChatTemplate()
		if err != nil {
			t.Errorf("%s: %v", c.config, err)
			continue
		}
		if strings.Join(tpl.StopStrings, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s: StopStrings = %q, want %q", c.config, tpl.StopStrings, c.want)
		}
	}
}

func TestChatTemplateErrors(t *testing.T) {
	msgs := []Message{{Role: "user", Content: "Hi"}}

	_, err := ParseChatTemplateFile("model/tokenizer_config.json: chat_template", "Hello\n{% if %}x{% endif %}\n")
	if err == nil || !strings.Contains(err.Error(), "model/tokenizer_config.json: chat_template: ") {
		t.Errorf("parse error = %v, want the file", err)
	}
	_, err = ParseChatTemplateFile("t.jinja", "Hello\n{{ [1, 2 }}\n")
	if err == nil || !strings.Contains(err.Error(), "t.jinja: line 2") {
		t.Errorf("parse error = %v, want the file and line 2", err)
	}

	tpl, err := ParseChatTemplateFile("t.jinja", "{{ raise_exception('System role not supported') }}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RenderChat(tpl, msgs, true); err == nil || !strings.Contains(err.Error(), "t.jinja") || !strings.Contains(err.Error(), "System role not supported") {
		t.Errorf("raise_exception error = %v, want the file and the message", err)
	}

	for _, c := range []struct{ name, src string }{
		{"huge output", "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}"},
		{"silent loop", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"},
		{"range too long", "{{ range(1000000000) | length }}"},
	} {
		tpl, err := ParseChatTemplateFile("t.jinja", c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tpl.Limits = ChatLimits{MaxOutput: 1 << 20, Timeout: 5 * time.Second}
		start := time.Now()
		_, err = RenderChat(tpl, msgs, true)
		if !errors.Is(err, ErrChatTemplateLimit) || !strings.Contains(err.Error(), "t.jinja") {
			t.Errorf("%s: error = %v, want ErrChatTemplateLimit naming the file", c.name, err)
		}
		if d := time.Since(start); d > 6*time.Second {
			t.Errorf("%s: took %v", c.name, d)
		}
	}

	recursive, err := ParseChatTemplateFile("t.jinja", "{% macro f(n) %}{{ f(n) }}{% endmacro %}\n{{ f(1) }}")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RenderChat(recursive, msgs, true); !errors.Is(err, ErrChatTemplateLimit) || !strings.Contains(err.Error(), "t.jinja: line 1: ") {
		t.Errorf("endless recursion: error = %v, want ErrChatTemplateLimit naming the file and line 1", err)
	}
	if _, err := ParseChatTemplate("{% include '/etc/passwd' %}"); err == nil {
		tpl, _ := ParseChatTemplate("{% include '/etc/passwd' %}")
		if out, err := RenderChat(tpl, msgs, false); err == nil {
			t.Errorf("include read a file: %q", out)
		}
	}
	if _, err := RenderChat(ChatTemplate{}, msgs, false); err == nil {
		t.Error("the zero ChatTemplate rendered")
	}
}

func TestChatTemplateKwargsAndClock(t *testing.T) {
	tpl, err := ParseChatTemplate(`{{ strftime_now("%d %b %Y") }}|{{ enable_thinking is defined and not enable_thinking }}|{{ messages[-1].content }}|{{ bos_token is defined }}`)
	if err != nil {
		t.Fatal(err)
	}
	tpl.Now = func() time.Time { return pinnedDate }
	got, err := tpl.Render([]Message{{Role: "user", Content: "Hi"}}, false, map[string]any{"enable_thinking": false})
	if want := "26 Jul 2024|True|Hi|False"; err != nil || got != want {
		t.Errorf("Render = %q, %v; want %q", got, err, want)
	}
}

// FuzzRenderChat renders arbitrary template sources with arbitrary
// messages: parsing and rendering must return, with a render or an error,
// and never panic or hang.
func FuzzRenderChat(f *testing.F) {
	f.Add(chatMLSource, "user", "Hi", true)
	f.Add("{% for m in messages[::-1] %}{{ m.content|trim }}{% if not loop.last %},{% endif %}{% endfor %}", "system", " x ", false)
	f.Add("{% set ns = namespace(a=1) %}{% for m in messages %}{% set ns.a = ns.a + 1 %}{% endfor %}{{ ns.a }}{{ messages[-1].content.split('</think>')[-1].lstrip() }}", "assistant", "a</think>b", true)
	f.Add("{% if messages[0]['role'] != 'user' %}{{ raise_exception('bad role') }}{% endif %}{{ strftime_now('%d %b %Y') }}{{ messages|tojson }}", "tool", "{{ }}", false)
	f.Add("{% macro m(x) %}[{{ x }}]{% endmacro %}{% for i in range(3) %}{{ m(i) }}{% endfor %}{{ 'a' * 3 }}", "user", "", true)
	f.Add("{% for m in messages %}{{ '<' + m.role + '>' + (m.content|trim if loop.first else '') ~ [1 if m else 2, {'k': 'v' if loop.last}] | length }}{% endfor %}", "assistant", " x ", true)
	f.Fuzz(func(t *testing.T, source, role, content string, gen bool) {
		tpl, err := ParseChatTemplateFile("fuzz.jinja", source)
		if err != nil {
			return
		}
		tpl.Limits = ChatLimits{MaxOutput: 1 << 16, MaxRange: 10000, Timeout: 2 * time.Second}
		tpl.Now = func() time.Time { return pinnedDate }
		msgs := []Message{{Role: role, Content: content}, {Role: "user", Content: content}}
		if out, err := RenderChat(tpl, msgs, gen); err == nil && len(out) > 1<<16 {
			t.Errorf("render of %d bytes passed the %d-byte limit", len(out), 1<<16)
		}
	})
}

package expert

import (
	"context"
	"fmt"
	"strings"

	"rlvr/format/tokenizer"
	"rlvr/sample"
	"rlvr/serve"
	"rlvr/task"
	"rlvr/task/world"
)

// Scripted answers world questions in one of the world's solution styles
// (world.Styles), slips included: the built-in world's heterogeneous
// expert models. It implements serve.Generator, so it is served over HTTP
// like a model, and is safe for concurrent use.
//
// A prompt is read as text; its last "Q:" line is the question. A prompt
// without a readable question gets a reply saying so, as a real model's
// unhelpful answer would be.
type Scripted struct {
	Style     int
	Wrong     bool // every answer wrong (world.SolveWrong)
	Tokenizer tokenizer.Encoder
}

// Sample implements serve.Generator.
func (s Scripted) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	return answerText(ctx, reqs, s.Tokenizer, s.answer)
}

// answerText samples what answer says to each prompt's text: its tokens,
// cut at the request's stop strings and token budget, N times over.
func answerText(ctx context.Context, reqs []sample.Request, tok tokenizer.Encoder, answer func(prompt string) string) ([][]sample.Completion, error) {
	out := make([][]sample.Completion, len(reqs))
	for i, r := range reqs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		text := answer(tok.Decode(r.Prompt))
		for _, stop := range r.Params.Stop {
			if k := strings.Index(text, stop); k >= 0 {
				text = text[:k]
			}
		}
		toks := tok.Encode(text)
		finish := sample.FinishStop
		if max := r.Params.MaxTokens; max > 0 && len(toks) > max {
			toks, finish = toks[:max], sample.FinishLength
			text = tok.Decode(toks)
		}
		c := sample.Completion{Tokens: toks, Logprobs: make([]float32, len(toks)), Text: text, Finish: finish}
		for k := 0; k < max(r.Params.N, 1); k++ {
			if r.OnToken != nil {
				for _, t := range toks {
					r.OnToken(k, t, 0)
				}
			}
			out[i] = append(out[i], c)
		}
	}
	return out, nil
}

// answer is the style's solution to the prompt's question.
func (s Scripted) answer(prompt string) string {
	i := strings.LastIndex(prompt, "Q:")
	if i < 0 {
		return "I see no question (a line starting Q:).\n"
	}
	line, _, _ := strings.Cut(prompt[i:], "\n")
	p, err := world.ParseQuestion(line)
	if err != nil {
		return fmt.Sprintf("I cannot read the question %q.\n", line)
	}
	solve := world.Solve
	if s.Wrong {
		solve = world.SolveWrong
	}
	text, _ := solve(p, s.Style)
	return text
}

// WorldModels returns the world's experts as served models named E0 (the
// reference) to E<n-1>, on the byte tokenizer. Chat requests are read as
// the concatenation of their messages.
func WorldModels() []serve.Model {
	tok := tokenizer.NewByteTokenizer()
	var ms []serve.Model
	for i := range world.Styles {
		ms = append(ms, byteModel(task.ExpertName(i), tok, Scripted{Style: i, Tokenizer: tok}))
	}
	return ms
}

// WrongModel returns the world's style as a served model whose every
// answer is wrong (Scripted.Wrong), named name.
func WrongModel(name string, style int) serve.Model {
	tok := tokenizer.NewByteTokenizer()
	return byteModel(name, tok, Scripted{Style: style, Wrong: true, Tokenizer: tok})
}

// FixedModel returns an expert that answers every request with text (see
// Fixed), served as the world's experts are.
func FixedModel(name, text string) serve.Model {
	tok := tokenizer.NewByteTokenizer()
	return byteModel(name, tok, Fixed{Text: text, Tokenizer: tok})
}

// byteModel serves g on the byte tokenizer tok, reading a chat as the
// concatenation of its messages.
func byteModel(name string, tok *tokenizer.ByteTokenizer, g serve.Generator) serve.Model {
	chat := func(msgs []tokenizer.Message) (string, error) {
		var b strings.Builder
		for _, m := range msgs {
			b.WriteString(m.Content)
			if !strings.HasSuffix(m.Content, "\n") {
				b.WriteByte('\n')
			}
		}
		return b.String(), nil
	}
	return serve.Model{Name: name, Generator: g, Tokenizer: tok, Chat: chat, StopTokens: []int32{tokenizer.ByteEOS}}
}

// Fixed answers everything with the same text: an expert without
// information, such as EAPO's meaningless guidance ("I cannot offer you
// any assistance", App. E). It implements serve.Generator.
type Fixed struct {
	Text      string
	Tokenizer tokenizer.Encoder
}

// Sample implements serve.Generator.
func (f Fixed) Sample(ctx context.Context, reqs []sample.Request) ([][]sample.Completion, error) {
	return answerText(ctx, reqs, f.Tokenizer, func(string) string { return f.Text })
}

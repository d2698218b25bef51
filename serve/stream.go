package serve

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	api "rlvr/api/openai"
	"rlvr/format/tokenizer"
	"rlvr/sample"
)

// generation is one accepted request: chat or legacy completion, with its
// prompts and sampling parameters. Choice i*n+k is sample k of prompt i.
type generation struct {
	chat     bool
	id       string
	created  int64
	m        *model
	prompts  [][]int32
	params   sample.Params
	logprobs bool
	stream   bool
	usage    bool      // send a usage chunk at the end of a stream
	used     api.Usage // filled in when the results are in
}

// tokenInfo is one generated token as logprobs show it.
type tokenInfo struct {
	text    string
	bytes   []byte
	logprob float64
}

func (m *model) isStop(tok int32) bool { return slices.Contains(m.stop, tok) }

func (m *model) tokenInfo(tok int32, logprob float32) tokenInfo {
	lp := float64(logprob)
	if math.IsNaN(lp) || math.IsInf(lp, 0) || lp < -9999 {
		lp = -9999 // JSON has no infinities; OpenAI writes impossible tokens so
	}
	ids := []int32{tok}
	var raw []byte
	switch t := m.Tokenizer.(type) {
	case interface {
		AppendDecode(dst []byte, ids []int32, skipSpecial bool) []byte
	}:
		raw = t.AppendDecode(nil, ids, false)
	case *tokenizer.ByteTokenizer:
		if tok >= 0 && tok < 256 {
			raw = []byte{byte(tok)}
		}
	}
	text := m.Tokenizer.Decode(ids)
	if raw == nil {
		raw = []byte(text)
	}
	return tokenInfo{text: text, bytes: raw, logprob: lp}
}

// text returns a completion's text as clients see it: the sampler's text
// (already cut before a stop string) without the text of a final stop
// token.
func (g *generation) text(c sample.Completion) string {
	t := c.Text
	if n := len(c.Tokens); n > 0 && g.m.isStop(c.Tokens[n-1]) {
		t = strings.TrimSuffix(t, g.m.Tokenizer.Decode(c.Tokens[n-1:]))
	}
	return t
}

func (g *generation) infos(tokens []int32, logprobs []float32) []tokenInfo {
	out := make([]tokenInfo, len(tokens))
	for i, t := range tokens {
		out[i] = g.m.tokenInfo(t, logprobs[i])
	}
	return out
}

func chatLogprobs(infos []tokenInfo) *api.ChatLogprobs {
	lp := &api.ChatLogprobs{Content: make([]api.TokenLogprob, len(infos))}
	for i, t := range infos {
		lp.Content[i] = api.TokenLogprob{Token: t.text, Logprob: t.logprob, Bytes: api.BytesOf(t.bytes), TopLogprobs: []api.TopLogprob{}}
	}
	return lp
}

// legacyLogprobs converts infos whose first token starts at byte *offset
// of the choice's text, and advances *offset.
func legacyLogprobs(infos []tokenInfo, offset *int) *api.CompletionLogprobs {
	lp := &api.CompletionLogprobs{
		Tokens:        make([]string, len(infos)),
		TokenLogprobs: make([]float64, len(infos)),
		TextOffset:    make([]int, len(infos)),
	}
	for i, t := range infos {
		lp.Tokens[i], lp.TokenLogprobs[i], lp.TextOffset[i] = t.text, t.logprob, *offset
		*offset += len(t.bytes)
	}
	return lp
}

func (g *generation) countUsage(out [][]sample.Completion) {
	g.used = api.Usage{}
	for i, comps := range out {
		g.used.PromptTokens += len(g.prompts[i])
		for _, c := range comps {
			g.used.CompletionTokens += len(c.Tokens)
		}
	}
	g.used.TotalTokens = g.used.PromptTokens + g.used.CompletionTokens
}

// response builds the non-streaming response body.
func (g *generation) response(out [][]sample.Completion) any {
	g.countUsage(out)
	usage := g.used
	if g.chat {
		resp := &api.ChatCompletionResponse{ID: g.id, Object: api.ObjectChatCompletion, Created: g.created, Model: g.m.Name, Usage: &usage}
		for k, c := range out[0] {
			choice := api.ChatChoice{Index: k, Message: api.Message{Role: "assistant", Content: g.text(c)}, FinishReason: api.FinishReasonOf(c.Finish)}
			if g.logprobs {
				choice.Logprobs = chatLogprobs(g.infos(c.Tokens, c.Logprobs))
			}
			resp.Choices = append(resp.Choices, choice)
		}
		return resp
	}
	resp := &api.CompletionResponse{ID: g.id, Object: api.ObjectTextCompletion, Created: g.created, Model: g.m.Name, Usage: &usage}
	for i, comps := range out {
		for k, c := range comps {
			choice := api.CompletionChoice{Index: i*g.params.N + k, Text: g.text(c), FinishReason: api.FinishReasonOf(c.Finish)}
			if g.logprobs {
				offset := 0
				choice.Logprobs = legacyLogprobs(g.infos(c.Tokens, c.Logprobs), &offset)
			}
			resp.Choices = append(resp.Choices, choice)
		}
	}
	return resp
}

// chunk builds one streaming chunk for one choice.
func (g *generation) chunk(index int, text string, infos []tokenInfo, offset *int, finish api.FinishReason) any {
	if g.chat {
		c := api.ChatChunkChoice{Index: index, Delta: api.Delta{Content: text}, FinishReason: finish}
		if g.logprobs && len(infos) > 0 {
			c.Logprobs = chatLogprobs(infos)
		}
		return &api.ChatCompletionChunk{ID: g.id, Object: api.ObjectChatCompletionChunk, Created: g.created, Model: g.m.Name,
			Choices: []api.ChatChunkChoice{c}}
	}
	c := api.CompletionChoice{Index: index, Text: text, FinishReason: finish}
	if g.logprobs && len(infos) > 0 {
		c.Logprobs = legacyLogprobs(infos, offset)
	}
	return &api.CompletionResponse{ID: g.id, Object: api.ObjectTextCompletion, Created: g.created, Model: g.m.Name,
		Choices: []api.CompletionChoice{c}}
}

// sse writes server-sent events, one JSON value per data event.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

func (e *sse) event(v any) {
	data, err := json.Marshal(v)
	if err != nil { // our own types always marshal; keep the stream well-formed
		data, _ = json.Marshal(api.NewError(api.ErrorTypeServer, "", "", "serve: encoding a chunk failed"))
	}
	e.buf.WriteString("data: ")
	e.buf.Write(data)
	e.buf.WriteString("\n\n")
}

// flush sends the buffered events; an error means the client is gone.
func (e *sse) flush() error {
	if e.buf.Len() == 0 {
		return nil
	}
	if e.timeout > 0 {
		_ = e.rc.SetWriteDeadline(time.Now().Add(e.timeout))
	}
	_, err := e.w.Write(e.buf.Bytes())
	e.buf.Reset()
	if err != nil {
		return err
	}
	return e.rc.Flush()
}

// choiceStream is what has been streamed of one choice.
type choiceStream struct {
	toks    []int32     // the text tokens received: stop tokens left out
	got     int         // tokens received, stop tokens included
	sent    string      // the text sent
	pending []tokenInfo // logprobs not sent yet
	offset  int         // the legacy text_offset of the next token
	dirty   bool        // tokens arrived since the text was last sent
}

// stream answers g with server-sent events as j's tokens arrive.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, g *generation, j *job) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sse{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout}
	choices := make([]choiceStream, len(g.prompts)*g.params.N)
	if g.chat {
		for i := range choices {
			out.event(&api.ChatCompletionChunk{ID: g.id, Object: api.ObjectChatCompletionChunk, Created: g.created, Model: g.m.Name,
				Choices: []api.ChatChunkChoice{{Index: i, Delta: api.Delta{Role: "assistant"}}}})
		}
	}
	if err := out.flush(); err != nil {
		return
	}
	for {
		select {
		case <-j.events.ready:
			g.apply(out, choices, j.events.take())
			if err := out.flush(); err != nil {
				s.log.Debug("serve: stream client gone", "id", g.id, "err", err)
				return
			}
		case res := <-j.done:
			// Every token was pushed before the results were sent.
			g.apply(out, choices, j.events.take())
			if res.err != nil {
				e := s.sampleError(res.err)
				out.event(api.NewError(e.typ, e.code, e.param, e.msg))
				out.flush()
				return
			}
			g.finish(out, choices, res.out)
			if g.usage {
				u := g.used
				if g.chat {
					out.event(&api.ChatCompletionChunk{ID: g.id, Object: api.ObjectChatCompletionChunk, Created: g.created, Model: g.m.Name,
						Choices: []api.ChatChunkChoice{}, Usage: &u})
				} else {
					out.event(&api.CompletionResponse{ID: g.id, Object: api.ObjectTextCompletion, Created: g.created, Model: g.m.Name,
						Choices: []api.CompletionChoice{}, Usage: &u})
				}
			}
			out.buf.WriteString("data: [DONE]\n\n")
			out.flush()
			return
		case <-r.Context().Done():
			return
		}
	}
}

// apply takes in streamed tokens and writes the text they make that can
// no longer change: not an incomplete UTF-8 character, nor text that
// could begin a stop string.
func (g *generation) apply(out *sse, choices []choiceStream, events []event) {
	for _, e := range events {
		if e.choice >= len(choices) {
			continue
		}
		c := &choices[e.choice]
		c.got++
		if g.logprobs {
			c.pending = append(c.pending, g.m.tokenInfo(e.token, e.logprob))
		}
		if !g.m.isStop(e.token) {
			c.toks = append(c.toks, e.token)
			c.dirty = true
		}
	}
	for i := range choices {
		c := &choices[i]
		if !c.dirty {
			continue
		}
		c.dirty = false
		text := g.m.Tokenizer.Decode(c.toks)
		for strings.HasSuffix(text, string(utf8.RuneError)) {
			text = strings.TrimSuffix(text, string(utf8.RuneError))
		}
		text = text[:len(text)-sample.HoldBack(text, g.params.Stop)]
		if len(text) > len(c.sent) && strings.HasPrefix(text, c.sent) {
			out.event(g.chunk(i, text[len(c.sent):], c.pending, &c.offset, ""))
			c.sent, c.pending = text, nil
		}
	}
}

// finish writes what remains of each choice and its finish reason.
func (g *generation) finish(out *sse, choices []choiceStream, results [][]sample.Completion) {
	g.countUsage(results)
	for p, comps := range results {
		for k, comp := range comps {
			i := p*g.params.N + k
			c := &choices[i]
			if g.logprobs && c.got < len(comp.Tokens) { // a Generator that does not stream
				c.pending = append(c.pending, g.infos(comp.Tokens[c.got:], comp.Logprobs[c.got:])...)
			}
			rest := ""
			if final := g.text(comp); strings.HasPrefix(final, c.sent) {
				rest = final[len(c.sent):]
			} // else the Generator's text disagrees with its streamed tokens; what was sent stands
			if rest != "" || len(c.pending) > 0 {
				out.event(g.chunk(i, rest, c.pending, &c.offset, ""))
			}
			out.event(g.chunk(i, "", nil, nil, api.FinishReasonOf(comp.Finish)))
		}
	}
}

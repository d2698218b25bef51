package sample

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// MaxNew is the number of new tokens the params allow: MaxTokens, or 256
// when it is 0.
func (p *Params) MaxNew() int {
	if p.MaxTokens == 0 {
		return 256
	}
	return p.MaxTokens
}

// Add appends a drawn token to c under p's stop rules and reports whether
// the token was kept and whether the sample ended: at a stop string (the
// token that completed it kept only with IncludeStop), at a stop token
// (kept), or at MaxTokens. last says the sampler has no room for another
// token, so the sample ends there whatever the rules say. dec may be nil
// when p has no stop strings; it then leaves Text empty.
func (c *Completion) Add(p *Params, dec Decoder, tok int32, lp float32, last bool) (kept, done bool) {
	if len(p.Stop) > 0 {
		text := dec.Decode(append(c.Tokens, tok))
		for _, stop := range p.Stop {
			if i := strings.Index(text, stop); i >= 0 {
				c.Finish, c.StopString = FinishStop, stop
				if !p.IncludeStop {
					c.Text = text[:i]
					return false, true
				}
				c.Text = text[:i+len(stop)]
				c.Tokens = append(c.Tokens, tok)
				c.Logprobs = append(c.Logprobs, lp)
				return true, true
			}
		}
	}
	c.Tokens = append(c.Tokens, tok)
	c.Logprobs = append(c.Logprobs, lp)
	switch {
	case slices.Contains(p.StopTokens, tok):
		c.Finish, done = FinishStop, true
	case len(c.Tokens) >= p.MaxNew() || last:
		c.Finish, done = FinishLength, true
	}
	if done && dec != nil {
		c.Text = dec.Decode(c.Tokens)
	}
	return true, done
}

// anyStopIn reports whether text holds one of the stop strings, or
// whether one holds U+FFFD, which a prefix's cut character decodes to
// and the whole text may not hold.
func anyStopIn(text string, stop []string) bool {
	for _, s := range stop {
		if strings.Contains(text, s) || strings.ContainsRune(s, utf8.RuneError) {
			return true
		}
	}
	return false
}

// Replay passes tokens sampled elsewhere through p's stop rules (Add) and
// returns the completion a sampler honouring them returns: the same
// tokens, cut where a stop token, stop string or MaxTokens ends them.
// finish is why the tokens ended when no rule ends them first. A remote
// sampler that stops only at its own stop tokens gives, after Replay, the
// local sampler's completion for the same draws. dec may be nil when p
// has no stop strings.
func Replay(p *Params, dec Decoder, toks []int32, lps []float32, finish Finish) (Completion, error) {
	var c Completion
	if len(toks) != len(lps) {
		return c, fmt.Errorf("sample: %d tokens but %d logprobs", len(toks), len(lps))
	}
	if len(p.Stop) > 0 && dec == nil {
		return c, fmt.Errorf("sample: stop strings need a decoder")
	}
	if len(p.Stop) > 0 && !anyStopIn(dec.Decode(toks), p.Stop) {
		// No stop string anywhere in the whole text, so none in a prefix
		// of it: the per-token search, a decode per token, can be
		// skipped.
		q := *p
		q.Stop = nil
		p = &q
	}
	for i, t := range toks {
		if _, done := c.Add(p, dec, t, lps[i], false); done {
			return c, nil
		}
	}
	c.Finish = finish
	if dec != nil {
		c.Text = dec.Decode(c.Tokens)
	}
	return c, nil
}

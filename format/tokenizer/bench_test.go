package tokenizer

import (
	"os"
	"testing"

	"rlvr/internal/shareddata"
)

// BenchmarkEncodeGSM8K tokenizes every question and answer of GSM8K train
// (7,473 problems, about 4 MB) with the Qwen3 tokenizer; one iteration is
// the whole set. The word cache is reset before each iteration.
func BenchmarkEncodeGSM8K(b *testing.B) {
	tok := qwen3(b)
	texts := gsm8kTexts(b)
	size := 0
	for _, s := range texts {
		size += len(s)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var ids []int32
	tokens := 0
	for b.Loop() {
		b.StopTimer()
		tok.cache = newWordCache() // measure a cold cache
		b.StartTimer()
		tokens = 0
		for _, s := range texts {
			ids = tok.AppendEncode(ids[:0], s, true)
			tokens += len(ids)
		}
	}
	b.ReportMetric(float64(tokens), "tokens/op")
}

// BenchmarkEncodeGSM8KWarm is BenchmarkEncodeGSM8K with the word cache kept
// from one iteration to the next, as in a training run.
func BenchmarkEncodeGSM8KWarm(b *testing.B) {
	tok := qwen3(b)
	texts := gsm8kTexts(b)
	var ids []int32
	for b.Loop() {
		for _, s := range texts {
			ids = tok.AppendEncode(ids[:0], s, true)
		}
	}
}

// BenchmarkLoadQwen3 parses the 11 MB Qwen3 tokenizer.json.
func BenchmarkLoadQwen3(b *testing.B) {
	data, err := os.ReadFile(shareddata.Path(b, "tokenizers/qwen3/tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

package tokenizer

// Hooks for the external tests (package tokenizer_test), which may import
// package gguf.

// ResetWordCache empties t's word cache, for benchmarks of a cold cache.
func ResetWordCache(t *Tokenizer) { t.cache = newWordCache() }

// GSM8KTexts returns every question and answer of GSM8K train.
var GSM8KTexts = gsm8kTexts

// GGUFShapedAsGemma reports whether v's tokenizer.json gets Gemma's shape.
func GGUFShapedAsGemma(v GGUFVocab) bool { return spmFlavor(&v) == spmGemma }

// Package tokenizer turns text into token ids and back for the models rlvr
// trains, and renders their chat templates.
//
// The main type, [Tokenizer], reads a Hugging Face tokenizer.json that
// describes a BPE model and reproduces the Hugging Face tokenizers
// library's output. Two kinds are supported:
//
//   - byte-level BPE, the kind used by Qwen2, Qwen2.5, Qwen3, Llama-3 and
//     SmolLM2: the text is split into pre-tokens (the Digits pre-tokenizer,
//     then a hand-written scanner that matches the Qwen2, Llama-3 or GPT-2
//     split regular expression exactly), mapped to bytes, and merged by BPE
//     rank; decoding maps ids back to bytes, replacing invalid UTF-8 as the
//     Rust library does;
//   - SentencePiece-style BPE, the kind used by Gemma and Llama 2, whose
//     vocabulary is of characters (no ByteLevel pre-tokenizer): the
//     normalizers Replace (" " to "▁"), Prepend and NFC, the pre-tokenizers
//     Metaspace and Split on a String pattern (any behaviour), characters
//     outside the vocabulary as <0xXX> byte tokens (byte_fallback) or the
//     unknown token (fuse_unk), and the decoders Replace, ByteFallback,
//     Fuse, Strip and Metaspace, applied to the token strings as the Rust
//     library does.
//
// In both, added tokens (such as <|im_start|> or <start_of_turn>) are split
// off first, by leftmost-longest match, honouring their special, lstrip,
// rstrip, single_word and normalized flags (a normalized token matches its
// normalized content in normalized text), and the text between them is
// normalized and pre-tokenized piece by piece.
//
// Split patterns are recognised by their exact text; a tokenizer.json with
// any other pattern, model type, normalizer, pre-tokenizer, post-processor
// or decoder is rejected by [Parse] with a [*ParseError] that names the file
// and the JSON field. Encode never adds BOS or EOS tokens: chat templates
// already carry the tokens they need. [Tokenizer.AddBOS] and
// [Tokenizer.AddEOS] report whether the model expects them, from
// tokenizer_config.json or else the post-processor's template.
//
// A GGUF file describes its tokenizer in metadata; [HFFilesFromGGUF] turns
// a [GGUFVocab] of the gpt2 model (byte-level) or the llama model
// (SentencePiece, usually without merges, which are then derived from the
// vocabulary as transformers derives them) into the tokenizer.json and
// tokenizer_config.json transformers builds from the file, and [FromGGUF]
// into a Tokenizer, so a GGUF model and its imported directory share one
// implementation.
//
// # Normalization
//
// Qwen's tokenizer.json asks for Unicode NFC normalization. The standard
// library has no NFC tables, so a [Tokenizer] checks each piece of text with
// a quick test that proves most text, including all ASCII, already NFC, and
// leaves such text unchanged, which is exactly what NFC would do. Text that
// might not be in NFC (it contains combining marks, conjoining Hangul jamo
// or one of the few characters NFC always replaces) is passed to the
// function given to [Tokenizer.WithNormalizer], for instance
// golang.org/x/text/unicode/norm's NFC.String, and is left unchanged when
// none was given. [Tokenizer.Normalization] reports what the file asked for.
//
// # Chat templates
//
// [ParseChatTemplate] parses a tokenizer_config.json chat_template (or a
// GGUF's tokenizer.chat_template) with the Jinja engine
// github.com/nikolalohinski/gonja/v2, chosen because it is the only
// maintained pure-Go Jinja that parses real Hugging Face templates
// (whitespace control, namespace, loop variables, slicing, Python string
// methods, macros); pongo2 is Django-like and lacks most of these. It is
// configured as transformers configures Jinja2 (trim_blocks,
// lstrip_blocks), and this package adds what transformers adds or what
// gonja gets wrong: raise_exception (an error naming the template's file
// and quoting the message), strftime_now with an injectable clock, tojson
// as json.dumps(ensure_ascii=False), Python's strip and trim, and negative
// list indices. [RenderChat] and [ChatTemplate.Render] pass messages,
// add_generation_prompt, bos_token, eos_token and extra kwargs such as
// enable_thinking. Renders are bounded in output size, range() items,
// time, call depth and the size of every value built ([ChatLimits]), and
// parsing in nesting, so that a hostile template gives an error naming
// its file and line rather than a crash; include and import cannot read
// files. [ChatTemplate.StopStrings] are the end-of-turn
// strings to stop generation on. Renders are checked byte for byte against
// transformers on Qwen3, Qwen2.5, SmolLM2, Llama 3.1 and 3.2,
// DeepSeek-R1-Distill-Qwen and Gemma 3 templates (testdata/chat,
// python/chat_ref.py). gonja is vendored in third_party/gonja with two
// patches: conditional expressions inside brackets, which Gemma 3's
// template uses, and render limits (see its README.md).
//
// # Small vocabularies
//
// [ByteTokenizer] is a 259-token byte-level tokenizer for the built-in toy
// worlds. Both it and [Tokenizer] satisfy [Encoder]. [WriteByteTokenizer]
// writes it as a Hugging Face tokenizer.json and tokenizer_config.json
// that [Load] (and the Hugging Face libraries) read back as the same
// tokenizer, and [Tokenizer.ByteTokenizer] recognises such a file.
//
// All types in this package are safe for concurrent use once built.
package tokenizer

package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"rlvr/internal/atomicfile"
)

// ByteTokenizerJSON returns a Hugging Face tokenizer.json that describes
// [ByteTokenizer]: a BPE model without merges whose vocabulary maps each
// byte's character in the GPT-2 byte-level alphabet to the byte's value, a
// ByteLevel pre-tokenizer without the regular-expression split and without
// a prefix space, a ByteLevel decoder, and "<s>", "</s>" and "<pad>" as
// special added tokens 256 to 258. Its post-processor puts "<s>" in front
// of every sequence, so that the Hugging Face library's default encoding
// matches add_bos_token in [ByteTokenizerConfigJSON]; [Parse] ignores
// post-processors, as it always does. Both this package and the tokenizers
// library encode and decode with it exactly as ByteTokenizer does.
func ByteTokenizerJSON() []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [")
	for k, name := range byteSpecials {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    {\"id\": %d, \"content\": %s, \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, \"special\": true}",
			256+k, jsonString(name))
	}
	b.WriteString("\n  ],\n  \"normalizer\": null,\n")
	b.WriteString("  \"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false},\n")
	bos := jsonString(byteSpecials[ByteBOS-256])
	fmt.Fprintf(&b, `  "post_processor": {"type": "TemplateProcessing", `+
		`"single": [{"SpecialToken": {"id": %[1]s, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}], `+
		`"pair": [{"SpecialToken": {"id": %[1]s, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": %[1]s, "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}], `+
		`"special_tokens": {%[1]s: {"id": %[1]s, "ids": [%[2]d], "tokens": [%[1]s]}}},`+"\n", bos, ByteBOS)
	b.WriteString("  \"decoder\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": false, \"use_regex\": false},\n")
	b.WriteString("  \"model\": {\n    \"type\": \"BPE\",\n    \"dropout\": null,\n    \"unk_token\": null,\n" +
		"    \"continuing_subword_prefix\": null,\n    \"end_of_word_suffix\": null,\n    \"fuse_unk\": false,\n" +
		"    \"byte_fallback\": false,\n    \"ignore_merges\": false,\n    \"vocab\": {")
	for id := 0; id < 256; id++ {
		if id > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n      %s: %d", jsonString(string(byteToRune[id])), id)
	}
	b.WriteString("\n    },\n    \"merges\": []\n  }\n}\n")
	return b.Bytes()
}

// ByteTokenizerConfigJSON returns the tokenizer_config.json that goes with
// [ByteTokenizerJSON]: bos_token "<s>", eos_token "</s>", pad_token
// "<pad>", add_bos_token true, and no chat template.
func ByteTokenizerConfigJSON() []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"add_bos_token\": true,\n  \"add_eos_token\": false,\n  \"added_tokens_decoder\": {")
	for k, name := range byteSpecials {
		if k > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n    %s: {\"content\": %s, \"lstrip\": false, \"normalized\": false, \"rstrip\": false, \"single_word\": false, \"special\": true}",
			jsonString(strconv.Itoa(256+k)), jsonString(name))
	}
	fmt.Fprintf(&b, "\n  },\n  \"bos_token\": %s,\n  \"clean_up_tokenization_spaces\": false,\n  \"eos_token\": %s,\n"+
		"  \"pad_token\": %s,\n  \"tokenizer_class\": \"PreTrainedTokenizerFast\"\n}\n",
		jsonString(byteSpecials[ByteBOS-256]), jsonString(byteSpecials[ByteEOS-256]), jsonString(byteSpecials[BytePAD-256]))
	return b.Bytes()
}

// WriteByteTokenizer writes [ByteTokenizerJSON] and
// [ByteTokenizerConfigJSON] into dir as tokenizer.json and
// tokenizer_config.json, creating dir. Each file is replaced atomically.
func WriteByteTokenizer(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tokenizer: %w", err)
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"tokenizer.json", ByteTokenizerJSON()}, {"tokenizer_config.json", ByteTokenizerConfigJSON()}} {
		if err := atomicfile.WriteBytes(filepath.Join(dir, f.name), f.data); err != nil {
			return fmt.Errorf("tokenizer: %w", err)
		}
	}
	return nil
}

// jsonString returns s as a JSON string, with <, > and & left as they are.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}

// ByteTokenizer reports whether t encodes and decodes exactly as
// [ByteTokenizer] does, and returns one if so. That holds when its file
// describes the byte tokenizer, as [ByteTokenizerJSON] does: the 256 bytes
// as ids 0 to 255, no merges, no normalizer, no split before the byte-level
// mapping, "<s>", "</s>" and "<pad>" as special added tokens 256 to 258
// and nothing else, and a configuration naming them as BOS, EOS and PAD.
// The check reads the parsed tables, so it does not depend on how the file
// is formatted.
func (t *Tokenizer) ByteTokenizer() (*ByteTokenizer, bool) {
	if len(t.tokens) != 256+len(byteSpecials) || len(t.vocab) != 256 || len(t.merges) != 0 ||
		len(t.splitters) != 0 || t.nfc || !t.byteLevel || len(t.added) != len(byteSpecials) {
		return nil, false
	}
	for b, id := range t.byteID {
		if id != int32(b) {
			return nil, false
		}
	}
	for k, name := range byteSpecials {
		a := t.added[name]
		if a == nil || int(a.id) != 256+k || !a.special || a.lstrip || a.rstrip || a.singleWord {
			return nil, false
		}
	}
	if t.bos != ByteBOS || t.eos != ByteEOS || t.pad != BytePAD {
		return nil, false
	}
	return NewByteTokenizer(), true
}

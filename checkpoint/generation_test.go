package checkpoint

import (
	"strings"
	"testing"
)

// FuzzGenerationEOS reads arbitrary generation_config.json files: no
// input panics, and every id read lies in the vocabulary.
func FuzzGenerationEOS(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"eos_token_id": 2}`, `{"eos_token_id": [2, 7]}`, `{"eos_token_id": [2, 10]}`,
		`{"eos_token_id": -1}`, `{"eos_token_id": null}`, `{"eos_token_id": "x"}`, `[1]`} {
		f.Add([]byte(s))
	}
	const vocab = 10
	f.Fuzz(func(t *testing.T, data []byte) {
		ids, err := generationEOS("generation_config.json", data, vocab)
		if err != nil {
			if !strings.Contains(err.Error(), "generation_config.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, id := range ids {
			if id < 0 || id >= vocab {
				t.Fatalf("id %d outside the vocabulary of %d", id, vocab)
			}
		}
	})
}

package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/checkpoint"
	"rlvr/format/tokenizer"
)

func TestInitModelCommand(t *testing.T) {
	tokDir := t.TempDir()
	if err := tokenizer.WriteByteTokenizer(tokDir); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "m")
	for _, c := range []struct {
		name string
		args []string
		want string // in the output, or in the error when fail
		fail bool
	}{
		{"tiny with overrides", []string{"--shape", "llama-tiny", "--dim", "32", "--heads", "2", "--kv-heads", "1", "--layers", "1", "--out", out}, "d_model 32, 1 layers, 2 heads / 1 KV of 16", false},
		{"refuses a non-empty dir", []string{"--shape", "llama-tiny", "--out", out}, "not empty", true},
		{"force", []string{"--shape", "qwen3-tiny", "--seed", "3", "--out", out, "--force"}, "Qwen3ForCausalLM", false},
		{"unknown shape", []string{"--shape", "gpt-5", "--out", out}, "known: qwen3-tiny", true},
		{"inconsistent shape", []string{"--shape", "qwen3-tiny", "--heads", "3", "--out", out, "--force"}, "heads 3 do not divide dim 64", true},
		{"missing tokenizer", []string{"--tokenizer", filepath.Join(tokDir, "nope"), "--out", out}, "nope", true},
		{"empty out", []string{"--out", ""}, "--out is empty", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := rootCmd()
			var buf bytes.Buffer
			root.SetOut(&buf)
			root.SetErr(&buf)
			root.SetArgs(append([]string{"init-model", "--tokenizer", tokDir}, c.args...))
			err := root.Execute()
			if c.fail {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want one containing %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(buf.String(), c.want) {
				t.Fatalf("output %q, want %q in it", buf.String(), c.want)
			}
		})
	}
	l, err := checkpoint.Open(out, "")
	if err != nil {
		t.Fatal(err)
	}
	if l.HFConfig.Architecture != "Qwen3ForCausalLM" || l.Model.Config.Dim != 64 {
		t.Errorf("the forced rewrite left %s d_model %d", l.HFConfig.Architecture, l.Model.Config.Dim)
	}
}

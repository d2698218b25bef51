package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"rlvr/engine/model"
)

// TestSampleReport runs the decoding benchmark on a tiny model and checks
// every figure it reports is filled in and consistent.
func TestSampleReport(t *testing.T) {
	cfg := model.Config{Vocab: 50, Dim: 32, Layers: 2, Heads: 4, KVHeads: 2, Hidden: 48, MaxSeq: 17}
	m, err := model.New(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	rep := NewSampleReport(Peak{GFLOPS: 100, Source: "test"})
	if err := Sample(context.Background(), "tiny", m, 0, []int{1, 4}, 16, 2, rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 {
		t.Fatalf("%d results for 2 stream counts", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Tokens != 16*r.Streams || r.TokensPerSec <= 0 || r.GFLOPS <= 0 || r.PeakShare != r.GFLOPS/100 {
			t.Fatalf("result %+v", r)
		}
		var total float64
		for _, v := range r.OpShare {
			total += v
		}
		if r.OpShare["matmul"] <= 0 || r.OpShare["sampling"] < 0 || total < 0.99 || total > 1.01 {
			t.Fatalf("time by op %v sums to %.3f", r.OpShare, total)
		}
	}
	if g := rep.LogprobGap["tiny"]; g > 1e-4 {
		t.Fatalf("logprob gap %g", g)
	}
	table := rep.Table()
	for _, want := range []string{"tiny", "GFLOP/s", "peak memory", "matmul"} {
		if !strings.Contains(table, want) {
			t.Fatalf("table lacks %q:\n%s", want, table)
		}
	}
}

// TestDecodeFLOPs checks the count on a shape worked by hand.
func TestDecodeFLOPs(t *testing.T) {
	c := model.Config{Vocab: 10, Dim: 8, Layers: 2, Heads: 2, KVHeads: 1, Hidden: 12, MaxSeq: 16}
	// Per layer: q,k,v 8·(8+4+4) = 128, o 8·8 = 64, MLP 3·8·12 = 288; head 80.
	want := 2*(2*(128+64+288)+80) + 4.0*5*8*2
	if got := model.DecodeFLOPs(c, 5); got != want {
		t.Fatalf("DecodeFLOPs = %v, want %v", got, want)
	}
}

// TestRunC checks run.c's rate is read from its output, and a binary that
// fails or prints no rate is an error naming it.
func TestRunC(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := script("run", `echo "Once upon a time"; echo "achieved tok/s: 3456.5" >&2`)
	if v, err := RunC(context.Background(), good, "m.bin", "tok.bin", 256, 2); err != nil || v != 3456.5 {
		t.Fatalf("RunC = %v, %v", v, err)
	}
	silent := script("silent", `echo hello`)
	if _, err := RunC(context.Background(), silent, "m.bin", "tok.bin", 256, 1); err == nil || !strings.Contains(err.Error(), "achieved tok/s") {
		t.Fatalf("no rate printed: %v", err)
	}
	failing := script("failing", `echo "cannot open m.bin" >&2; exit 1`)
	if _, err := RunC(context.Background(), failing, "m.bin", "tok.bin", 256, 1); err == nil || !strings.Contains(err.Error(), "cannot open m.bin") {
		t.Fatalf("failing binary: %v", err)
	}
}

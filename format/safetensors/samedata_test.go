package safetensors

import (
	"path/filepath"
	"testing"
)

// TestSameData compares tensors by dtype, shape and bytes, across chunk
// boundaries.
func TestSameData(t *testing.T) {
	big := make([]float32, chunkBytes/4+3) // more than one chunk
	for i := range big {
		big[i] = float32(i)
	}
	changed := append([]float32(nil), big...)
	changed[len(changed)-1] = -1
	path := filepath.Join(t.TempDir(), "m.safetensors")
	err := Write(path, []Tensor{
		{Name: "a", Shape: []int{len(big)}, Data: big},
		{Name: "b", Shape: []int{len(big)}, Data: big},
		{Name: "c", Shape: []int{len(big)}, Data: changed},
		{Name: "d", Shape: []int{1, len(big)}, Data: big},
	}, nil, F32)
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"a", "b", true}, {"a", "a", true}, {"a", "c", false}, {"a", "d", false}} {
		if got, err := f.SameData(tc.a, tc.b); err != nil || got != tc.want {
			t.Errorf("SameData(%s, %s) = %v, %v; want %v", tc.a, tc.b, got, err, tc.want)
		}
	}
	if _, err := f.SameData("a", "nosuch"); err == nil {
		t.Error("no error for a missing tensor")
	}
}

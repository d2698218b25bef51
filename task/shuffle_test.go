package task

import (
	"math"
	"slices"
	"strconv"
	"testing"
)

// TestShuffleGolden pins the permutations. They were checked against an
// independent implementation of the documented algorithm (PCG-DXSM, then
// Fisher–Yates with Lemire's method), so they must not change with Go.
func TestShuffleGolden(t *testing.T) {
	tests := []struct {
		seed uint64
		want []int
	}{
		{0, []int{0, 9, 2, 5, 1, 8, 3, 7, 6, 4}},
		{1, []int{0, 5, 2, 3, 1, 4, 8, 7, 6, 9}},
		{42, []int{1, 9, 2, 6, 5, 4, 8, 0, 7, 3}},
	}
	for _, tt := range tests {
		s := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		Shuffle(s, tt.seed)
		if !slices.Equal(s, tt.want) {
			t.Errorf("Shuffle(seed %d) = %v, want %v", tt.seed, s, tt.want)
		}
	}
}

func TestShuffleIsPermutation(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 100, 1319} {
		s := make([]int, n)
		for i := range s {
			s[i] = i
		}
		Shuffle(s, uint64(n))
		again := slices.Clone(s)
		slices.Sort(s)
		for i := range s {
			if s[i] != i {
				t.Fatalf("n=%d: not a permutation", n)
			}
		}
		s2 := make([]int, n)
		for i := range s2 {
			s2[i] = i
		}
		Shuffle(s2, uint64(n))
		if !slices.Equal(again, s2) {
			t.Fatalf("n=%d: two shuffles with one seed differ", n)
		}
	}
}

// TestShuffleUniform checks that the 6 orders of 3 elements come up about
// equally often over many seeds.
func TestShuffleUniform(t *testing.T) {
	const trials = 60000
	counts := map[[3]int]int{}
	for seed := range uint64(trials) {
		s := [3]int{0, 1, 2}
		Shuffle(s[:], seed)
		counts[s]++
	}
	if len(counts) != 6 {
		t.Fatalf("%d orders, want 6", len(counts))
	}
	for order, c := range counts {
		if math.Abs(float64(c)-trials/6) > 500 { // about 5 standard deviations
			t.Errorf("order %v came up %d times in %d", order, c, trials)
		}
	}
}

func TestSplit(t *testing.T) {
	ex := make([]Example, 1319)
	for i := range ex {
		ex[i] = Example{ID: strconv.Itoa(i)}
	}
	orig := slices.Clone(ex)
	tests := []struct {
		frac float64
		val  int
	}{{0, 0}, {0.1, 132}, {0.5, 660}, {0.999, 1318}, {1, 1319}}
	for _, tt := range tests {
		train, val := Split(ex, tt.frac, 7)
		if len(val) != tt.val || len(train)+len(val) != len(ex) {
			t.Errorf("Split(%v): %d train, %d val; want %d val", tt.frac, len(train), len(val), tt.val)
		}
		seen := map[string]bool{}
		for _, e := range slices.Concat(train, val) {
			if seen[e.ID] {
				t.Fatalf("Split(%v): %s twice", tt.frac, e.ID)
			}
			seen[e.ID] = true
		}
		train2, val2 := Split(ex, tt.frac, 7)
		if !slices.EqualFunc(train, train2, sameID) || !slices.EqualFunc(val, val2, sameID) {
			t.Errorf("Split(%v) differs between calls", tt.frac)
		}
	}
	if !slices.EqualFunc(ex, orig, sameID) {
		t.Error("Split modified its input")
	}
	_, v1 := Split(ex, 0.1, 1)
	_, v2 := Split(ex, 0.1, 2)
	if slices.EqualFunc(v1, v2, sameID) {
		t.Error("seeds 1 and 2 give the same split")
	}

	// Appending to val must not overwrite train.
	train, val := Split(ex, 0.5, 3)
	first := train[0].ID
	_ = append(val, Example{ID: "new"})
	if train[0].ID != first {
		t.Error("append to val overwrote train")
	}

	// The split itself is pinned.
	small := []Example{{ID: "a"}, {ID: "b"}, {ID: "c"}, {ID: "d"}, {ID: "e"}}
	train, val = Split(small, 0.4, 7)
	want(t, "train", ids(train), []string{"b", "a", "c"})
	want(t, "val", ids(val), []string{"e", "d"})
}

func TestSplitPanics(t *testing.T) {
	for _, frac := range []float64{-0.1, 1.5, math.NaN(), math.Inf(1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Split(%v) did not panic", frac)
				}
			}()
			Split([]int{1, 2}, frac, 0)
		}()
	}
}

func sameID(a, b Example) bool { return a.ID == b.ID }

func ids(ex []Example) []string {
	out := make([]string, len(ex))
	for i, e := range ex {
		out[i] = e.ID
	}
	return out
}

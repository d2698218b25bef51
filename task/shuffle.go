package task

import (
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// shuffleStream is the second half of the PCG seed.
const shuffleStream = 0x9e3779b97f4a7c15

// Shuffle permutes s in place, pseudo-randomly and deterministically for
// seed. The order depends only on seed and len(s), not on the Go version:
// it is a Fisher–Yates shuffle from the last element down, drawing each
// index with Lemire's multiply-and-reject method from math/rand/v2's PCG
// seeded with (seed, 0x9e3779b97f4a7c15), whose output is fixed by its
// algorithm. (The methods of rand.Rand, including its Shuffle, are free to
// change across Go versions; they are not used.)
func Shuffle[S ~[]E, E any](s S, seed uint64) {
	pcg := rand.NewPCG(seed, shuffleStream)
	for i := len(s) - 1; i > 0; i-- {
		j := below(pcg, uint64(i)+1)
		s[i], s[j] = s[j], s[i]
	}
}

// below returns a uniform number in [0, n), n > 0.
func below(src *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(src.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), n)
		}
	}
	return hi
}

// Split shuffles a copy of s with Shuffle and seed and splits it into a
// training part and a validation part of round(valFraction·len(s))
// elements, each in shuffled order. s is not modified; train and val do
// not share memory that an append could overwrite. The split depends only
// on seed and s. Split panics if valFraction is not in [0, 1].
func Split[S ~[]E, E any](s S, valFraction float64, seed uint64) (train, val S) {
	if !(valFraction >= 0 && valFraction <= 1) {
		panic(fmt.Sprintf("task: Split: validation fraction %v not in [0, 1]", valFraction))
	}
	perm := slices.Clone(s)
	Shuffle(perm, seed)
	n := int(math.Round(valFraction * float64(len(perm))))
	return perm[n:], perm[:n:n]
}

// Package tokens converts token ids between the int32 the engine and
// sampler use and the int tokenizers use.
package tokens

// Int32s converts ids to int32.
func Int32s(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, t := range ids {
		out[i] = int32(t)
	}
	return out
}

// Ints converts ids to int.
func Ints(ids []int32) []int {
	out := make([]int, len(ids))
	for i, t := range ids {
		out[i] = int(t)
	}
	return out
}

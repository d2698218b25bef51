package safetensors

import "math"

// BF16ToFloat32 converts a bfloat16 value, given as its bits, to float32.
// The conversion is exact.
func BF16ToFloat32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// Float32ToBF16 converts f to bfloat16 bits, rounding to nearest with ties
// to even. Values beyond the bfloat16 range become infinities, and NaNs stay
// NaNs (quiet, keeping the sign and the high payload bits).
func Float32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: truncating could make it infinite
		return uint16(u>>16) | 0x0040
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// F16ToFloat32 converts an IEEE 754 half-precision value, given as its bits,
// to float32. The conversion is exact, including subnormals, infinities and
// NaNs (whose payload is kept).
func F16ToFloat32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0 && mant == 0: // signed zero
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalize, since float32 has the range
		exp = 127 - 15 + 1
		for mant&0x400 == 0 {
			mant <<= 1
			exp--
		}
		return math.Float32frombits(sign | exp<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

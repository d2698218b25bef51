package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"rlvr/format/safetensors"
)

// Type is a GGML tensor type.
type Type uint32

// The tensor types rlvr reads, with GGML's numbers.
const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	BF16 Type = 30
)

// typeInfo is a type's block: values per block and bytes per block.
type typeInfo struct {
	name         string
	block, bytes int
}

// qk is the k-quants' super-block of values.
const qk = 256

var types = map[Type]typeInfo{
	F32:  {"F32", 1, 4},
	F16:  {"F16", 1, 2},
	BF16: {"BF16", 1, 2},
	Q4_0: {"Q4_0", 32, 2 + 16},
	Q4_1: {"Q4_1", 32, 2 + 2 + 16},
	Q5_0: {"Q5_0", 32, 2 + 4 + 16},
	Q5_1: {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0: {"Q8_0", 32, 2 + 32},
	Q2_K: {"Q2_K", qk, qk/16 + qk/4 + 2 + 2},
	Q3_K: {"Q3_K", qk, qk/8 + qk/4 + 12 + 2},
	Q4_K: {"Q4_K", qk, 2 + 2 + 12 + qk/2},
	Q5_K: {"Q5_K", qk, 2 + 2 + 12 + qk/8 + qk/2},
	Q6_K: {"Q6_K", qk, qk/2 + qk/4 + qk/16 + 2},
}

func (t Type) String() string {
	if i, ok := types[t]; ok {
		return i.name
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// Types lists the types Dequantize reads.
func Types() []Type {
	return []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K}
}

// BlockSize returns the type's values and bytes per block.
func (t Type) BlockSize() (values, bytes int, ok bool) {
	i, ok := types[t]
	return i.block, i.bytes, ok
}

// Dequantize decodes src, whole blocks of type t, into dst as float32.
// The arithmetic follows ggml's reference dequantize_row functions
// operation for operation, each product rounded to float32 before it is
// added (never fused), so the values are those of llama.cpp and of the
// gguf Python package bit for bit.
func Dequantize(t Type, src []byte, dst []float32) error {
	info, ok := types[t]
	if !ok {
		return fmt.Errorf("gguf: unknown tensor type %d", uint32(t))
	}
	if len(dst)%info.block != 0 || len(src) != len(dst)/info.block*info.bytes {
		return fmt.Errorf("gguf: %s: %d bytes do not hold %d values", t, len(src), len(dst))
	}
	n := len(dst) / info.block
	for b := range n {
		blk := src[b*info.bytes : (b+1)*info.bytes]
		y := dst[b*info.block : (b+1)*info.block]
		switch t {
		case F32:
			y[0] = math.Float32frombits(binary.LittleEndian.Uint32(blk))
		case F16:
			y[0] = half(blk)
		case BF16:
			y[0] = safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(blk))
		case Q4_0:
			dequantQ4_0(blk, y)
		case Q4_1:
			dequantQ4_1(blk, y)
		case Q5_0:
			dequantQ5_0(blk, y)
		case Q5_1:
			dequantQ5_1(blk, y)
		case Q8_0:
			dequantQ8_0(blk, y)
		case Q2_K:
			dequantQ2_K(blk, y)
		case Q3_K:
			dequantQ3_K(blk, y)
		case Q4_K:
			dequantQ4_K(blk, y)
		case Q5_K:
			dequantQ5_K(blk, y)
		case Q6_K:
			dequantQ6_K(blk, y)
		}
	}
	return nil
}

// half reads a little-endian IEEE half.
func half(p []byte) float32 { return safetensors.F16ToFloat32(binary.LittleEndian.Uint16(p)) }

func dequantQ4_0(b []byte, y []float32) {
	d, qs := half(b), b[2:18]
	for j := range 16 {
		y[j] = float32(int(qs[j]&0xF)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

func dequantQ4_1(b []byte, y []float32) {
	d, m, qs := half(b), half(b[2:]), b[4:20]
	for j := range 16 {
		y[j] = float32(float32(qs[j]&0xF)*d) + m
		y[j+16] = float32(float32(qs[j]>>4)*d) + m
	}
}

func dequantQ5_0(b []byte, y []float32) {
	d, qh, qs := half(b), binary.LittleEndian.Uint32(b[2:]), b[6:22]
	for j := range 16 {
		h0 := byte(qh>>j<<4) & 0x10
		h1 := byte(qh>>(j+12)) & 0x10
		y[j] = float32(int(qs[j]&0xF|h0)-16) * d
		y[j+16] = float32(int(qs[j]>>4|h1)-16) * d
	}
}

func dequantQ5_1(b []byte, y []float32) {
	d, m, qh, qs := half(b), half(b[2:]), binary.LittleEndian.Uint32(b[4:]), b[8:24]
	for j := range 16 {
		h0 := byte(qh>>j<<4) & 0x10
		h1 := byte(qh>>(j+12)) & 0x10
		y[j] = float32(float32(qs[j]&0xF|h0)*d) + m
		y[j+16] = float32(float32(qs[j]>>4|h1)*d) + m
	}
}

func dequantQ8_0(b []byte, y []float32) {
	d := half(b)
	for j, q := range b[2:34] {
		y[j] = float32(int8(q)) * d
	}
}

// Q2_K: 16 scales (4-bit scale, 4-bit min), 2-bit values, d and dmin.
func dequantQ2_K(b []byte, y []float32) {
	scales, q := b[:16], b[16:80]
	d, dmin := half(b[80:]), half(b[82:])
	is := 0
	for n := 0; n < qk; n += 128 {
		shift := uint(0)
		for range 4 {
			for half := range 2 {
				sc := scales[is]
				is++
				dl, ml := d*float32(sc&0xF), dmin*float32(sc>>4)
				for l := range 16 {
					y[0] = float32(dl*float32((q[l+16*half]>>shift)&3)) - ml
					y = y[1:]
				}
			}
			shift += 2
		}
		q = q[32:]
	}
}

// Q3_K: a high-bit mask, 2-bit low values, 16 6-bit scales packed in 12
// bytes, and d.
func dequantQ3_K(b []byte, y []float32) {
	hm, q, packed := b[:32], b[32:96], b[96:108]
	d := half(b[108:])
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	var aux [4]uint32
	aux[0] = binary.LittleEndian.Uint32(packed)
	aux[1] = binary.LittleEndian.Uint32(packed[4:])
	tmp := binary.LittleEndian.Uint32(packed[8:])
	aux[2] = (aux[0]>>4)&kmask2 | ((tmp>>4)&kmask1)<<4
	aux[3] = (aux[1]>>4)&kmask2 | ((tmp>>6)&kmask1)<<4
	aux[0] = aux[0]&kmask2 | (tmp&kmask1)<<4
	aux[1] = aux[1]&kmask2 | ((tmp>>2)&kmask1)<<4
	var scales [16]int8
	for i := range scales {
		scales[i] = int8(aux[i/4] >> (8 * (i % 4)))
	}
	is, m := 0, byte(1)
	for n := 0; n < qk; n += 128 {
		shift := uint(0)
		for range 4 {
			for half := range 2 {
				dl := d * float32(int(scales[is])-32)
				is++
				for l := range 16 {
					v := int((q[l+16*half] >> shift) & 3)
					if hm[l+16*half]&m == 0 {
						v -= 4
					}
					y[0] = dl * float32(v)
					y = y[1:]
				}
			}
			shift += 2
			m <<= 1
		}
		q = q[32:]
	}
}

// scaleMinK4 unpacks the j'th 6-bit scale and min of Q4_K and Q5_K.
func scaleMinK4(j int, q []byte) (byte, byte) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

func dequantQ4_K(b []byte, y []float32) {
	d, dmin, scales, q := half(b), half(b[2:]), b[4:16], b[16:144]
	is := 0
	for j := 0; j < qk; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := range 32 {
			y[l] = float32(d1*float32(q[l]&0xF)) - m1
			y[l+32] = float32(d2*float32(q[l]>>4)) - m2
		}
		y, q, is = y[64:], q[32:], is+2
	}
}

func dequantQ5_K(b []byte, y []float32) {
	d, dmin, scales, qh, ql := half(b), half(b[2:]), b[4:16], b[16:48], b[48:176]
	is, u1, u2 := 0, byte(1), byte(2)
	for j := 0; j < qk; j += 64 {
		sc, m := scaleMinK4(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = scaleMinK4(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := range 32 {
			lo, hi := ql[l]&0xF, ql[l]>>4
			if qh[l]&u1 != 0 {
				lo += 16
			}
			if qh[l]&u2 != 0 {
				hi += 16
			}
			y[l] = float32(d1*float32(lo)) - m1
			y[l+32] = float32(d2*float32(hi)) - m2
		}
		y, ql, is = y[64:], ql[32:], is+2
		u1 <<= 2
		u2 <<= 2
	}
}

func dequantQ6_K(b []byte, y []float32) {
	ql, qh, sc := b[:128], b[128:192], b[192:208]
	d := half(b[208:])
	for n := 0; n < qk; n += 128 {
		for l := range 32 {
			is := l / 16
			q1 := int(ql[l]&0xF|((qh[l]>>0)&3)<<4) - 32
			q2 := int(ql[l+32]&0xF|((qh[l]>>2)&3)<<4) - 32
			q3 := int(ql[l]>>4|((qh[l]>>4)&3)<<4) - 32
			q4 := int(ql[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
			y[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
			y[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
			y[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
			y[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
		}
		y, ql, qh, sc = y[128:], ql[64:], qh[32:], sc[8:]
	}
}

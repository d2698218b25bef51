//go:build !(cgo && amd64)

package gemm

const panelsAccelerated = false

var panels512 = false

func panelsC(out []float32, ldo int, x []float32, ldx int, m int, p *Panels, p0, p1 int, accumulate bool) {
	panic("gemm: no C panel kernel")
}

func amxUsable() error { return errNoAMX }

func panelsAMXC(out []float32, ldo int, xb []uint16, m int, p *Panels, p0, p1 int, accumulate bool) {
	panic("gemm: no AMX panel kernel")
}

func dotUsable() error { return errNoDot }

func panelsDotC(out []float32, ldo int, xb []uint16, m int, p *Panels, p0, p1 int, accumulate bool) {
	panic("gemm: no AVX512-BF16 panel kernel")
}

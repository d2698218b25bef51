package gemm

import (
	"runtime"
	"strings"
	"testing"
)

// TestParseCPUInfo reads the first processor's name, family and model
// from /proc/cpuinfo's text, whose "model" key is a prefix of "model
// name" and comes after it.
func TestParseCPUInfo(t *testing.T) {
	text := "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx512_bf16\n\n" +
		"processor\t: 1\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: other\n"
	name, family, model := parseCPUInfo(strings.NewReader(text))
	if name != "AMD EPYC" || family != 25 || model != 17 {
		t.Fatalf("parseCPUInfo = %q, %d, %d; want AMD EPYC, 25, 17", name, family, model)
	}
	c := CPUInfo{Name: name, Family: family, Model: model}
	if got, want := c.Identity(), "AMD EPYC family 25 model 17"; got != want {
		t.Errorf("Identity() = %q, want %q", got, want)
	}
	name, family, model = parseCPUInfo(strings.NewReader("processor\t: 0\nCPU implementer\t: 0x41\n"))
	if name != runtime.GOARCH || family != 0 || model != 0 {
		t.Errorf("without the fields: %q, %d, %d; want %q, 0, 0", name, family, model, runtime.GOARCH)
	}
	if got := (CPUInfo{Name: "arm64"}).Identity(); got != "arm64" {
		t.Errorf("Identity() without family and model = %q, want the name alone", got)
	}
}

package gemm

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/cpu"
)

// CPUInfo is the processor and the matrix instructions the kernels care
// about, for choosing a bf16 kernel and for naming the machine in every
// benchmark table.
type CPUInfo struct {
	Name string // the model name /proc/cpuinfo gives, or the architecture
	// Family and Model are /proc/cpuinfo's "cpu family" and "model", 0
	// where it has none: a name such as "AMD EPYC" covers several
	// generations, which these tell apart (family 25 model 17: Zen 4).
	Family, Model int
	AVX2FMA       bool // 8-wide float32 FMA: the float32 kernels' instructions
	AVX512F       bool
	AVX512BF16    bool // VDPBF16PS: bf16 dot products (Zen 4, Cooper Lake, Sapphire Rapids)
	AMXBF16       bool // AMX tiles with bf16 (Sapphire Rapids and later)
	AMXInt8       bool
}

// BF16 reports whether the CPU multiplies bf16 matrices in hardware.
func (c CPUInfo) BF16() bool { return c.AVX512BF16 || c.AMXBF16 }

// Features lists what the CPU has of AVX2+FMA, AVX-512, AVX512-BF16 and
// AMX, naming the missing bf16 ones: "AVX2+FMA, no AVX512-BF16, no AMX".
func (c CPUInfo) Features() string {
	var f []string
	if c.AVX2FMA {
		f = append(f, "AVX2+FMA")
	}
	if c.AVX512F {
		f = append(f, "AVX-512")
	}
	if c.AVX512BF16 {
		f = append(f, "AVX512-BF16")
	} else {
		f = append(f, "no AVX512-BF16")
	}
	switch {
	case c.AMXBF16 && c.AMXInt8:
		f = append(f, "AMX-BF16", "AMX-INT8")
	case c.AMXBF16:
		f = append(f, "AMX-BF16")
	default:
		f = append(f, "no AMX")
	}
	return strings.Join(f, ", ")
}

// String is the name and the features: "AMD EPYC (AVX2+FMA, no
// AVX512-BF16, no AMX)".
func (c CPUInfo) String() string { return c.Name + " (" + c.Features() + ")" }

var (
	cpuOnce sync.Once
	cpuInfo CPUInfo
)

// DetectCPU reads the processor's name and matrix instructions (CPUID,
// through golang.org/x/sys/cpu; all false off x86).
func DetectCPU() CPUInfo {
	cpuOnce.Do(func() {
		name, family, model := cpuIdentity()
		cpuInfo = CPUInfo{
			Name:       name,
			Family:     family,
			Model:      model,
			AVX2FMA:    cpu.X86.HasAVX2 && cpu.X86.HasFMA,
			AVX512F:    cpu.X86.HasAVX512F,
			AVX512BF16: cpu.X86.HasAVX512BF16,
			AMXBF16:    cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16,
			AMXInt8:    cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8,
		}
	})
	return cpuInfo
}

// Identity is the name with the family and model where /proc/cpuinfo
// gives them: "AMD EPYC family 25 model 17", for records that must
// tell one generation of a processor from another.
func (c CPUInfo) Identity() string {
	if c.Family == 0 && c.Model == 0 {
		return c.Name
	}
	return fmt.Sprintf("%s family %d model %d", c.Name, c.Family, c.Model)
}

// cpuIdentity is the first "model name", "cpu family" and "model" of
// /proc/cpuinfo, or GOARCH and zeros where there are none.
func cpuIdentity() (name string, family, model int) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH, 0, 0
	}
	defer f.Close()
	return parseCPUInfo(f)
}

// parseCPUInfo reads cpuIdentity's fields from the text of /proc/cpuinfo:
// the first processor's, which on the machines here every processor
// shares.
func parseCPUInfo(r io.Reader) (name string, family, model int) {
	name = runtime.GOARCH
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() && len(seen) < 3 {
		key, val, ok := strings.Cut(sc.Text(), ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok || seen[key] {
			continue
		}
		switch key {
		case "model name":
			name = val
		case "cpu family":
			family, _ = strconv.Atoi(val)
		case "model":
			model, _ = strconv.Atoi(val)
		default:
			continue
		}
		seen[key] = true
	}
	return name, family, model
}

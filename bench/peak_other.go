//go:build !(cgo && amd64)

package bench

const fmaProbeAvailable = false

func fmaProbe(int) float64 { return 0 }

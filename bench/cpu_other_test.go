//go:build !unix

package bench

// processCPU is not measured here (no cpu-ns/op metric).
func processCPU() int64 { return 0 }

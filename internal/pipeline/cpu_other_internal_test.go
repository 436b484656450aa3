//go:build !unix

package pipeline

// processCPU is not measured here (the cpu-ns/op metrics read 0).
func processCPU() int64 { return 0 }

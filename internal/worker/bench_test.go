package worker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkSpawn measures a worker's start-up: exec of this binary, the
// confinement constructor, the Go runtime, a wasmtime engine, and the
// hello on the socket; then its kill.
//
//	go test ./internal/worker -run '^$' -bench Spawn
func BenchmarkSpawn(b *testing.B) {
	exe := mustExe(b)
	for range b.N {
		w, err := spawn(context.Background(), []string{exe}, 10*time.Second)
		if err != nil {
			b.Fatal(err)
		}
		w.kill(killedShutdown)
		<-w.exited
	}
}

// BenchmarkMemcgLimit measures what a worker's memory cgroup adds to each
// call: reading its usage and writing its limit.
func BenchmarkMemcgLimit(b *testing.B) {
	root, err := memcgRoot()
	if err != nil {
		b.Skipf("no memory cgroup for workers here: %v", err)
	}
	dir := filepath.Join(root, "bench")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	m, err := openMemcg(dir)
	defer m.leave()
	if err != nil {
		b.Fatal(err)
	}
	for _, alternate := range []bool{false, true} {
		name := "same-headroom"
		if alternate {
			// Every call writes the limit: calls of tools with
			// different memory_mb, one after the other.
			name = "alternating-headroom"
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				headroom := uint64(80 << 20)
				if alternate && i%2 == 1 {
					headroom += 16 << 20
				}
				if err := m.setLimit(headroom); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

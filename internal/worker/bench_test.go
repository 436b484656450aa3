package worker

import (
	"context"
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

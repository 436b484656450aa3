package worker

import (
	"context"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/testkit"
)

// BenchmarkLoadCode measures handing a fresh worker a tool's compiled code
// (ensureLoaded: the load frame, the worker's deserialize, its answer), by
// descriptor (the sealed memfd over the code channel, codefd.go) against
// the bytes in the frame (how every load went before, and how a worker
// without a code channel still gets them), alternating in one run. The
// worker's start and kill are outside the timer. The JS tool's artifact is
// ~46 MB, the Go tool's ~10, the WAT tool's a few KB.
//
//	go test ./internal/worker -run '^$' -bench LoadCode -benchtime 20x -count 3
func BenchmarkLoadCode(b *testing.B) {
	for _, tool := range []string{"echo", "go/echo", "js/echo"} {
		path := testkit.Component(b, tool)
		p := newPool(b, &Options{Size: 1})
		p.mem.minFile = 0 // the WAT tool's too, to compare
		if _, err := p.Open(context.Background(), path, lim); err != nil {
			b.Fatal(err)
		}
		art := firstKey(p)
		a, ok := p.mem.Get(art)
		if !ok || a.file == nil {
			b.Fatalf("%s: no memfd in memory", tool)
		}
		code := make([]byte, a.size)
		if _, err := a.file.ReadAt(code, 0); err != nil {
			b.Fatal(err)
		}
		a.close()
		// The same code as bytes, in a pool of its own.
		pb := newPool(b, &Options{Size: 1})
		pb.setFingerprint(p.fingerprint)
		pb.mem.put(&memArtifact{key: art, code: code, size: len(code)})
		for _, via := range []struct {
			name string
			pool *Pool
		}{{"descriptor", p}, {"bytes", pb}} {
			b.Run(tool+"/"+via.name, func(b *testing.B) {
				b.SetBytes(int64(len(code)))
				for b.Loop() {
					b.StopTimer()
					w, err := via.pool.spawnTracked(context.Background())
					if err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					if err := via.pool.ensureLoaded(context.Background(), w, art); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					w.kill(killedShutdown)
					select {
					case <-w.exited:
					case <-time.After(10 * time.Second):
						b.Fatal("worker not reaped")
					}
					b.StartTimer()
				}
			})
		}
	}
}

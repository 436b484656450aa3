package mcpserver

import (
	"sync/atomic"
	"time"
)

// warmRunners run Host.Call on goroutines kept between calls. The SDK
// answers each request on a goroutine of its own, which starts with a
// small stack; the call path below Host.Call (the pipeline's stages, the
// sandbox) is deep enough that such a stack grows several times during
// every call, each time copied whole, and is then freed with the goroutine.
// A runner's stack has grown once, at its first call, and stays grown:
// BenchmarkStdioFrontEnd's host-call-fresh-goroutine and
// host-call-warm-runner measure the difference (about 20 µs a call on a
// two-core machine). Handing the call over costs two goroutine switches.
//
// A call never waits for a runner: with none idle, a new one starts. A
// runner idle for runnerIdle ends, and one that would make more than
// maxIdleRunners idle ends at once: a burst of concurrent calls (the
// callers' choice) leaves no more than that many behind.
type warmRunners struct {
	work chan func() // unbuffered: only an idle runner takes a job
	idle atomic.Int32
}

const (
	runnerIdle     = 30 * time.Second
	maxIdleRunners = 64
)

func newWarmRunners() *warmRunners { return &warmRunners{work: make(chan func())} }

// run runs f on a runner and returns when f has.
func (w *warmRunners) run(f func()) {
	done := make(chan struct{})
	job := func() {
		defer close(done)
		f()
	}
	select {
	case w.work <- job:
	default:
		go w.runner(job)
	}
	<-done
}

func (w *warmRunners) runner(job func()) {
	job()
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		if w.idle.Add(1) > maxIdleRunners {
			w.idle.Add(-1)
			return
		}
		select {
		case job = <-w.work:
			w.idle.Add(-1)
			job()
			idle.Reset(runnerIdle)
		case <-idle.C:
			w.idle.Add(-1)
			return
		}
	}
}

package maiden

import (
	"errors"
)

// Errors returned by New (the Host's own are in surface.go).
var (
	// ErrNoWorkerMain is returned by New for worker isolation (the
	// default) when this program cannot serve as a worker: WorkerMain was
	// not called and Options.WorkerCommand is empty.
	ErrNoWorkerMain = errors.New("worker isolation (the default) needs a program that serves as a worker: " +
		"call maiden.WorkerMain() first thing in main (and in TestMain), or set Options.WorkerCommand to a maiden binary " +
		"(e.g. []string{\"/usr/local/bin/maiden\"}); for tools you trust, Options.Isolation = maiden.InProcess runs them in this process")
)

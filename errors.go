package maiden

import (
	"errors"

	"github.com/maiden-run/maiden/api"
)

// Errors returned by Host. Tool failures are not among them: those are
// Results with OK false (see ErrorKind).
var (
	// ErrClosed is returned by calls on a closed Host.
	ErrClosed = api.ErrClosed
	// ErrNoConfig is returned by New without a configuration.
	ErrNoConfig = errors.New("no configuration")
	// ErrUnknownTool is returned for a tool name agent.toml does not define.
	ErrUnknownTool = errors.New("no tool")
	// ErrOverloaded is returned when MaxConcurrent calls are running and
	// MaxQueued are already waiting.
	ErrOverloaded = errors.New("maiden: overloaded")
	// ErrNoWorkerMain is returned by New for worker isolation (the
	// default) when this program cannot serve as a worker: WorkerMain was
	// not called and Options.WorkerCommand is empty.
	ErrNoWorkerMain = errors.New("worker isolation (the default) needs a program that serves as a worker: " +
		"call maiden.WorkerMain() first thing in main (and in TestMain), or set Options.WorkerCommand to a maiden binary " +
		"(e.g. []string{\"/usr/local/bin/maiden\"}); for tools you trust, Options.Isolation = maiden.InProcess runs them in this process")
)

package pipeline

import (
	"errors"

	"github.com/maiden-run/maiden/api"
)

// Errors returned by Host; the root package re-exports them. Tool failures
// are not among them: those are Results with OK false (see ErrorKind).
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
)

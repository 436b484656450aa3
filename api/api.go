// Package api holds the types every layer of maiden shares: the error kinds
// a call can end with and the lines of a tool's log. It imports only the standard library, so
// the root package, the sandbox, the worker processes and the front ends all
// speak of failures with one vocabulary.
//
//	switch res.Error.Kind {
//	case api.KindDeadline: // retry with a smaller input, or give up
//	}
package api

import (
	"context"
	"encoding/json"
	"errors"
)

// ErrClosed is the one error for work asked of something closed: the Host
// after Close (maiden.ErrClosed is this value), and under it the sandbox,
// the worker pool, the imported MCP servers' hub and an upstream.
var ErrClosed = errors.New("maiden: closed")

// ErrorKind classifies a failed call. Every front end (CLI, MCP) reports
// these same kinds; the README maps them to exit codes.
type ErrorKind string

// Error kinds.
const (
	// KindTool: the tool's execute returned an error.
	KindTool ErrorKind = "tool"
	// KindDeadline: the call ran past the tool's timeout_ms.
	KindDeadline ErrorKind = "deadline"
	// KindMemory: the call tried to use more than its memory_mb ceiling (or
	// the fixed allowance beyond it, in worker mode).
	KindMemory ErrorKind = "memory"
	// KindTrap: the tool trapped, exited, or broke a host limit (output
	// size); in worker mode also a worker process that died.
	KindTrap ErrorKind = "trap"
	// KindDenied: a policy refused the call. In this release that is a
	// call that failed after the host refused one of its http-fetch
	// requests (a host, port or address not allowed, a credential not
	// declared or with no value on the host): the message gives the first
	// refusal, which names the agent.toml key or variable that would change
	// it, then what the tool reported. A tool that handles a refusal and
	// succeeds is not affected.
	KindDenied ErrorKind = "denied"
	// KindInvalid: the tool's file is not a loadable maiden tool.
	KindInvalid ErrorKind = "invalid"
	// KindConfig: the call could not be made as asked because of the
	// configuration (a tool whose policy cannot be compiled). An unknown
	// tool is not a Result but the error ErrUnknownTool.
	KindConfig ErrorKind = "config"
	// KindInput: the input is not JSON, is over the size cap, or does not
	// match the tool's input schema; the message lists the problems, so an
	// agent can fix its call.
	KindInput ErrorKind = "input"
	// KindPending: a human must approve the call and has not yet; the
	// error's Approval is the request's ID. Repeating the same call (same
	// tool and input) after the approval runs it, once.
	KindPending ErrorKind = "pending"
	// KindUnavailable: the tool's server is down (an imported MCP server
	// that died and is being restarted); nothing ran. Retry later.
	KindUnavailable ErrorKind = "unavailable"
)

// Level is the severity of a tool's log line, as in the WIT enum.
type Level string

// Levels, in the contract's order.
const (
	LevelDebug Level = "debug"
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
)

// Log sources: what produced a line.
const (
	SourceLog    = "log"    // the host interface's log function
	SourceStdout = "stdout" // WASI standard output, one entry per line
	SourceStderr = "stderr" // WASI standard error, one entry per line
	SourceHost   = "host"   // maiden itself (e.g. the truncation marker)
)

// LogEntry is one line of a call's log.
type LogEntry struct {
	Level   Level  `json:"level"`
	Source  string `json:"source"`
	Message string `json:"message"`
}

// ToolError describes a failed call.
type ToolError struct {
	Kind    ErrorKind `json:"kind"`
	Message string    `json:"message"`
	// Approval is the approval request's ID when a human was asked: set
	// for kind pending, and for a denial by a human.
	Approval string `json:"approval,omitempty"`
	// Structured is a JSON object the caller can act on, set by failures
	// that have one: a session boundary's structured error (code
	// SANDBOX_COMMAND_EXECUTION_FAILED, reason, requiredExpansion; see
	// docs/boundaries.md). The MCP front end returns it as structuredContent.
	Structured json.RawMessage `json:"structured,omitempty"`
}

func (e *ToolError) Error() string { return string(e.Kind) + ": " + e.Message }

// Is lets errors.Is see a deadline as context.DeadlineExceeded, so callers
// that handle context errors handle a tool's deadline the same way.
func (e *ToolError) Is(target error) bool {
	return e.Kind == KindDeadline && target == context.DeadlineExceeded
}

// Progress is one report of a running tool's progress.
type Progress struct {
	// Progress increases with each report a caller sees (MCP requires it);
	// its unit is the tool's.
	Progress float64 `json:"progress"`
	// Total is what Progress reaches when the work is done; 0 if unknown.
	Total float64 `json:"total,omitempty"`
	// Message is the tool's words, redacted like its logs and capped at
	// maiden.MaxProgressMessage bytes.
	Message string `json:"message,omitempty"`
}

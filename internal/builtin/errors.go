package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// Reasons of an *Error. They are stable: callers and models may act on them.
const (
	ReasonInvalidInput  = "invalid_input"  // the input JSON does not match the tool's input schema
	ReasonInvalidPath   = "invalid_path"   // not absolute (and no workspace), not normalised, or holding NUL
	ReasonPathTooLong   = "path_too_long"  // over 4096 bytes
	ReasonNotFound      = "not_found"      // no such file or directory
	ReasonIsDirectory   = "is_directory"   // a directory where a file was needed
	ReasonNotDirectory  = "not_directory"  // a file where a directory was needed
	ReasonNotRegular    = "not_regular"    // a device, FIFO or socket
	ReasonTooLarge      = "too_large"      // over a size cap
	ReasonSymlinkEscape = "symlink_escape" // a symlink or ".." would leave the allowed directory
	ReasonSymlink       = "symlink"        // a symlink that is not followed here (see docs/builtins.md)
	ReasonFetchDenied   = "fetch_denied"   // the egress gate refused the request; nothing was sent
	ReasonFetchTimeout  = "fetch_timeout"  // the call's deadline passed during the fetch
	ReasonFetchTooLarge = "fetch_too_large"
	ReasonFetchFailed   = "fetch_failed" // the exchange failed or the response was refused
	ReasonNoCard        = "no_card"      // the agent's cards do not allow the read or write (fs:read, fs:write) where the path led
	ReasonIO            = "io"           // anything else the system said
)

// Error is a built-in tool's failure that is not about the boundary. Target is the path or URL the call named
// (shortened when very long); Message says what to do about it and never holds secret material.
type Error struct {
	Tool    string `json:"tool"`
	Target  string `json:"target,omitempty"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Rule is the egress rule that decided a fetch_* failure (as in the gate's audit event), else "".
	Rule string `json:"rule,omitempty"`
}

func (e *Error) Error() string {
	s := e.Tool
	if e.Target != "" {
		s += " " + e.Target
	}
	return s + ": " + e.Reason + ": " + e.Message
}

// shorten makes a caller's path or URL fit in a message: quoted if it holds anything unprintable, cut after 256 bytes.
func shorten(s string) string {
	const max = 256
	cut := len(s) > max
	if cut {
		s = s[:max]
	}
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		s = q
	}
	if cut {
		s += "..."
	}
	return s
}

func errorf(tool, target, reason, format string, args ...any) *Error {
	return &Error{Tool: tool, Target: shorten(target), Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// decode parses in strictly into v: one JSON object, no unknown keys, nothing after it, at most max bytes.
func decode(tool string, in []byte, max int, v any) error {
	if len(in) > max {
		return errorf(tool, "", ReasonInvalidInput, "input is %d bytes, over the %d-byte cap", len(in), max)
	}
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(tool, "", ReasonInvalidInput, "input is not a valid %s object: %v", tool, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(tool, "", ReasonInvalidInput, "input has data after the JSON object")
	}
	return nil
}

package config

import (
	"errors"
	"strconv"
	"strings"
)

var (
	// ErrInvalidHostPattern is wrapped by every error NormalizeHostPattern
	// returns, so egress code can tell a bad pattern from other failures.
	ErrInvalidHostPattern = errors.New("invalid host pattern")
)

// Error is one problem in a configuration file.
type Error struct {
	File string // file name as given to Load or Parse
	Line int    // 1-based; 0 if the problem has no single place (e.g. a missing key)
	Key  string // dotted key path such as "tools.weather.memory_mb"; "" for syntax errors
	Msg  string
	// Err is the cause when a caller can act on it (an unpinned oci://
	// reference wraps *oci.PinError, so maiden check can resolve it); nil
	// otherwise.
	Err error
}

// Unwrap returns the cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Error formats the problem as "file:line: key: message", the shape editors
// and CI annotators recognise. ":line" is omitted when Line is 0 and "key: "
// when Key is empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a configuration file, sorted by line. Load
// and Parse return it (never a bare *Error) so callers can print everything at
// once.
type Errors []*Error

// Error returns one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find an individual *Error.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

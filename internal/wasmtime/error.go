package wasmtime

/*
#include "shim.h"
#include <stdlib.h>
*/
import "C"

import (
	"strings"
	"unsafe"
)

// Error is a failure reported by wasmtime: a compile or link error, a trap,
// or a guest exit.
type Error struct {
	// Message is the root cause in one line, e.g. "wasm trap: wasm
	// `unreachable` instruction executed".
	Message string
	// Detail is wasmtime's full report, with the cause chain and the guest
	// backtrace when there is one. It can be long.
	Detail string
	// ExitStatus is the status a guest passed to WASI exit, when it exited.
	ExitStatus *int
	// Host is the error a host function returned, when that is what stopped
	// the guest, or the panic of the store's Output handler, which fails
	// the call whatever the guest did next.
	Host error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the host function's error, if any, so errors.Is/As see it.
func (e *Error) Unwrap() error { return e.Host }

// takeError converts and deletes a wasmtime error; nil stays nil.
func takeError(err *C.wasmtime_error_t) *Error {
	if err == nil {
		return nil
	}
	defer C.wasmtime_error_delete(err)
	var msg C.wasm_name_t
	C.wasmtime_error_message(err, &msg)
	detail := C.GoStringN((*C.char)(unsafe.Pointer(msg.data)), C.int(msg.size))
	C.wasm_byte_vec_delete(&msg)
	// The host-side (Rust) stack backtrace says nothing about the guest.
	if i := strings.Index(detail, "\nStack backtrace:"); i >= 0 {
		detail = strings.TrimRight(detail[:i], "\n")
	}
	e := &Error{Message: rootCause(detail), Detail: detail}
	var status C.int
	if C.wasmtime_error_exit_status(err, &status) {
		s := int(status)
		e.ExitStatus = &s
	}
	return e
}

// rootCause picks the most useful single line out of wasmtime's report. The
// report is an anyhow chain: a context line, an optional guest backtrace,
// then "Caused by:" and one indented line per cause, innermost last.
func rootCause(detail string) string {
	lines := strings.Split(detail, "\n")
	last := ""
	inCauses := false
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "Caused by:" {
			inCauses = true
			continue
		}
		if inCauses && t != "" {
			last = t
		}
	}
	if last != "" {
		// Causes are numbered when there are several ("0: ...").
		if i := strings.Index(last, ": "); i > 0 && isDigits(last[:i]) {
			last = last[i+2:]
		}
		return last
	}
	for _, l := range lines {
		if t := strings.TrimSpace(l); t != "" {
			return t
		}
	}
	return "unknown wasmtime error"
}

func isDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// newCError makes a wasmtime error to hand back to wasmtime (which owns it).
func newCError(msg string) *C.wasmtime_error_t {
	cs := C.CString(msg)
	defer C.free(unsafe.Pointer(cs))
	return C.wasmtime_error_new(cs)
}

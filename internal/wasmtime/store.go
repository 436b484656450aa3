package wasmtime

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// StopReason says why a store stopped running guest code early.
type StopReason int

// Stop reasons.
const (
	StopNone      StopReason = C.MAIDEN_STOP_NONE
	StopDeadline  StopReason = C.MAIDEN_STOP_DEADLINE
	StopInterrupt StopReason = C.MAIDEN_STOP_INTERRUPT
)

func (r StopReason) String() string {
	switch r {
	case StopNone:
		return "none"
	case StopDeadline:
		return "deadline"
	case StopInterrupt:
		return "interrupt"
	}
	return fmt.Sprintf("stop(%d)", int(r))
}

// StoreOptions configures a store. Every store is created with an empty
// WASI context: no arguments, no environment, no network, empty stdin, and
// no preopened directories but those in Preopens.
type StoreOptions struct {
	// MemoryLimit is the ceiling, in bytes, on all linear memories of the
	// store together. Required.
	MemoryLimit uint64
	// TableElements bounds each table; 0 means an eighth of MemoryLimit
	// divided among the tables (at least 10,000 entries), so that all of a
	// store's tables together stay within the memory ceiling too.
	TableElements int64
	// Instances, Tables and Memories bound how many of each a store may
	// create; 0 means 1,000 instances, 20 tables and 20 memories.
	Instances, Tables, Memories int64
	// Deadline, if not zero, is when guest code traps with StopDeadline.
	Deadline time.Time
	// Output receives what the guest writes to WASI stdout (fd 1) and stderr
	// (fd 2). wasmtime calls it from a thread of its own while the guest
	// waits for the write, so it must not block. If it panics, the bytes
	// are lost, the guest's write fails, the rest of the call's output is
	// refused and the call fails with the panic. nil discards.
	Output func(fd int, p []byte)
	// Data is anything the embedder wants host functions to reach.
	Data any
	// Preopens are the directories the guest's WASI filesystem sees (none
	// by default). Each HostPath is opened when the store is created, by
	// wasmtime, with an ordinary open that follows symlinks: the caller
	// checks the path (or passes /proc/self/fd/N of a directory it opened
	// itself). Beneath it, wasmtime resolves every guest path itself
	// (cap-std): `..`, absolute paths and symlinks never leave the
	// directory.
	Preopens []Preopen
}

// Preopen is one directory given to a store's WASI context.
type Preopen struct {
	// HostPath is the directory on the host.
	HostPath string
	// GuestPath is the name the guest opens it by (an absolute path, say).
	GuestPath string
	// Write allows creating, writing, renaming and removing files and
	// directories beneath it; without it the directory and every file in
	// it are read-only.
	Write bool
}

// Store holds the instances of one unit of isolation. It is used by one
// goroutine at a time, except Interrupt, which any goroutine may call.
type Store struct {
	engine *Engine
	ptr    *C.wasmtime_store_t
	ctx    *C.wasmtime_context_t
	state  *C.maiden_store_state
	handle cgo.Handle
	output func(int, []byte)
	data   any

	mu     sync.Mutex // guards closed against Interrupt
	closed bool
	// dl is the store's deadline (CLOCK_MONOTONIC ns) as registered in
	// the engine's deadlines, whose timer advances the epoch then.
	dl      deadlineEntry
	busy    bool
	hostErr error
	// outputErr is set when the Output handler panicked during the current
	// call (maidenWASIOutput). Guarded by mu: wasmtime calls the handler
	// from a thread of its own.
	outputErr error
	// lifted is set by a host call whose arguments wasmtime lifted at a
	// cost past TrimArgumentBytes (see Lifted).
	lifted bool
	final  struct { // the state's last readings, kept at Close
		stop   StopReason
		denied bool
		peak   uint64
	}
}

// ErrBusy is returned when a store is entered while a call on it is already
// running (stores are single-threaded).
var ErrBusy = errors.New("wasmtime: store is already running a call")

// NewStore creates a store with its limits, deadline and an empty WASI
// context.
func NewStore(e *Engine, opts *StoreOptions) (*Store, error) {
	if e.closed.Load() {
		return nil, ErrUseAfterClose
	}
	if opts == nil || opts.MemoryLimit == 0 {
		return nil, ErrMemoryLimit
	}
	s := &Store{engine: e, output: opts.Output, data: opts.Data, dl: deadlineEntry{index: -1}}
	s.handle = cgo.NewHandle(s)
	s.state = C.maiden_store_state_new(C.uintptr_t(s.handle), C.uint64_t(opts.MemoryLimit))
	if s.state == nil {
		s.handle.Delete()
		return nil, errors.New("wasmtime: out of memory")
	}
	s.ptr = C.wasmtime_store_new(e.ptr, unsafe.Pointer(s.state), nil)
	s.ctx = C.wasmtime_store_context(s.ptr)

	tableElems, instances, tables, memories := opts.TableElements, opts.Instances, opts.Tables, opts.Memories
	if instances <= 0 {
		instances = 1000
	}
	if tables <= 0 {
		tables = 20
	}
	if memories <= 0 {
		memories = 20
	}
	if tableElems <= 0 {
		// A table entry costs the host about 8 bytes.
		tableElems = max(10_000, int64(opts.MemoryLimit/8)/tables)
	}
	memorySize := C.int64_t(-1) // maiden's memory creator enforces the ceiling
	if e.cfg.Pooling {
		// The pooling allocator bypasses the creator; fall back to wasmtime's
		// per-memory limit.
		memorySize = C.int64_t(opts.MemoryLimit)
	}
	C.wasmtime_store_limiter(s.ptr, memorySize, C.int64_t(tableElems), C.int64_t(instances), C.int64_t(tables), C.int64_t(memories))

	// Without a WASI context, a guest calling WASI aborts the whole process;
	// with an empty one, it gets no capabilities.
	wasi := C.wasi_config_new()
	C.maiden_wasi_capture_output(wasi, s.state)
	if err := preopen(wasi, opts.Preopens); err != nil {
		C.wasi_config_delete(wasi)
		s.free()
		return nil, err
	}
	if err := takeError(C.wasmtime_context_set_wasi(s.ctx, wasi)); err != nil {
		s.free()
		return nil, fmt.Errorf("set WASI context: %w", err)
	}
	if !e.cfg.NoEpochInterruption {
		C.maiden_store_watch(s.ptr, s.state)
	}
	if !opts.Deadline.IsZero() {
		s.SetDeadline(opts.Deadline)
	}
	e.storeOpened()
	return s, nil
}

// preopen adds each directory to a WASI configuration.
func preopen(wasi *C.wasi_config_t, dirs []Preopen) error {
	for _, d := range dirs {
		if d.HostPath == "" || d.GuestPath == "" {
			return fmt.Errorf("wasmtime: preopen %q as %q: both paths are required", d.HostPath, d.GuestPath)
		}
		if strings.IndexByte(d.HostPath, 0) >= 0 || strings.IndexByte(d.GuestPath, 0) >= 0 {
			// C would see the path cut at the NUL: another directory.
			return fmt.Errorf("wasmtime: preopen %q as %q: a path contains a NUL byte", d.HostPath, d.GuestPath)
		}
		perms := C.wasi_dir_perms(C.WASMTIME_WASI_DIR_PERMS_READ)
		files := C.wasi_file_perms(C.WASMTIME_WASI_FILE_PERMS_READ)
		if d.Write {
			perms |= C.WASMTIME_WASI_DIR_PERMS_WRITE
			files |= C.WASMTIME_WASI_FILE_PERMS_WRITE
		}
		host, guest := C.CString(d.HostPath), C.CString(d.GuestPath)
		ok := C.wasi_config_preopen_dir(wasi, host, guest, perms, files)
		C.free(unsafe.Pointer(host))
		C.free(unsafe.Pointer(guest))
		if !ok {
			return fmt.Errorf("wasmtime: cannot preopen directory %s (as %s): it does not exist, is not a directory or cannot be opened", d.HostPath, d.GuestPath)
		}
	}
	return nil
}

// Data returns StoreOptions.Data.
func (s *Store) Data() any { return s.data }

// SetDeadline sets when guest code traps with StopDeadline. The zero time
// removes the deadline.
func (s *Store) SetDeadline(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	var ns int64
	if !t.IsZero() {
		ns = int64(C.maiden_monotonic_ns()) + int64(time.Until(t))
		if ns == 0 {
			ns = 1
		}
	}
	C.maiden_store_set_deadline(s.state, C.int64_t(ns))
	s.engine.deadlines.remove(&s.dl)
	if ns != 0 {
		s.engine.deadlines.add(&s.dl, ns)
	}
}

// Interrupt makes running (or future) guest code in the store trap with
// StopInterrupt at its next epoch check: it advances the engine's epoch.
// Safe from any goroutine.
func (s *Store) Interrupt() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		C.maiden_store_interrupt(s.state)
		s.engine.IncrementEpoch()
	}
}

// StopReason reports whether the deadline or an interruption stopped guest
// code. After Close it reports what it was at Close.
func (s *Store) StopReason() StopReason {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.final.stop
	}
	return StopReason(C.maiden_store_stop_reason(s.state))
}

// MemoryDenied reports whether a linear memory allocation or growth was
// refused because of the store's memory ceiling.
func (s *Store) MemoryDenied() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.final.denied
	}
	return C.maiden_store_memory_denied(s.state) != 0
}

// MemoryPeak is the most linear memory, in bytes, the store held at once.
func (s *Store) MemoryPeak() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return s.final.peak
	}
	return uint64(C.maiden_store_memory_peak(s.state))
}

// Close frees the store and everything instantiated in it.
func (s *Store) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	// The state is freed below; keep what readers may still ask for.
	s.final.stop = StopReason(C.maiden_store_stop_reason(s.state))
	s.final.denied = C.maiden_store_memory_denied(s.state) != 0
	s.final.peak = uint64(C.maiden_store_memory_peak(s.state))
	s.closed = true
	s.engine.deadlines.remove(&s.dl)
	s.mu.Unlock()
	s.free()
	s.engine.storeClosed()
}

func (s *Store) free() {
	// Deleting the store frees its memories, whose finalizers still use the
	// state; the state goes last.
	C.wasmtime_store_delete(s.ptr)
	C.maiden_store_state_free(s.state)
	s.handle.Delete()
}

func (s *Store) enter() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrUseAfterClose
	}
	if s.busy {
		return ErrBusy
	}
	s.busy = true
	s.hostErr = nil
	s.outputErr = nil
	return nil
}

// Lifted tells whether a host call of this store received arguments whose
// lifting cost the host more than TrimArgumentBytes: the caller should call
// TrimHeap once the store is closed.
func (s *Store) Lifted() bool { return s.lifted }

func (s *Store) leave() {
	s.mu.Lock()
	s.busy = false
	s.mu.Unlock()
}

func (s *Store) takeCallError(cerr *C.wasmtime_error_t) error {
	err := takeError(cerr)
	s.mu.Lock()
	outErr := s.outputErr
	s.mu.Unlock()
	if outErr != nil {
		// The host lost the guest's output, so the call failed, whatever
		// the guest made of its failed write; wasmtime's report, if the
		// guest then trapped or exited, stays in Detail.
		detail := outErr.Error()
		if err != nil {
			detail = err.Detail
		}
		return &Error{Message: outErr.Error(), Detail: detail, Host: outErr}
	}
	if err == nil {
		return nil
	}
	err.Host = s.hostErr
	return err
}

// maidenWASIOutput hands the guest's WASI output to the Output handler and
// returns 0, or -1 when the output was dropped because the handler panicked
// (in this write or an earlier one of the call). A panic must never unwind
// into wasmtime's frames: it is recovered and fails the call
// (takeCallError).
//
//export maidenWASIOutput
func maidenWASIOutput(handle C.uintptr_t, fd C.int, buf *C.uchar, n C.size_t) (ret C.int) {
	var s *Store
	defer func() {
		if r := recover(); r != nil {
			ret = -1
			if s != nil {
				s.mu.Lock()
				if s.outputErr == nil {
					s.outputErr = fmt.Errorf("output handler panicked: %v", r)
				}
				s.mu.Unlock()
			}
		}
	}()
	s, _ = cgo.Handle(handle).Value().(*Store)
	if s == nil || s.output == nil || n == 0 {
		return 0
	}
	s.mu.Lock()
	failed := s.outputErr != nil
	s.mu.Unlock()
	if failed {
		return -1
	}
	s.output(int(fd), C.GoBytes(unsafe.Pointer(buf), C.int(n)))
	return 0
}

// Package wasmtime is maiden's small cgo layer over the wasmtime C API for
// WebAssembly components: engine, component, linker, store, function calls
// and component values. It knows nothing of maiden's policy; the sandbox
// package builds the tool contract on top of it.
//
// The layer exists because wasmtime-go, the official binding, has no
// component-model support. It compiles against its own declarations of the C
// API (capi.h, checked against wasmtime's headers by a test) and links the
// static libwasmtime shipped inside the wasmtime-go module (see deps.go).
//
// Ownership rules of the C API, wrapped here once so no caller has to know
// them: arguments to a component call are borrowed (maiden allocates and frees
// them); results belong to the caller (zeroed before the call, deleted after,
// then post-return runs); values a host callback returns belong to wasmtime
// and are allocated with wasmtime's own allocators.
//
//	e, _ := wasmtime.NewEngine(nil)
//	c, _ := e.NewComponent(wasmBytes)
//	l, _ := wasmtime.NewLinker(e)
//	s, _ := wasmtime.NewStore(e, &wasmtime.StoreOptions{MemoryLimit: 64 << 20})
//	inst, _ := l.Instantiate(s, c)
//	f, _ := inst.Func("describe")
//	v, _ := f.Call()
package wasmtime

/*
#cgo CFLAGS: -std=gnu11 -Wall -Wno-unused-function
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Version is the wasmtime release this layer links. It is part of every
// compiled-artifact cache key.
const Version = "39.0.1"

// Errors returned by this package.
var (
	// ErrUseAfterClose is returned when an engine, component, linker or store is used
	// after Close.
	ErrUseAfterClose = errors.New("wasmtime: use after close")
	// ErrMemoryLimit is returned when a store is created without a memory
	// limit; every store in maiden has a ceiling.
	ErrMemoryLimit = errors.New("wasmtime: store needs a memory limit")
)

// Config selects engine features. The zero value is maiden's production
// configuration.
type Config struct {
	// Pooling selects wasmtime's pooling instance allocator. Off by default:
	// the pooling allocator creates linear memories itself, bypassing maiden's
	// memory creator, so a store's memory ceiling is then enforced per memory by
	// wasmtime's store limiter and a denial cannot be told apart from any other
	// trap. It exists for benchmarks.
	Pooling bool
	// NoEpochInterruption compiles code without epoch checks, so a running
	// guest cannot be interrupted. Only for measuring the cost of
	// interruption; never for running tools.
	NoEpochInterruption bool
	// MaxWasmStack is the guest stack limit in bytes; 0 means wasmtime's
	// default (512 KiB).
	MaxWasmStack int
}

// Engine is a compilation and execution environment. It is safe for
// concurrent use.
type Engine struct {
	ptr *C.wasm_engine_t
	cfg Config

	// The epoch advances only when a store needs it to: at a store's
	// deadline (the engine's one timer, deadlines.go) and when a store is
	// interrupted, never on a
	// clock. A ticker (every 1 ms while any store existed and for 200 ms
	// after) woke a thread of the process each millisecond for a cgo call,
	// which woke the runtime's sysmon out of its deep sleep; a worker that
	// served one call burnt 3-14 ms of CPU and 140-690 context switches in
	// the second after it (bench/README.md, "An idle worker's CPU").
	//
	// epochMu orders increments before Close deletes the engine; stores
	// counts the stores open.
	epochMu   sync.RWMutex
	stores    atomic.Int64
	deadlines deadlines

	closed atomic.Bool
}

// tuneMalloc sets glibc's malloc up for calls' large copies, once per
// process (shim.c, maiden_tune_malloc).
var tuneMalloc = sync.OnceFunc(func() { C.maiden_tune_malloc() })

// NewEngine creates an engine. cfg may be nil for defaults.
func NewEngine(cfg *Config) (*Engine, error) {
	tuneMalloc()
	var c Config
	if cfg != nil {
		c = *cfg
	}
	conf := C.wasm_config_new()
	C.wasmtime_config_wasm_component_model_set(conf, true)
	C.wasmtime_config_epoch_interruption_set(conf, C.bool(!c.NoEpochInterruption))
	if c.MaxWasmStack > 0 {
		C.wasmtime_config_max_wasm_stack_set(conf, C.size_t(c.MaxWasmStack))
	}
	if c.Pooling {
		pc := C.wasmtime_pooling_allocation_config_new()
		C.wasmtime_pooling_allocation_config_total_component_instances_set(pc, 256)
		C.wasmtime_pooling_allocation_config_total_core_instances_set(pc, 1024)
		C.wasmtime_pooling_allocation_config_total_memories_set(pc, 512)
		C.wasmtime_pooling_allocation_config_total_tables_set(pc, 512)
		C.wasmtime_pooling_allocation_config_max_memory_size_set(pc, 4<<30)
		C.wasmtime_pooling_allocation_strategy_set(conf, pc)
		C.wasmtime_pooling_allocation_config_delete(pc)
	} else {
		C.maiden_config_memory_creator(conf)
		// Copy-on-write images need wasmtime's own mmap memories; with a
		// custom creator wasmtime would abort the process at instantiation.
		C.wasmtime_config_memory_init_cow_set(conf, false)
	}
	// wasm_engine_new_with_config takes ownership of conf.
	ptr := C.wasm_engine_new_with_config(conf)
	if ptr == nil {
		return nil, errors.New("wasmtime: cannot create engine")
	}
	e := &Engine{ptr: ptr, cfg: c}
	e.deadlines.e = e
	return e, nil
}

// Config returns the configuration the engine was created with, defaults
// filled in.
func (e *Engine) Config() Config { return e.cfg }

// Fingerprint identifies everything about the engine that compiled code
// depends on. Two engines with the same fingerprint can load each other's
// serialized components.
func (e *Engine) Fingerprint() string {
	return fmt.Sprintf("wasmtime-%s/%s-%s/epoch=%t/pooling=%t/stack=%d",
		Version, runtime.GOOS, runtime.GOARCH, !e.cfg.NoEpochInterruption, e.cfg.Pooling, e.cfg.MaxWasmStack)
}

// IncrementEpoch advances the engine epoch by one: every store's guest
// code, at its next epoch check, looks whether it was interrupted or its
// deadline passed (shim.c, maiden_epoch_callback). Stores call it at their
// deadline and on Interrupt; tests call it to step time deterministically.
func (e *Engine) IncrementEpoch() {
	e.epochMu.RLock()
	defer e.epochMu.RUnlock()
	if e.closed.Load() {
		return
	}
	C.wasmtime_engine_increment_epoch(e.ptr)
}

// Close releases the engine. Every component, linker and store made from it
// must be closed first.
func (e *Engine) Close() error {
	e.epochMu.Lock()
	was := e.closed.Swap(true)
	e.epochMu.Unlock()
	if was {
		return nil
	}
	// No increment runs now or later: the deadlines' timer that fires
	// after this finds the engine closed.
	C.wasm_engine_delete(e.ptr)
	return nil
}

func (e *Engine) storeOpened() { e.stores.Add(1) }

func (e *Engine) storeClosed() { e.stores.Add(-1) }

package wasmtime

/*
#include "shim.h"
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"sort"
	"sync"
	"unsafe"
)

// HostFunc implements a function a component imports. params are the
// guest's arguments; the returned values are the results (none or one, as
// the imported signature says). A non-nil error traps the guest; the error
// is available to the caller of the guest call through errors.As/Is on the
// call's error.
type HostFunc func(c *Caller, params []Val) ([]Val, error)

// Caller gives a host function access to the store it was called from.
type Caller struct {
	store *Store
}

// Store returns the calling store.
func (c *Caller) Store() *Store { return c.store }

// Linker resolves a component's imports: WASI and host functions. Define
// everything first, then instantiate from many goroutines at once.
type Linker struct {
	engine *Engine

	mu      sync.RWMutex // write-held while defining, read-held while instantiating
	ptr     *C.wasmtime_component_linker_t
	handles []cgo.Handle
	closed  bool
}

// NewLinker creates an empty linker.
func NewLinker(e *Engine) (*Linker, error) {
	if e.closed.Load() {
		return nil, ErrUseAfterClose
	}
	return &Linker{engine: e, ptr: C.wasmtime_component_linker_new(e.ptr)}, nil
}

// AddWASIP2 defines every WASI 0.2 interface. What a guest can do through
// them is decided per store by its WASI context, which maiden always creates
// empty (NewStore).
func (l *Linker) AddWASIP2() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrUseAfterClose
	}
	if err := takeError(C.wasmtime_component_linker_add_wasip2(l.ptr)); err != nil {
		return fmt.Errorf("add WASI: %w", err)
	}
	return nil
}

// DefineInstance defines an imported instance (an interface such as
// "maiden:tool/host@0.1.0") with the given functions.
func (l *Linker) DefineInstance(name string, funcs map[string]HostFunc) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrUseAfterClose
	}
	root := C.wasmtime_component_linker_root(l.ptr)
	// The root and nested instance hold exclusive access to the linker until
	// deleted, innermost first.
	defer C.wasmtime_component_linker_instance_delete(root)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var inst *C.wasmtime_component_linker_instance_t
	if err := takeError(C.wasmtime_component_linker_instance_add_instance(root, cname, C.size_t(len(name)), &inst)); err != nil {
		return fmt.Errorf("define instance %s: %w", name, err)
	}
	defer C.wasmtime_component_linker_instance_delete(inst)
	names := make([]string, 0, len(funcs))
	for n := range funcs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := cgo.NewHandle(funcs[n])
		cn := C.CString(n)
		err := takeError(C.maiden_linker_add_func(inst, cn, C.size_t(len(n)), C.uintptr_t(h)))
		C.free(unsafe.Pointer(cn))
		if err != nil {
			h.Delete()
			return fmt.Errorf("define %s#%s: %w", name, n, err)
		}
		l.handles = append(l.handles, h)
	}
	return nil
}

// Instantiate creates an instance of c in s. Start functions run here, under
// the store's deadline and memory ceiling.
func (l *Linker) Instantiate(s *Store, c *Component) (*Instance, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	c.mu.RLock()
	defer c.mu.RUnlock()
	if l.closed || c.closed {
		return nil, ErrUseAfterClose
	}
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	var inst C.wasmtime_component_instance_t
	if err := s.takeCallError(C.maiden_instantiate(l.ptr, s.ctx, c.ptr, &inst, s.state)); err != nil {
		return nil, err
	}
	return &Instance{store: s, inst: inst}, nil
}

// Close frees the linker and the host function handles it holds.
func (l *Linker) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.closed = true
	C.wasmtime_component_linker_delete(l.ptr)
	for _, h := range l.handles {
		h.Delete()
	}
	l.handles = nil
}

// Instance is an instantiated component living in one store.
type Instance struct {
	store *Store
	inst  C.wasmtime_component_instance_t
}

// ErrNoExport is returned by Instance.Func for a name the component does not
// export as a function.
var ErrNoExport = errors.New("wasmtime: no such exported function")

// Func looks up an exported function by name.
func (i *Instance) Func(name string) (*Func, error) {
	s := i.store
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	idx := C.wasmtime_component_instance_get_export_index(&i.inst, s.ctx, nil, cn, C.size_t(len(name)))
	if idx == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoExport, name)
	}
	defer C.wasmtime_component_export_index_delete(idx)
	f := &Func{store: s}
	if !C.wasmtime_component_instance_get_func(&i.inst, s.ctx, idx, &f.fn) {
		return nil, fmt.Errorf("%w: %s is not a function", ErrNoExport, name)
	}
	ft := C.wasmtime_component_func_type(&f.fn, s.ctx)
	f.params = int(C.wasmtime_component_func_type_param_count(ft))
	var rt C.wasmtime_component_valtype_t
	if C.wasmtime_component_func_type_result(ft, &rt) {
		f.results = 1
		C.wasmtime_component_valtype_delete(&rt)
	}
	C.wasmtime_component_func_type_delete(ft)
	return f, nil
}

// Func is an exported function of an instance.
type Func struct {
	store   *Store
	fn      C.wasmtime_component_func_t
	params  int
	results int
}

// ErrArity is returned when a function is called with the wrong number of
// arguments.
var ErrArity = errors.New("wasmtime: wrong number of arguments")

// Call calls the function and runs its post-return. It returns the result
// (the zero Val for a function without one). Errors are *Error values for
// traps, deadline, interruption and guest exits.
func (f *Func) Call(params ...Val) (Val, error) {
	if len(params) != f.params {
		return Val{}, fmt.Errorf("%w: want %d, got %d", ErrArity, f.params, len(params))
	}
	for i := range params {
		if err := checkVal(&params[i], 0); err != nil {
			return Val{}, fmt.Errorf("argument %d: %w", i, err)
		}
	}
	s := f.store
	if err := s.enter(); err != nil {
		return Val{}, err
	}
	defer s.leave()

	size := C.size_t(unsafe.Sizeof(C.wasmtime_component_val_t{}))
	var args, results *C.wasmtime_component_val_t
	if n := len(params); n > 0 {
		args = (*C.wasmtime_component_val_t)(C.calloc(C.size_t(n), size))
		defer C.free(unsafe.Pointer(args))
		cargs := unsafe.Slice(args, n)
		for i := range params {
			valToC(&params[i], &cargs[i])
		}
		// Arguments are borrowed by wasmtime; they are ours to free.
		defer func() {
			for i := range cargs {
				C.wasmtime_component_val_delete(&cargs[i])
			}
		}()
	}
	if f.results > 0 {
		// Zeroed: wasmtime overwrites results, and they are ours to delete.
		results = (*C.wasmtime_component_val_t)(C.calloc(C.size_t(f.results), size))
		defer C.free(unsafe.Pointer(results))
		// Deleted whatever the outcome: wasmtime writes the results when the
		// export returns, before post-return runs, so a post-return that
		// traps or meets the deadline still leaves them here to free (a zeroed
		// result, when the call itself failed, frees nothing).
		defer func() {
			rs := unsafe.Slice(results, f.results)
			for i := range rs {
				C.wasmtime_component_val_delete(&rs[i])
			}
		}()
	}
	err := s.takeCallError(C.maiden_func_call(&f.fn, s.ctx, args, C.size_t(len(params)), results, C.size_t(f.results), s.state))
	if err != nil {
		return Val{}, err
	}
	if f.results == 0 {
		return Val{}, nil
	}
	return valFromC(results)
}

//export maidenHostCall
func maidenHostCall(handle C.uintptr_t, cctx *C.wasmtime_context_t, args *C.wasmtime_component_val_t, nargs C.size_t, results *C.wasmtime_component_val_t, nresults C.size_t) (ret *C.wasmtime_error_t) {
	var store *Store
	defer func() {
		// A panic must never unwind into wasmtime's frames.
		if r := recover(); r != nil {
			err := fmt.Errorf("host function panicked: %v", r)
			if store != nil {
				store.hostErr = err
			}
			ret = newCError(err.Error())
		}
	}()
	st := (*C.maiden_store_state)(C.wasmtime_context_get_data(cctx))
	store = cgo.Handle(C.maiden_store_handle(st)).Value().(*Store)
	fn := cgo.Handle(handle).Value().(HostFunc)
	cost := argumentCost(args, nargs, MaxArgumentBytes+1)
	if cost > TrimArgumentBytes {
		store.lifted = true
	}
	if cost > MaxArgumentBytes {
		err := fmt.Errorf("%w: a host call's arguments would take more than %d MiB of host memory to copy; refused (wasmtime has already lifted them at about 32 bytes per list element)", ErrValue, MaxArgumentBytes>>20)
		store.hostErr = err
		return newCError(err.Error())
	}
	params, err := valsFromC(args, nargs, 0)
	if err != nil {
		store.hostErr = err
		return newCError(err.Error())
	}
	out, err := fn(&Caller{store: store}, params)
	if err == nil && len(out) != int(nresults) {
		err = fmt.Errorf("host function returned %d results, the import declares %d", len(out), int(nresults))
	}
	for i := 0; err == nil && i < len(out); i++ {
		err = checkVal(&out[i], 0)
	}
	if err != nil {
		store.hostErr = err
		return newCError(err.Error())
	}
	if nresults > 0 {
		cres := unsafe.Slice(results, int(nresults))
		for i := range out {
			valToC(&out[i], &cres[i])
		}
	}
	return nil
}

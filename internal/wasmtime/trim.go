package wasmtime

/*
#include <stdlib.h> // defines __GLIBC__ with glibc
#include "shim.h"
#if defined(__GLIBC__)
#include <malloc.h>
static int maiden_trim_heap(void) { return malloc_trim(0); }
#else
static int maiden_trim_heap(void) { return 0; }
#endif
*/
import "C"

import (
	"runtime/debug"
	"unsafe"
)

// TrimHeap gives the memory freed by a huge host-call argument back to the
// operating system. wasmtime lifts a host call's arguments (a list of
// header tuples, a list<u8> body) into millions of small C allocations
// before the host function runs; freed, they stay in the C allocator's
// arenas, so the process's RSS would keep the call's peak for good (3.6 GB
// after one 3.7 M-header call). TrimHeap returns them (glibc's
// malloc_trim; a no-op with other C libraries) and the Go heap's copy
// (debug.FreeOSMemory). It costs a garbage collection: call it only after
// a call that passed such an argument.
func TrimHeap() {
	debug.FreeOSMemory()
	C.maiden_trim_heap()
}

// Bounds on what a host call's arguments may cost the host, counted as the
// Go copy maiden would make of them (see argumentCost).
const (
	// MaxArgumentBytes is the most a host call's arguments may cost: past
	// it the call traps before maiden copies anything. wasmtime has lifted
	// them already by then (nothing in its C API bounds that beforehand);
	// the bound keeps maiden's own copy, which was the larger part for a
	// list of tuples (2.8 of 3.9 GB for 3.7 M headers), from adding to it.
	// Legitimate calls are far below it: maiden's http-fetch takes at
	// most 64 headers and a 2 MiB body.
	MaxArgumentBytes = 64 << 20
	// TrimArgumentBytes is the cost past which a store reports Lifted.
	TrimArgumentBytes = 8 << 20
)

// valCost is what one value costs in Go once copied, besides its bytes.
const valCost = int(unsafe.Sizeof(Val{}))

// argumentCost estimates the host memory a copy of n C values would take
// (a Val per value plus its string bytes; a list<u8> as its bytes) without
// copying anything. It stops counting once past limit.
func argumentCost(data *C.wasmtime_component_val_t, n C.size_t, limit int) int {
	return valsCost(data, n, limit, 0)
}

func valsCost(data *C.wasmtime_component_val_t, n C.size_t, limit, depth int) int {
	if n == 0 {
		return 0
	}
	total := 0
	vals := unsafe.Slice(data, int(n))
	for i := range vals {
		total += valCostOf(&vals[i], limit-total, depth+1)
		if total > limit {
			return total
		}
	}
	return total
}

func valCostOf(c *C.wasmtime_component_val_t, limit, depth int) int {
	if depth > maxDepth {
		return limit + 1 // valsFromC refuses it anyway
	}
	u := unsafe.Pointer(&c.of)
	cost := valCost
	switch Kind(c.kind) {
	case KindString, KindEnum:
		cost += int((*C.wasm_name_t)(u).size)
	case KindList:
		l := (*C.wasmtime_component_vallist_t)(u)
		if l.size > 0 && Kind(l.data.kind) == KindU8 {
			return cost + int(l.size) // copied as bytes
		}
		cost += valsCost(l.data, l.size, limit-cost, depth)
	case KindTuple:
		t := (*C.wasmtime_component_valtuple_t)(u)
		cost += valsCost(t.data, t.size, limit-cost, depth)
	case KindRecord:
		r := (*C.wasmtime_component_valrecord_t)(u)
		if r.size > 0 {
			for _, e := range unsafe.Slice(r.data, int(r.size)) {
				cost += int(e.name.size) + valCostOf(&e.val, limit-cost, depth+1)
				if cost > limit {
					return cost
				}
			}
		}
	case KindVariant:
		v := (*C.wasmtime_component_valvariant_t)(u)
		cost += int(v.discriminant.size)
		if v.val != nil {
			cost += valCostOf(v.val, limit-cost, depth+1)
		}
	case KindOption:
		if p := *(**C.wasmtime_component_val_t)(u); p != nil {
			cost += valCostOf(p, limit-cost, depth+1)
		}
	case KindResult:
		if r := (*C.wasmtime_component_valresult_t)(u); r.val != nil {
			cost += valCostOf(r.val, limit-cost, depth+1)
		}
	case KindFlags:
		f := (*C.wasmtime_component_valflags_t)(u)
		if f.size > 0 {
			for _, name := range unsafe.Slice(f.data, int(f.size)) {
				cost += valCost + int(name.size)
			}
		}
	}
	return cost
}

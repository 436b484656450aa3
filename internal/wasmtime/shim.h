// The C half of the cgo layer: the few things that must be C because wasmtime
// calls them (callbacks) or because doing them from Go would cost one cgo call
// per element (list<u8> conversion).

#ifndef MAIDEN_SHIM_H
#define MAIDEN_SHIM_H

#include <stdatomic.h>
#include <stdint.h>

#include "capi.h"

// Why a store stopped running guest code (maiden_store_state.stop_reason).
enum {
  MAIDEN_STOP_NONE = 0,
  MAIDEN_STOP_DEADLINE = 1,  // the store's deadline passed
  MAIDEN_STOP_INTERRUPT = 2, // the host asked it to stop (cancellation)
};

// Per-store state shared between Go and the C callbacks (defined in shim.c;
// opaque to Go because cgo cannot read C11 atomics). Allocated with malloc,
// never Go memory, since wasmtime keeps pointers to it.
typedef struct maiden_store_state maiden_store_state;

maiden_store_state *maiden_store_state_new(uintptr_t handle, uint64_t memory_limit);
void maiden_tune_malloc(void);
void maiden_store_state_free(maiden_store_state *st);
void maiden_store_interrupt(maiden_store_state *st);
void maiden_store_set_deadline(maiden_store_state *st, int64_t deadline_ns);
int64_t maiden_monotonic_ns(void);
int maiden_store_stop_reason(maiden_store_state *st);
int maiden_store_memory_denied(maiden_store_state *st);
uint64_t maiden_store_memory_peak(maiden_store_state *st);
uintptr_t maiden_store_handle(maiden_store_state *st);

// Installs the epoch-deadline callback that checks st's interrupt flag and
// deadline once per epoch tick, and arms the first tick.
void maiden_store_watch(wasmtime_store_t *store, maiden_store_state *st);

// Routes the WASI context's stdout and stderr into Go (maidenWASIOutput).
void maiden_wasi_capture_output(wasi_config_t *config, maiden_store_state *st);

// Installs maiden's linear-memory creator on an engine config. Memories are
// plain mmap reservations whose growth is charged to the store that
// instantiated them, so a denial is observed (and reported as the memory
// ceiling) rather than surfacing as an unexplained trap.
void maiden_config_memory_creator(wasm_config_t *config);

// Instantiate and call with the current thread's store state set, so the
// memory creator knows which store a new memory is charged to.
wasmtime_error_t *maiden_instantiate(const wasmtime_component_linker_t *linker,
                                     wasmtime_context_t *context,
                                     const wasmtime_component_t *component,
                                     wasmtime_component_instance_t *out,
                                     maiden_store_state *st);
wasmtime_error_t *maiden_func_call(const wasmtime_component_func_t *func,
                                   wasmtime_context_t *context,
                                   const wasmtime_component_val_t *args,
                                   size_t nargs,
                                   wasmtime_component_val_t *results,
                                   size_t nresults, maiden_store_state *st);

// Defines a host function whose calls are forwarded to maidenHostCall with the
// given cgo.Handle.
wasmtime_error_t *
maiden_linker_add_func(wasmtime_component_linker_instance_t *inst,
                       const char *name, size_t name_len, uintptr_t handle);

// list<u8> conversion in one pass each way.
void maiden_val_list_from_bytes(wasmtime_component_val_t *out,
                                const uint8_t *data, size_t len);
// Returns 1 and copies the bytes if every element of list is a u8, else 0.
int maiden_val_list_to_bytes(const wasmtime_component_vallist_t *list,
                             uint8_t *dst);

#endif

#include "shim.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "_cgo_export.h"

// ---- store state -----------------------------------------------------------

// Freed only after the store is deleted, because memories hold a pointer to
// it until then.
struct maiden_store_state {
  // Set by Go from any goroutine; read by the epoch callback.
  _Atomic int interrupt;
  // CLOCK_MONOTONIC nanoseconds after which guest code traps; 0 = none.
  _Atomic int64_t deadline_ns;
  // What made the epoch callback trap (MAIDEN_STOP_*), written on the thread
  // running the guest, read by Go after the call returned.
  int stop_reason;

  // Linear-memory accounting for the whole store (every memory of every core
  // instance), enforced by maiden's memory creator.
  uint64_t memory_limit;
  _Atomic uint64_t memory_used;
  _Atomic uint64_t memory_peak;
  _Atomic int memory_denied;

  // cgo.Handle of the Go-side *Store, for callbacks into Go.
  uintptr_t handle;
};

int maiden_store_stop_reason(maiden_store_state *st) { return st->stop_reason; }
int maiden_store_memory_denied(maiden_store_state *st) {
  return atomic_load(&st->memory_denied);
}
uint64_t maiden_store_memory_peak(maiden_store_state *st) {
  return atomic_load(&st->memory_peak);
}
uintptr_t maiden_store_handle(maiden_store_state *st) { return st->handle; }

maiden_store_state *maiden_store_state_new(uintptr_t handle,
                                           uint64_t memory_limit) {
  maiden_store_state *st = calloc(1, sizeof(*st));
  if (st == NULL) {
    return NULL;
  }
  st->handle = handle;
  st->memory_limit = memory_limit;
  return st;
}

void maiden_store_state_free(maiden_store_state *st) { free(st); }

void maiden_store_interrupt(maiden_store_state *st) {
  atomic_store(&st->interrupt, 1);
}

void maiden_store_set_deadline(maiden_store_state *st, int64_t deadline_ns) {
  atomic_store(&st->deadline_ns, deadline_ns);
}

int64_t maiden_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

// ---- epoch deadline --------------------------------------------------------

// Runs on the guest's thread each time the engine epoch passes the store's
// epoch deadline, which maiden keeps one increment ahead. The epoch advances
// only at a store's deadline and when a store is interrupted (engine.go,
// store.go: no ticker); checking a flag and the clock here (rather than
// counting increments) makes the deadline exact, and lets cancellation reach
// a running guest without any Go code on the guest's thread.
static wasmtime_error_t *maiden_epoch_callback(
    wasmtime_context_t *context, void *data, uint64_t *epoch_deadline_delta,
    wasmtime_update_deadline_kind_t *update_kind) {
  (void)context;
  maiden_store_state *st = data;
  int reason = MAIDEN_STOP_NONE;
  if (atomic_load(&st->interrupt)) {
    reason = MAIDEN_STOP_INTERRUPT;
  } else {
    int64_t deadline = atomic_load(&st->deadline_ns);
    if (deadline != 0 && maiden_monotonic_ns() >= deadline) {
      reason = MAIDEN_STOP_DEADLINE;
    }
  }
  if (reason != MAIDEN_STOP_NONE) {
    st->stop_reason = reason;
    return wasmtime_error_new(reason == MAIDEN_STOP_DEADLINE
                                  ? "maiden: deadline exceeded"
                                  : "maiden: interrupted");
  }
  *epoch_deadline_delta = 1;
  *update_kind = WASMTIME_UPDATE_DEADLINE_CONTINUE;
  return NULL;
}

void maiden_store_watch(wasmtime_store_t *store, maiden_store_state *st) {
  wasmtime_store_epoch_deadline_callback(store, maiden_epoch_callback, st,
                                         NULL);
  wasmtime_context_set_epoch_deadline(wasmtime_store_context(store), 1);
}

// ---- WASI output -----------------------------------------------------------

// Go returns nonzero when it dropped the output (the store's Output handler
// panicked). wasmtime takes a negative return for an OS error code: the
// guest's write then fails with an I/O error instead of seeming to succeed.
static ptrdiff_t maiden_stdout(void *data, const unsigned char *buf,
                               size_t len) {
  maiden_store_state *st = data;
  if (maidenWASIOutput(st->handle, 1, (unsigned char *)buf, len) != 0) {
    return -EIO;
  }
  return (ptrdiff_t)len;
}

static ptrdiff_t maiden_stderr(void *data, const unsigned char *buf,
                               size_t len) {
  maiden_store_state *st = data;
  if (maidenWASIOutput(st->handle, 2, (unsigned char *)buf, len) != 0) {
    return -EIO;
  }
  return (ptrdiff_t)len;
}

void maiden_wasi_capture_output(wasi_config_t *config, maiden_store_state *st) {
  wasi_config_set_stdout_custom(config, maiden_stdout, st, NULL);
  wasi_config_set_stderr_custom(config, maiden_stderr, st, NULL);
}

// ---- linear memories -------------------------------------------------------

// The store whose call is running on this thread. wasmtime creates a
// component's memories synchronously inside instantiate, on the calling
// thread, so this tells the creator which store to charge.
static _Thread_local maiden_store_state *maiden_current;

typedef struct maiden_memory {
  maiden_store_state *st;
  uint8_t *base;
  size_t size;       // bytes the guest may access
  size_t accessible; // bytes made readable/writable (size rounded to pages)
  size_t capacity;   // bytes the memory may grow to without moving
  size_t mapped;     // length of the whole reservation, guard included
} maiden_memory;

static size_t maiden_page_size(void) {
  static size_t page;
  if (page == 0) {
    page = (size_t)sysconf(_SC_PAGESIZE);
  }
  return page;
}

static size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

// Charges n bytes to the store; refuses (and remembers the refusal) if the
// store's total would pass its ceiling.
static int maiden_charge(maiden_store_state *st, uint64_t n) {
  uint64_t used = atomic_load(&st->memory_used);
  for (;;) {
    if (n > st->memory_limit || used > st->memory_limit - n) {
      atomic_store(&st->memory_denied, 1);
      return 0;
    }
    if (atomic_compare_exchange_weak(&st->memory_used, &used, used + n)) {
      break;
    }
  }
  uint64_t now = used + n;
  uint64_t peak = atomic_load(&st->memory_peak);
  while (now > peak &&
         !atomic_compare_exchange_weak(&st->memory_peak, &peak, now)) {
  }
  return 1;
}

static void maiden_uncharge(maiden_store_state *st, uint64_t n) {
  atomic_fetch_sub(&st->memory_used, n);
}

static uint8_t *maiden_memory_get(void *env, size_t *byte_size,
                                  size_t *byte_capacity) {
  maiden_memory *m = env;
  *byte_size = m->size;
  *byte_capacity = m->capacity;
  return m->base;
}

static wasmtime_error_t *maiden_memory_grow(void *env, size_t new_size) {
  maiden_memory *m = env;
  if (new_size <= m->size) {
    return NULL;
  }
  if (new_size > m->capacity) {
    atomic_store(&m->st->memory_denied, 1);
    return wasmtime_error_new("maiden: memory ceiling reached");
  }
  size_t delta = new_size - m->size;
  if (!maiden_charge(m->st, delta)) {
    return wasmtime_error_new("maiden: memory ceiling reached");
  }
  size_t want = round_up(new_size, maiden_page_size());
  if (want > m->accessible) {
    if (mprotect(m->base + m->accessible, want - m->accessible,
                 PROT_READ | PROT_WRITE) != 0) {
      maiden_uncharge(m->st, delta);
      return wasmtime_error_new("maiden: mprotect failed while growing memory");
    }
    m->accessible = want;
  }
  m->size = new_size;
  return NULL;
}

// A few released reservations are kept for reuse: creating and destroying a
// multi-GiB reservation per call (mmap, mprotect, munmap and the TLB
// shootdown that comes with it) was a third of a tiny tool's call time.
// A reservation is zeroed before it goes back on the list (see
// maiden_zero_resident), so nothing of one call's memory is visible to the
// next.
#define MAIDEN_SPARE_MAX 16

typedef struct maiden_spare {
  uint8_t *base;
  size_t mapped;
  size_t accessible;
  size_t resident; // bytes kept resident (zeroed), counted in maiden_kept_resident
} maiden_spare;

static pthread_mutex_t maiden_spare_mu = PTHREAD_MUTEX_INITIALIZER;
static maiden_spare maiden_spares[MAIDEN_SPARE_MAX];
static int maiden_nspares;

// Bytes of released memories kept resident (zeroed in place rather than
// returned to the kernel) across all spares: writing a page that is still
// mapped is much cheaper than faulting in a fresh zero page, and a JS
// runtime rewrites megabytes of heap snapshot on every instantiation.
#define MAIDEN_KEEP_RESIDENT_MAX ((size_t)256 << 20)
static size_t maiden_kept_resident;

// MAIDEN_FILL_GAP_PAGES: a run of at most this many pages that are not
// resident, between two resident ones, is zeroed in place like them (and
// so made resident) instead of dropped with its own madvise. A system call
// costs ~1.3 µs on the VM this was measured on (bench/README.md, "System
// calls") and zeroing a page ~0.1 µs, and a Go tool's memory comes back
// with ~30 such runs a call, half of them 8 pages or shorter; once filled,
// a run is resident at the next release and costs no call at all.
#define MAIDEN_FILL_GAP_PAGES 8

// MAIDEN_ZERO_WHOLE_MAX: a memory of at most this many bytes (one
// WebAssembly page, a tiny tool's whole memory) is zeroed whole in place,
// every page, without asking the kernel which are resident: its mincore and
// madvise cost more than zeroing sixteen pages, and once zeroed whole the
// memory stays resident, so the next release faults nothing in. Measured
// (bench/README.md, "Zeroing a tiny memory whole"): the tiny WAT call 0.73x
// the p50 in process and 0.71x in a worker.
#define MAIDEN_ZERO_WHOLE_MAX ((size_t)64 << 10)

// maiden_zero_resident makes [base, base+len) read as zeros for the next
// user. A memory of at most MAIDEN_ZERO_WHOLE_MAX bytes is zeroed whole,
// within the budget. Otherwise resident pages are zeroed in place while the
// budget lasts, and so are short runs of other pages between them
// (MAIDEN_FILL_GAP_PAGES); every other page is dropped with MADV_DONTNEED.
// Dropping matters for pages that are not resident too: a page swapped out
// still holds the old data and would come back with it (zeroing one in
// place swaps it in and overwrites it: zeros too, which is why zeroing
// whole is as safe). Returns the bytes kept resident.
static size_t maiden_zero_resident(uint8_t *base, size_t len, size_t budget) {
  size_t page = maiden_page_size();
  size_t npages = len / page;
  if (len <= MAIDEN_ZERO_WHOLE_MAX && budget >= len) {
    memset(base, 0, len);
    return len;
  }
  unsigned char *vec = NULL;
  if (budget > 0 && npages > 0) {
    vec = malloc(npages);
    if (vec != NULL && mincore(base, len, vec) != 0) {
      free(vec);
      vec = NULL;
    }
  }
  if (vec == NULL) {
    if (len > 0) {
      madvise(base, len, MADV_DONTNEED);
    }
    return 0;
  }
  size_t kept = 0;
  size_t drop_from = SIZE_MAX; // start of the current run of pages to drop
  for (size_t i = 0; i <= npages; i++) {
    int keep = i < npages && (vec[i] & 1) && kept < budget;
    if (keep) {
      if (drop_from != SIZE_MAX) {
        size_t run = (i - drop_from) * page;
        if (i - drop_from <= MAIDEN_FILL_GAP_PAGES && kept + run < budget) {
          memset(base + drop_from * page, 0, run);
          kept += run;
        } else {
          madvise(base + drop_from * page, run, MADV_DONTNEED);
        }
        drop_from = SIZE_MAX;
      }
      memset(base + i * page, 0, page);
      kept += page;
    } else if (i < npages && drop_from == SIZE_MAX) {
      drop_from = i;
    } else if (i == npages && drop_from != SIZE_MAX) {
      madvise(base + drop_from * page, (i - drop_from) * page, MADV_DONTNEED);
    }
  }
  free(vec);
  if (len > npages * page) { // a partial last page (never, with 64 KiB pages)
    madvise(base + npages * page, len - npages * page, MADV_DONTNEED);
  }
  return kept;
}

static int maiden_spare_put(uint8_t *base, size_t mapped, size_t accessible) {
  // Reserve the resident budget up front so concurrent releases cannot
  // together keep more than the cap.
  pthread_mutex_lock(&maiden_spare_mu);
  if (maiden_nspares >= MAIDEN_SPARE_MAX) {
    pthread_mutex_unlock(&maiden_spare_mu);
    return 0;
  }
  size_t budget = 0;
  if (maiden_kept_resident < MAIDEN_KEEP_RESIDENT_MAX) {
    budget = MAIDEN_KEEP_RESIDENT_MAX - maiden_kept_resident;
    if (budget > accessible) {
      budget = accessible;
    }
  }
  maiden_kept_resident += budget;
  pthread_mutex_unlock(&maiden_spare_mu);

  size_t kept = maiden_zero_resident(base, accessible, budget);

  int ok = 0;
  pthread_mutex_lock(&maiden_spare_mu);
  maiden_kept_resident -= budget - kept;
  if (maiden_nspares < MAIDEN_SPARE_MAX) {
    maiden_spares[maiden_nspares++] = (maiden_spare){
        .base = base, .mapped = mapped, .accessible = accessible, .resident = kept};
    ok = 1;
  } else {
    maiden_kept_resident -= kept; // the caller unmaps it
  }
  pthread_mutex_unlock(&maiden_spare_mu);
  return ok;
}

static int maiden_spare_take(size_t mapped, maiden_spare *out) {
  int ok = 0;
  pthread_mutex_lock(&maiden_spare_mu);
  for (int i = maiden_nspares - 1; i >= 0; i--) {
    if (maiden_spares[i].mapped == mapped) {
      *out = maiden_spares[i];
      maiden_kept_resident -= out->resident;
      maiden_spares[i] = maiden_spares[--maiden_nspares];
      ok = 1;
      break;
    }
  }
  pthread_mutex_unlock(&maiden_spare_mu);
  return ok;
}

static void maiden_memory_free(void *env) {
  maiden_memory *m = env;
  if (!maiden_spare_put(m->base, m->mapped, m->accessible)) {
    munmap(m->base, m->mapped);
  }
  maiden_uncharge(m->st, m->size);
  free(m);
}

static wasmtime_error_t *
maiden_new_memory(void *env, const wasm_memorytype_t *ty, size_t minimum,
                  size_t maximum, size_t reserved_size_in_bytes,
                  size_t guard_size_in_bytes, wasmtime_linear_memory_t *ret) {
  (void)env;
  (void)ty;
  maiden_store_state *st = maiden_current;
  if (st == NULL) {
    return wasmtime_error_new(
        "maiden: linear memory created outside a maiden call");
  }
  size_t page = maiden_page_size();
  size_t capacity;
  if (reserved_size_in_bytes != 0) {
    // Compiled code relies on this exact reservation (bounds checks elided
    // against it), so it is honoured even though the ceiling is lower.
    capacity = reserved_size_in_bytes;
  } else {
    // The memory may never grow past the store's ceiling, so reserving that
    // much up front means it never has to move.
    capacity = maximum;
    if (capacity > st->memory_limit) {
      capacity = (size_t)st->memory_limit;
    }
    if (capacity < minimum) {
      capacity = minimum;
    }
    capacity = round_up(capacity, page);
  }
  if (minimum > capacity || guard_size_in_bytes > SIZE_MAX - capacity) {
    return wasmtime_error_new("maiden: impossible memory reservation");
  }
  if (!maiden_charge(st, minimum)) {
    return wasmtime_error_new("maiden: memory ceiling reached");
  }
  size_t mapped = round_up(capacity + guard_size_in_bytes, page);
  size_t accessible = round_up(minimum, page);
  uint8_t *base;
  maiden_spare spare;
  if (maiden_spare_take(mapped, &spare)) {
    // Make exactly [0, accessible) readable and writable, the rest
    // inaccessible, whatever the previous user left.
    base = spare.base;
    int rc = 0;
    if (spare.accessible > accessible) {
      rc = mprotect(base + accessible, spare.accessible - accessible, PROT_NONE);
    } else if (spare.accessible < accessible) {
      rc = mprotect(base + spare.accessible, accessible - spare.accessible,
                    PROT_READ | PROT_WRITE);
    }
    if (rc != 0) {
      munmap(base, mapped);
      maiden_uncharge(st, minimum);
      return wasmtime_error_new("maiden: mprotect failed");
    }
  } else {
    void *p = mmap(NULL, mapped, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      maiden_uncharge(st, minimum);
      return wasmtime_error_new("maiden: cannot reserve address space");
    }
    base = p;
    if (accessible > 0 &&
        mprotect(base, accessible, PROT_READ | PROT_WRITE) != 0) {
      munmap(base, mapped);
      maiden_uncharge(st, minimum);
      return wasmtime_error_new("maiden: mprotect failed");
    }
  }
  maiden_memory *m = calloc(1, sizeof(*m));
  if (m == NULL) {
    munmap(base, mapped);
    maiden_uncharge(st, minimum);
    return wasmtime_error_new("maiden: out of host memory");
  }
  m->st = st;
  m->base = base;
  m->size = minimum;
  m->accessible = accessible;
  m->capacity = capacity;
  m->mapped = mapped;
  ret->env = m;
  ret->get_memory = maiden_memory_get;
  ret->grow_memory = maiden_memory_grow;
  ret->finalizer = maiden_memory_free;
  return NULL;
}

void maiden_config_memory_creator(wasm_config_t *config) {
  wasmtime_memory_creator_t creator = {
      .env = NULL,
      .new_memory = maiden_new_memory,
      .finalizer = NULL,
  };
  wasmtime_config_host_memory_creator_set(config, &creator);
}

wasmtime_error_t *maiden_instantiate(const wasmtime_component_linker_t *linker,
                                     wasmtime_context_t *context,
                                     const wasmtime_component_t *component,
                                     wasmtime_component_instance_t *out,
                                     maiden_store_state *st) {
  maiden_store_state *prev = maiden_current;
  maiden_current = st;
  wasmtime_error_t *err =
      wasmtime_component_linker_instantiate(linker, context, component, out);
  maiden_current = prev;
  return err;
}

wasmtime_error_t *maiden_func_call(const wasmtime_component_func_t *func,
                                   wasmtime_context_t *context,
                                   const wasmtime_component_val_t *args,
                                   size_t nargs,
                                   wasmtime_component_val_t *results,
                                   size_t nresults, maiden_store_state *st) {
  maiden_store_state *prev = maiden_current;
  maiden_current = st;
  wasmtime_error_t *err =
      wasmtime_component_func_call(func, context, args, nargs, results, nresults);
  if (err == NULL) {
    err = wasmtime_component_func_post_return(func, context);
  }
  maiden_current = prev;
  return err;
}

// ---- host functions --------------------------------------------------------

// wasmtime's callback type cannot be implemented by an //export'ed Go
// function directly (cgo cannot export a function taking a const pointer),
// so this trampoline forwards to Go with the handle as plain data.
static wasmtime_error_t *
maiden_host_trampoline(void *data, wasmtime_context_t *context,
                       const wasmtime_component_func_type_t *ty,
                       wasmtime_component_val_t *args, size_t nargs,
                       wasmtime_component_val_t *results, size_t nresults) {
  (void)ty;
  return maidenHostCall((uintptr_t)data, context, args, nargs, results,
                        nresults);
}

wasmtime_error_t *
maiden_linker_add_func(wasmtime_component_linker_instance_t *inst,
                       const char *name, size_t name_len, uintptr_t handle) {
  return wasmtime_component_linker_instance_add_func(
      inst, name, name_len, maiden_host_trampoline, (void *)handle, NULL);
}

// ---- values ----------------------------------------------------------------

void maiden_val_list_from_bytes(wasmtime_component_val_t *out,
                                const uint8_t *data, size_t len) {
  out->kind = WASMTIME_COMPONENT_LIST;
  wasmtime_component_vallist_new_uninit(&out->of.list, len);
  wasmtime_component_val_t *elems = out->of.list.data;
  for (size_t i = 0; i < len; i++) {
    elems[i].kind = WASMTIME_COMPONENT_U8;
    elems[i].of.u8 = data[i];
  }
}

int maiden_val_list_to_bytes(const wasmtime_component_vallist_t *list,
                             uint8_t *dst) {
  const wasmtime_component_val_t *elems = list->data;
  for (size_t i = 0; i < list->size; i++) {
    if (elems[i].kind != WASMTIME_COMPONENT_U8) {
      return 0;
    }
    dst[i] = elems[i].of.u8;
  }
  return 1;
}


// maiden_tune_malloc keeps glibc's malloc from returning a call's buffers
// to the kernel: a component call copies its input and output through
// wasmtime's C API (the argument's vector, the Rust string lowered and
// lifted), a few buffers of the input's size each. glibc's dynamic rule
// serves such a buffer from the heap once one was freed, but trims the
// heap's top when more than twice that is free, which the end of every
// call of 1 MiB is: the next call faulted ~750 fresh pages in (half of a
// 1 MiB call's run, BenchmarkInputStages/run). These are the ceilings of
// that same rule (DEFAULT_MMAP_THRESHOLD_MAX on 64-bit, and twice it): up
// to 64 MiB free is kept per arena. An operator's own settings win.
void maiden_tune_malloc(void) {
#ifdef __GLIBC__
	if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") || getenv("GLIBC_TUNABLES"))
		return;
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

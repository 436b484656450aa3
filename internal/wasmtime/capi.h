// maiden's declarations of the part of wasmtime's C API that this package
// uses, and nothing more.
//
// Why our own header: cgo directives may name only the package's own
// directory, and wasmtime's headers live in the wasmtime-go module in the
// module cache, at a path that differs per machine. With these declarations
// the package compiles from any module cache with no generated flags; the
// library itself reaches the link through wasmtime-go's own cgo directives
// (deps.go imports it).
//
// Written from the API's documented meaning, against wasmtime 39 (the
// wasmtime-go version in go.mod). Every type, layout, constant and prototype
// here is checked against the real headers of that version by
// TestCAPIMatchesWasmtimeHeaders (capi_test.go): layouts and constants
// through the compiler's debug information and static assertions, prototypes
// by redeclaring them after the real headers. Add to this file whatever new
// API the package starts to use; the test then checks it too.
//
// Ownership, as the C API defines it: a function that returns or fills in an
// object hands it to the caller, who deletes it with the matching _delete;
// arguments are borrowed unless a comment says the callee takes them.

#ifndef MAIDEN_CAPI_H
#define MAIDEN_CAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// ---- opaque handles ----------------------------------------------------------
// Only ever used through pointers; their contents are wasmtime's.

typedef struct wasm_config_t wasm_config_t;
typedef struct wasm_engine_t wasm_engine_t;
typedef struct wasm_memorytype_t wasm_memorytype_t;
typedef struct wasm_functype_t wasm_functype_t;
typedef struct wasi_config_t wasi_config_t;
typedef struct wasmtime_error wasmtime_error_t;
typedef struct wasmtime_store wasmtime_store_t;
typedef struct wasmtime_context wasmtime_context_t;
typedef struct wasmtime_pooling_allocation_config_t
    wasmtime_pooling_allocation_config_t;
typedef struct wasmtime_module_type wasmtime_module_type_t;

typedef struct wasmtime_component_t wasmtime_component_t;
typedef struct wasmtime_component_type_t wasmtime_component_type_t;
typedef struct wasmtime_component_instance_type
    wasmtime_component_instance_type_t;
typedef struct wasmtime_component_func_type_t wasmtime_component_func_type_t;
typedef struct wasmtime_component_export_index_t
    wasmtime_component_export_index_t;
typedef struct wasmtime_component_linker_t wasmtime_component_linker_t;
typedef struct wasmtime_component_linker_instance_t
    wasmtime_component_linker_instance_t;
typedef struct wasmtime_component_resource_type
    wasmtime_component_resource_type_t;
typedef struct wasmtime_component_resource_any
    wasmtime_component_resource_any_t;

// Component value types that have structure (a list's element type, a
// record's fields, ...) are handles queried with functions.
typedef struct wasmtime_component_list_type wasmtime_component_list_type_t;
typedef struct wasmtime_component_record_type wasmtime_component_record_type_t;
typedef struct wasmtime_component_tuple_type wasmtime_component_tuple_type_t;
typedef struct wasmtime_component_variant_type
    wasmtime_component_variant_type_t;
typedef struct wasmtime_component_enum_type wasmtime_component_enum_type_t;
typedef struct wasmtime_component_option_type wasmtime_component_option_type_t;
typedef struct wasmtime_component_result_type wasmtime_component_result_type_t;
typedef struct wasmtime_component_flags_type wasmtime_component_flags_type_t;
typedef struct wasmtime_component_future_type wasmtime_component_future_type_t;
typedef struct wasmtime_component_stream_type wasmtime_component_stream_type_t;

// ---- scalars and callbacks ---------------------------------------------------

typedef char wasm_byte_t;

// Tags of the tagged unions below, one byte each.
typedef uint8_t wasmtime_component_valkind_t;
typedef uint8_t wasmtime_component_valtype_kind_t;
typedef uint8_t wasmtime_component_item_kind_t;
// What an epoch-deadline callback asks for after it returns.
typedef uint8_t wasmtime_update_deadline_kind_t;
// Bitmasks of WASMTIME_WASI_DIR_PERMS_* and WASMTIME_WASI_FILE_PERMS_*: what
// a preopened directory, and the files beneath it, allow.
typedef size_t wasi_dir_perms;
typedef size_t wasi_file_perms;

// A linear memory of a custom memory creator: the callback reports where the
// memory is, how many bytes are in use and how far it can grow in place.
typedef uint8_t *(*wasmtime_memory_get_callback_t)(void *env,
                                                   size_t *byte_size,
                                                   size_t *byte_capacity);
// Grows a linear memory to new_size bytes; an error refuses the growth.
typedef wasmtime_error_t *(*wasmtime_memory_grow_callback_t)(void *env,
                                                             size_t new_size);

#ifndef MAIDEN_CAPI_PROTOTYPES_ONLY
// Everything in this block has a body or a value, so it cannot be declared a
// second time after the real headers; capi_test.go compares it with them
// through debug information and static assertions instead.

// ---- constants ---------------------------------------------------------------

// wasmtime_update_deadline_kind_t: carry on running guest code.
enum { WASMTIME_UPDATE_DEADLINE_CONTINUE = 0 };

// wasi_dir_perms: list a directory's entries; create, rename and remove them.
enum { WASMTIME_WASI_DIR_PERMS_READ = 1, WASMTIME_WASI_DIR_PERMS_WRITE = 2 };
// wasi_file_perms: the most any file beneath a preopened directory allows.
enum { WASMTIME_WASI_FILE_PERMS_READ = 1, WASMTIME_WASI_FILE_PERMS_WRITE = 2 };

// wasmtime_component_valkind_t: which member of a value's union is set.
enum {
  WASMTIME_COMPONENT_BOOL = 0,
  WASMTIME_COMPONENT_S8 = 1,
  WASMTIME_COMPONENT_U8 = 2,
  WASMTIME_COMPONENT_S16 = 3,
  WASMTIME_COMPONENT_U16 = 4,
  WASMTIME_COMPONENT_S32 = 5,
  WASMTIME_COMPONENT_U32 = 6,
  WASMTIME_COMPONENT_S64 = 7,
  WASMTIME_COMPONENT_U64 = 8,
  WASMTIME_COMPONENT_F32 = 9,
  WASMTIME_COMPONENT_F64 = 10,
  WASMTIME_COMPONENT_CHAR = 11,
  WASMTIME_COMPONENT_STRING = 12,
  WASMTIME_COMPONENT_LIST = 13,
  WASMTIME_COMPONENT_RECORD = 14,
  WASMTIME_COMPONENT_TUPLE = 15,
  WASMTIME_COMPONENT_VARIANT = 16,
  WASMTIME_COMPONENT_ENUM = 17,
  WASMTIME_COMPONENT_OPTION = 18,
  WASMTIME_COMPONENT_RESULT = 19,
  WASMTIME_COMPONENT_FLAGS = 20,
  WASMTIME_COMPONENT_RESOURCE = 21,
};

// wasmtime_component_valtype_kind_t. Note the order differs from the value
// kinds above (signed before unsigned here).
enum {
  WASMTIME_COMPONENT_VALTYPE_BOOL = 0,
  WASMTIME_COMPONENT_VALTYPE_S8 = 1,
  WASMTIME_COMPONENT_VALTYPE_S16 = 2,
  WASMTIME_COMPONENT_VALTYPE_S32 = 3,
  WASMTIME_COMPONENT_VALTYPE_S64 = 4,
  WASMTIME_COMPONENT_VALTYPE_U8 = 5,
  WASMTIME_COMPONENT_VALTYPE_U16 = 6,
  WASMTIME_COMPONENT_VALTYPE_U32 = 7,
  WASMTIME_COMPONENT_VALTYPE_U64 = 8,
  WASMTIME_COMPONENT_VALTYPE_F32 = 9,
  WASMTIME_COMPONENT_VALTYPE_F64 = 10,
  WASMTIME_COMPONENT_VALTYPE_CHAR = 11,
  WASMTIME_COMPONENT_VALTYPE_STRING = 12,
  WASMTIME_COMPONENT_VALTYPE_LIST = 13,
  WASMTIME_COMPONENT_VALTYPE_RECORD = 14,
  WASMTIME_COMPONENT_VALTYPE_TUPLE = 15,
  WASMTIME_COMPONENT_VALTYPE_VARIANT = 16,
  WASMTIME_COMPONENT_VALTYPE_ENUM = 17,
  WASMTIME_COMPONENT_VALTYPE_OPTION = 18,
  WASMTIME_COMPONENT_VALTYPE_RESULT = 19,
  WASMTIME_COMPONENT_VALTYPE_FLAGS = 20,
  WASMTIME_COMPONENT_VALTYPE_OWN = 21,
  WASMTIME_COMPONENT_VALTYPE_BORROW = 22,
  WASMTIME_COMPONENT_VALTYPE_FUTURE = 23,
  WASMTIME_COMPONENT_VALTYPE_STREAM = 24,
  WASMTIME_COMPONENT_VALTYPE_ERROR_CONTEXT = 25,
};

// wasmtime_component_item_kind_t: what an import or export is.
enum {
  WASMTIME_COMPONENT_ITEM_COMPONENT = 0,
  WASMTIME_COMPONENT_ITEM_COMPONENT_INSTANCE = 1,
  WASMTIME_COMPONENT_ITEM_MODULE = 2,
  WASMTIME_COMPONENT_ITEM_COMPONENT_FUNC = 3,
  WASMTIME_COMPONENT_ITEM_RESOURCE = 4,
  WASMTIME_COMPONENT_ITEM_CORE_FUNC = 5,
  WASMTIME_COMPONENT_ITEM_TYPE = 6,
};

// ---- structures --------------------------------------------------------------

// A byte buffer owned by whoever holds it: a length, then the bytes.
typedef struct wasm_byte_vec_t {
  size_t size;
  wasm_byte_t *data;
} wasm_byte_vec_t;

// What a custom memory creator fills in for each linear memory it makes.
typedef struct wasmtime_linear_memory {
  void *env;
  wasmtime_memory_get_callback_t get_memory;
  wasmtime_memory_grow_callback_t grow_memory;
  void (*finalizer)(void *env);
} wasmtime_linear_memory_t;

// Called for every linear memory an engine needs. reserved_size_in_bytes,
// when not zero, is the exact reservation compiled code relies on;
// guard_size_in_bytes must follow the memory, inaccessible.
typedef wasmtime_error_t *(*wasmtime_new_memory_callback_t)(
    void *env, const wasm_memorytype_t *ty, size_t minimum, size_t maximum,
    size_t reserved_size_in_bytes, size_t guard_size_in_bytes,
    wasmtime_linear_memory_t *memory_ret);

// A custom memory creator; the config copies it.
typedef struct wasmtime_memory_creator {
  void *env;
  wasmtime_new_memory_callback_t new_memory;
  void (*finalizer)(void *env);
} wasmtime_memory_creator_t;

// An instance of a component inside a store: a value, not a handle, valid
// as long as its store.
typedef struct wasmtime_component_instance {
  uint64_t store_id;
  uint32_t opaque_index;
} wasmtime_component_instance_t;

// An exported function of an instance, also a plain value. Its first part
// has the instance's shape, hence the nested structure.
typedef struct wasmtime_component_func {
  struct {
    uint64_t store_id;
    uint32_t opaque_instance;
  };
  uint32_t opaque_index;
} wasmtime_component_func_t;

// A component value type: a kind and, for kinds with structure, a handle.
typedef union wasmtime_component_valtype_union {
  wasmtime_component_list_type_t *list;
  wasmtime_component_record_type_t *record;
  wasmtime_component_tuple_type_t *tuple;
  wasmtime_component_variant_type_t *variant;
  wasmtime_component_enum_type_t *enum_;
  wasmtime_component_option_type_t *option;
  wasmtime_component_result_type_t *result;
  wasmtime_component_flags_type_t *flags;
  wasmtime_component_resource_type_t *own;
  wasmtime_component_resource_type_t *borrow;
  wasmtime_component_future_type_t *future;
  wasmtime_component_stream_type_t *stream;
} wasmtime_component_valtype_union_t;

typedef struct wasmtime_component_valtype_t {
  wasmtime_component_valtype_kind_t kind;
  wasmtime_component_valtype_union_t of;
} wasmtime_component_valtype_t;

// An import or export of a component (or a member of an instance type).
typedef union wasmtime_component_item_union {
  wasmtime_component_type_t *component;
  wasmtime_component_instance_type_t *component_instance;
  wasmtime_module_type_t *module;
  wasmtime_component_func_type_t *component_func;
  wasmtime_component_resource_type_t *resource;
  wasm_functype_t *core_func;
  wasmtime_component_valtype_t type;
} wasmtime_component_item_union_t;

typedef struct wasmtime_component_item_t {
  wasmtime_component_item_kind_t kind;
  wasmtime_component_item_union_t of;
} wasmtime_component_item_t;

// Component values. Every pointer inside a value is owned by the value and
// freed by wasmtime_component_val_delete, so nested parts must come from
// wasmtime's allocators (the _new functions), never from malloc.
struct wasmtime_component_val;
struct wasmtime_component_valrecord_entry;

typedef struct wasmtime_component_vallist {
  size_t size;
  struct wasmtime_component_val *data;
} wasmtime_component_vallist_t;

typedef struct wasmtime_component_valrecord {
  size_t size;
  struct wasmtime_component_valrecord_entry *data;
} wasmtime_component_valrecord_t;

typedef struct wasmtime_component_valtuple {
  size_t size;
  struct wasmtime_component_val *data;
} wasmtime_component_valtuple_t;

typedef struct wasmtime_component_valflags {
  size_t size;
  wasm_byte_vec_t *data;
} wasmtime_component_valflags_t;

// A variant's case name and its payload (NULL for none).
typedef struct {
  wasm_byte_vec_t discriminant;
  struct wasmtime_component_val *val;
} wasmtime_component_valvariant_t;

// A result: ok or err, and the payload (NULL for none).
typedef struct {
  bool is_ok;
  struct wasmtime_component_val *val;
} wasmtime_component_valresult_t;

typedef union {
  bool boolean;
  int8_t s8;
  uint8_t u8;
  int16_t s16;
  uint16_t u16;
  int32_t s32;
  uint32_t u32;
  int64_t s64;
  uint64_t u64;
  float f32;
  double f64;
  uint32_t character; // a Unicode scalar value
  wasm_byte_vec_t string; // UTF-8
  wasmtime_component_vallist_t list;
  wasmtime_component_valrecord_t record;
  wasmtime_component_valtuple_t tuple;
  wasmtime_component_valvariant_t variant;
  wasm_byte_vec_t enumeration; // the case name
  struct wasmtime_component_val *option; // NULL for none
  wasmtime_component_valresult_t result;
  wasmtime_component_valflags_t flags; // the names of the flags that are set
  wasmtime_component_resource_any_t *resource;
} wasmtime_component_valunion_t;

typedef struct wasmtime_component_val {
  wasmtime_component_valkind_t kind;
  wasmtime_component_valunion_t of;
} wasmtime_component_val_t;

typedef struct wasmtime_component_valrecord_entry {
  wasm_byte_vec_t name;
  wasmtime_component_val_t val;
} wasmtime_component_valrecord_entry_t;

#endif // MAIDEN_CAPI_PROTOTYPES_ONLY

// Names are byte vectors (UTF-8, not NUL-terminated).
typedef wasm_byte_vec_t wasm_name_t;

// A host function a component imports. args are the guest's arguments
// (borrowed); results are to be filled in with values the callee allocates
// and wasmtime then owns.
typedef wasmtime_error_t *(*wasmtime_component_func_callback_t)(
    void *data, wasmtime_context_t *context,
    const wasmtime_component_func_type_t *ty, wasmtime_component_val_t *args,
    size_t nargs, wasmtime_component_val_t *results, size_t nresults);

// ---- functions -----------------------------------------------------------------

// Byte vectors.
void wasm_byte_vec_new(wasm_byte_vec_t *out, size_t size,
                       const wasm_byte_t *data);
void wasm_byte_vec_new_empty(wasm_byte_vec_t *out);
void wasm_byte_vec_new_uninitialized(wasm_byte_vec_t *out, size_t size);
void wasm_byte_vec_delete(wasm_byte_vec_t *vec);

// Engine configuration and engines.
wasm_config_t *wasm_config_new(void);
void wasmtime_config_wasm_component_model_set(wasm_config_t *config,
                                              bool enable);
void wasmtime_config_epoch_interruption_set(wasm_config_t *config,
                                            bool enable);
void wasmtime_config_max_wasm_stack_set(wasm_config_t *config, size_t bytes);
void wasmtime_config_memory_init_cow_set(wasm_config_t *config, bool enable);
void wasmtime_config_host_memory_creator_set(
    wasm_config_t *config, wasmtime_memory_creator_t *creator);

wasmtime_pooling_allocation_config_t *
wasmtime_pooling_allocation_config_new(void);
void wasmtime_pooling_allocation_config_delete(
    wasmtime_pooling_allocation_config_t *config);
void wasmtime_pooling_allocation_config_total_component_instances_set(
    wasmtime_pooling_allocation_config_t *config, uint32_t n);
void wasmtime_pooling_allocation_config_total_core_instances_set(
    wasmtime_pooling_allocation_config_t *config, uint32_t n);
void wasmtime_pooling_allocation_config_total_memories_set(
    wasmtime_pooling_allocation_config_t *config, uint32_t n);
void wasmtime_pooling_allocation_config_total_tables_set(
    wasmtime_pooling_allocation_config_t *config, uint32_t n);
void wasmtime_pooling_allocation_config_max_memory_size_set(
    wasmtime_pooling_allocation_config_t *config, size_t bytes);
// Copies the pooling configuration into config.
void wasmtime_pooling_allocation_strategy_set(
    wasm_config_t *config, const wasmtime_pooling_allocation_config_t *pooling);

// Takes ownership of config.
wasm_engine_t *wasm_engine_new_with_config(wasm_config_t *config);
void wasm_engine_delete(wasm_engine_t *engine);
void wasmtime_engine_increment_epoch(wasm_engine_t *engine);

// Errors.
wasmtime_error_t *wasmtime_error_new(const char *message);
void wasmtime_error_delete(wasmtime_error_t *error);
void wasmtime_error_message(const wasmtime_error_t *error,
                            wasm_name_t *message);
// True, with *status set, if the error is a guest's WASI exit.
bool wasmtime_error_exit_status(const wasmtime_error_t *error, int *status);

// Stores. data is returned by wasmtime_context_get_data; finalizer (may be
// NULL) runs on it when the store is deleted.
wasmtime_store_t *wasmtime_store_new(wasm_engine_t *engine, void *data,
                                     void (*finalizer)(void *));
wasmtime_context_t *wasmtime_store_context(wasmtime_store_t *store);
// A negative limit leaves that resource unlimited.
void wasmtime_store_limiter(wasmtime_store_t *store, int64_t memory_size,
                            int64_t table_elements, int64_t instances,
                            int64_t tables, int64_t memories);
void wasmtime_store_delete(wasmtime_store_t *store);
void *wasmtime_context_get_data(const wasmtime_context_t *context);
// Takes ownership of wasi.
wasmtime_error_t *wasmtime_context_set_wasi(wasmtime_context_t *context,
                                            wasi_config_t *wasi);
void wasmtime_context_set_epoch_deadline(wasmtime_context_t *context,
                                         uint64_t ticks_beyond_current);
// func runs when the engine's epoch passes the store's deadline; returning
// an error traps the guest, otherwise it sets the next deadline's distance.
void wasmtime_store_epoch_deadline_callback(
    wasmtime_store_t *store,
    wasmtime_error_t *(*func)(wasmtime_context_t *context, void *data,
                              uint64_t *epoch_deadline_delta,
                              wasmtime_update_deadline_kind_t *update_kind),
    void *data, void (*finalizer)(void *));

// WASI contexts. A new configuration grants nothing.
wasi_config_t *wasi_config_new(void);
void wasi_config_delete(wasi_config_t *config);
// Opens host_path at once (following symlinks, as any ambient open does) and
// shows it to the guest as guest_path; false if it cannot be opened.
bool wasi_config_preopen_dir(wasi_config_t *config, const char *host_path,
                             const char *guest_path, wasi_dir_perms dir_perms,
                             wasi_file_perms file_perms);
void wasi_config_set_stdout_custom(
    wasi_config_t *config,
    ptrdiff_t (*callback)(void *data, const unsigned char *buf, size_t len),
    void *data, void (*finalizer)(void *));
void wasi_config_set_stderr_custom(
    wasi_config_t *config,
    ptrdiff_t (*callback)(void *data, const unsigned char *buf, size_t len),
    void *data, void (*finalizer)(void *));

// Components.
wasmtime_error_t *wasmtime_component_new(const wasm_engine_t *engine,
                                         const uint8_t *buf, size_t len,
                                         wasmtime_component_t **component_out);
wasmtime_error_t *
wasmtime_component_serialize(const wasmtime_component_t *component,
                             wasm_byte_vec_t *ret);
wasmtime_error_t *
wasmtime_component_deserialize(const wasm_engine_t *engine, const uint8_t *buf,
                               size_t len,
                               wasmtime_component_t **component_out);
wasmtime_error_t *
wasmtime_component_deserialize_file(const wasm_engine_t *engine,
                                    const char *path,
                                    wasmtime_component_t **component_out);
void wasmtime_component_delete(wasmtime_component_t *component);

// Component types: imports, exports and function signatures.
wasmtime_component_type_t *
wasmtime_component_type(const wasmtime_component_t *component);
void wasmtime_component_type_delete(wasmtime_component_type_t *ty);
size_t wasmtime_component_type_import_count(const wasmtime_component_type_t *ty,
                                            const wasm_engine_t *engine);
bool wasmtime_component_type_import_nth(const wasmtime_component_type_t *ty,
                                        const wasm_engine_t *engine,
                                        size_t nth, const char **name_ret,
                                        size_t *name_len_ret,
                                        wasmtime_component_item_t *type_ret);
size_t wasmtime_component_type_export_count(const wasmtime_component_type_t *ty,
                                            const wasm_engine_t *engine);
bool wasmtime_component_type_export_nth(const wasmtime_component_type_t *ty,
                                        const wasm_engine_t *engine,
                                        size_t nth, const char **name_ret,
                                        size_t *name_len_ret,
                                        wasmtime_component_item_t *type_ret);
void wasmtime_component_item_delete(wasmtime_component_item_t *item);
size_t wasmtime_component_instance_type_export_count(
    const wasmtime_component_instance_type_t *ty, const wasm_engine_t *engine);
bool wasmtime_component_instance_type_export_nth(
    const wasmtime_component_instance_type_t *ty, const wasm_engine_t *engine,
    size_t nth, const char **name_ret, size_t *name_len_ret,
    wasmtime_component_item_t *type_ret);

void wasmtime_component_func_type_delete(wasmtime_component_func_type_t *ty);
size_t wasmtime_component_func_type_param_count(
    const wasmtime_component_func_type_t *ty);
bool wasmtime_component_func_type_param_nth(
    const wasmtime_component_func_type_t *ty, size_t nth, const char **name_ret,
    size_t *name_len_ret, wasmtime_component_valtype_t *type_ret);
// False if the function returns nothing.
bool wasmtime_component_func_type_result(
    const wasmtime_component_func_type_t *ty,
    wasmtime_component_valtype_t *type_ret);

void wasmtime_component_valtype_delete(wasmtime_component_valtype_t *ty);
void wasmtime_component_list_type_element(
    const wasmtime_component_list_type_t *ty,
    wasmtime_component_valtype_t *type_ret);
size_t wasmtime_component_record_type_field_count(
    const wasmtime_component_record_type_t *ty);
bool wasmtime_component_record_type_field_nth(
    const wasmtime_component_record_type_t *ty, size_t nth,
    const char **name_ret, size_t *name_len_ret,
    wasmtime_component_valtype_t *type_ret);
size_t wasmtime_component_tuple_type_types_count(
    const wasmtime_component_tuple_type_t *ty);
bool wasmtime_component_tuple_type_types_nth(
    const wasmtime_component_tuple_type_t *ty, size_t nth,
    wasmtime_component_valtype_t *type_ret);
size_t wasmtime_component_variant_type_case_count(
    const wasmtime_component_variant_type_t *ty);
bool wasmtime_component_variant_type_case_nth(
    const wasmtime_component_variant_type_t *ty, size_t nth,
    const char **name_ret, size_t *name_len_ret, bool *has_payload_ret,
    wasmtime_component_valtype_t *payload_ret);
size_t wasmtime_component_enum_type_names_count(
    const wasmtime_component_enum_type_t *ty);
bool wasmtime_component_enum_type_names_nth(
    const wasmtime_component_enum_type_t *ty, size_t nth,
    const char **name_ret, size_t *name_len_ret);
void wasmtime_component_option_type_ty(
    const wasmtime_component_option_type_t *ty,
    wasmtime_component_valtype_t *type_ret);
// Each false if that side has no payload.
bool wasmtime_component_result_type_ok(
    const wasmtime_component_result_type_t *ty,
    wasmtime_component_valtype_t *type_ret);
bool wasmtime_component_result_type_err(
    const wasmtime_component_result_type_t *ty,
    wasmtime_component_valtype_t *type_ret);
size_t wasmtime_component_flags_type_names_count(
    const wasmtime_component_flags_type_t *ty);
bool wasmtime_component_flags_type_names_nth(
    const wasmtime_component_flags_type_t *ty, size_t nth,
    const char **name_ret, size_t *name_len_ret);

// Linkers. A linker instance (the root, or a nested one) borrows its parent
// exclusively until it is deleted.
wasmtime_component_linker_t *
wasmtime_component_linker_new(const wasm_engine_t *engine);
void wasmtime_component_linker_delete(wasmtime_component_linker_t *linker);
wasmtime_error_t *
wasmtime_component_linker_add_wasip2(wasmtime_component_linker_t *linker);
wasmtime_component_linker_instance_t *
wasmtime_component_linker_root(wasmtime_component_linker_t *linker);
wasmtime_error_t *wasmtime_component_linker_instance_add_instance(
    wasmtime_component_linker_instance_t *linker_instance, const char *name,
    size_t name_len,
    wasmtime_component_linker_instance_t **linker_instance_out);
wasmtime_error_t *wasmtime_component_linker_instance_add_func(
    wasmtime_component_linker_instance_t *linker_instance, const char *name,
    size_t name_len, wasmtime_component_func_callback_t callback, void *data,
    void (*finalizer)(void *));
void wasmtime_component_linker_instance_delete(
    wasmtime_component_linker_instance_t *linker_instance);
wasmtime_error_t *wasmtime_component_linker_instantiate(
    const wasmtime_component_linker_t *linker, wasmtime_context_t *context,
    const wasmtime_component_t *component,
    wasmtime_component_instance_t *instance_out);

// Instances and functions. instance_export_index narrows a lookup to a
// nested instance; NULL means the top level.
wasmtime_component_export_index_t *wasmtime_component_instance_get_export_index(
    const wasmtime_component_instance_t *instance, wasmtime_context_t *context,
    const wasmtime_component_export_index_t *instance_export_index,
    const char *name, size_t name_len);
void wasmtime_component_export_index_delete(
    wasmtime_component_export_index_t *export_index);
bool wasmtime_component_instance_get_func(
    const wasmtime_component_instance_t *instance, wasmtime_context_t *context,
    const wasmtime_component_export_index_t *export_index,
    wasmtime_component_func_t *func_out);
wasmtime_component_func_type_t *
wasmtime_component_func_type(const wasmtime_component_func_t *func,
                             wasmtime_context_t *context);
// args are borrowed; results must be zeroed and are the caller's to delete.
// wasmtime_component_func_post_return must follow a successful call.
wasmtime_error_t *wasmtime_component_func_call(
    const wasmtime_component_func_t *func, wasmtime_context_t *context,
    const wasmtime_component_val_t *args, size_t args_size,
    wasmtime_component_val_t *results, size_t results_size);
wasmtime_error_t *
wasmtime_component_func_post_return(const wasmtime_component_func_t *func,
                                    wasmtime_context_t *context);

// Component values.
void wasmtime_component_vallist_new_uninit(wasmtime_component_vallist_t *out,
                                           size_t size);
void wasmtime_component_valrecord_new_uninit(
    wasmtime_component_valrecord_t *out, size_t size);
void wasmtime_component_valtuple_new_uninit(wasmtime_component_valtuple_t *out,
                                            size_t size);
void wasmtime_component_valflags_new_uninit(wasmtime_component_valflags_t *out,
                                            size_t size);
// Moves *val to a new heap value (for option, result and variant payloads).
wasmtime_component_val_t *
wasmtime_component_val_new(wasmtime_component_val_t *val);
// Frees everything the value owns (not the value itself).
void wasmtime_component_val_delete(wasmtime_component_val_t *value);

#endif // MAIDEN_CAPI_H

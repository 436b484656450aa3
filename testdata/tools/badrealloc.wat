;; badrealloc: a cabi_realloc that answers with a pointer past the end of
;; linear memory (0xfffffff0), so the host's copy of execute's input into
;; the guest has nowhere valid to go (describe and schema return static
;; strings and never allocate).
;; Host should report: kind trap, wasmtime's bounds check naming the
;; realloc's return ("realloc return: beyond end of memory"); the host
;; writes nothing outside the guest's memory and the next call works.
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "Allocates out of bounds.")
  (data (i32.const 64) "{\"type\":\"object\"}")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (i32.const 0xfffffff0))
  (func $ret_string (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))
  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 24)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 64) (i32.const 17)))
  (func (export "execute") (param i32 i32) (result i32)
    (i32.store8 (i32.const 4096) (i32.const 0))
    (i32.store (i32.const 4100) (i32.const 16))
    (i32.store (i32.const 4104) (i32.const 1))
    (i32.const 4096))
)

;; pastend: stores one word just past the end of its one-page (64 KiB)
;; memory and, if that did not trap, returns ok("stored"). Nothing else in
;; it touches memory outside its page, so the store alone decides the
;; outcome. maiden keeps released reservations for reuse (shim.c, the
;; spares): this guest in a reservation an earlier guest grew must still
;; trap, the pages past its size made inaccessible again.
;; Host should report: trap (out of bounds memory access).
(module
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Stores just past the end of its memory.")
  (data (i32.const 64) "{\"type\":\"object\"}")
  (data (i32.const 96) "stored")

  ;; cabi_realloc: a bump allocator. The host calls it to place the input
  ;; string (and, for imports, returned strings and lists) in our memory.
  ;; It grows memory when needed and never frees: cabi_post_* resets the heap
  ;; once the host has copied a call's results out.
  (func $realloc (export "cabi_realloc")
    (param $old i32) (param $old_size i32) (param $align i32) (param $new_size i32)
    (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (if (i32.and (i32.ne (local.get $old) (i32.const 0))
                 (i32.le_u (local.get $new_size) (local.get $old_size)))
      (then (return (local.get $old))))
    ;; p = heap rounded up to align (a power of two)
    (local.set $p
      (i32.and (i32.add (global.get $heap) (i32.sub (local.get $align) (i32.const 1)))
               (i32.sub (i32.const 0) (local.get $align))))
    (local.set $end (i32.add (local.get $p) (local.get $new_size)))
    (if (i32.lt_u (local.get $end) (local.get $p)) (then unreachable))
    (local.set $have (i32.shl (memory.size) (i32.const 16)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.eq
              (memory.grow
                (i32.shr_u (i32.add (i32.sub (local.get $end) (local.get $have)) (i32.const 0xffff))
                           (i32.const 16)))
              (i32.const -1))
          (then unreachable))))
    (if (local.get $old)
      (then (memory.copy (local.get $p) (local.get $old) (local.get $old_size))))
    (global.set $heap (local.get $end))
    (local.get $p))

  ;; Post-return: the host has copied the results, so drop the call's heap.
  (func (export "cabi_post_describe") (param i32) (global.set $heap (i32.const 8192)))
  (func (export "cabi_post_schema") (param i32) (global.set $heap (i32.const 8192)))
  (func (export "cabi_post_execute") (param i32) (global.set $heap (i32.const 8192)))

  ;; Results wider than one value go through a return area at 4096; the
  ;; export returns its address.
  ;; string: ptr @0, len @4
  (func $ret_string (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))
  ;; result<string, string>: tag @0 (0 ok, 1 err), ptr @4, len @8
  (func $ret_result (param $tag i32) (param $p i32) (param $n i32) (result i32)
    (i32.store8 (i32.const 4096) (local.get $tag))
    (i32.store (i32.const 4100) (local.get $p))
    (i32.store (i32.const 4104) (local.get $n))
    (i32.const 4096))

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 39)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 64) (i32.const 17)))

  (func (export "execute") (param i32 i32) (result i32)
    (i32.store (i32.shl (memory.size) (i32.const 16)) (i32.const 42))
    (call $ret_result (i32.const 0) (i32.const 96) (i32.const 6)))
)

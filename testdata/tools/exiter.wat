;; exiter: calls WASI's exit from execute (see exiter.wit): input "ok"
;; exits with exit(ok) (status 0), anything else with exit(err) (status 1).
;; Host should report: a trap naming the exit status (the call does not
;; return; a reactor's exit, even with status 0, fails the call).
(module
  ;; exit(status: result) flattens to one i32: 0 ok, 1 err.
  (import "wasi:cli/exit@0.2.0" "exit" (func $exit (param i32)))
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Exits through WASI instead of returning.")
  (data (i32.const 64) "{\"type\":\"string\"}")
  (data (i32.const 96) "returned")

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
    (call $ret_string (i32.const 16) (i32.const 40)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 64) (i32.const 17)))

  (func (export "execute") (param $p i32) (param $n i32) (result i32)
    ;; "ok" (2 bytes, 'o' 'k') exits with ok, anything else with err.
    (call $exit
      (if (result i32)
          (i32.and (i32.eq (local.get $n) (i32.const 2))
                   (i32.eq (i32.load16_u (local.get $p)) (i32.const 0x6b6f)))
        (then (i32.const 0))
        (else (i32.const 1))))
    (call $ret_result (i32.const 0) (i32.const 96) (i32.const 8)))
)

;; postleak: execute returns ok with a 40 MiB string (memory grown by 641
;; pages, the output at 64 KiB .. 64 KiB + 40 MiB), then its post-return
;; misbehaves: with input "trap" cabi_post_execute traps (unreachable), with
;; any other input it spins forever (the deadline ends it).
;; Host should report: a trap or the deadline, and free the result wasmtime
;; had already lifted for it: a tool repeating this must not make the host
;; keep 40 MiB per call.
(module
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Returns 40 MiB, bad post.")
  (data (i32.const 40) "{\"type\":\"object\"}")

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
  ;; input "trap" (first byte 't', kept at 8 by execute): trap; else spin.
  (func (export "cabi_post_execute") (param i32)
    (if (i32.eq (i32.load8_u (i32.const 8)) (i32.const 0x74)) (then unreachable))
    (loop $spin (br $spin)))

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
    (call $ret_string (i32.const 16) (i32.const 25)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 40) (i32.const 17)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 8) (i32.load8_u (local.get $in)))
    (if (i32.eq (memory.grow (i32.const 641)) (i32.const -1)) (then unreachable))
    (memory.fill (i32.const 65536) (i32.const 0x61) (i32.const 41943040))
    (call $ret_result (i32.const 0) (i32.const 65536) (i32.const 41943040)))
)

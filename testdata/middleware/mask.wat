;; mask: passes every call before the tool runs and every failure, and
;; rewrites every output once the tool succeeded
;; ({"verdict":"rewrite","output":"masked by mask"}), so a test sees whether
;; the after phase's rewrite replaced what the tool returned: the event
;; starts {"version":1,"phase":" (22 bytes), then "before", "after" or
;; "failed". Same ABI as withhold.wat.
(module
  ;; log(level: enum level {debug, info, warn, error} as i32, message: string)
  (import "maiden:middleware/host@0.1.0" "log" (func $log (param i32 i32 i32)))

  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))

  ;; cabi_realloc: a bump allocator for the host to place the event in our
  ;; memory; cabi_post_* resets the heap once the host copied the result.
  (func $realloc (export "cabi_realloc")
    (param $old i32) (param $old_size i32) (param $align i32) (param $new_size i32)
    (result i32)
    (local $p i32) (local $end i32) (local $have i32)
    (if (i32.and (i32.ne (local.get $old) (i32.const 0))
                 (i32.le_u (local.get $new_size) (local.get $old_size)))
      (then (return (local.get $old))))
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

  (func (export "cabi_post_describe") (param i32) (global.set $heap (i32.const 8192)))
  (func (export "cabi_post_handle") (param i32) (global.set $heap (i32.const 8192)))

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
  (data (i32.const 16) "Masks every output. A fixture for maiden's own tests.")
  (data (i32.const 80) "{\"verdict\":\"pass\"}")
  (data (i32.const 112) "{\"verdict\":\"rewrite\",\"output\":\"masked by mask\"}")

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 53)))
  (func (export "handle") (param $in i32) (param $len i32) (result i32)
    (if (i32.and (i32.gt_u (local.get $len) (i32.const 22))
                 (i32.eq (i32.load8_u (i32.add (local.get $in) (i32.const 22))) (i32.const 97))) ;; 'a'
      (then (return (call $ret_result (i32.const 0) (i32.const 112) (i32.const 47)))))
    (call $ret_result (i32.const 0) (i32.const 80) (i32.const 18)))
)

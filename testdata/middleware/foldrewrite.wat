;; foldrewrite: rewrites every call's input (before phase) to
;; {"message":"hi","MESSAGE":"evil"}, two keys that differ only in case, which
;; the host must refuse as it refuses such an input from the agent: Go's
;; encoding/json takes one for the other. Same ABI as pass.wat.
(module
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas, 8192.. heap
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

  (data (i32.const 16) "Rewrites every call's input to keys that differ only in case. A fixture for maiden's own tests.")
  (data (i32.const 256) "{\"verdict\":\"rewrite\",\"input\":{\"message\":\"hi\",\"MESSAGE\":\"evil\"}}")

  ;; describe: a string (ptr @4096, len @4100)
  (func (export "describe") (result i32)
    (i32.store (i32.const 4096) (i32.const 16))
    (i32.store (i32.const 4100) (i32.const 95))
    (i32.const 4096))
  ;; handle: result<string, string> ok (tag @4096, ptr @4100, len @4104)
  (func (export "handle") (param $in i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 4096) (i32.const 0))
    (i32.store (i32.const 4100) (i32.const 256))
    (i32.store (i32.const 4104) (i32.const 63))
    (i32.const 4096))
)

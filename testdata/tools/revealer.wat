;; revealer: a maiden:tool@0.3.0 tool that asks the host's reveal for the
;; value of the handle it is given (its whole input is the handle), logs the
;; answer at info and returns it: ok(value) when the host reveals it,
;; err(refusal) when it refuses. So it is the hostile part: it echoes a
;; revealed value into both its log and its output.
;; Host should report: whatever its reveal decides; a revealed value comes
;; back redacted wherever the call's redactor knows it.
;;
;; reveal(handle: string) -> result<string, string> flattens to (ptr, len,
;; return-area) with the same 12-byte area execute returns (tag u8 @0, ptr
;; @4, len @8), so execute hands reveal's area back as its own.
(module
  (import "maiden:tool/host@0.3.0" "reveal" (func $reveal (param i32 i32 i32)))
  (import "maiden:tool/host@0.3.0" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Reveals the secret handle it is given and echoes the value.")
  (data (i32.const 96) "{\"type\":\"string\"}")

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
  (func (export "cabi_post_schema") (param i32) (global.set $heap (i32.const 8192)))
  (func (export "cabi_post_output-schema") (param i32) (global.set $heap (i32.const 8192)))
  (func (export "cabi_post_execute") (param i32) (global.set $heap (i32.const 8192)))

  (func $ret_string (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 59)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 96) (i32.const 17)))
  (func (export "output-schema") (result i32)
    (call $ret_string (i32.const 0) (i32.const 0)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (call $reveal (local.get $in) (local.get $len) (i32.const 4112))
    ;; log(info, the answer, whichever it is)
    (call $log (i32.const 1) (i32.load (i32.const 4116)) (i32.load (i32.const 4120)))
    (i32.const 4112))
)

;; biglog: logs one line whose message is as long as the input says: the
;; input is a decimal byte count n; execute grows its memory to hold n zero
;; bytes (a valid UTF-8 string of NULs) at 8192 and calls log(info, 8192, n),
;; then returns ok("logged"). For the host-call argument cap (MaxArgumentBytes)
;; at its edge: the host must refuse to copy a message whose lifting costs
;; more than the cap, and take one at the cap.
;; Host should report: success under the cap (one info line of n bytes); over
;; it, a trap naming the cap, and no line logged.
(module
  ;; log(level: enum level {debug, info, warn, error} as i32, message: string)
  (import "maiden:tool/host@0.1.0" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Logs one line of as many zero bytes as its input says.")
  (data (i32.const 80) "{\"type\":\"object\"}")
  (data (i32.const 104) "logged")

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
    (call $ret_string (i32.const 16) (i32.const 54)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 80) (i32.const 17)))

  ;; The input (placed by the host at p, n bytes long) is a decimal count.
  (func $atoi (param $p i32) (param $n i32) (result i32)
    (local $acc i32) (local $end i32)
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (block $done
      (loop $digit
        (br_if $done (i32.ge_u (local.get $p) (local.get $end)))
        (local.set $acc
          (i32.add (i32.mul (local.get $acc) (i32.const 10))
                   (i32.sub (i32.load8_u (local.get $p)) (i32.const 48))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $digit)))
    (local.get $acc))

  (func (export "execute") (param $p i32) (param $n i32) (result i32)
    (local $len i32) (local $msg i32)
    (local.set $len (call $atoi (local.get $p) (local.get $n)))
    ;; A fresh region past the input, zeroed (memory.grow zeroes), n bytes.
    (local.set $msg (call $realloc (i32.const 0) (i32.const 0) (i32.const 1) (local.get $len)))
    (call $log (i32.const 1) (local.get $msg) (local.get $len))
    (call $ret_result (i32.const 0) (i32.const 104) (i32.const 6)))
)

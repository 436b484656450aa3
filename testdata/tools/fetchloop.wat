;; fetchloop: calls the host's http-fetch for one URL over and over, until
;; the call's deadline ends it; it never returns. Input: exactly
;; {"u":"URL"} (what the host passes on for that object: the URL is the
;; bytes between the first 6 and the last 2; nothing else is decoded). Each answer (a refusal, most likely) is dropped: the heap goes
;; back to where the input ends before the next request.
;; Host should report: the deadline; and, for a call that is audited (a
;; declared agent's), write at most its bound of fetch records, refusing
;; the requests past it, however fast a tool asks (a denied request costs
;; microseconds, each an audit record).
;;
;; http-fetch flattens to 12 i32 params: method (ptr, len), url (ptr, len),
;; headers (ptr, len), body (ptr, len), credential (tag, ptr, len), return-area
;; ptr (24 bytes, here at 4112).
(module
  (import "maiden:tool/host@0.1.0" "http-fetch"
    (func $fetch (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Fetches the URL {\"u\":URL} names, again and again until the deadline.")
  (data (i32.const 96) "{\"type\":\"object\",\"properties\":{\"u\":{\"type\":\"string\"}},\"required\":[\"u\"]}")

  ;; cabi_realloc: a bump allocator (grows memory when needed).
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
  (func (export "cabi_post_execute") (param i32) (global.set $heap (i32.const 8192)))

  ;; string: ptr @0, len @4
  (func $ret_string (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 68)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 96) (i32.const 71)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (local $mark i32)
    (local.set $mark (global.get $heap))
    (loop $again
      (global.set $heap (local.get $mark))
      (call $fetch
        (i32.const 0) (i32.const 0)          ;; method "" (GET)
        (i32.add (local.get $in) (i32.const 6)) (i32.sub (local.get $len) (i32.const 8))
        (i32.const 0) (i32.const 0)          ;; headers: none
        (i32.const 0) (i32.const 0)          ;; body: empty
        (i32.const 0) (i32.const 0) (i32.const 0) ;; no credential
        (i32.const 4112))
      (br $again))
    unreachable)
)

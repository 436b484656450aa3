;; bodyfetcher: a maiden:tool@0.2.0 tool that POSTs its input, as the raw
;; 0.2.0 body string, to https://x.test/ through the host's http-fetch and
;; returns ok("<status> <body>") with the response body string as the host
;; encoded it, or on fetch-error err("denied: <msg>"), err("timeout"),
;; err("too-large") or err("failed: <msg>").
;; Input "BIG" instead sends a body string of 5 MiB of "a", past the host's
;; 2 MiB request cap. So the input is the hostile part: a body string with a
;; character above U+00FF is not a valid 0.2.0 body (one character per byte).
;; Host should report: a malformed or oversized body as the tool error
;; "failed: ..." (a fetch error, never a trap); otherwise whatever its
;; http-fetch answers, the body encoded one character per byte.
;;
;; http-fetch flattens exactly as in 0.1.0 (fetcher.wat): a string body is a
;; (ptr, len) pair like list<u8> was. Return area at 4112.
(module
  (import "maiden:tool/host@0.2.0" "http-fetch"
    (func $fetch (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "POSTs its input as the body to https://x.test/.")
  (data (i32.const 96) "{\"type\":\"string\"}")
  (data (i32.const 128) "https://x.test/")
  (data (i32.const 144) "POST")
  (data (i32.const 152) "BIG")
  (data (i32.const 240) "denied: ")
  (data (i32.const 248) "failed: ")
  (data (i32.const 256) "timeout")
  (data (i32.const 264) "too-large")

  ;; cabi_realloc: a bump allocator that grows memory (as in fetcher.wat).
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
  (func $ret_result (param $tag i32) (param $p i32) (param $n i32) (result i32)
    (i32.store8 (i32.const 4096) (local.get $tag))
    (i32.store (i32.const 4100) (local.get $p))
    (i32.store (i32.const 4104) (local.get $n))
    (i32.const 4096))

  (func $eq (param $a i32) (param $an i32) (param $b i32) (param $bn i32) (result i32)
    (local $i i32)
    (if (i32.ne (local.get $an) (local.get $bn)) (then (return (i32.const 0))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $an)))
        (if (i32.ne (i32.load8_u (i32.add (local.get $a) (local.get $i)))
                    (i32.load8_u (i32.add (local.get $b) (local.get $i))))
          (then (return (i32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 1))

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 47)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 96) (i32.const 17)))
  ;; 0.2.0's output-schema: this tool declares none.
  (func (export "output-schema") (result i32)
    (call $ret_string (i32.const 0) (i32.const 0)))

  (func $concat (param $tag i32) (param $a i32) (param $an i32) (param $b i32) (param $bn i32)
    (result i32)
    (local $p i32)
    (local.set $p (call $realloc (i32.const 0) (i32.const 0) (i32.const 1)
                                 (i32.add (local.get $an) (local.get $bn))))
    (memory.copy (local.get $p) (local.get $a) (local.get $an))
    (memory.copy (i32.add (local.get $p) (local.get $an)) (local.get $b) (local.get $bn))
    (call $ret_result (local.get $tag) (local.get $p) (i32.add (local.get $an) (local.get $bn))))

  ;; ok("<status> <body>"): digits written backwards into 4160..4165.
  (func $status_body (param $status i32) (param $b i32) (param $bn i32) (result i32)
    (local $p i32)
    (local.set $p (i32.const 4166))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 48) (i32.rem_u (local.get $status) (i32.const 10))))
      (local.set $status (i32.div_u (local.get $status) (i32.const 10)))
      (br_if $digit (local.get $status)))
    (i32.store8 (i32.const 4166) (i32.const 32))
    (call $concat (i32.const 0) (local.get $p) (i32.sub (i32.const 4167) (local.get $p))
                  (local.get $b) (local.get $bn)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (local $body i32) (local $body_len i32) (local $i i32)
    (local.set $body (local.get $in))
    (local.set $body_len (local.get $len))
    (if (call $eq (local.get $in) (local.get $len) (i32.const 152) (i32.const 3))
      (then
        (local.set $body_len (i32.const 0x500000))
        (local.set $body (call $realloc (i32.const 0) (i32.const 0) (i32.const 1) (local.get $body_len)))
        (memory.fill (local.get $body) (i32.const 97) (local.get $body_len))))
    (call $fetch
      (i32.const 144) (i32.const 4)        ;; method "POST"
      (i32.const 128) (i32.const 15)       ;; url
      (i32.const 0) (i32.const 0)          ;; headers: none
      (local.get $body) (local.get $body_len)
      (i32.const 0) (i32.const 0) (i32.const 0) ;; credential: none
      (i32.const 4112))                    ;; return area
    (if (i32.eqz (i32.load8_u (i32.const 4112)))
      (then
        (return (call $status_body
          (i32.load16_u (i32.const 4116))
          (i32.load (i32.const 4128)) (i32.load (i32.const 4132))))))
    (local.set $i (i32.load8_u (i32.const 4116)))
    (if (i32.eqz (local.get $i))
      (then (return (call $concat (i32.const 1) (i32.const 240) (i32.const 8)
                          (i32.load (i32.const 4120)) (i32.load (i32.const 4124))))))
    (if (i32.eq (local.get $i) (i32.const 1))
      (then (return (call $ret_result (i32.const 1) (i32.const 256) (i32.const 7)))))
    (if (i32.eq (local.get $i) (i32.const 2))
      (then (return (call $ret_result (i32.const 1) (i32.const 264) (i32.const 9)))))
    (if (i32.eq (local.get $i) (i32.const 3))
      (then (return (call $concat (i32.const 1) (i32.const 248) (i32.const 8)
                          (i32.load (i32.const 4120)) (i32.load (i32.const 4124))))))
    unreachable)
)

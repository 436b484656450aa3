;; rawbody: a maiden:tool@0.1.0 tool that POSTs its input, as the list<u8>
;; body, to https://x.test/ through the host's http-fetch, and returns
;; ok("<status> <body>"), or on fetch-error err("denied: <msg>"),
;; err("timeout"), err("too-large") or err("failed: <msg>"). So the body's
;; length is the caller's to choose to the byte: the request cap
;; (MaxRequestBody, 2 MiB) is tested at its edge.
;; Host should report: a body over the cap as the tool error
;; "failed: request body is N bytes; the limit is 2097152" (never sent, never
;; a trap); a body within it reaches the host's http-fetch whole.
;;
;; http-fetch's flattening and return area are fetcher.wat's.
(module
  ;; http-fetch: func(req: request) -> result<response, fetch-error>
  (import "maiden:tool/host@0.1.0" "http-fetch"
    (func $fetch (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "POSTs its input as the body through the host. A fixture for maiden's own tests.")
  (data (i32.const 96) "{\"type\":\"string\",\"description\":\"the request body\"}")
  (data (i32.const 300) "https://x.test/")
  (data (i32.const 320) "POST")
  (data (i32.const 240) "denied: ")
  (data (i32.const 248) "failed: ")
  (data (i32.const 256) "timeout")
  (data (i32.const 264) "too-large")

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
    (call $ret_string (i32.const 16) (i32.const 79)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 96) (i32.const 50)))

  ;; $concat: ret_result(tag, a ++ b), the bytes copied to a fresh allocation
  (func $concat (param $tag i32) (param $a i32) (param $an i32) (param $b i32) (param $bn i32)
    (result i32)
    (local $p i32)
    (local.set $p (call $realloc (i32.const 0) (i32.const 0) (i32.const 1)
                                 (i32.add (local.get $an) (local.get $bn))))
    (memory.copy (local.get $p) (local.get $a) (local.get $an))
    (memory.copy (i32.add (local.get $p) (local.get $an)) (local.get $b) (local.get $bn))
    (call $ret_result (local.get $tag) (local.get $p) (i32.add (local.get $an) (local.get $bn))))

  ;; $status_body: ok("<status> <body>"); the decimal digits are written
  ;; backwards into scratch at 4160..4165, the space at 4166.
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
    (local $i i32)
    (call $fetch
      (i32.const 320) (i32.const 4)        ;; method "POST"
      (i32.const 300) (i32.const 15)       ;; url
      (i32.const 0) (i32.const 0)          ;; headers: none
      (local.get $in) (local.get $len)     ;; body: the input
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

;; fetcher: calls the host's http-fetch with the input as the URL and returns
;; ok("<status> <body>"), or on fetch-error err("denied: <msg>"), err("timeout"),
;; err("too-large") or err("failed: <msg>").
;; Input: the raw URL, or "CRED=NAME URL" to ask the host to attach the secret
;; named NAME (credential = some("NAME")); "CRED=NAME" alone is a tool error.
;; The request is GET (method ""), no headers, empty body.
;; Host should report: whatever its http-fetch decides (a refusal comes back as
;; the tool error "denied: <rule and reason>"); the body must be UTF-8 since it
;; is returned inside a string. Its input is raw text, not JSON, so it is for
;; sandbox-level tests; through maiden.Host use js/fetcher (JSON input).
;;
;; http-fetch flattens to 12 i32 params: method (ptr, len), url (ptr, len),
;; headers (ptr, len), body (ptr, len), credential (tag, ptr, len), return-area
;; ptr. Return area (24 bytes, here at 4112): tag u8 @0 (0 ok, 1 err);
;; ok: status u16 @4, headers (ptr, len) @8/@12, body (ptr, len) @16/@20;
;; err: case u8 @4 (0 denied(string), 1 timeout, 2 too-large, 3 failed(string)),
;; string (ptr, len) @8/@12. The host allocates returned strings and lists
;; through cabi_realloc.
(module
  ;; http-fetch: func(req: request) -> result<response, fetch-error>
  (import "maiden:tool/host@0.1.0" "http-fetch"
    (func $fetch (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Fetches the URL given as input through the host and returns \"<status> <body>\".")
  (data (i32.const 96) "{\"type\":\"string\",\"description\":\"URL to fetch, optionally prefixed with CRED=NAME and a space\"}")
  (data (i32.const 192) "CRED=")
  (data (i32.const 200) "bad input: want \"CRED=NAME URL\" or a URL")
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

  ;; $eq: do the bytes at (a, an) equal those at (b, bn)?
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
    (call $ret_string (i32.const 16) (i32.const 78)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 96) (i32.const 94)))

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
    (local $url i32) (local $url_len i32) (local $end i32) (local $i i32)
    (local $cred_tag i32) (local $cred i32) (local $cred_len i32)
    (local.set $url (local.get $in))
    (local.set $url_len (local.get $len))
    ;; "CRED=NAME URL": NAME is the name of a secret in the tool's policy.
    (if (i32.and (i32.ge_u (local.get $len) (i32.const 5))
                 (call $eq (local.get $in) (i32.const 5) (i32.const 192) (i32.const 5)))
      (then
        (local.set $end (i32.add (local.get $in) (local.get $len)))
        (local.set $cred (i32.add (local.get $in) (i32.const 5)))
        (local.set $i (local.get $cred))
        (block $found
          (loop $scan
            (br_if $found (i32.ge_u (local.get $i) (local.get $end)))
            (br_if $found (i32.eq (i32.load8_u (local.get $i)) (i32.const 32)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $scan)))
        (if (i32.ge_u (local.get $i) (local.get $end))
          (then (return (call $ret_result (i32.const 1) (i32.const 200) (i32.const 40)))))
        (local.set $cred_tag (i32.const 1))
        (local.set $cred_len (i32.sub (local.get $i) (local.get $cred)))
        (local.set $url (i32.add (local.get $i) (i32.const 1)))
        (local.set $url_len (i32.sub (local.get $end) (local.get $url)))))
    (call $fetch
      (i32.const 0) (i32.const 0)          ;; method "" (GET)
      (local.get $url) (local.get $url_len)
      (i32.const 0) (i32.const 0)          ;; headers: none
      (i32.const 0) (i32.const 0)          ;; body: empty
      (local.get $cred_tag) (local.get $cred) (local.get $cred_len)
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

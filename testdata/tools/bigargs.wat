;; bigargs: a hostile maiden:tool@0.1.0 tool that passes http-fetch arguments
;; far larger than any policy allows, to make the host expand them: wasmtime's
;; component value API lifts a list<u8> at 32 bytes of host memory per byte
;; (and a list of tuples likewise) before any maiden code runs.
;; Input {"headers":true}: 3.7 M empty headers (59 MB of tuples); any other
;; object: a 59 MB body. Its linear memory (60 MiB) fits memory_mb = 64.
;; Host should report: in worker isolation, kind memory (the worker is
;; stopped at memory_mb plus the fixed allowance; the parent is unharmed);
;; never a host that grows by gigabytes.
(module
  (import "maiden:tool/host@0.1.0" "http-fetch"
    (func $fetch (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))
  ;; 960 pages = 60 MiB, zeroed: a zero header tuple is two empty strings.
  (memory (export "memory") 960)
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Passes a 59 MB body (or 3.7 M headers) to http-fetch.")
  (data (i32.const 96) "{\"type\":\"object\"}")
  (data (i32.const 128) "https://x.test/")
  (data (i32.const 160) "survived")

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

  (func $ret_string (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))
  (func $ret_result (param $tag i32) (param $p i32) (param $n i32) (result i32)
    (i32.store8 (i32.const 4096) (local.get $tag))
    (i32.store (i32.const 4100) (local.get $p))
    (i32.store (i32.const 4104) (local.get $n))
    (i32.const 4096))

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 53)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 96) (i32.const 17)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    ;; {"headers":true} is 16 bytes; anything else sends the body.
    (if (i32.eq (local.get $len) (i32.const 16))
      (then
        (call $fetch
          (i32.const 0) (i32.const 0)
          (i32.const 128) (i32.const 15)
          (i32.const 65536) (i32.const 3700000)   ;; 3.7 M zero tuples
          (i32.const 0) (i32.const 0)
          (i32.const 0) (i32.const 0) (i32.const 0)
          (i32.const 4112)))
      (else
        (call $fetch
          (i32.const 0) (i32.const 0)
          (i32.const 128) (i32.const 15)
          (i32.const 0) (i32.const 0)
          (i32.const 65536) (i32.const 61865984)  ;; 59 MiB body
          (i32.const 0) (i32.const 0) (i32.const 0)
          (i32.const 4112))))
    (call $ret_result (i32.const 0) (i32.const 160) (i32.const 8)))
)

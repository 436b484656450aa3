;; unterminated: writes 16 MiB to WASI stdout with no line break (512
;; writes of 32 KiB of "x"), then calls the host's http-fetch once (so a test
;; can look at the host while the call is still running), and returns
;; ok("written") whatever the fetch answered.
;; Host should report: success, with a log that holds none of the line (it
;; is over the log's budget) and the truncation marker counting the bytes
;; dropped; while the call runs the host holds at most the log's budget of
;; the unterminated line, never the 16 MiB.
;;
;; The module imports wasi_snapshot_preview1, so the build wraps it with the
;; preview1 reactor adapter (see stdout.wat); http-fetch's flattening is
;; fetcher.wat's.
(module
  (import "maiden:tool/host@0.1.0" "http-fetch"
    (func $fetch (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  ;; 16.. static strings; 1024 an iovec; 1040 nwritten; 4096 return area;
  ;; 4112 http-fetch's return area; 8192..40960 the "x"s; 65536.. heap
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 16) "Writes 16 MiB to stdout without a newline. A fixture for maiden's own tests.")
  (data (i32.const 128) "{}")
  (data (i32.const 224) "written")
  (data (i32.const 240) "https://x.test/")

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

  (func (export "cabi_post_describe") (param i32))
  (func (export "cabi_post_schema") (param i32))
  (func (export "cabi_post_execute") (param i32))

  (func $ret_string (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 76)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 128) (i32.const 2)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (local $i i32)
    (memory.fill (i32.const 8192) (i32.const 120) (i32.const 32768))
    (loop $write
      (i32.store (i32.const 1024) (i32.const 8192))
      (i32.store (i32.const 1028) (i32.const 32768))
      (drop (call $fd_write (i32.const 1) (i32.const 1024) (i32.const 1) (i32.const 1040)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $write (i32.lt_u (local.get $i) (i32.const 512))))
    (call $fetch
      (i32.const 0) (i32.const 0)          ;; method "" (GET)
      (i32.const 240) (i32.const 15)       ;; url
      (i32.const 0) (i32.const 0)          ;; headers: none
      (i32.const 0) (i32.const 0)          ;; body: empty
      (i32.const 0) (i32.const 0) (i32.const 0) ;; credential: none
      (i32.const 4112))                    ;; return area
    (i32.store8 (i32.const 4096) (i32.const 0))
    (i32.store (i32.const 4100) (i32.const 224))
    (i32.store (i32.const 4104) (i32.const 7))
    (i32.const 4096))
)

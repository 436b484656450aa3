;; aliasargs: a hostile maiden:tool@0.2.0 tool (the newer contract: string
;; bodies) that passes http-fetch 4096 header tuples whose names and values
;; all point at the same 16 KiB of its memory. The canonical ABI allows the
;; aliasing; wasmtime's component value API lifts every string separately,
;; so 80 KiB of guest memory becomes 128 MiB of host memory before any
;; maiden code runs (4096 x 2 x 16 KiB) — and nothing bounds the factor:
;; with memory_mb = 64 the same trick asks for hundreds of terabytes.
;; Its linear memory is 2 pages (128 KiB).
;; Host should report: in process, refused at load (kind invalid, naming
;; the import); in worker isolation, whatever the worker's memory limit
;; allows; never a host that grows by more than the stated bound.
(module
  (import "maiden:tool/host@0.2.0" "http-fetch"
    (func $fetch (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Passes 4096 aliased 16 KiB headers to http-fetch.")
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

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 49)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 96) (i32.const 17)))
  (func (export "output-schema") (result i32)
    (call $ret_string (i32.const 96) (i32.const 17)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (local $p i32)
    ;; 4096 tuples at 65536..131071, each (16384, 16384, 16384, 16384):
    ;; name and value are the same 16 KiB of zero bytes at 16384.
    (local.set $p (i32.const 65536))
    (loop $fill
      (i32.store (local.get $p) (i32.const 16384))
      (i32.store offset=4 (local.get $p) (i32.const 16384))
      (i32.store offset=8 (local.get $p) (i32.const 16384))
      (i32.store offset=12 (local.get $p) (i32.const 16384))
      (local.set $p (i32.add (local.get $p) (i32.const 16)))
      (br_if $fill (i32.lt_u (local.get $p) (i32.const 131072))))
    (call $fetch
      (i32.const 0) (i32.const 0)
      (i32.const 128) (i32.const 15)
      (i32.const 65536) (i32.const 4096)
      (i32.const 0) (i32.const 0)
      (i32.const 0) (i32.const 0) (i32.const 0)
      (i32.const 4112))
    (call $ret_result (i32.const 0) (i32.const 160) (i32.const 8)))
)

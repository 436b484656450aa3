;; bigdirty: dirtymem for a memory past maiden's 256 MiB resident budget
;; (MAIDEN_KEEP_RESIDENT_MAX in internal/wasmtime/shim.c): a released
;; reservation's resident pages are zeroed in place only while the budget
;; lasts; the rest must be dropped (madvise), the last run of them too.
;; execute grows its memory to 4160 pages (260 MiB). Input "mark": writes a
;; byte in every 4 KiB page (so all are resident) and 0xab in the last byte,
;; then returns ok("marked"). Any other input: returns ok("clean") if the
;; last byte is 0, else err("dirty memory from an earlier call").
;; Host should report: "marked", then "clean" for the next call, whichever
;; reservation it gets.
(module
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Marks or checks the last page of a 260 MiB memory.")
  (data (i32.const 80) "{\"type\":\"object\"}")
  (data (i32.const 104) "marked")
  (data (i32.const 112) "clean")
  (data (i32.const 120) "dirty memory from an earlier call")

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
    (call $ret_string (i32.const 16) (i32.const 50)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 80) (i32.const 17)))

  (func (export "execute") (param $p i32) (param $n i32) (result i32)
    (local $a i32) (local $end i32)
    (if (i32.eq (memory.grow (i32.sub (i32.const 4160) (memory.size))) (i32.const -1))
      (then unreachable))
    (local.set $end (i32.shl (memory.size) (i32.const 16)))
    (if (i32.and (i32.ge_u (local.get $n) (i32.const 1))
                 (i32.eq (i32.load8_u (local.get $p)) (i32.const 109))) ;; 'm'
      (then
        ;; Touch every 4 KiB page past the heap, then mark the last byte.
        (local.set $a (i32.const 65536))
        (block $done
          (loop $page
            (br_if $done (i32.ge_u (local.get $a) (local.get $end)))
            (i32.store8 (local.get $a) (i32.const 1))
            (local.set $a (i32.add (local.get $a) (i32.const 4096)))
            (br $page)))
        (i32.store8 (i32.sub (local.get $end) (i32.const 1)) (i32.const 0xab))
        (return (call $ret_result (i32.const 0) (i32.const 104) (i32.const 6)))))
    (if (i32.load8_u (i32.sub (local.get $end) (i32.const 1)))
      (then (return (call $ret_result (i32.const 1) (i32.const 120) (i32.const 33)))))
    (call $ret_result (i32.const 0) (i32.const 112) (i32.const 5)))
)

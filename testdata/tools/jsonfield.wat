;; jsonfield: a benchmark fixture (bench/compare, workload "json"). execute
;; takes a JSON object and returns ok(the raw JSON text of its top-level
;; "target" member), which must be a string: for
;; {"a":{"target":"no"},"target":"yes"} the output is "yes" with its quotes.
;; Host should report: success and that text; err(...) if the object has no
;; top-level "target" string.
;;
;; The scan is hand-written: one pass over the bytes, tracking nesting depth
;; and string boundaries (with backslash escapes), comparing each key at depth
;; 1 with "target" byte for byte (a key spelled with escapes, "t\u0061rget",
;; does not match). It does not validate the JSON: maiden checks the input
;; against the tool's schema, which parses it, before any tool code runs.
;; The block between BEGIN scan and END scan is copied verbatim into
;; bench/compare/wasm/extism.wat (bench/compare's tests check it), so every
;; engine in the comparison runs the same guest code.
;;
;; ABI: as testdata/tools/echo.wat (the canonical ABI for world `tool`, by hand).
(module
  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. return areas and scratch, 8192.. heap
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Returns the top-level \"target\" string of a JSON object, as JSON text. A benchmark fixture.")
  (data (i32.const 112) "{\"type\":\"object\",\"properties\":{\"target\":{\"type\":\"string\"}},\"required\":[\"target\"]}")
  (data (i32.const 208) "no top-level \"target\" string in the input")

  ;; cabi_realloc: a bump allocator. The host calls it to place the input
  ;; string in our memory. It grows memory when needed and never frees:
  ;; cabi_post_* resets the heap once the host has copied a call's results out.
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

  (func (export "cabi_post_describe") (param i32) (global.set $heap (i32.const 8192)))
  (func (export "cabi_post_schema") (param i32) (global.set $heap (i32.const 8192)))
  (func (export "cabi_post_execute") (param i32) (global.set $heap (i32.const 8192)))

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
    (call $ret_string (i32.const 16) (i32.const 90)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 112) (i32.const 81)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (local $r i64)
    (local.set $r (call $find_target (local.get $in) (local.get $len)))
    (if (i64.eq (local.get $r) (i64.const -1))
      (then (return (call $ret_result (i32.const 1) (i32.const 208) (i32.const 41)))))
    (call $ret_result (i32.const 0)
      (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32)))
      (i32.wrap_i64 (local.get $r))))

  ;; BEGIN scan
  ;; $find_target returns where the raw JSON text of the top-level "target"
  ;; member's value lies in the object at [p, p+n), as (address << 32) |
  ;; length, quotes included; or -1 if there is no such member or its value
  ;; is not a string.
  (func $find_target (param $p i32) (param $n i32) (result i64)
    (local $i i32) (local $end i32) (local $c i32) (local $depth i32) (local $e i32) (local $v i32)
    (local.set $i (local.get $p))
    (local.set $end (i32.add (local.get $p) (local.get $n)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $i)))
        (if (i32.eq (local.get $c) (i32.const 34)) ;; '"': a string, key or value
          (then
            (local.set $e (call $string_end (local.get $i) (local.get $end)))
            ;; A key of the outermost object is a string at depth 1 followed
            ;; by ':'. "target" is 6 bytes, so e - i == 7.
            (if (i32.and (i32.eq (local.get $depth) (i32.const 1))
                         (i32.eq (i32.sub (local.get $e) (local.get $i)) (i32.const 7)))
              (then
                (if (i32.and
                      ;; "targ" and "et", little-endian
                      (i32.eq (i32.load (i32.add (local.get $i) (i32.const 1))) (i32.const 0x67726174))
                      (i32.eq (i32.load16_u (i32.add (local.get $i) (i32.const 5))) (i32.const 0x7465)))
                  (then
                    (local.set $v (call $skip_ws (i32.add (local.get $e) (i32.const 1)) (local.get $end)))
                    (if (i32.and (i32.lt_u (local.get $v) (local.get $end))
                                 (i32.eq (i32.load8_u (local.get $v)) (i32.const 58))) ;; ':': it is the key
                      (then
                        (local.set $v (call $skip_ws (i32.add (local.get $v) (i32.const 1)) (local.get $end)))
                        (if (i32.or (i32.ge_u (local.get $v) (local.get $end))
                                    (i32.ne (i32.load8_u (local.get $v)) (i32.const 34)))
                          (then (return (i64.const -1)))) ;; not a string
                        (local.set $e (call $string_end (local.get $v) (local.get $end)))
                        (if (i32.ge_u (local.get $e) (local.get $end)) (then (return (i64.const -1))))
                        (return
                          (i64.or (i64.shl (i64.extend_i32_u (local.get $v)) (i64.const 32))
                                  (i64.extend_i32_u (i32.sub (i32.add (local.get $e) (i32.const 1)) (local.get $v)))))))))))
            (local.set $i (i32.add (local.get $e) (i32.const 1)))
            (br $next)))
        (if (i32.or (i32.eq (local.get $c) (i32.const 123)) (i32.eq (local.get $c) (i32.const 91))) ;; '{' '['
          (then (local.set $depth (i32.add (local.get $depth) (i32.const 1)))))
        (if (i32.or (i32.eq (local.get $c) (i32.const 125)) (i32.eq (local.get $c) (i32.const 93))) ;; '}' ']'
          (then (local.set $depth (i32.sub (local.get $depth) (i32.const 1)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i64.const -1))

  ;; $string_end returns the address of the quote that closes the string
  ;; opening at i (which holds '"'), or end if it is not closed.
  (func $string_end (param $i i32) (param $end i32) (result i32)
    (local $c i32)
    (local.set $i (i32.add (local.get $i) (i32.const 1)))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $i)))
        (if (i32.eq (local.get $c) (i32.const 34)) (then (return (local.get $i))))
        ;; a backslash escapes the next byte (\" \\ \n \uXXXX: skipping one is enough)
        (local.set $i (i32.add (local.get $i)
          (select (i32.const 2) (i32.const 1) (i32.eq (local.get $c) (i32.const 92)))))
        (br $next)))
    (local.get $end))

  ;; $skip_ws returns the first address from i that is not JSON whitespace,
  ;; or end.
  (func $skip_ws (param $i i32) (param $end i32) (result i32)
    (local $c i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
        (local.set $c (i32.load8_u (local.get $i)))
        (br_if $done (i32.eqz (i32.or (i32.or (i32.eq (local.get $c) (i32.const 32)) (i32.eq (local.get $c) (i32.const 9)))
                                      (i32.or (i32.eq (local.get $c) (i32.const 10)) (i32.eq (local.get $c) (i32.const 13))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $i))
  ;; END scan
)

;; The bench/compare workloads as one Extism plugin (Extism Go SDK v1.7.1,
;; kernel ABI of extism-runtime v1.7.0: module "extism:host/env"). Each export
;; is an Extism plugin function: () -> i32 (0 = ok), input and output through
;; the kernel.
;;
;;   echo       the input, unchanged (testdata/tools/echo.wat)
;;   jsonfield  the raw JSON text of the input's top-level "target" string
;;              (testdata/tools/jsonfield.wat; same scan code, verbatim)
;;   cpuloop    10^8 64-bit multiply-adds, the result in decimal
;;              (testdata/tools/cpuloop.wat; same loop)
;;
;; Data moves the way Extism's own PDKs move it: the input is copied into
;; this module's memory 8 bytes per input_load_u64 call (the tail with
;; input_load_u8), the output is allocated in the kernel's memory (alloc),
;; written 8 bytes per store_u64 (the tail with store_u8) and published
;; with output_set. The input always lands at 8192, so a reused plugin
;; instance does not grow; nothing is cleared between calls.
(module
  (import "extism:host/env" "input_length" (func $input_length (result i64)))
  (import "extism:host/env" "input_load_u64" (func $input_load_u64 (param i64) (result i64)))
  (import "extism:host/env" "input_load_u8" (func $input_load_u8 (param i64) (result i32)))
  (import "extism:host/env" "alloc" (func $alloc (param i64) (result i64)))
  (import "extism:host/env" "store_u64" (func $store_u64 (param i64 i64)))
  (import "extism:host/env" "store_u8" (func $store_u8 (param i64 i32)))
  (import "extism:host/env" "output_set" (func $output_set (param i64 i64)))
  (import "extism:host/env" "error_set" (func $error_set (param i64)))

  (memory (export "memory") 1)
  ;; 16..4095 static strings, 4096.. scratch, 8192.. the input
  (data (i32.const 16) "no top-level \"target\" string in the input")

  ;; $read_input copies the whole input to 8192 (growing memory as needed)
  ;; and returns its length.
  (func $read_input (result i32)
    (local $n i32) (local $off i32) (local $need i32)
    (local.set $n (i32.wrap_i64 (call $input_length)))
    (local.set $need (i32.add (i32.const 8192) (local.get $n)))
    (if (i32.gt_u (local.get $need) (i32.shl (memory.size) (i32.const 16)))
      (then
        (if (i32.eq
              (memory.grow
                (i32.shr_u (i32.add (i32.sub (local.get $need) (i32.shl (memory.size) (i32.const 16))) (i32.const 0xffff))
                           (i32.const 16)))
              (i32.const -1))
          (then unreachable))))
    (block $words
      (loop $word
        (br_if $words (i32.gt_u (i32.add (local.get $off) (i32.const 8)) (local.get $n)))
        (i64.store (i32.add (i32.const 8192) (local.get $off))
          (call $input_load_u64 (i64.extend_i32_u (local.get $off))))
        (local.set $off (i32.add (local.get $off) (i32.const 8)))
        (br $word)))
    (block $bytes
      (loop $byte
        (br_if $bytes (i32.ge_u (local.get $off) (local.get $n)))
        (i32.store8 (i32.add (i32.const 8192) (local.get $off))
          (call $input_load_u8 (i64.extend_i32_u (local.get $off))))
        (local.set $off (i32.add (local.get $off) (i32.const 1)))
        (br $byte)))
    (local.get $n))

  ;; $to_kernel copies [p, p+n) into a new block of kernel memory and
  ;; returns the block's offset.
  (func $to_kernel (param $p i32) (param $n i32) (result i64)
    (local $k i64) (local $off i32)
    (local.set $k (call $alloc (i64.extend_i32_u (local.get $n))))
    (block $words
      (loop $word
        (br_if $words (i32.gt_u (i32.add (local.get $off) (i32.const 8)) (local.get $n)))
        (call $store_u64 (i64.add (local.get $k) (i64.extend_i32_u (local.get $off)))
          (i64.load (i32.add (local.get $p) (local.get $off))))
        (local.set $off (i32.add (local.get $off) (i32.const 8)))
        (br $word)))
    (block $bytes
      (loop $byte
        (br_if $bytes (i32.ge_u (local.get $off) (local.get $n)))
        (call $store_u8 (i64.add (local.get $k) (i64.extend_i32_u (local.get $off)))
          (i32.load8_u (i32.add (local.get $p) (local.get $off))))
        (local.set $off (i32.add (local.get $off) (i32.const 1)))
        (br $byte)))
    (local.get $k))

  (func $output (param $p i32) (param $n i32) (result i32)
    (call $output_set (call $to_kernel (local.get $p) (local.get $n)) (i64.extend_i32_u (local.get $n)))
    (i32.const 0))

  (func $fail (param $p i32) (param $n i32) (result i32)
    (call $error_set (call $to_kernel (local.get $p) (local.get $n)))
    (i32.const 1))

  (func (export "echo") (result i32)
    (call $output (i32.const 8192) (call $read_input)))

  (func (export "jsonfield") (result i32)
    (local $r i64)
    (local.set $r (call $find_target (i32.const 8192) (call $read_input)))
    (if (i64.eq (local.get $r) (i64.const -1))
      (then (return (call $fail (i32.const 16) (i32.const 41)))))
    (call $output
      (i32.wrap_i64 (i64.shr_u (local.get $r) (i64.const 32)))
      (i32.wrap_i64 (local.get $r))))

  ;; The loop of testdata/tools/cpuloop.wat, verbatim; the input is ignored.
  (func (export "cpuloop") (result i32)
    (local $i i64) (local $x i64) (local $p i32)
    (local.set $i (i64.const 100000000))
    (local.set $x (i64.const 1))
    (loop $burn
      (local.set $x
        (i64.add (i64.mul (local.get $x) (i64.const 6364136223846793005))
                 (local.get $i)))
      (local.set $i (i64.sub (local.get $i) (i64.const 1)))
      (br_if $burn (i64.ne (local.get $i) (i64.const 0))))
    ;; x as unsigned decimal, written backwards from 4160 into 4128..4159
    (local.set $p (i32.const 4160))
    (loop $digits
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p)
        (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $x) (i64.const 10)))))
      (local.set $x (i64.div_u (local.get $x) (i64.const 10)))
      (br_if $digits (i64.ne (local.get $x) (i64.const 0))))
    (call $output (local.get $p) (i32.sub (i32.const 4160) (local.get $p))))

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

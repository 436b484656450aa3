;; dirtysmall: dirtymem for a memory of one WebAssembly page, which maiden
;; zeroes whole when a call releases it (MAIDEN_ZERO_WHOLE_MAX in
;; internal/wasmtime/shim.c) instead of asking the kernel which pages are
;; resident. execute fails if it finds a mark in memory it did not write,
;; then leaves marks in four of the memory's sixteen 4 KiB pages, the last
;; eight bytes among them.
;; Host should report: success on every call, output "clean".
(module
  (memory (export "memory") 1 1)
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Fails if memory from an earlier call is visible.")
  (data (i32.const 80) "{\"type\":\"object\"}")
  (data (i32.const 112) "clean")
  (data (i32.const 128) "dirty memory from an earlier call")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (local.get $p))
  (func $str (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))
  (func $result (param $tag i32) (param $p i32) (param $n i32) (result i32)
    (i32.store8 (i32.const 4096) (local.get $tag))
    (i32.store (i32.const 4100) (local.get $p))
    (i32.store (i32.const 4104) (local.get $n))
    (i32.const 4096))
  (func (export "describe") (result i32) (call $str (i32.const 16) (i32.const 48)))
  (func (export "schema") (result i32) (call $str (i32.const 80) (i32.const 17)))
  (func (export "execute") (param i32 i32) (result i32)
    (if (i32.or
          (i32.or (i64.ne (i64.load (i32.const 12288)) (i64.const 0))
                  (i64.ne (i64.load (i32.const 32768)) (i64.const 0)))
          (i32.or (i64.ne (i64.load (i32.const 49152)) (i64.const 0))
                  (i64.ne (i64.load (i32.const 65528)) (i64.const 0))))
      (then (return (call $result (i32.const 1) (i32.const 128) (i32.const 33)))))
    (i64.store (i32.const 12288) (i64.const 0x5ec2e75ec2e7))
    (i64.store (i32.const 32768) (i64.const 0x5ec2e75ec2e7))
    (i64.store (i32.const 49152) (i64.const 0x5ec2e75ec2e7))
    (i64.store (i32.const 65528) (i64.const 0x5ec2e75ec2e7))
    (call $result (i32.const 0) (i32.const 112) (i32.const 5)))
)

;; stdout: writes "hello, stdout\n" to WASI stdout (fd 1), then
;; "hello, stderr\n" to stderr (fd 2), with preview 1's fd_write, then
;; returns ok("written"); a failed write returns err("errno N") (WASI
;; preview 1 numbering) and writes nothing more.
;; Host should report: success, output "written", the two lines on stdout
;; and stderr (the store's Output sees fd 1, then fd 2).
;;
;; The module imports wasi_snapshot_preview1, so the build wraps it with the
;; preview1 reactor adapter, which writes through wasi:cli/stdout and stderr
;; (see echo.wat for the tool ABI).
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  ;; 16.. static strings; 1024 an iovec; 1040 nwritten; 2048 "errno NN";
  ;; 4096 return area; 65536.. heap (the input, the adapter's state)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 16) "Writes a line to stdout and one to stderr. A fixture for maiden's own tests.")
  (data (i32.const 128) "{}")
  (data (i32.const 160) "hello, stdout\n")
  (data (i32.const 192) "hello, stderr\n")
  (data (i32.const 224) "written")
  (data (i32.const 2048) "errno ")

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

  ;; Each call is a fresh instance: nothing to reset after a result.
  (func (export "cabi_post_describe") (param i32))
  (func (export "cabi_post_schema") (param i32))
  (func (export "cabi_post_execute") (param i32))

  (func $ret_string (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))
  (func $ret_result (param $tag i32) (param $p i32) (param $n i32) (result i32)
    (i32.store8 (i32.const 4096) (local.get $tag))
    (i32.store (i32.const 4100) (local.get $p))
    (i32.store (i32.const 4104) (local.get $n))
    (i32.const 4096))
  ;; err("errno N"), N < 100
  (func $errno (param $e i32) (result i32)
    (if (i32.ge_u (local.get $e) (i32.const 10))
      (then
        (i32.store8 (i32.const 2054) (i32.add (i32.const 48) (i32.div_u (local.get $e) (i32.const 10))))
        (i32.store8 (i32.const 2055) (i32.add (i32.const 48) (i32.rem_u (local.get $e) (i32.const 10))))
        (return (call $ret_result (i32.const 1) (i32.const 2048) (i32.const 8)))))
    (i32.store8 (i32.const 2054) (i32.add (i32.const 48) (local.get $e)))
    (call $ret_result (i32.const 1) (i32.const 2048) (i32.const 7)))
  ;; write(fd, p, n): fd_write of one iovec; its errno (0 on success)
  (func $write (param $fd i32) (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 1024) (local.get $p))
    (i32.store (i32.const 1028) (local.get $n))
    (call $fd_write (local.get $fd) (i32.const 1024) (i32.const 1) (i32.const 1040)))

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 76)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 128) (i32.const 2)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (local $e i32)
    (local.set $e (call $write (i32.const 1) (i32.const 160) (i32.const 14)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (local.set $e (call $write (i32.const 2) (i32.const 192) (i32.const 14)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (call $ret_result (i32.const 0) (i32.const 224) (i32.const 7)))
)

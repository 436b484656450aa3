;; fsescape: a hostile tool that asks WASI for a path exactly as given, with
;; nothing in between (a Go or JS runtime cleans `..` out of a path before
;; WASI sees it; this does not). Its input is not JSON: it is the raw path,
;; opened relative to the first preopened directory (fd 3), following
;; symlinks; execute returns the first 4 KiB of the file as ok, or
;; "errno N" (WASI preview 1 numbering) as err. With no preopened directory
;; fd 3 does not exist: errno 8 (badf).
;;
;; The module imports wasi_snapshot_preview1, so the build wraps it with the
;; preview1 reactor adapter (see echo.wat for the tool ABI).
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read"
    (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  ;; 16.. static strings; 1024 the opened fd; 1032 an iovec; 1048 nread;
  ;; 2048 "errno NN"; 4096 return area; 8192..12287 the read buffer;
  ;; 65536.. heap (the input, the adapter's state)
  (global $heap (mut i32) (i32.const 65536))
  (data (i32.const 16) "Opens a raw WASI path under the first preopened directory. A fixture for maiden's own tests.")
  (data (i32.const 128) "{}")
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

  (func (export "describe") (result i32)
    (call $ret_string (i32.const 16) (i32.const 92)))
  (func (export "schema") (result i32)
    (call $ret_string (i32.const 128) (i32.const 2)))

  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (local $e i32)
    ;; path_open(fd 3, LOOKUP_SYMLINK_FOLLOW, path, no oflags,
    ;;           rights fd_read (2), inheriting 0, no fdflags, &fd)
    (local.set $e (call $path_open (i32.const 3) (i32.const 1)
      (local.get $in) (local.get $len) (i32.const 0)
      (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 1024)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (i32.store (i32.const 1032) (i32.const 8192))
    (i32.store (i32.const 1036) (i32.const 4096))
    (local.set $e (call $fd_read (i32.load (i32.const 1024)) (i32.const 1032) (i32.const 1) (i32.const 1048)))
    (if (local.get $e) (then (return (call $errno (local.get $e)))))
    (call $ret_result (i32.const 0) (i32.const 8192) (i32.load (i32.const 1048))))
)

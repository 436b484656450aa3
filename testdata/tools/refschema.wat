;; refschema: a tool whose schema() refers to a file on the host
;; (/tmp/maiden-refschema-target.json, which the test creates as a valid schema).
;; If maiden followed the reference, the schema would compile and the tool would
;; be served; it must not read host files on a tool's behalf.
;; Host should report: invalid (at load, in maiden tools/check, and on call).
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "Its schema refers to a local file, which the host must not read.")
  (data (i32.const 256) "{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"file:///tmp/maiden-refschema-target.json\"}}}")
  (data (i32.const 1024) "ran anyway")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $heap) (i32.const 7)) (i32.const -8)))
    (global.set $heap (i32.add (local.get $p) (local.get 3)))
    (local.get $p))
  (func $str (param $p i32) (param $n i32) (result i32)
    (i32.store (i32.const 4096) (local.get $p))
    (i32.store (i32.const 4100) (local.get $n))
    (i32.const 4096))
  (func (export "describe") (result i32) (call $str (i32.const 16) (i32.const 64)))
  (func (export "schema") (result i32) (call $str (i32.const 256) (i32.const 88)))
  (func (export "execute") (param i32 i32) (result i32)
    (i32.store8 (i32.const 4096) (i32.const 0))
    (i32.store (i32.const 4100) (i32.const 1024))
    (i32.store (i32.const 4104) (i32.const 10))
    (i32.const 4096))
)

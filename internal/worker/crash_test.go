package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/maiden-run/maiden/internal/sandbox"
	"github.com/maiden-run/maiden/internal/testkit"
	"github.com/maiden-run/maiden/internal/toolbuild"
)

// crashWAT writes the hardening issue's fourth finding: a valid tool whose
// one function keeps 190 i64 locals live across 100,000 branches. wasmtime
// 39's code generator panics on it (an index out of bounds in cranelift)
// and, in process, aborts maiden.
func crashWAT() string {
	const locals, branches = 190, 100_000
	var b strings.Builder
	b.WriteString(`(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 8192))
  (data (i32.const 16) "crash")
  (data (i32.const 64) "{\"type\":\"object\"}")
  (func $realloc (export "cabi_realloc") (param i32 i32 i32 i32) (result i32) (local $p i32)
    (local.set $p (global.get $heap)) (global.set $heap (i32.add (global.get $heap) (local.get 3))) (local.get $p))
  (func (export "cabi_post_describe") (param i32))
  (func (export "cabi_post_schema") (param i32))
  (func (export "cabi_post_execute") (param i32))
  (func (export "describe") (result i32)
    (i32.store (i32.const 4096) (i32.const 16)) (i32.store (i32.const 4100) (i32.const 5)) (i32.const 4096))
  (func (export "schema") (result i32)
    (i32.store (i32.const 4096) (i32.const 64)) (i32.store (i32.const 4100) (i32.const 17)) (i32.const 4096))
  (func $big (param $x i32) (result i64)
`)
	for i := range locals {
		fmt.Fprintf(&b, "    (local $l%d i64)\n", i)
	}
	for i := range locals {
		fmt.Fprintf(&b, "    (local.set $l%d (i64.extend_i32_u (i32.add (local.get $x) (i32.const %d))))\n", i, i)
	}
	for k := range branches {
		a, c := k%locals, (k*7+3)%locals
		fmt.Fprintf(&b, "    (if (i32.and (local.get $x) (i32.const %d)) (then (local.set $l%d (i64.add (local.get $l%d) (local.get $l%d)))))\n", k%31+1, a, a, c)
	}
	sum := "(local.get $l0)"
	for i := 1; i < locals; i++ {
		sum = fmt.Sprintf("(i64.add %s (local.get $l%d))", sum, i)
	}
	fmt.Fprintf(&b, "    %s)\n", sum)
	b.WriteString(`  (func (export "execute") (param $in i32) (param $len i32) (result i32)
    (drop (call $big (local.get $len)))
    (i32.store8 (i32.const 4096) (i32.const 0)) (i32.store (i32.const 4100) (i32.const 16))
    (i32.store (i32.const 4104) (i32.const 5)) (i32.const 4096))
)
`)
	return b.String()
}

// TestCodeGeneratorCrashIsInvalid compiles the real crashing component in
// a compile worker: the call is kind invalid, naming the compiler's
// failure, and the pool goes on serving.
func TestCodeGeneratorCrashIsInvalid(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("compiles a 1.6 MB function (tens of seconds)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tc, err := toolbuild.EnsureToolchain(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := tc.ComponentFromWAT(ctx, []byte(crashWAT()))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "crash.wasm")
	if err := os.WriteFile(path, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	p := newPool(t, nil)
	_, err = p.Open(ctx, path, lim)
	if !errors.Is(err, sandbox.ErrInvalidTool) || !strings.Contains(err.Error(), "compiler failed") {
		t.Fatalf("err = %v, want invalid: the compiler failed", err)
	}
	t.Logf("%v", err)
	if out := call(t, p, testkit.Component(t, "echo"), `{"message":"after"}`, lim); out.Failure != nil {
		t.Fatalf("pool broken after the compiler crash: %+v", out)
	}
}

package wasmtime

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// capi.h declares the part of wasmtime's C API this package uses, written
// by us. These tests hold it to the real headers of the wasmtime-go version
// in go.mod, in three ways:
//
//   - layouts: both headers are compiled with debug information and every
//     typedef capi.h declares is compared, through DWARF, with the real one
//     of the same name: size, tags, every member's name, offset and type,
//     recursively through pointers and function pointer types;
//   - constants: every enumerator in capi.h becomes a static assertion
//     compiled against the real headers;
//   - prototypes: capi.h's function declarations (and its opaque typedefs)
//     are compiled again after the real headers, where C requires every
//     redeclaration to have a compatible type.
//
// TestCAPICheckCatchesDrift shows each check failing on a deliberately
// wrong copy of capi.h.

const wasmtimeGoModule = "github.com/bytecodealliance/wasmtime-go/v39"

// realInclude returns the include directory of the wasmtime-go module that
// go.mod selects, downloading it if needed.
func realInclude(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", wasmtimeGoModule)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v: %s", wasmtimeGoModule, err, stderr.String())
	}
	var info struct{ Dir, Version, Error string }
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("go mod download output: %v", err)
	}
	if info.Error != "" || info.Dir == "" {
		t.Fatalf("go mod download %s: %s", wasmtimeGoModule, info.Error)
	}
	inc := filepath.Join(info.Dir, "build", "include")
	if _, err := os.Stat(filepath.Join(inc, "wasmtime.h")); err != nil {
		t.Fatalf("%s@%s has no C headers: %v", wasmtimeGoModule, info.Version, err)
	}
	return inc
}

func cc(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "CC").Output()
	c := strings.TrimSpace(string(out))
	if err != nil || c == "" {
		c = "gcc"
	}
	if _, err := exec.LookPath(strings.Fields(c)[0]); err != nil {
		t.Fatalf("C compiler %q not found (cgo needs it too): %v", c, err)
	}
	return c
}

func TestCAPIMatchesWasmtimeHeaders(t *testing.T) {
	inc := realInclude(t)
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	compiler := cc(t)
	problems, stats := checkCAPI(t, compiler, filepath.Join(here, "capi.h"), inc)
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("compared %d typedefs, %d constants and the prototypes in capi.h with %s, compiled by %s", stats.typedefs, stats.constants, inc, compiler)
	// Guard against a check that passes because it compared nothing (say, a
	// compiler that stopped emitting unused types).
	if stats.typedefs < 50 || stats.constants < 50 {
		t.Errorf("only %d typedefs and %d constants found in capi.h's debug information", stats.typedefs, stats.constants)
	}
}

// TestCAPICheckCatchesDrift breaks a copy of capi.h in one way at a time,
// each a mistake a hand-written header could make, and requires the check
// to report it.
func TestCAPICheckCatchesDrift(t *testing.T) {
	inc := realInclude(t)
	compiler := cc(t)
	orig, err := os.ReadFile("capi.h")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct{ name, old, new, want string }{
		{"constant value", "WASMTIME_COMPONENT_FLAGS = 20", "WASMTIME_COMPONENT_FLAGS = 21", "WASMTIME_COMPONENT_FLAGS"},
		{"member order", "  bool is_ok;\n  struct wasmtime_component_val *val;", "  struct wasmtime_component_val *val;\n  bool is_ok;", "wasmtime_component_valresult_t"},
		{"member type of the same size", "uint32_t character;", "int32_t character;", "character"},
		{"flattened nested struct", "  struct {\n    uint64_t store_id;\n    uint32_t opaque_instance;\n  };", "  uint64_t store_id;\n  uint32_t opaque_instance;", "wasmtime_component_func_t"},
		{"missing union member", "  wasmtime_component_resource_any_t *resource;\n} wasmtime_component_valunion_t;", "} wasmtime_component_valunion_t;", "wasmtime_component_valunion_t"},
		{"callback parameter", "typedef wasmtime_error_t *(*wasmtime_memory_grow_callback_t)(void *env,\n                                                             size_t new_size);", "typedef wasmtime_error_t *(*wasmtime_memory_grow_callback_t)(void *env,\n                                                             uint32_t new_size);", "wasmtime_memory_grow_callback_t"},
		{"prototype parameter", "bool wasmtime_error_exit_status(const wasmtime_error_t *error, int *status);", "bool wasmtime_error_exit_status(const wasmtime_error_t *error, long *status);", "wasmtime_error_exit_status"},
		{"prototype const", "void wasmtime_component_val_delete(wasmtime_component_val_t *value);", "void wasmtime_component_val_delete(const wasmtime_component_val_t *value);", "wasmtime_component_val_delete"},
		{"prototype return", "size_t wasmtime_component_func_type_param_count(", "uint32_t wasmtime_component_func_type_param_count(", "wasmtime_component_func_type_param_count"},
		{"opaque tag", "typedef struct wasmtime_store wasmtime_store_t;", "typedef struct wasmtime_store_t wasmtime_store_t;", "wasmtime_store_t"},
	} {
		t.Run(m.name, func(t *testing.T) {
			if bytes.Count(orig, []byte(m.old)) != 1 {
				t.Fatalf("capi.h changed: %q is not there exactly once; update this mutation", m.old)
			}
			dir := t.TempDir()
			bad := filepath.Join(dir, "capi.h")
			if err := os.WriteFile(bad, bytes.Replace(orig, []byte(m.old), []byte(m.new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			problems, _ := checkCAPI(t, compiler, bad, inc)
			if len(problems) == 0 {
				t.Fatalf("the check accepted capi.h with a wrong %s", m.name)
			}
			joined := strings.Join(problems, "\n")
			t.Logf("reported:\n%s", firstLines(joined, 6))
			if !strings.Contains(joined, m.want) {
				t.Errorf("the check failed, but without naming %s:\n%s", m.want, joined)
			}
		})
	}
}

type capiStats struct{ typedefs, constants int }

// checkCAPI compares the header at ours with the real headers in inc and
// returns the differences it found.
func checkCAPI(t *testing.T, compiler, ours, inc string) (problems []string, stats capiStats) {
	t.Helper()
	dir := t.TempDir()
	ourDir := filepath.Dir(ours)
	compile := func(name, src string, flags ...string) (string, error) {
		c := filepath.Join(dir, name+".c")
		o := filepath.Join(dir, name+".o")
		if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		args := append(strings.Fields(compiler)[1:], "-std=gnu11", "-c", "-o", o)
		args = append(args, flags...)
		args = append(args, c)
		out, err := exec.Command(strings.Fields(compiler)[0], args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s: %v\n%s", name, err, out)
		}
		return o, nil
	}
	debug := []string{"-g", "-fno-eliminate-unused-debug-types", "-O0"}

	// Layouts, through debug information.
	ourObj, err := compile("ours", "#include \"capi.h\"\n", append(debug, "-I"+ourDir)...)
	if err != nil {
		return []string{"capi.h does not compile on its own: " + err.Error()}, stats
	}
	realObj, err := compile("real", "#include <wasi.h>\n#include <wasmtime.h>\n", append(debug, "-I"+inc)...)
	if err != nil {
		t.Fatalf("the real headers do not compile: %v", err)
	}
	ourTypes, consts, err := readDWARF(ourObj, "capi.h")
	if err != nil {
		t.Fatal(err)
	}
	realTypes, _, err := readDWARF(realObj, "")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(ourTypes.typedefs))
	for n := range ourTypes.typedefs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		stats.typedefs++
		rt, ok := realTypes.typedefs[n]
		if !ok {
			problems = append(problems, fmt.Sprintf("typedef %s: not in the real headers", n))
			continue
		}
		if err := sameType(ourTypes.typedefs[n], rt, map[[2]dwarf.Type]bool{}, n); err != nil {
			problems = append(problems, fmt.Sprintf("typedef %s: %v", n, err))
		}
	}

	// Constants, as static assertions against the real headers. One file
	// per constant would be slow; one file reports every failing assertion.
	var src strings.Builder
	src.WriteString("#include <wasi.h>\n#include <wasmtime.h>\n")
	cnames := make([]string, 0, len(consts))
	for n := range consts {
		cnames = append(cnames, n)
	}
	sort.Strings(cnames)
	for _, n := range cnames {
		stats.constants++
		// No #ifndef guard: some constants are enumerators, not macros (the
		// WASI permission flags); a name the real headers lack is an
		// undeclared identifier, which fails the assertion naming it.
		fmt.Fprintf(&src, "_Static_assert((%[1]s) == %[2]d, \"%[1]s is %[2]d in capi.h\");\n", n, consts[n])
	}
	if _, err := compile("constants", src.String(), "-I"+inc, "-fmax-errors=0"); err != nil {
		problems = append(problems, "constants differ: "+err.Error())
	}

	// Prototypes and opaque typedefs, redeclared after the real ones.
	if _, err := compile("prototypes", "#include <wasi.h>\n#include <wasmtime.h>\n#define MAIDEN_CAPI_PROTOTYPES_ONLY\n#include \"capi.h\"\n",
		"-I"+inc, "-I"+ourDir, "-Wall", "-Werror", "-fmax-errors=0"); err != nil {
		problems = append(problems, "declarations conflict with the real headers: "+err.Error())
	}
	return problems, stats
}

type dwarfTypes struct {
	typedefs map[string]dwarf.Type
}

// readDWARF returns the typedefs an object's debug information describes
// and the values of its enumerators. With onlyFile set, only those declared
// in a file of that name count.
func readDWARF(obj, onlyFile string) (dwarfTypes, map[string]int64, error) {
	f, err := elf.Open(obj)
	if err != nil {
		return dwarfTypes{}, nil, err
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		return dwarfTypes{}, nil, fmt.Errorf("%s: %w", obj, err)
	}
	types := dwarfTypes{typedefs: map[string]dwarf.Type{}}
	consts := map[string]int64{}
	var files []*dwarf.LineFile
	inFile := func(e *dwarf.Entry) bool {
		if onlyFile == "" {
			return true
		}
		i, ok := e.Val(dwarf.AttrDeclFile).(int64)
		return ok && i >= 0 && int(i) < len(files) && files[i] != nil && filepath.Base(files[i].Name) == onlyFile
	}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return types, nil, err
		}
		if e == nil {
			break
		}
		switch e.Tag {
		case dwarf.TagCompileUnit:
			lr, err := d.LineReader(e)
			if err != nil || lr == nil {
				return types, nil, fmt.Errorf("%s: no line table: %v", obj, err)
			}
			files = lr.Files()
			continue // its children are the declarations
		case dwarf.TagTypedef:
			if name, _ := e.Val(dwarf.AttrName).(string); name != "" && inFile(e) {
				t, err := d.Type(e.Offset)
				if err != nil {
					return types, nil, err
				}
				types.typedefs[name] = t
			}
		case dwarf.TagEnumerationType:
			if inFile(e) && e.Children {
				for {
					c, err := r.Next()
					if err != nil {
						return types, nil, err
					}
					if c == nil || c.Tag == 0 {
						break
					}
					name, _ := c.Val(dwarf.AttrName).(string)
					switch v := c.Val(dwarf.AttrConstValue).(type) {
					case int64:
						consts[name] = v
					case uint64:
						consts[name] = int64(v)
					}
				}
				continue
			}
		}
		r.SkipChildren()
	}
	return types, consts, nil
}

func stripTypedefs(t dwarf.Type) dwarf.Type {
	for {
		td, ok := t.(*dwarf.TypedefType)
		if !ok {
			return t
		}
		t = td.Type
	}
}

// sameType reports how a (ours) differs from b (real). Typedef names do not
// matter, what they stand for does. Struct and union tags, member names
// (except ours named opaque*, placeholders for private members), member
// offsets and types must match; an opaque type of ours (declared, never
// defined) matches any type with the same tag.
func sameType(a, b dwarf.Type, seen map[[2]dwarf.Type]bool, path string) error {
	a, b = stripTypedefs(a), stripTypedefs(b)
	key := [2]dwarf.Type{a, b}
	if seen[key] {
		return nil
	}
	seen[key] = true
	if reflect.TypeOf(a) != reflect.TypeOf(b) {
		return fmt.Errorf("%s: %s in capi.h, %s in wasmtime", path, a, b)
	}
	switch x := a.(type) {
	case *dwarf.StructType:
		y := b.(*dwarf.StructType)
		if x.Kind != y.Kind || x.StructName != y.StructName {
			return fmt.Errorf("%s: %s %s in capi.h, %s %s in wasmtime", path, x.Kind, x.StructName, y.Kind, y.StructName)
		}
		if x.Incomplete {
			return nil
		}
		if y.Incomplete {
			return fmt.Errorf("%s: defined in capi.h, opaque in wasmtime", path)
		}
		if x.ByteSize != y.ByteSize {
			return fmt.Errorf("%s: %d bytes in capi.h, %d in wasmtime", path, x.ByteSize, y.ByteSize)
		}
		if len(x.Field) != len(y.Field) {
			return fmt.Errorf("%s: %d members in capi.h, %d in wasmtime", path, len(x.Field), len(y.Field))
		}
		var errs []error
		for i := range x.Field {
			fx, fy := x.Field[i], y.Field[i]
			p := path + "." + fx.Name
			if fx.Name == "" {
				p = fmt.Sprintf("%s.<member %d>", path, i)
			}
			if fx.Name != fy.Name && !strings.HasPrefix(fx.Name, "opaque") {
				errs = append(errs, fmt.Errorf("%s: member %d is %q in wasmtime", p, i, fy.Name))
				continue
			}
			if fx.ByteOffset != fy.ByteOffset || fx.BitSize != fy.BitSize || fx.BitOffset != fy.BitOffset || fx.DataBitOffset != fy.DataBitOffset {
				errs = append(errs, fmt.Errorf("%s: at offset %d in capi.h, %d in wasmtime", p, fx.ByteOffset, fy.ByteOffset))
				continue
			}
			if err := sameType(fx.Type, fy.Type, seen, p); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	case *dwarf.PtrType:
		return sameType(x.Type, b.(*dwarf.PtrType).Type, seen, path+"*")
	case *dwarf.QualType:
		y := b.(*dwarf.QualType)
		if x.Qual != y.Qual {
			return fmt.Errorf("%s: %s in capi.h, %s in wasmtime", path, x, y)
		}
		return sameType(x.Type, y.Type, seen, path)
	case *dwarf.ArrayType:
		y := b.(*dwarf.ArrayType)
		if x.Count != y.Count {
			return fmt.Errorf("%s: %s in capi.h, %s in wasmtime", path, x, y)
		}
		return sameType(x.Type, y.Type, seen, path+"[]")
	case *dwarf.FuncType:
		y := b.(*dwarf.FuncType)
		if len(x.ParamType) != len(y.ParamType) {
			return fmt.Errorf("%s: %s in capi.h, %s in wasmtime", path, x, y)
		}
		var errs []error
		if err := sameType(x.ReturnType, y.ReturnType, seen, path+"()"); err != nil {
			errs = append(errs, err)
		}
		for i := range x.ParamType {
			if err := sameType(x.ParamType[i], y.ParamType[i], seen, fmt.Sprintf("%s(param %d)", path, i)); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	case *dwarf.EnumType:
		if x.ByteSize != b.Size() {
			return fmt.Errorf("%s: enum of %d bytes in capi.h, %d in wasmtime", path, x.ByteSize, b.Size())
		}
		return nil
	case *dwarf.VoidType, *dwarf.DotDotDotType:
		return nil
	}
	// Basic types: int, unsigned char, float, _Bool, ...
	if a.Size() != b.Size() || a.Common().Name != b.Common().Name {
		return fmt.Errorf("%s: %s (%d bytes) in capi.h, %s (%d bytes) in wasmtime", path, a, a.Size(), b, b.Size())
	}
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

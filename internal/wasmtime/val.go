package wasmtime

/*
#include "shim.h"
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"unicode/utf8"
	"unsafe"
)

// Kind is the kind of a component value. The numbering is wasmtime's.
type Kind uint8

// Value kinds. Resources are not supported: maiden's world has none.
const (
	KindBool    Kind = C.WASMTIME_COMPONENT_BOOL
	KindS8      Kind = C.WASMTIME_COMPONENT_S8
	KindU8      Kind = C.WASMTIME_COMPONENT_U8
	KindS16     Kind = C.WASMTIME_COMPONENT_S16
	KindU16     Kind = C.WASMTIME_COMPONENT_U16
	KindS32     Kind = C.WASMTIME_COMPONENT_S32
	KindU32     Kind = C.WASMTIME_COMPONENT_U32
	KindS64     Kind = C.WASMTIME_COMPONENT_S64
	KindU64     Kind = C.WASMTIME_COMPONENT_U64
	KindF32     Kind = C.WASMTIME_COMPONENT_F32
	KindF64     Kind = C.WASMTIME_COMPONENT_F64
	KindChar    Kind = C.WASMTIME_COMPONENT_CHAR
	KindString  Kind = C.WASMTIME_COMPONENT_STRING
	KindList    Kind = C.WASMTIME_COMPONENT_LIST
	KindRecord  Kind = C.WASMTIME_COMPONENT_RECORD
	KindTuple   Kind = C.WASMTIME_COMPONENT_TUPLE
	KindVariant Kind = C.WASMTIME_COMPONENT_VARIANT
	KindEnum    Kind = C.WASMTIME_COMPONENT_ENUM
	KindOption  Kind = C.WASMTIME_COMPONENT_OPTION
	KindResult  Kind = C.WASMTIME_COMPONENT_RESULT
	KindFlags   Kind = C.WASMTIME_COMPONENT_FLAGS
)

var kindNames = map[Kind]string{
	KindBool: "bool", KindS8: "s8", KindU8: "u8", KindS16: "s16", KindU16: "u16",
	KindS32: "s32", KindU32: "u32", KindS64: "s64", KindU64: "u64", KindF32: "f32",
	KindF64: "f64", KindChar: "char", KindString: "string", KindList: "list",
	KindRecord: "record", KindTuple: "tuple", KindVariant: "variant", KindEnum: "enum",
	KindOption: "option", KindResult: "result", KindFlags: "flags",
}

func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ErrValue reports a value that cannot cross the boundary: an unsupported
// kind, invalid UTF-8 in a string, an out-of-range number.
var ErrValue = errors.New("wasmtime: invalid component value")

// Val is a component-model value. Only the fields of its Kind are used.
type Val struct {
	Kind Kind

	Bool  bool
	Int   int64   // s8, s16, s32, s64
	Uint  uint64  // u8, u16, u32, u64
	Float float64 // f32, f64
	Char  rune
	Str   string // string
	Case  string // variant and enum: the case name

	// Bytes holds a list<u8>. A list arriving from a guest whose elements are
	// all u8 is always returned here; List is then nil.
	Bytes []byte
	// List holds the elements of a list or a tuple.
	List []Val
	// Fields holds a record's fields in declaration order.
	Fields []Field
	// Flags holds the names of the flags that are set.
	Flags []string

	// Payload is the payload of a variant case, a some option (nil means
	// none), or a result (nil means no payload).
	Payload *Val
	// OK tells a result's ok from its err.
	OK bool
}

// Field is one named field of a record.
type Field struct {
	Name string
	Val  Val
}

// Constructors for the kinds maiden uses.

func String(s string) Val              { return Val{Kind: KindString, Str: s} }
func Bytes(b []byte) Val               { return Val{Kind: KindList, Bytes: b} }
func U8(v uint8) Val                   { return Val{Kind: KindU8, Uint: uint64(v)} }
func U16(v uint16) Val                 { return Val{Kind: KindU16, Uint: uint64(v)} }
func U32(v uint32) Val                 { return Val{Kind: KindU32, Uint: uint64(v)} }
func S32(v int32) Val                  { return Val{Kind: KindS32, Int: int64(v)} }
func Bool(v bool) Val                  { return Val{Kind: KindBool, Bool: v} }
func List(vs ...Val) Val               { return Val{Kind: KindList, List: vs} }
func Tuple(vs ...Val) Val              { return Val{Kind: KindTuple, List: vs} }
func Record(fs ...Field) Val           { return Val{Kind: KindRecord, Fields: fs} }
func Enum(c string) Val                { return Val{Kind: KindEnum, Case: c} }
func Variant(c string, p *Val) Val     { return Val{Kind: KindVariant, Case: c, Payload: p} }
func Some(v Val) Val                   { return Val{Kind: KindOption, Payload: &v} }
func None() Val                        { return Val{Kind: KindOption} }
func Ok(v *Val) Val                    { return Val{Kind: KindResult, OK: true, Payload: v} }
func Err(v *Val) Val                   { return Val{Kind: KindResult, Payload: v} }
func FieldOf(name string, v Val) Field { return Field{Name: name, Val: v} }

// Field returns the record field with the given name.
func (v Val) Field(name string) (Val, bool) {
	for _, f := range v.Fields {
		if f.Name == name {
			return f.Val, true
		}
	}
	return Val{}, false
}

// AsBytes returns a list<u8> as bytes, whichever way it is stored.
func (v Val) AsBytes() ([]byte, bool) {
	if v.Kind != KindList {
		return nil, false
	}
	if v.Bytes != nil || len(v.List) == 0 {
		return v.Bytes, true
	}
	b := make([]byte, len(v.List))
	for i, e := range v.List {
		if e.Kind != KindU8 {
			return nil, false
		}
		b[i] = byte(e.Uint)
	}
	return b, true
}

// maxDepth bounds recursion over values so that a deeply nested value (from
// a fuzzer, or from a future guest) cannot exhaust the goroutine stack.
const maxDepth = 100

// ---- C → Go ----------------------------------------------------------------

// valFromC copies a C value into Go memory. It neither frees nor modifies the
// C value.
func valFromC(c *C.wasmtime_component_val_t) (Val, error) {
	return valFromCDepth(c, 0)
}

func valFromCDepth(c *C.wasmtime_component_val_t, depth int) (Val, error) {
	if depth > maxDepth {
		return Val{}, fmt.Errorf("%w: nested deeper than %d", ErrValue, maxDepth)
	}
	k := Kind(c.kind)
	u := unsafe.Pointer(&c.of)
	v := Val{Kind: k}
	switch k {
	case KindBool:
		v.Bool = bool(*(*C.bool)(u))
	case KindS8:
		v.Int = int64(*(*C.int8_t)(u))
	case KindS16:
		v.Int = int64(*(*C.int16_t)(u))
	case KindS32:
		v.Int = int64(*(*C.int32_t)(u))
	case KindS64:
		v.Int = int64(*(*C.int64_t)(u))
	case KindU8:
		v.Uint = uint64(*(*C.uint8_t)(u))
	case KindU16:
		v.Uint = uint64(*(*C.uint16_t)(u))
	case KindU32:
		v.Uint = uint64(*(*C.uint32_t)(u))
	case KindU64:
		v.Uint = uint64(*(*C.uint64_t)(u))
	case KindF32:
		v.Float = float64(*(*C.float)(u))
	case KindF64:
		v.Float = float64(*(*C.double)(u))
	case KindChar:
		v.Char = rune(*(*C.uint32_t)(u))
	case KindString:
		v.Str = goString((*C.wasm_name_t)(u))
	case KindEnum:
		v.Case = goString((*C.wasm_name_t)(u))
	case KindList:
		l := (*C.wasmtime_component_vallist_t)(u)
		if l.size > 0 {
			b := make([]byte, int(l.size))
			if C.maiden_val_list_to_bytes(l, (*C.uint8_t)(unsafe.Pointer(&b[0]))) == 1 {
				v.Bytes = b
				break
			}
		}
		elems, err := valsFromC(l.data, l.size, depth)
		if err != nil {
			return Val{}, err
		}
		v.List = elems
	case KindTuple:
		t := (*C.wasmtime_component_valtuple_t)(u)
		elems, err := valsFromC(t.data, t.size, depth)
		if err != nil {
			return Val{}, err
		}
		v.List = elems
	case KindRecord:
		r := (*C.wasmtime_component_valrecord_t)(u)
		if r.size > 0 {
			entries := unsafe.Slice(r.data, int(r.size))
			v.Fields = make([]Field, len(entries))
			for i := range entries {
				fv, err := valFromCDepth(&entries[i].val, depth+1)
				if err != nil {
					return Val{}, err
				}
				v.Fields[i] = Field{Name: goString(&entries[i].name), Val: fv}
			}
		}
	case KindVariant:
		vv := (*C.wasmtime_component_valvariant_t)(u)
		v.Case = goString(&vv.discriminant)
		if vv.val != nil {
			p, err := valFromCDepth(vv.val, depth+1)
			if err != nil {
				return Val{}, err
			}
			v.Payload = &p
		}
	case KindOption:
		p := *(**C.wasmtime_component_val_t)(u)
		if p != nil {
			pv, err := valFromCDepth(p, depth+1)
			if err != nil {
				return Val{}, err
			}
			v.Payload = &pv
		}
	case KindResult:
		r := (*C.wasmtime_component_valresult_t)(u)
		v.OK = bool(r.is_ok)
		if r.val != nil {
			pv, err := valFromCDepth(r.val, depth+1)
			if err != nil {
				return Val{}, err
			}
			v.Payload = &pv
		}
	case KindFlags:
		f := (*C.wasmtime_component_valflags_t)(u)
		if f.size > 0 {
			names := unsafe.Slice(f.data, int(f.size))
			v.Flags = make([]string, len(names))
			for i := range names {
				v.Flags[i] = goString(&names[i])
			}
		}
	default:
		return Val{}, fmt.Errorf("%w: unsupported kind %s", ErrValue, k)
	}
	return v, nil
}

func valsFromC(data *C.wasmtime_component_val_t, n C.size_t, depth int) ([]Val, error) {
	if n == 0 {
		return nil, nil
	}
	cs := unsafe.Slice(data, int(n))
	out := make([]Val, len(cs))
	for i := range cs {
		v, err := valFromCDepth(&cs[i], depth+1)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func goString(n *C.wasm_name_t) string {
	if n.size == 0 {
		return ""
	}
	return C.GoStringN((*C.char)(unsafe.Pointer(n.data)), C.int(n.size))
}

// ---- Go → C ----------------------------------------------------------------

// checkVal validates v without allocating C memory, so that a conversion
// that would fail is refused before anything is written for wasmtime.
func checkVal(v *Val, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: nested deeper than %d", ErrValue, maxDepth)
	}
	switch v.Kind {
	case KindBool, KindS64, KindU64, KindF32, KindF64:
	case KindS8:
		if v.Int < math.MinInt8 || v.Int > math.MaxInt8 {
			return fmt.Errorf("%w: %d out of range for s8", ErrValue, v.Int)
		}
	case KindS16:
		if v.Int < math.MinInt16 || v.Int > math.MaxInt16 {
			return fmt.Errorf("%w: %d out of range for s16", ErrValue, v.Int)
		}
	case KindS32:
		if v.Int < math.MinInt32 || v.Int > math.MaxInt32 {
			return fmt.Errorf("%w: %d out of range for s32", ErrValue, v.Int)
		}
	case KindU8:
		if v.Uint > math.MaxUint8 {
			return fmt.Errorf("%w: %d out of range for u8", ErrValue, v.Uint)
		}
	case KindU16:
		if v.Uint > math.MaxUint16 {
			return fmt.Errorf("%w: %d out of range for u16", ErrValue, v.Uint)
		}
	case KindU32:
		if v.Uint > math.MaxUint32 {
			return fmt.Errorf("%w: %d out of range for u32", ErrValue, v.Uint)
		}
	case KindChar:
		if !utf8.ValidRune(v.Char) {
			return fmt.Errorf("%w: %U is not a Unicode scalar value", ErrValue, v.Char)
		}
	case KindString:
		if !utf8.ValidString(v.Str) {
			return fmt.Errorf("%w: string is not valid UTF-8", ErrValue)
		}
	case KindEnum:
		if !utf8.ValidString(v.Case) {
			return fmt.Errorf("%w: enum case is not valid UTF-8", ErrValue)
		}
	case KindList, KindTuple:
		if v.Kind == KindList && v.Bytes != nil && len(v.List) > 0 {
			return fmt.Errorf("%w: list has both Bytes and List", ErrValue)
		}
		for i := range v.List {
			if err := checkVal(&v.List[i], depth+1); err != nil {
				return err
			}
		}
	case KindRecord:
		for i := range v.Fields {
			if !utf8.ValidString(v.Fields[i].Name) {
				return fmt.Errorf("%w: field name is not valid UTF-8", ErrValue)
			}
			if err := checkVal(&v.Fields[i].Val, depth+1); err != nil {
				return err
			}
		}
	case KindVariant, KindOption, KindResult:
		if v.Kind == KindVariant && !utf8.ValidString(v.Case) {
			return fmt.Errorf("%w: variant case is not valid UTF-8", ErrValue)
		}
		if v.Payload != nil {
			return checkVal(v.Payload, depth+1)
		}
	case KindFlags:
		for _, f := range v.Flags {
			if !utf8.ValidString(f) {
				return fmt.Errorf("%w: flag name is not valid UTF-8", ErrValue)
			}
		}
	default:
		return fmt.Errorf("%w: unsupported kind %s", ErrValue, v.Kind)
	}
	return nil
}

// valToC writes v into out, allocating every nested part with wasmtime's
// allocators so that wasmtime (or wasmtime_component_val_delete) can free it.
// v must have passed checkVal.
func valToC(v *Val, out *C.wasmtime_component_val_t) {
	out.kind = C.wasmtime_component_valkind_t(v.Kind)
	u := unsafe.Pointer(&out.of)
	switch v.Kind {
	case KindBool:
		*(*C.bool)(u) = C.bool(v.Bool)
	case KindS8:
		*(*C.int8_t)(u) = C.int8_t(v.Int)
	case KindS16:
		*(*C.int16_t)(u) = C.int16_t(v.Int)
	case KindS32:
		*(*C.int32_t)(u) = C.int32_t(v.Int)
	case KindS64:
		*(*C.int64_t)(u) = C.int64_t(v.Int)
	case KindU8:
		*(*C.uint8_t)(u) = C.uint8_t(v.Uint)
	case KindU16:
		*(*C.uint16_t)(u) = C.uint16_t(v.Uint)
	case KindU32:
		*(*C.uint32_t)(u) = C.uint32_t(v.Uint)
	case KindU64:
		*(*C.uint64_t)(u) = C.uint64_t(v.Uint)
	case KindF32:
		*(*C.float)(u) = C.float(v.Float)
	case KindF64:
		*(*C.double)(u) = C.double(v.Float)
	case KindChar:
		*(*C.uint32_t)(u) = C.uint32_t(v.Char)
	case KindString:
		newName((*C.wasm_name_t)(u), v.Str)
	case KindEnum:
		newName((*C.wasm_name_t)(u), v.Case)
	case KindList:
		if len(v.List) == 0 {
			var p *C.uint8_t
			if len(v.Bytes) > 0 {
				p = (*C.uint8_t)(unsafe.Pointer(&v.Bytes[0]))
			}
			C.maiden_val_list_from_bytes(out, p, C.size_t(len(v.Bytes)))
			return
		}
		l := (*C.wasmtime_component_vallist_t)(u)
		C.wasmtime_component_vallist_new_uninit(l, C.size_t(len(v.List)))
		elems := unsafe.Slice(l.data, len(v.List))
		for i := range v.List {
			valToC(&v.List[i], &elems[i])
		}
	case KindTuple:
		t := (*C.wasmtime_component_valtuple_t)(u)
		C.wasmtime_component_valtuple_new_uninit(t, C.size_t(len(v.List)))
		if len(v.List) > 0 {
			elems := unsafe.Slice(t.data, len(v.List))
			for i := range v.List {
				valToC(&v.List[i], &elems[i])
			}
		}
	case KindRecord:
		r := (*C.wasmtime_component_valrecord_t)(u)
		C.wasmtime_component_valrecord_new_uninit(r, C.size_t(len(v.Fields)))
		if len(v.Fields) > 0 {
			entries := unsafe.Slice(r.data, len(v.Fields))
			for i := range v.Fields {
				newName(&entries[i].name, v.Fields[i].Name)
				valToC(&v.Fields[i].Val, &entries[i].val)
			}
		}
	case KindVariant:
		vv := (*C.wasmtime_component_valvariant_t)(u)
		newName(&vv.discriminant, v.Case)
		vv.val = heapVal(v.Payload)
	case KindOption:
		*(**C.wasmtime_component_val_t)(u) = heapVal(v.Payload)
	case KindResult:
		r := (*C.wasmtime_component_valresult_t)(u)
		r.is_ok = C.bool(v.OK)
		r.val = heapVal(v.Payload)
	case KindFlags:
		f := (*C.wasmtime_component_valflags_t)(u)
		C.wasmtime_component_valflags_new_uninit(f, C.size_t(len(v.Flags)))
		if len(v.Flags) > 0 {
			names := unsafe.Slice(f.data, len(v.Flags))
			for i, n := range v.Flags {
				newName(&names[i], n)
			}
		}
	}
}

// heapVal moves a converted payload onto wasmtime's heap, as the variant,
// option and result fields require.
func heapVal(p *Val) *C.wasmtime_component_val_t {
	if p == nil {
		return nil
	}
	tmp := (*C.wasmtime_component_val_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.wasmtime_component_val_t{}))))
	defer C.free(unsafe.Pointer(tmp))
	valToC(p, tmp)
	return C.wasmtime_component_val_new(tmp)
}

func newName(out *C.wasm_name_t, s string) {
	if s == "" {
		C.wasm_byte_vec_new_empty(out)
		return
	}
	// Allocated by wasmtime, filled by Go's copy: wasm_byte_vec_new copies
	// a byte at a time (~0.5 ms of a 1 MiB input).
	C.wasm_byte_vec_new_uninitialized(out, C.size_t(len(s)))
	copy(unsafe.Slice((*byte)(unsafe.Pointer(out.data)), len(s)), s)
}

// roundTrip converts v to a C value with wasmtime's allocators and back,
// then frees the C value the way wasmtime would. It is the seam the fuzz test
// uses to exercise both conversions (test files cannot use cgo).
func roundTrip(v Val) (Val, error) {
	if err := checkVal(&v, 0); err != nil {
		return Val{}, err
	}
	c := (*C.wasmtime_component_val_t)(C.calloc(1, C.size_t(unsafe.Sizeof(C.wasmtime_component_val_t{}))))
	defer C.free(unsafe.Pointer(c))
	valToC(&v, c)
	defer C.wasmtime_component_val_delete(c)
	return valFromC(c)
}

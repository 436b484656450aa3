package wasmtime

/*
#include "shim.h"
#include <stdlib.h>
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// Component is a compiled component. It is safe for concurrent use; many
// stores may instantiate it at once.
type Component struct {
	engine *Engine

	mu     sync.RWMutex // held for reading while ptr is in use
	ptr    *C.wasmtime_component_t
	closed bool
}

// NewComponent compiles a component from its binary encoding. Compiling a
// large component takes seconds; callers cache the result.
func (e *Engine) NewComponent(wasm []byte) (*Component, error) {
	if e.closed.Load() {
		return nil, ErrUseAfterClose
	}
	var ptr *C.wasmtime_component_t
	var buf *C.uint8_t
	if len(wasm) > 0 {
		buf = (*C.uint8_t)(unsafe.Pointer(&wasm[0]))
	}
	if err := takeError(C.wasmtime_component_new(e.ptr, buf, C.size_t(len(wasm)), &ptr)); err != nil {
		return nil, err
	}
	return &Component{engine: e, ptr: ptr}, nil
}

// DeserializeComponent loads a component serialized by Serialize from
// memory (wasmtime copies the bytes into its own mapping).
//
// The bytes are trusted: they contain native code that will run in this
// process. Verify where they came from first.
func (e *Engine) DeserializeComponent(b []byte) (*Component, error) {
	if e.closed.Load() {
		return nil, ErrUseAfterClose
	}
	if len(b) == 0 {
		return nil, errors.New("wasmtime: empty serialized component")
	}
	var ptr *C.wasmtime_component_t
	if err := takeError(C.wasmtime_component_deserialize(e.ptr, (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b)), &ptr)); err != nil {
		return nil, err
	}
	return &Component{engine: e, ptr: ptr}, nil
}

// DeserializeComponentFile loads a component serialized by Serialize,
// memory-mapping the file.
//
// The file is trusted: it contains native code that will run in this
// process. Only load files this process (or another run of it) wrote into a
// directory nobody else can write to.
func (e *Engine) DeserializeComponentFile(path string) (*Component, error) {
	if e.closed.Load() {
		return nil, ErrUseAfterClose
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	var ptr *C.wasmtime_component_t
	if err := takeError(C.wasmtime_component_deserialize_file(e.ptr, cs, &ptr)); err != nil {
		return nil, err
	}
	return &Component{engine: e, ptr: ptr}, nil
}

// Serialize returns the compiled form of the component, for
// DeserializeComponentFile on an engine with the same Fingerprint.
func (c *Component) Serialize() ([]byte, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrUseAfterClose
	}
	var vec C.wasm_byte_vec_t
	if err := takeError(C.wasmtime_component_serialize(c.ptr, &vec)); err != nil {
		return nil, err
	}
	defer C.wasm_byte_vec_delete(&vec)
	return C.GoBytes(unsafe.Pointer(vec.data), C.int(vec.size)), nil
}

// Close frees the compiled code once no store is instantiating it; stores
// that already hold instances keep their own reference inside wasmtime.
func (c *Component) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	C.wasmtime_component_delete(c.ptr)
}

// ItemKind is what a component import or export is.
type ItemKind uint8

// Item kinds, numbered as wasmtime does.
const (
	ItemComponent ItemKind = C.WASMTIME_COMPONENT_ITEM_COMPONENT
	ItemInstance  ItemKind = C.WASMTIME_COMPONENT_ITEM_COMPONENT_INSTANCE
	ItemModule    ItemKind = C.WASMTIME_COMPONENT_ITEM_MODULE
	ItemFunc      ItemKind = C.WASMTIME_COMPONENT_ITEM_COMPONENT_FUNC
	ItemResource  ItemKind = C.WASMTIME_COMPONENT_ITEM_RESOURCE
	ItemCoreFunc  ItemKind = C.WASMTIME_COMPONENT_ITEM_CORE_FUNC
	ItemType      ItemKind = C.WASMTIME_COMPONENT_ITEM_TYPE
)

func (k ItemKind) String() string {
	switch k {
	case ItemComponent:
		return "component"
	case ItemInstance:
		return "instance"
	case ItemModule:
		return "module"
	case ItemFunc:
		return "func"
	case ItemResource:
		return "resource"
	case ItemCoreFunc:
		return "core func"
	case ItemType:
		return "type"
	}
	return fmt.Sprintf("item(%d)", uint8(k))
}

// Item is one import or export of a component.
type Item struct {
	Name string
	Kind ItemKind
	// Type is the WIT-like signature of a function item, e.g.
	// "func(input: string) -> result<string, string>"; empty otherwise.
	Type string
	// Params and Result are a function's parameter types and result type
	// ("" for none) in the same syntax, for comparing signatures without
	// caring about parameter names.
	Params []string
	Result string
	// Exports lists the members of an instance item.
	Exports []Item
}

// Imports lists what the component imports.
func (c *Component) Imports() ([]Item, error) { return c.items(true) }

// Exports lists what the component exports.
func (c *Component) Exports() ([]Item, error) { return c.items(false) }

func (c *Component) items(imports bool) ([]Item, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrUseAfterClose
	}
	ty := C.wasmtime_component_type(c.ptr)
	defer C.wasmtime_component_type_delete(ty)
	var n C.size_t
	if imports {
		n = C.wasmtime_component_type_import_count(ty, c.engine.ptr)
	} else {
		n = C.wasmtime_component_type_export_count(ty, c.engine.ptr)
	}
	out := make([]Item, 0, int(n))
	for i := C.size_t(0); i < n; i++ {
		var name *C.char
		var nameLen C.size_t
		var item C.wasmtime_component_item_t
		var ok C.bool
		if imports {
			ok = C.wasmtime_component_type_import_nth(ty, c.engine.ptr, i, &name, &nameLen, &item)
		} else {
			ok = C.wasmtime_component_type_export_nth(ty, c.engine.ptr, i, &name, &nameLen, &item)
		}
		if !ok {
			continue
		}
		it := c.describeItem(C.GoStringN(name, C.int(nameLen)), &item)
		C.wasmtime_component_item_delete(&item)
		out = append(out, it)
	}
	runtime.KeepAlive(c)
	return out, nil
}

func (c *Component) describeItem(name string, item *C.wasmtime_component_item_t) Item {
	it := Item{Name: name, Kind: ItemKind(item.kind)}
	u := unsafe.Pointer(&item.of)
	switch it.Kind {
	case ItemFunc:
		it.Type, it.Params, it.Result = funcTypeString(*(**C.wasmtime_component_func_type_t)(u))
	case ItemInstance:
		inst := *(**C.wasmtime_component_instance_type_t)(u)
		n := C.wasmtime_component_instance_type_export_count(inst, c.engine.ptr)
		for i := C.size_t(0); i < n; i++ {
			var en *C.char
			var enLen C.size_t
			var sub C.wasmtime_component_item_t
			if !C.wasmtime_component_instance_type_export_nth(inst, c.engine.ptr, i, &en, &enLen, &sub) {
				continue
			}
			it.Exports = append(it.Exports, c.describeItem(C.GoStringN(en, C.int(enLen)), &sub))
			C.wasmtime_component_item_delete(&sub)
		}
	}
	return it
}

func funcTypeString(ft *C.wasmtime_component_func_type_t) (sig string, params []string, result string) {
	var b strings.Builder
	b.WriteString("func(")
	n := C.wasmtime_component_func_type_param_count(ft)
	for i := C.size_t(0); i < n; i++ {
		var name *C.char
		var nameLen C.size_t
		var vt C.wasmtime_component_valtype_t
		if !C.wasmtime_component_func_type_param_nth(ft, i, &name, &nameLen, &vt) {
			continue
		}
		if i > 0 {
			b.WriteString(", ")
		}
		var pb strings.Builder
		writeValType(&pb, &vt, 0)
		C.wasmtime_component_valtype_delete(&vt)
		b.WriteString(C.GoStringN(name, C.int(nameLen)))
		b.WriteString(": ")
		b.WriteString(pb.String())
		params = append(params, pb.String())
	}
	b.WriteString(")")
	var rt C.wasmtime_component_valtype_t
	if C.wasmtime_component_func_type_result(ft, &rt) {
		var rb strings.Builder
		writeValType(&rb, &rt, 0)
		C.wasmtime_component_valtype_delete(&rt)
		result = rb.String()
		b.WriteString(" -> ")
		b.WriteString(result)
	}
	return b.String(), params, result
}

// writeValType renders a value type in WIT syntax, so that signatures can be
// compared with the contract and shown to tool authors as they wrote them.
func writeValType(b *strings.Builder, vt *C.wasmtime_component_valtype_t, depth int) {
	if depth > maxDepth {
		b.WriteString("...")
		return
	}
	u := unsafe.Pointer(&vt.of)
	switch vt.kind {
	case C.WASMTIME_COMPONENT_VALTYPE_BOOL:
		b.WriteString("bool")
	case C.WASMTIME_COMPONENT_VALTYPE_S8:
		b.WriteString("s8")
	case C.WASMTIME_COMPONENT_VALTYPE_S16:
		b.WriteString("s16")
	case C.WASMTIME_COMPONENT_VALTYPE_S32:
		b.WriteString("s32")
	case C.WASMTIME_COMPONENT_VALTYPE_S64:
		b.WriteString("s64")
	case C.WASMTIME_COMPONENT_VALTYPE_U8:
		b.WriteString("u8")
	case C.WASMTIME_COMPONENT_VALTYPE_U16:
		b.WriteString("u16")
	case C.WASMTIME_COMPONENT_VALTYPE_U32:
		b.WriteString("u32")
	case C.WASMTIME_COMPONENT_VALTYPE_U64:
		b.WriteString("u64")
	case C.WASMTIME_COMPONENT_VALTYPE_F32:
		b.WriteString("f32")
	case C.WASMTIME_COMPONENT_VALTYPE_F64:
		b.WriteString("f64")
	case C.WASMTIME_COMPONENT_VALTYPE_CHAR:
		b.WriteString("char")
	case C.WASMTIME_COMPONENT_VALTYPE_STRING:
		b.WriteString("string")
	case C.WASMTIME_COMPONENT_VALTYPE_LIST:
		lt := *(**C.wasmtime_component_list_type_t)(u)
		var et C.wasmtime_component_valtype_t
		C.wasmtime_component_list_type_element(lt, &et)
		b.WriteString("list<")
		writeValType(b, &et, depth+1)
		b.WriteString(">")
		C.wasmtime_component_valtype_delete(&et)
	case C.WASMTIME_COMPONENT_VALTYPE_RECORD:
		rt := *(**C.wasmtime_component_record_type_t)(u)
		n := C.wasmtime_component_record_type_field_count(rt)
		b.WriteString("record { ")
		for i := C.size_t(0); i < n; i++ {
			var name *C.char
			var nameLen C.size_t
			var ft C.wasmtime_component_valtype_t
			if !C.wasmtime_component_record_type_field_nth(rt, i, &name, &nameLen, &ft) {
				continue
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(C.GoStringN(name, C.int(nameLen)))
			b.WriteString(": ")
			writeValType(b, &ft, depth+1)
			C.wasmtime_component_valtype_delete(&ft)
		}
		b.WriteString(" }")
	case C.WASMTIME_COMPONENT_VALTYPE_TUPLE:
		tt := *(**C.wasmtime_component_tuple_type_t)(u)
		n := C.wasmtime_component_tuple_type_types_count(tt)
		b.WriteString("tuple<")
		for i := C.size_t(0); i < n; i++ {
			var et C.wasmtime_component_valtype_t
			if !C.wasmtime_component_tuple_type_types_nth(tt, i, &et) {
				continue
			}
			if i > 0 {
				b.WriteString(", ")
			}
			writeValType(b, &et, depth+1)
			C.wasmtime_component_valtype_delete(&et)
		}
		b.WriteString(">")
	case C.WASMTIME_COMPONENT_VALTYPE_VARIANT:
		vt := *(**C.wasmtime_component_variant_type_t)(u)
		n := C.wasmtime_component_variant_type_case_count(vt)
		b.WriteString("variant { ")
		for i := C.size_t(0); i < n; i++ {
			var name *C.char
			var nameLen C.size_t
			var has C.bool
			var pt C.wasmtime_component_valtype_t
			if !C.wasmtime_component_variant_type_case_nth(vt, i, &name, &nameLen, &has, &pt) {
				continue
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(C.GoStringN(name, C.int(nameLen)))
			if has {
				b.WriteString("(")
				writeValType(b, &pt, depth+1)
				b.WriteString(")")
				C.wasmtime_component_valtype_delete(&pt)
			}
		}
		b.WriteString(" }")
	case C.WASMTIME_COMPONENT_VALTYPE_ENUM:
		et := *(**C.wasmtime_component_enum_type_t)(u)
		n := C.wasmtime_component_enum_type_names_count(et)
		b.WriteString("enum { ")
		for i := C.size_t(0); i < n; i++ {
			var name *C.char
			var nameLen C.size_t
			if !C.wasmtime_component_enum_type_names_nth(et, i, &name, &nameLen) {
				continue
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(C.GoStringN(name, C.int(nameLen)))
		}
		b.WriteString(" }")
	case C.WASMTIME_COMPONENT_VALTYPE_OPTION:
		ot := *(**C.wasmtime_component_option_type_t)(u)
		var it C.wasmtime_component_valtype_t
		C.wasmtime_component_option_type_ty(ot, &it)
		b.WriteString("option<")
		writeValType(b, &it, depth+1)
		b.WriteString(">")
		C.wasmtime_component_valtype_delete(&it)
	case C.WASMTIME_COMPONENT_VALTYPE_RESULT:
		rt := *(**C.wasmtime_component_result_type_t)(u)
		var ok, er C.wasmtime_component_valtype_t
		hasOK := C.wasmtime_component_result_type_ok(rt, &ok)
		hasErr := C.wasmtime_component_result_type_err(rt, &er)
		b.WriteString("result")
		if hasOK || hasErr {
			b.WriteString("<")
			if hasOK {
				writeValType(b, &ok, depth+1)
				C.wasmtime_component_valtype_delete(&ok)
			} else {
				b.WriteString("_")
			}
			if hasErr {
				b.WriteString(", ")
				writeValType(b, &er, depth+1)
				C.wasmtime_component_valtype_delete(&er)
			}
			b.WriteString(">")
		}
	case C.WASMTIME_COMPONENT_VALTYPE_FLAGS:
		ft := *(**C.wasmtime_component_flags_type_t)(u)
		n := C.wasmtime_component_flags_type_names_count(ft)
		b.WriteString("flags { ")
		for i := C.size_t(0); i < n; i++ {
			var name *C.char
			var nameLen C.size_t
			if !C.wasmtime_component_flags_type_names_nth(ft, i, &name, &nameLen) {
				continue
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(C.GoStringN(name, C.int(nameLen)))
		}
		b.WriteString(" }")
	case C.WASMTIME_COMPONENT_VALTYPE_OWN:
		b.WriteString("own<resource>")
	case C.WASMTIME_COMPONENT_VALTYPE_BORROW:
		b.WriteString("borrow<resource>")
	case C.WASMTIME_COMPONENT_VALTYPE_FUTURE:
		b.WriteString("future")
	case C.WASMTIME_COMPONENT_VALTYPE_STREAM:
		b.WriteString("stream")
	case C.WASMTIME_COMPONENT_VALTYPE_ERROR_CONTEXT:
		b.WriteString("error-context")
	default:
		fmt.Fprintf(b, "type(%d)", vt.kind)
	}
}

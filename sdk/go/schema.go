package maiden

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
)

// SchemaFor returns a JSON Schema (as compact JSON text) describing the JSON
// encoding of T as encoding/json produces and accepts it. Agents read it to
// build a tool's input, so T is normally a struct:
//
//	type Input struct {
//		City  string `json:"city" jsonschema:"city name, e.g. Paris"`
//		Units string `json:"units,omitempty" jsonschema:"metric (default) or imperial"`
//	}
//
// gives {"type":"object","properties":{"city":{"type":"string","description":
// "city name, e.g. Paris"},"units":{...}},"required":["city"]}.
//
// Struct fields follow encoding/json: exported fields only, named by their
// json tag, "-" skipped, embedded structs inlined. A field is required unless
// it is a pointer or its tag says omitempty or omitzero. The jsonschema tag
// is the field's description. Maps become objects whose values share one
// schema, []byte a base64 string, interfaces and types with their own JSON
// encoding an unconstrained schema ({}); a recursive type is unconstrained
// where it recurs.
func SchemaFor[T any]() string {
	var b strings.Builder
	g := schemaGen{b: &b, seen: map[reflect.Type]bool{}}
	g.node(reflect.TypeFor[T](), "")
	return b.String()
}

type schemaGen struct {
	b    *strings.Builder
	seen map[reflect.Type]bool // struct types on the current path
}

var (
	rawMessageType    = reflect.TypeFor[json.RawMessage]()
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

// open writes `{"type":T` (or `{` when typ is "") and the description.
func (g *schemaGen) open(typ, desc string) {
	g.b.WriteByte('{')
	sep := false
	if typ != "" {
		g.b.WriteString(`"type":`)
		g.b.WriteString(strconv.Quote(typ))
		sep = true
	}
	if desc != "" {
		if sep {
			g.b.WriteByte(',')
		}
		g.b.WriteString(`"description":`)
		writeJSONString(g.b, desc)
	}
}

func (g *schemaGen) node(t reflect.Type, desc string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType:
		g.open("", desc)
		g.b.WriteByte('}')
		return
	case t.PkgPath() == "time" && t.Name() == "Time":
		g.open("string", desc)
		g.b.WriteString(`,"format":"date-time"}`)
		return
	case t.Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(jsonMarshalerType):
		g.open("", desc)
		g.b.WriteByte('}')
		return
	case t.Kind() != reflect.String && (t.Implements(textMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)):
		g.open("string", desc)
		g.b.WriteByte('}')
		return
	}
	switch t.Kind() {
	case reflect.Bool:
		g.open("boolean", desc)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		g.open("integer", desc)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		g.open("integer", desc)
		g.b.WriteString(`,"minimum":0`)
	case reflect.Float32, reflect.Float64:
		g.open("number", desc)
	case reflect.String:
		g.open("string", desc)
	case reflect.Slice, reflect.Array:
		if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8 {
			g.open("string", desc)
			g.b.WriteString(`,"contentEncoding":"base64"`)
			break
		}
		g.open("array", desc)
		g.b.WriteString(`,"items":`)
		g.node(t.Elem(), "")
		if t.Kind() == reflect.Array {
			n := strconv.Itoa(t.Len())
			g.b.WriteString(`,"minItems":` + n + `,"maxItems":` + n)
		}
	case reflect.Map:
		g.open("object", desc)
		g.b.WriteString(`,"additionalProperties":`)
		g.node(t.Elem(), "")
	case reflect.Struct:
		if g.seen[t] {
			g.open("", desc)
			break
		}
		g.seen[t] = true
		g.open("object", desc)
		g.b.WriteString(`,"properties":{`)
		var required []string
		n := 0
		g.fields(t, &n, &required)
		g.b.WriteByte('}')
		if len(required) > 0 {
			g.b.WriteString(`,"required":[`)
			for i, r := range required {
				if i > 0 {
					g.b.WriteByte(',')
				}
				writeJSONString(g.b, r)
			}
			g.b.WriteByte(']')
		}
		delete(g.seen, t)
	default: // interfaces; channels and funcs do not encode at all
		g.open("", desc)
	}
	g.b.WriteByte('}')
}

// fields writes t's properties, inlining embedded structs as encoding/json
// does (for the common case: an embedded struct without a json name).
func (g *schemaGen) fields(t reflect.Type, n *int, required *[]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			et := ft
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				g.fields(et, n, required)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if *n > 0 {
			g.b.WriteByte(',')
		}
		*n++
		writeJSONString(g.b, name)
		g.b.WriteByte(':')
		desc := f.Tag.Get("jsonschema")
		if hasOpt(opts, "string") && isScalar(ft) {
			g.open("string", desc)
			g.b.WriteByte('}')
		} else {
			g.node(ft, desc)
		}
		if ft.Kind() != reflect.Pointer && !hasOpt(opts, "omitempty") && !hasOpt(opts, "omitzero") {
			*required = append(*required, name)
		}
	}
}

func hasOpt(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}

func isScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return true
	}
	return false
}

func writeJSONString(b *strings.Builder, s string) {
	out, _ := json.Marshal(s) // a string always marshals
	b.Write(out)
}

package maiden

import (
	"encoding"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// unmarshalExact is json.Unmarshal, except that an object key which differs
// from a struct field's JSON name only in case is an error instead of a
// match.
//
// encoding/json fills a field from any key equal to its name under Unicode
// case folding ("CITY", "City", "\u212aind" for "kind"). maiden's own checks
// (the input schema, the agent's cards, CEL conditions) read keys exactly, so
// a lone "CITY" would reach the tool's City field unchecked by the rules
// written for "city". Refusing such a key keeps the tool reading what the
// host checked. Keys that match no field are ignored, as encoding/json
// ignores them; a field of map type takes any key.
//
// encoding/json/v2 matches case exactly, but Go 1.26 offers it only under
// GOEXPERIMENT=jsonv2; walking the decoded document against v's type costs a
// second parse of an input that is small.
func unmarshalExact(data []byte, v any) error {
	var doc any
	if json.Unmarshal(data, &doc) == nil { // invalid JSON: Unmarshal below says why
		if err := checkKeys(doc, reflect.ValueOf(v), reflect.TypeOf(v), ""); err != nil {
			return err
		}
	}
	return json.Unmarshal(data, v)
}

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// checkKeys walks doc (a value decoded into any) the way json.Unmarshal
// would walk it into a value of type t. rv is that value when there is one
// (it matters where an interface already holds a pointer, which
// encoding/json decodes into) and invalid otherwise. path names doc's place
// in the input for the error.
func checkKeys(doc any, rv reflect.Value, t reflect.Type, path string) error {
	for t != nil {
		if rv.IsValid() && rv.Kind() == reflect.Interface && !rv.IsNil() {
			if e := rv.Elem(); e.Kind() == reflect.Pointer && !e.IsNil() &&
				!(e.Elem().Kind() == reflect.Interface && e.Elem().Elem().Equal(e)) {
				rv, t = e, e.Type()
				continue
			}
		}
		if t.Implements(jsonUnmarshalerType) || reflect.PointerTo(t).Implements(jsonUnmarshalerType) ||
			t.Implements(textUnmarshalerType) || reflect.PointerTo(t).Implements(textUnmarshalerType) {
			return nil // the type decodes itself (time.Time, json.RawMessage, ...)
		}
		if t.Kind() != reflect.Pointer {
			break
		}
		if rv.IsValid() && !rv.IsNil() {
			rv = rv.Elem()
		} else {
			rv = reflect.Value{}
		}
		t = t.Elem()
	}
	if t == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		fields := jsonFields(t)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if f, ok := fields[k]; ok {
				var fv reflect.Value
				if rv.IsValid() {
					fv, _ = rv.FieldByIndexErr(f.index) // a nil embedded pointer: by type only
				}
				if err := checkKeys(obj[k], fv, f.typ, joinPath(path, k)); err != nil {
					return err
				}
				continue
			}
			for _, name := range slices.Sorted(maps.Keys(fields)) {
				if strings.EqualFold(k, name) {
					// %+q: a key such as "\u212aind" must not print as "Kind"
					where := ""
					if path != "" {
						where = " in " + strconv.QuoteToASCII(path)
					}
					return fmt.Errorf("key %+q%s is not the field %q: keys must match a field's name exactly, case included", k, where, name)
				}
			}
		}
	case reflect.Map:
		obj, ok := doc.(map[string]any)
		if !ok {
			return nil
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			// encoding/json decodes each value into a fresh element
			if err := checkKeys(obj[k], reflect.Value{}, t.Elem(), joinPath(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		arr, ok := doc.([]any)
		if !ok {
			return nil
		}
		for i, x := range arr {
			var ev reflect.Value // encoding/json reuses the elements already there
			if rv.IsValid() && i < rv.Len() {
				ev = rv.Index(i)
			}
			if err := checkKeys(x, ev, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	}
	return nil // scalars, and interfaces decoded as generic values
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

type jsonField struct {
	index  []int
	typ    reflect.Type
	tagged bool
}

// jsonFields returns the fields encoding/json decodes t's object keys into,
// by JSON name: its typeFields, reduced to what matching needs (exported
// fields named by their json tag, "-" skipped, untagged embedded structs
// inlined breadth first, a name hidden by one at a shallower depth, and two
// at the same depth both dropped unless one alone is tagged).
func jsonFields(t reflect.Type) map[string]jsonField {
	type found struct {
		name string
		jsonField
	}
	var all []found
	type level struct {
		typ   reflect.Type
		index []int
	}
	current, next := []level{}, []level{{typ: t}}
	var count map[reflect.Type]int // the structs of the level being read, by how many times they appear there
	nextCount := map[reflect.Type]int{t: 1}
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, l := range current {
			if visited[l.typ] {
				continue
			}
			visited[l.typ] = true
			for i := range l.typ.NumField() {
				sf := l.typ.Field(i)
				if sf.Anonymous {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if !sf.IsExported() && et.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !isValidTag(name) {
					name = ""
				}
				index := append(slices.Clip(l.index), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					f := found{name: name, jsonField: jsonField{index: index, typ: sf.Type, tagged: name != ""}}
					if f.name == "" {
						f.name = sf.Name
					}
					all = append(all, f)
					if count[l.typ] > 1 { // the same struct twice at one depth: a duplicate, dropped below
						all = append(all, f)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, level{typ: ft, index: index})
				}
			}
		}
	}
	byName := map[string][]jsonField{}
	for _, f := range all {
		byName[f.name] = append(byName[f.name], f.jsonField)
	}
	out := make(map[string]jsonField, len(byName))
	for name, fs := range byName {
		slices.SortStableFunc(fs, func(a, b jsonField) int {
			if len(a.index) != len(b.index) {
				return len(a.index) - len(b.index)
			}
			if a.tagged != b.tagged {
				if a.tagged {
					return -1
				}
				return 1
			}
			return slices.Compare(a.index, b.index)
		})
		if len(fs) > 1 && len(fs[0].index) == len(fs[1].index) && fs[0].tagged == fs[1].tagged {
			continue // Go's ambiguous selector: encoding/json fills neither
		}
		out[name] = fs[0]
	}
	return out
}

// isValidTag is encoding/json's: a tag name it does not accept leaves the
// field named by its Go name.
func isValidTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

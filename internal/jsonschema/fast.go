package jsonschema

import (
	"encoding/json"
	"strconv"
	"sync/atomic"
	"unicode/utf8"

	"github.com/maiden-run/maiden/internal/jsonparse"
)

// fastSchema is a schema of the plain kind most tools declare (types,
// properties, required, additionalProperties, one items schema, enum,
// const, lengths and counts, annotations), checked without the library:
// only to say yes. Its no, or a schema outside that kind, goes the
// library's way, which decides again and explains. The library copies
// every string it checks ([]byte(str), whatever the keywords): most of a
// 1 MiB string's validation, and its garbage.
//
// A yes must never come where the library's path says no, so the kind is
// an allow-list of keywords read from the schema's text (one the library
// knows and this does not, or a form of one this does not read, makes the
// whole schema slow), and it counts its work at least as the library's
// path does (see fits), saying no where that would be over maxChecks.
// FuzzFastAgreesWithLibrary holds it to that.
type fastSchema struct {
	always   *bool // a boolean schema: true fits everything, false nothing
	types    []string
	enum     []any
	hasEnum  bool
	constant any
	hasConst bool
	props    map[string]*fastSchema
	required []string
	// additional applies to properties not in props, items to every item;
	// nil: anything.
	additional, items *fastSchema
	// Bounds; -1: none.
	minLength, maxLength, minItems, maxItems, minProps, maxProps int
	// cost is the library path's charge for evaluating this schema on a
	// value, before its parts: a check, and its enum's comparisons;
	// perPart its charge per property or item (fanOut).
	cost, perPart int
}

// fastKeywords are the keywords a fast schema may have; annotations are
// read by nobody.
var fastKeywords = map[string]bool{
	"type": true, "enum": true, "const": true, "properties": true, "required": true,
	"additionalProperties": true, "items": true,
	"minLength": true, "maxLength": true, "minItems": true, "maxItems": true,
	"minProperties": true, "maxProperties": true,
	"title": true, "description": true, "default": true, "examples": true, "$comment": true,
	"deprecated": true, "readOnly": true, "writeOnly": true,
}

// buildFast is doc (a schema document, as lib.UnmarshalJSON parsed it) as a
// fast schema, or nil if it or any subschema is not of the plain kind. The
// root may name its draft: this kind means the same in every draft the
// library knows (const, which draft-04 lacks, is only stricter).
func buildFast(doc any, root bool) *fastSchema {
	if b, ok := doc.(bool); ok {
		return &fastSchema{always: &b, cost: 1}
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	f := &fastSchema{minLength: -1, maxLength: -1, minItems: -1, maxItems: -1, minProps: -1, maxProps: -1}
	for k, v := range m {
		if k == "$schema" && root {
			continue
		}
		if !fastKeywords[k] {
			return nil
		}
		if !f.read(k, v) {
			return nil
		}
	}
	f.cost = 1 + len(f.enum)/16
	// fanOut's perPart: one of properties, additionalProperties, items
	// per part, the largest; a boolean subschema counts 1.
	for _, k := range f.props {
		f.perPart = max(f.perPart, 1+k.ownCost())
	}
	for _, k := range []*fastSchema{f.additional, f.items} {
		if k != nil {
			f.perPart = max(f.perPart, 1+k.ownCost())
		}
	}
	return f
}

func (f *fastSchema) ownCost() int { return len(f.enum) / 16 }

// read takes one keyword's value; false if its form is not one fast
// schemas read.
func (f *fastSchema) read(k string, v any) bool {
	switch k {
	case "type":
		switch v := v.(type) {
		case string:
			f.types = []string{v}
		case []any:
			for _, t := range v {
				s, ok := t.(string)
				if !ok {
					return false
				}
				f.types = append(f.types, s)
			}
		default:
			return false
		}
	case "enum":
		e, ok := v.([]any)
		if !ok {
			return false
		}
		f.enum, f.hasEnum = e, true
	case "const":
		f.constant, f.hasConst = v, true
	case "properties":
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		f.props = make(map[string]*fastSchema, len(m))
		for name, s := range m {
			if f.props[name] = buildFast(s, false); f.props[name] == nil {
				return false
			}
		}
	case "required":
		r, ok := v.([]any)
		if !ok {
			return false
		}
		for _, n := range r {
			s, ok := n.(string)
			if !ok {
				return false
			}
			f.required = append(f.required, s)
		}
	case "additionalProperties":
		f.additional = buildFast(v, false)
		return f.additional != nil
	case "items":
		f.items = buildFast(v, false) // an array of schemas (a tuple) is not read
		return f.items != nil
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		i, err := strconv.Atoi(string(n)) // 2.0 or 1e1 is not read
		if err != nil || i < 0 {
			return false
		}
		*f.bound(k) = i
	}
	return true
}

func (f *fastSchema) bound(k string) *int {
	switch k {
	case "minLength":
		return &f.minLength
	case "maxLength":
		return &f.maxLength
	case "minItems":
		return &f.minItems
	case "maxItems":
		return &f.maxItems
	case "minProperties":
		return &f.minProps
	}
	return &f.maxProps
}

// fastWalk is one fast check's state: the work counted and the stop flag
// of the validation it serves, read every stopEvery schemas.
type fastWalk struct {
	checks, limit int
	stop          *atomic.Bool
	sinceStop     int
}

const stopEvery = 4096

// fastFits tells whether v surely fits the schema: yes only if the
// library's path would say yes too, within maxChecks. A stop makes it say
// no (the library's path then stops at once).
func (f *fastSchema) fastFits(v any, stop *atomic.Bool) bool {
	// The library's path also evaluates the not-not wrapper of the check
	// pass (three schemas, each a check and one in place).
	w := fastWalk{checks: 6, limit: maxChecks, stop: stop}
	return f.fits(v, &w)
}

// enter begins one evaluation of f, by fits or fitsMembers, of a value
// of n parts (an object's members, an array's items): it reads the stop
// flag now and then, and charges the evaluation as early.check does (a
// boolean schema 1). done: the answer is known, ok; else go on.
func (f *fastSchema) enter(w *fastWalk, n int) (done, ok bool) {
	if w.sinceStop++; w.sinceStop >= stopEvery {
		w.sinceStop = 0
		if w.stop.Load() {
			return true, false
		}
	}
	if f.always != nil {
		w.checks++
		return true, *f.always && w.checks <= w.limit
	}
	if w.checks += f.cost + f.perPart*n; w.checks > w.limit {
		return true, false
	}
	return false, true
}

// fits is the library's path with maiden's hook (early.check: type, const,
// enum, the charge; then the library's keywords) for the plain kind. It
// charges each evaluation as early.check does (cost, perPart × parts),
// and a boolean schema 1 where the library charges nothing.
func (f *fastSchema) fits(v any, w *fastWalk) bool {
	if done, ok := f.enter(w, parts(v)); done {
		return ok
	}
	if f.types != nil {
		if _, ok := typeMatches(v, f.types); !ok {
			return false
		}
	}
	if f.hasConst && !jsonEqual(v, f.constant) {
		return false
	}
	if f.hasEnum && !inEnum(v, f.enum) {
		return false
	}
	switch v := v.(type) {
	case string:
		if f.minLength >= 0 || f.maxLength >= 0 {
			n := utf8.RuneCountInString(v)
			if n < f.minLength || f.maxLength >= 0 && n > f.maxLength {
				return false
			}
		}
	case map[string]any:
		if len(v) < f.minProps || f.maxProps >= 0 && len(v) > f.maxProps {
			return false
		}
		for _, r := range f.required {
			if _, ok := v[r]; !ok {
				return false
			}
		}
		for k, e := range v {
			s, ok := f.props[k]
			if !ok {
				s = f.additional
			}
			if s != nil && !s.fits(e, w) {
				return false
			}
		}
	case []any:
		if len(v) < f.minItems || f.maxItems >= 0 && len(v) > f.maxItems {
			return false
		}
		if f.items != nil {
			for _, e := range v {
				if !f.items.fits(e, w) {
					return false
				}
			}
		}
	}
	return true
}

func inEnum(v any, enum []any) bool {
	for _, w := range enum {
		if jsonEqual(v, w) {
			return true
		}
	}
	return false
}

// fastFitsMembers is fastFits for an object given as its members' text
// (jsonparse.Scanned.Members, no key twice): it decodes only the members
// a subschema other than a boolean one applies to, and counts its work as
// fits does on the decoded object. It says no where it would need the
// whole object (const or enum at the top).
func (f *fastSchema) fastFitsMembers(ms []jsonparse.Member, stop *atomic.Bool) bool {
	w := fastWalk{checks: 6, limit: maxChecks, stop: stop}
	return f.fitsMembers(ms, &w)
}

func (f *fastSchema) fitsMembers(ms []jsonparse.Member, w *fastWalk) bool {
	if done, ok := f.enter(w, len(ms)); done {
		return ok
	}
	if f.types != nil {
		if _, ok := typeMatches(map[string]any(nil), f.types); !ok {
			return false
		}
	}
	if f.hasConst || f.hasEnum {
		return false
	}
	if len(ms) < f.minProps || f.maxProps >= 0 && len(ms) > f.maxProps {
		return false
	}
	if len(f.required) > 0 && !hasKeys(ms, f.required) {
		return false
	}
	for _, m := range ms {
		s, ok := f.props[m.Key]
		if !ok {
			s = f.additional
		}
		switch {
		case s == nil:
		case s.always != nil:
			if !s.fits(nil, w) { // reads no value
				return false
			}
		case m.Plain:
			if !s.fits(m.Value[1:len(m.Value)-1], w) {
				return false
			}
		default:
			v, err := jsonparse.ParseStrict(m.Value)
			if err != nil || !s.fits(v, w) {
				return false
			}
		}
	}
	return true
}

// hasKeys tells whether ms has a member of each of keys.
func hasKeys(ms []jsonparse.Member, keys []string) bool {
	if len(ms)*len(keys) > 256 {
		set := make(map[string]struct{}, len(ms))
		for _, m := range ms {
			set[m.Key] = struct{}{}
		}
		for _, k := range keys {
			if _, ok := set[k]; !ok {
				return false
			}
		}
		return true
	}
next:
	for _, k := range keys {
		for _, m := range ms {
			if m.Key == k {
				continue next
			}
		}
		return false
	}
	return true
}

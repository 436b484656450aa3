package grant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting in a rendered input (the schema check before it
// has its own bounds; this one keeps the recursion here finite).
const maxDepth = 64

// Render turns a call's JSON input into its canonical arguments, in
// canonical order (see the package documentation for the rules). The input
// must be a JSON object. Render is stricter than a JSON decoder on purpose:
// a duplicate key (at any depth), invalid UTF-8, a lone surrogate escape or
// a number whose exponent does not fit is an error, because a tool's own
// decoder could read such input differently from the rendering a grant was
// matched against.
func Render(input []byte) ([]Arg, error) {
	p := &jsonParser{s: input}
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, p.fail("a JSON object")
	}
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.fail("the end of the input")
	}
	var args []Arg
	for _, m := range v.obj { // sorted by key and free of duplicates
		if m.key == "" {
			return nil, fmt.Errorf("%w: a property with an empty name has no argument form", ErrRender)
		}
		args = appendArg(args, m.key, m.val, true)
	}
	return args, nil
}

// RenderValue is Render of an input already decoded: v is what a JSON
// decoder with UseNumber made of it (map[string]any, []any, string,
// json.Number, bool, nil). Its value cannot show a duplicate key, invalid
// UTF-8 or a lone surrogate escape, which Render refuses, so the decoder
// must have refused them (jsonparse.ParseStrict does); for a v so decoded
// from an input, RenderValue(v) and Render(input) give the same arguments,
// or both an error. It is how a call decoded once is rendered without
// reading its text again.
func RenderValue(v any) ([]Arg, error) { return renderValue(v, false) }

// RenderJSONInput is RenderValue for a tool that receives the input as
// JSON, which its own reader decodes: a number a binary64 reader
// (JavaScript's JSON.parse, a Go float64) reads as another number is
// refused, naming it and where. Rendered exactly, a card pinned to
// 9007199254740993 would let such a tool run on 9007199254740992 (and
// 1e400 on Infinity); rounded, a card pinned to one would allow the
// other. What it renders, a binary64 reader reads back to the same
// rendering. (A wrapped CLI's argv is text, which no reader rounds: its
// command parse renders numbers with RenderValue.)
func RenderJSONInput(v any) ([]Arg, error) { return renderValue(v, true) }

func renderValue(v any, binary64 bool) ([]Arg, error) {
	if _, isObject := v.(map[string]any); !isObject {
		return nil, notObjectError(kindOf(v))
	}
	top, err := fromValue(v, 0, binary64)
	if err != nil {
		return nil, err
	}
	var args []Arg
	for _, m := range top.obj {
		if m.key == "" {
			return nil, fmt.Errorf("%w: a property with an empty name has no argument form", ErrRender)
		}
		args = appendArg(args, m.key, m.val, true)
	}
	return args, nil
}

// fromValue is the jsonValue of a decoded value, checked as Render checks
// the text: the same depth bound (a value deeper than maxDepth, whatever
// its kind), and each number read as number() does (and, for binary64,
// checked: RenderJSONInput).
func fromValue(v any, depth int, binary64 bool) (jsonValue, error) {
	if depth > maxDepth {
		return jsonValue{}, fmt.Errorf("%w: nested deeper than %d", ErrRender, maxDepth)
	}
	switch v := v.(type) {
	case nil:
		return jsonValue{kind: jNull}, nil
	case bool:
		if v {
			return jsonValue{kind: jTrue}, nil
		}
		return jsonValue{kind: jFalse}, nil
	case string:
		if !utf8.ValidString(v) {
			return jsonValue{}, fmt.Errorf("%w: invalid UTF-8 in %q", ErrRender, v)
		}
		return jsonValue{kind: jString, str: v}, nil
	case json.Number:
		if plainInt(string(v)) {
			// Its own canonical form, and one binary64 holds.
			return jsonValue{kind: jNumber, str: string(v)}, nil
		}
		p := &jsonParser{s: []byte(v)}

		if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
			return jsonValue{}, fmt.Errorf("%w: %q is not a JSON number", ErrRender, string(v))
		}
		n, err := p.exactNumber()
		if err == nil && p.i != len(p.s) {
			err = fmt.Errorf("%w: %q is not a JSON number", ErrRender, string(v))
		}
		if err != nil {
			return jsonValue{}, err
		}
		if binary64 {
			if read, same := asBinary64(n.str); !same {
				return jsonValue{}, fmt.Errorf("%w: %s", ErrRender, notBinary64(n.str, read))
			}
		}
		return n, nil
	case []any:
		out := jsonValue{kind: jArray, arr: make([]jsonValue, 0, len(v))}
		for i, e := range v {
			ev, err := fromValue(e, depth+1, binary64)
			if err != nil {
				return jsonValue{}, under(err, strconv.Itoa(i))
			}
			out.arr = append(out.arr, ev)
		}
		return out, nil
	case map[string]any:
		out := jsonValue{kind: jObject, obj: make([]member, 0, len(v))}
		for k, e := range v {
			if !utf8.ValidString(k) {
				return jsonValue{}, fmt.Errorf("%w: invalid UTF-8 in the property name %q", ErrRender, k)
			}
			ev, err := fromValue(e, depth+1, binary64)
			if err != nil {
				return jsonValue{}, under(err, k)
			}
			out.obj = append(out.obj, member{key: k, val: ev})
		}
		slices.SortFunc(out.obj, func(a, b member) int { return strings.Compare(a.key, b.key) })
		return out, nil
	}
	return jsonValue{}, fmt.Errorf("%w: %T is not a decoded JSON value", ErrRender, v)
}

// valueError is an error of RenderValue and where in the value it is.
type valueError struct {
	at  []string // the path, innermost first
	err error
}

func (e *valueError) Error() string {
	var b strings.Builder
	for i := len(e.at) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(e.at[i]))
	}
	return e.err.Error() + " (at " + b.String() + ")"
}

func (e *valueError) Unwrap() error { return e.err }

// under places err at key within its container.
func under(err error, key string) error {
	if ve, ok := err.(*valueError); ok {
		ve.at = append(ve.at, key)
		return ve
	}
	return &valueError{at: []string{key}, err: err}
}

// plainInt tells whether n is an integer of 1 to 15 digits with no
// leading zero, optionally negative, and not -0: what most numbers in a
// call are, and written as exactNumber would write them.
func plainInt(n string) bool {
	d := n
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 || d[0] == '0' && (len(d) > 1 || len(n) > 1) {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// kindOf names a decoded value's JSON type, for an error.
// notObjectError is ErrNotObject (and ErrRender) for an input of the kind
// it names.
type notObjectError string

func (e notObjectError) Error() string { return ErrNotObject.Error() + ", got " + string(e) }

func (e notObjectError) Is(target error) bool { return target == ErrNotObject || target == ErrRender }

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

func appendArg(args []Arg, name string, v jsonValue, top bool) []Arg {
	switch v.kind {
	case jString:
		return append(args, Arg{Name: name, Value: v.str})
	case jTrue, jFalse:
		if top && !strings.HasPrefix(name, "no-") {
			f := FormTrue
			if v.kind == jFalse {
				f = FormFalse
			}
			return append(args, Arg{Name: name, Form: f})
		}
		// In an array, or a name that itself starts with "no-" (whose
		// --no-name would read as the negation of another name).
		return append(args, Arg{Name: name, Value: v.canonical()})
	case jArray:
		if !top || len(v.arr) == 0 {
			return append(args, Arg{Name: name, Value: v.canonical()})
		}
		for _, e := range v.arr {
			if e.kind == jArray {
				args = append(args, Arg{Name: name, Value: e.canonical()})
				continue
			}
			args = appendArg(args, name, e, false)
		}
		return args
	default:
		return append(args, Arg{Name: name, Value: v.canonical()})
	}
}

type jsonKind uint8

const (
	jNull jsonKind = iota
	jTrue
	jFalse
	jNumber
	jString
	jArray
	jObject
)

type jsonValue struct {
	kind jsonKind
	str  string // string value, or canonical number
	arr  []jsonValue
	obj  []member // sorted by key
}

type member struct {
	key string
	val jsonValue
	at  int // byte offset of the key, for errors
}

type jsonParser struct {
	s []byte
	i int
}

func (p *jsonParser) fail(expected string) error {
	found := "the end"
	if p.i < len(p.s) {
		found = strconv.QuoteRune(rune(p.s[p.i]))
		if r, n := utf8.DecodeRune(p.s[p.i:]); r != utf8.RuneError || n > 1 {
			found = strconv.QuoteRune(r)
		}
	}
	return fmt.Errorf("%w: at byte %d: expected %s, found %s", ErrRender, p.i, expected, found)
}

func (p *jsonParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *jsonParser) value(depth int) (jsonValue, error) {
	if depth > maxDepth {
		return jsonValue{}, fmt.Errorf("%w: at byte %d: nested deeper than %d", ErrRender, p.i, maxDepth)
	}
	p.space()
	if p.i >= len(p.s) {
		return jsonValue{}, p.fail("a JSON value")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.string()
		return jsonValue{kind: jString, str: s}, err
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case p.word("true"):
		return jsonValue{kind: jTrue}, nil
	case p.word("false"):
		return jsonValue{kind: jFalse}, nil
	case p.word("null"):
		return jsonValue{kind: jNull}, nil
	}
	return jsonValue{}, p.fail("a JSON value")
}

func (p *jsonParser) word(w string) bool {
	if bytes.HasPrefix(p.s[p.i:], []byte(w)) {
		p.i += len(w)
		return true
	}
	return false
}

func (p *jsonParser) object(depth int) (jsonValue, error) {
	p.i++ // '{'
	v := jsonValue{kind: jObject}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return v, nil
	}
	for {
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return v, p.fail("a property name in double quotes")
		}
		at := p.i
		k, err := p.string()
		if err != nil {
			return v, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return v, p.fail("':'")
		}
		p.i++
		e, err := p.value(depth + 1)
		if err != nil {
			return v, err
		}
		v.obj = append(v.obj, member{key: k, val: e, at: at})
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			slices.SortStableFunc(v.obj, func(a, b member) int { return strings.Compare(a.key, b.key) })
			for i := 1; i < len(v.obj); i++ {
				if v.obj[i].key == v.obj[i-1].key {
					return v, fmt.Errorf("%w: at byte %d: duplicate property %q", ErrRender, v.obj[i].at, v.obj[i].key)
				}
			}
			return v, nil
		}
		return v, p.fail("',' or '}'")
	}
}

func (p *jsonParser) array(depth int) (jsonValue, error) {
	p.i++ // '['
	v := jsonValue{kind: jArray}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		e, err := p.value(depth + 1)
		if err != nil {
			return v, err
		}
		v.arr = append(v.arr, e)
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return v, nil
		}
		return v, p.fail("',' or ']'")
	}
}

func (p *jsonParser) string() (string, error) {
	p.i++ // '"'
	var b []byte
	for {
		if p.i >= len(p.s) {
			return "", p.fail(`a closing '"'`)
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), nil
		case c < 0x20:
			return "", p.fail("an escaped control character")
		case c == '\\':
			r, err := p.escape()
			if err != nil {
				return "", err
			}
			b = utf8.AppendRune(b, r)
		case c < 0x80:
			b = append(b, c)
			p.i++
		default:
			r, n := utf8.DecodeRune(p.s[p.i:])
			if r == utf8.RuneError && n == 1 {
				return "", fmt.Errorf("%w: at byte %d: invalid UTF-8", ErrRender, p.i)
			}
			b = append(b, p.s[p.i:p.i+n]...)
			p.i += n
		}
	}
}

func (p *jsonParser) escape() (rune, error) {
	if p.i+1 >= len(p.s) {
		p.i++
		return 0, p.fail("an escape")
	}
	c := p.s[p.i+1]
	p.i += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, err := p.hex4()
		if err != nil {
			return 0, err
		}
		if !utf16.IsSurrogate(r) {
			return r, nil
		}
		at := p.i - 6
		if r < 0xdc00 && p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
			p.i += 2
			r2, err := p.hex4()
			if err != nil {
				return 0, err
			}
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, nil
			}
		}
		return 0, fmt.Errorf("%w: at byte %d: a lone UTF-16 surrogate escape", ErrRender, at)
	}
	p.i--
	return 0, p.fail(`an escape (\" \\ \/ \b \f \n \r \t \uXXXX)`)
}

func (p *jsonParser) hex4() (rune, error) {
	if p.i+4 > len(p.s) {
		return 0, p.fail("four hex digits")
	}
	n, err := strconv.ParseUint(string(p.s[p.i:p.i+4]), 16, 32)
	if err != nil {
		return 0, p.fail("four hex digits")
	}
	p.i += 4
	return rune(n), nil
}

// number reads a JSON number and returns it in canonical form: the exact
// decimal value, written as ECMAScript writes numbers (no exponent from
// 1e-6 up to 1e21, else d.ddde±n) but without rounding to a float64, so
// that two numbers render alike exactly when they are the same number.
func (p *jsonParser) number() (jsonValue, error) { return p.exactNumber() }

// asBinary64 is what a binary64 reader makes of the canonical number n,
// written back canonically (as JavaScript prints it, exactly as
// exactNumber writes it), and whether that is n. A number of at most 15
// significant digits well within the range always is (DBL_DIG): no
// conversion then.
func asBinary64(n string) (string, bool) {
	mant, exp := n, 0
	if m, e, found := strings.Cut(n, "e"); found {
		mant = m
		exp, _ = strconv.Atoi(e)
	}
	digits := 0
	for i := 0; i < len(mant); i++ {
		if mant[i] >= '0' && mant[i] <= '9' {
			digits++
		}
	}
	if digits <= 15 && exp > -290 && exp < 290 {
		return n, true
	}
	f, _ := strconv.ParseFloat(n, 64) // ±Inf past the range, a rounded value within it
	if math.IsInf(f, 0) {
		if f < 0 {
			return "-Infinity", false
		}
		return "Infinity", false
	}
	q := &jsonParser{s: []byte(strconv.FormatFloat(f, 'e', -1, 64))}
	v, err := q.exactNumber()
	if err != nil {
		return string(q.s), false // cannot happen: FormatFloat writes a JSON number
	}
	return v.str, v.str == n
}

// notBinary64 says why the number n is refused: a binary64 reader reads it
// as read.
func notBinary64(n, read string) string {
	return "the number " + n + " is not one a binary64 reader (JavaScript's JSON.parse, a float64) reads as itself: it reads " + read + " (send it as a string, or one a binary64 number holds exactly)"
}

// exactNumber is number without the binary64 check.
func (p *jsonParser) exactNumber() (jsonValue, error) {
	start := p.i
	neg := false
	if p.s[p.i] == '-' {
		neg = true
		p.i++
	}
	digitsFrom := func() string {
		j := p.i
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
		}
		return string(p.s[j:p.i])
	}
	intPart := digitsFrom()
	if intPart == "" || len(intPart) > 1 && intPart[0] == '0' {
		p.i = start
		return jsonValue{}, p.fail("a JSON number")
	}
	frac := ""
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if frac = digitsFrom(); frac == "" {
			return jsonValue{}, p.fail("digits after '.'")
		}
	}
	exp := int64(0)
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		eneg := false
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			eneg = p.s[p.i] == '-'
			p.i++
		}
		e := strings.TrimLeft(digitsFrom(), "0")
		if p.s[p.i-1] < '0' || p.s[p.i-1] > '9' {
			return jsonValue{}, p.fail("digits of an exponent")
		}
		if len(e) > 9 {
			return jsonValue{}, fmt.Errorf("%w: at byte %d: number exponent out of range", ErrRender, start)
		}
		if e != "" {
			exp, _ = strconv.ParseInt(e, 10, 64)
		}
		if eneg {
			exp = -exp
		}
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= int64(len(frac))
	if digits == "" {
		return jsonValue{kind: jNumber, str: "0"}, nil
	}
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	n := int64(len(digits))
	k := n + exp // the decimal point sits after k digits
	var s string
	switch {
	case exp >= 0 && k <= 21:
		s = digits + strings.Repeat("0", int(exp))
	case k > 0 && k <= 21:
		s = digits[:k] + "." + digits[k:]
	case k > -6 && k <= 0:
		s = "0." + strings.Repeat("0", int(-k)) + digits
	default:
		s = digits[:1]
		if n > 1 {
			s += "." + digits[1:]
		}
		if k-1 >= 0 {
			s += "e+" + strconv.FormatInt(k-1, 10)
		} else {
			s += "e-" + strconv.FormatInt(-(k-1), 10)
		}
	}
	if neg {
		s = "-" + s
	}
	return jsonValue{kind: jNumber, str: s}, nil
}

// canonical writes v as canonical JSON: no insignificant space, object keys
// sorted bytewise, numbers canonical, strings with the minimal escapes.
func (v jsonValue) canonical() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v jsonValue) write(b *strings.Builder) {
	switch v.kind {
	case jNull:
		b.WriteString("null")
	case jTrue:
		b.WriteString("true")
	case jFalse:
		b.WriteString("false")
	case jNumber:
		b.WriteString(v.str)
	case jString:
		writeJSONString(b, v.str)
	case jArray:
		b.WriteByte('[')
		for i, e := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			e.write(b)
		}
		b.WriteByte(']')
	case jObject:
		b.WriteByte('{')
		for i, m := range v.obj {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, m.key)
			b.WriteByte(':')
			m.val.write(b)
		}
		b.WriteByte('}')
	}
}

func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

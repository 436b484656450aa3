// Package jsonparse parses one JSON document into the values encoding/json's
// Decoder with UseNumber produces (map[string]any, []any, string,
// json.Number, bool, nil), accepting exactly the documents it accepts, only
// faster: strings are scanned eight bytes at a time (a long one with the
// standard library's vectorised byte search and 32 bytes a step) and, when
// they hold no escape and are valid UTF-8, are substrings of the input (so
// they keep the input alive while any of them is); numbers are always
// substrings, and integers 0 to 999 shared boxed values; arrays are made
// once at their final size.
//
// It is pure: it imports only the standard library.
package jsonparse

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest, as in encoding/json: a
// document nested deeper is refused.
const MaxDepth = 10000

// SyntaxError is why a document was refused and where: Offset is the byte
// offset in the input of the first byte that could not be accepted (the
// input's length when it ended too early).
type SyntaxError struct {
	Offset int
	msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s at byte offset %d", e.msg, e.Offset)
}

// Parse parses s, one JSON value with optional whitespace around it, into
// the value encoding/json's Decoder with UseNumber decodes from it (map
// keys: the last of duplicates wins; invalid UTF-8 and lone surrogates in
// strings become U+FFFD, as encoding/json replaces them). Anything after the
// value but whitespace is an error.
func Parse(s string) (any, error) { return parse(s, false) }

// ParseStrict is Parse refusing, as a *SyntaxError at the offending byte,
// what JSON parsers read differently: a duplicate key in an object (the
// last wins here and in encoding/json and JSON.parse, the first in some
// others, and some refuse it), invalid UTF-8 in a string and a \u escape
// of a lone UTF-16 surrogate (replaced by U+FFFD here, refused or kept as
// they are by others). What it accepts, every conforming parser reads as
// the one value it returns (numbers aside: it keeps their text, which a
// binary64 reader may round).
func ParseStrict(s string) (any, error) { return parse(s, true) }

func parse(s string, strict bool) (any, error) {
	p := pool.Get().(*parser)
	p.s, p.i, p.depth, p.strict = s, 0, 0, strict
	v, err := p.top()
	p.s = ""
	// Scratch space stays in the pool only while small, and holds no value
	// of this document.
	if err != nil {
		p.used = max(p.used, len(p.vals))
	}
	clear(p.vals[:p.used])
	p.vals, p.used = p.vals[:0], 0
	if cap(p.vals) <= maxPooled && cap(p.buf) <= maxPooled*16 {
		pool.Put(p)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

const maxPooled = 1 << 12

var pool = sync.Pool{New: func() any { return new(parser) }}

// parser is one parse's state. Arrays' elements are gathered on the
// stack vals (a nested array's above its parent's) and copied out at the
// closing bracket, when their number is known. Objects' members go straight
// into their map (gathering them to make the map at its final size was
// slower for small objects: the copy, and write barriers while the GC runs).
type parser struct {
	s     string
	i     int
	depth int
	vals  []any
	used  int    // the length vals reached: what to clear at the end
	buf   []byte // an escaped string's unescaped bytes
	// strict: refuse duplicate keys, invalid UTF-8 and lone surrogates
	// (ParseStrict).
	strict bool
	// fold: scanTop compares keys folded (Scan's second pass over a
	// document with FoldableKeys).
	fold bool
	// Scan's: its limits, what it found, and the keys of the objects it
	// is in (each object's after its parent's), for duplicates.
	lim  Limits
	sc   Scanned
	keys []string
	// plainStr: the last string scanStr read had no escape.
	plainStr bool
	// scanFast's: the frames of the containers around the innermost one
	// (outer[:nout]), the words of open objects' keys (kw[:nkw]; long
	// keys in keys), a bit for each short key of the innermost object
	// (sig), the maps of objects with many keys, and the top-level
	// object's member being read.
	outer     []outer
	nout      int
	kw        []uint64
	nkw       int
	sig       uint64
	seen      []map[string]struct{}
	memberKey string
	memberAt  int
}

func (p *parser) fail(msg string) error {
	return &SyntaxError{Offset: p.i, msg: msg}
}

// failChar says what was found at p.i instead of what was expected (or that
// the input ended), in encoding/json's words.
func (p *parser) failChar(context string) error {
	if p.i >= len(p.s) {
		return p.fail("unexpected end of JSON input")
	}
	return p.fail("invalid character " + quoteChar(p.s[p.i]) + " " + context)
}

func quoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := fmt.Sprintf("%q", rune(c))
	return "'" + s[1:len(s)-1] + "'"
}

func (p *parser) top() (any, error) {
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.i < len(p.s) {
		return nil, p.failChar("after top-level value")
	}
	return v, nil
}

func isSpace(c byte) bool {
	return c <= ' ' && (c == ' ' || c == '\t' || c == '\n' || c == '\r')
}

// next reads what follows an element of an array or object, after any
// whitespace: a comma (more elements: true, the whitespace after it
// skipped too) or the container's close; anything else is after's error.
func (p *parser) next(close byte, after string) (more bool, err error) {
	p.skipSpace()
	if p.i >= len(p.s) {
		return false, p.fail("unexpected end of JSON input")
	}
	c := p.s[p.i]
	p.i++
	if c == ',' {
		p.skipSpace()
		return true, nil
	}
	if c == close {
		return false, nil
	}
	p.i--
	return false, p.failChar(after)
}

func (p *parser) skipSpace() {
	s, i := p.s, p.i
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	p.i = i
}

// value parses the value starting at p.i (no whitespace before it).
func (p *parser) value() (any, error) {
	if p.i >= len(p.s) {
		return nil, p.fail("unexpected end of JSON input")
	}
	switch c := p.s[p.i]; c {
	case '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return s, nil
	case '{':
		return p.object()
	case '[':
		return p.array()
	case 't':
		return p.literal("true", true)
	case 'f':
		return p.literal("false", false)
	case 'n':
		return p.literal("null", nil)
	default:
		if c == '-' || '0' <= c && c <= '9' {
			return p.number()
		}
		return nil, p.failChar("looking for beginning of value")
	}
}

func (p *parser) literal(word string, v any) (any, error) {
	if strings.HasPrefix(p.s[p.i:], word) {
		p.i += len(word)
		return v, nil
	}
	// Point at the first byte that differs.
	for k := 1; k < len(word); k++ {
		p.i++
		if p.i >= len(p.s) || p.s[p.i] != word[k] {
			return nil, p.failChar("in literal " + word + " (expecting '" + word[k:k+1] + "')")
		}
	}
	panic("unreachable")
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// number parses the RFC 8259 number at p.i; its text is the json.Number.
func (p *parser) number() (any, error) {
	start := p.i
	if err := p.numberEnd(); err != nil {
		return nil, err
	}
	s, i := p.s, p.i
	if n := i - start; n <= 3 && s[start] != '-' && s[i-1] != '.' {
		// An integer below 1000 (no leading zeros in JSON: its text is
		// its value's), already boxed.
		if v := smallInt(s[start:i]); v >= 0 {
			return smallInts[v], nil
		}
	}
	return json.Number(s[start:i]), nil
}

// numberEnd moves p.i past the RFC 8259 number at p.i.
func (p *parser) numberEnd() error {
	s, i := p.s, p.i
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i++
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	default:
		p.i = i
		return p.failChar("in numeric literal")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			p.i = i
			return p.failChar("after decimal point in numeric literal")
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			p.i = i
			return p.failChar("in exponent of numeric literal")
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	p.i = i
	return nil
}

// smallInts holds json.Number("0") to json.Number("999") as interface
// values, made once: small integers are common (ids, counts, limits), and
// boxing each parsed one would be an allocation.
var smallInts = func() (t [1000]any) {
	for v := range t {
		t[v] = json.Number(strconv.Itoa(v))
	}
	return t
}()

// smallInt is the value of n, 1 to 3 digits, or -1 if n is not all digits.
func smallInt(n string) int {
	v := 0
	for k := 0; k < len(n); k++ {
		c := n[k]
		if !isDigit(c) {
			return -1
		}
		v = v*10 + int(c-'0')
	}
	return v
}

func (p *parser) array() (any, error) {
	if p.depth++; p.depth > MaxDepth {
		return nil, p.fail("exceeded max depth")
	}
	p.i++
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return []any{}, nil
	}
	mark := len(p.vals)
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		p.vals = append(p.vals, v)
		if more, err := p.next(']', "after array element"); err != nil {
			return nil, err
		} else if !more {
			break
		}
	}
	out := make([]any, len(p.vals)-mark)
	copy(out, p.vals[mark:])
	p.used = max(p.used, len(p.vals))
	p.vals = p.vals[:mark]
	p.depth--
	return out, nil
}

func (p *parser) object() (any, error) {
	if p.depth++; p.depth > MaxDepth {
		return nil, p.fail("exceeded max depth")
	}
	p.i++
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.depth--
		return map[string]any{}, nil
	}
	m := make(map[string]any)
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.failChar("looking for beginning of object key string")
		}
		at := p.i
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.failChar("after object key")
		}
		p.i++
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		n := len(m)
		m[key] = v
		if len(m) == n && p.strict {
			p.i = at
			return nil, p.fail("duplicate key " + strconv.Quote(key))
		}
		if more, err := p.next('}', "after object key:value pair"); err != nil {
			return nil, err
		} else if !more {
			break
		}
	}
	p.depth--
	return m, nil
}

const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load64 is s[i:i+8] as a little-endian word (one load on amd64 and arm64).
func load64(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// stops has the top bit set in the byte of x that is the first quote,
// backslash or control character of x, if any (and maybe in bytes after it,
// never before: a borrow only moves upward from such a byte).
func stops(x uint64) uint64 {
	q := x ^ (lsb * '"')
	b := x ^ (lsb * '\\')
	return (((q - lsb) &^ q) | ((b - lsb) &^ b) | ((x - lsb*0x20) &^ x)) & msb
}

// plain returns the end of the run of plain bytes at s[i:] (the index of
// the first quote, backslash or control character, or len(s)) and whether
// any byte of the run is non-ASCII (then it may be invalid UTF-8).
func plain(s string, i int) (int, bool) {
	var seen uint64 // the OR of the words passed: its top bits say non-ASCII
	// A short run ends within a few words: read it a word at a time (and
	// so is a string with an escape every few dozen bytes). One still going
	// after eight words goes to plainLong, which finds its end with the
	// standard library's vectorised search; where that finds a control
	// character, the words go on to say where.
	for k := 0; i+8 <= len(s); k++ {
		if k == 8 {
			if end, nonASCII, ok := plainLong(s, i); ok {
				return end, nonASCII || seen&msb != 0
			}
		}
		x := load64(s, i)
		if m := stops(x); m != 0 {
			n := bits.TrailingZeros64(m) >> 3
			// Only the bytes before the stop count.
			seen |= x & (1<<(8*n) - 1)
			return i + n, seen&msb != 0
		}
		seen |= x
		i += 8
	}
	for ; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || c < 0x20 {
			break
		}
		seen |= uint64(c)
	}
	return i, seen&msb != 0
}

// testHookWindow, if set (by tests only), is told the length of every
// window plainLong reads: TestStringScanIsLinear adds them up.
var testHookWindow func(n int)

// plainLong is plain for a run that may be long: the end is the first quote
// or backslash at or after i (strings.IndexByte, vectorised), or len(s) if
// there is none, provided the bytes before it hold no control character
// (ctlOrHigh); ok is false otherwise, and the caller reads the run a word at
// a time to find where it stops. The stop is looked for in windows that
// double from 256 bytes, each checked before the next is read, so the work
// is in proportion to the run, not to the rest of the document (a string
// with an escape every few dozen bytes is not read to its closing quote
// once per escape).
func plainLong(s string, i int) (end int, nonASCII, ok bool) {
	var high bool
	for w := 256; i < len(s); w *= 2 {
		chunk := s[i:min(len(s), i+w)]
		if testHookWindow != nil {
			testHookWindow(len(chunk))
		}
		stop, found := len(chunk), false
		if b := strings.IndexByte(chunk, '\\'); b >= 0 {
			stop, found = b, true
		}
		if q := strings.IndexByte(chunk[:stop], '"'); q >= 0 {
			stop, found = q, true
		}
		ctl, h := ctlOrHigh(chunk[:stop])
		if ctl {
			return 0, false, false
		}
		high = high || h
		if found {
			return i + stop, high, true
		}
		i += len(chunk)
	}
	return len(s), high, true
}

// ctlOrHigh says whether s holds a control character (below 0x20) and
// whether it holds a non-ASCII byte, reading 32 bytes a step. In a word x,
// (x - 0x20 in each byte) &^ x has the top bit set in a byte below 0x20 and,
// since a borrow only starts at such a byte, in no byte when there is none.
func ctlOrHigh(s string) (ctl, high bool) {
	var c, h uint64
	i := 0
	for ; i+32 <= len(s); i += 32 {
		w := s[i : i+32]
		a, b, d, e := load64(w, 0), load64(w, 8), load64(w, 16), load64(w, 24)
		c |= ((a - lsb*0x20) &^ a) | ((b - lsb*0x20) &^ b) | ((d - lsb*0x20) &^ d) | ((e - lsb*0x20) &^ e)
		h |= a | b | d | e
	}
	for ; i+8 <= len(s); i += 8 {
		x := load64(s, i)
		c |= (x - lsb*0x20) &^ x
		h |= x
	}
	for ; i < len(s); i++ {
		x := uint64(s[i])
		if x < 0x20 {
			c |= msb
		}
		h |= x
	}
	return c&msb != 0, h&msb != 0
}

// str parses the string whose opening quote is at p.i. A string with no
// escape that is valid UTF-8 is a substring of the input.
func (p *parser) str() (string, error) {
	s := p.s
	start := p.i + 1
	i, nonASCII := plain(s, start)
	if i < len(s) && s[i] == '"' {
		if v := s[start:i]; !nonASCII || utf8.ValidString(v) {
			p.i = i + 1
			return v, nil
		}
	}
	if err := p.strSlow(start, i, nonASCII); err != nil {
		return "", err
	}
	return string(p.buf), nil
}

// strSlow goes on with the string starting at start (after the quote)
// whose first run of plain bytes ends at i, at an escape, a control
// character, the end of the input, or a quote after invalid UTF-8: it
// unescapes (into p.buf, which holds the string's value when it returns
// nil) and replaces invalid UTF-8 as encoding/json does.
func (p *parser) strSlow(start, i int, nonASCII bool) error {
	s := p.s
	buf := p.buf[:0]
	run := s[start:i]
	for {
		if nonASCII && !utf8.ValidString(run) {
			if p.strict {
				p.i = start + invalidAt(run)
				return p.fail("invalid UTF-8 in string")
			}
			buf = appendValid(buf, run)
		} else {
			buf = append(buf, run...)
		}
		if i >= len(s) {
			p.i = i
			return p.fail("unexpected end of JSON input")
		}
		switch c := s[i]; {
		case c == '"':
			p.i = i + 1
			p.buf = buf
			return nil
		case c < 0x20:
			p.i = i
			return p.failChar("in string literal")
		}
		// A backslash.
		if i+1 >= len(s) {
			p.i = i + 1
			return p.fail("unexpected end of JSON input")
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			buf = append(buf, e)
			i += 2
		case 'b':
			buf = append(buf, '\b')
			i += 2
		case 'f':
			buf = append(buf, '\f')
			i += 2
		case 'n':
			buf = append(buf, '\n')
			i += 2
		case 'r':
			buf = append(buf, '\r')
			i += 2
		case 't':
			buf = append(buf, '\t')
			i += 2
		case 'u':
			r, n := hex4(s, i+2)
			if n < 4 {
				p.i = i + 2 + n
				return p.failChar("in \\u hexadecimal character escape")
			}
			i += 6
			if utf16.IsSurrogate(r) {
				at := i - 6
				// A pair only with a \u escape right after it; else,
				// like a lone low half, U+FFFD.
				d := utf8.RuneError
				if i+1 < len(s) && s[i] == '\\' && s[i+1] == 'u' {
					if r2, n := hex4(s, i+2); n == 4 {
						if d2 := utf16.DecodeRune(r, r2); d2 != utf8.RuneError {
							d = d2
							i += 6
						}
					}
				}
				if d == utf8.RuneError && p.strict {
					p.i = at
					return p.fail("lone UTF-16 surrogate " + s[at:at+6] + " in string")
				}
				r = d
			}
			buf = utf8.AppendRune(buf, r)
		default:
			p.i = i + 1
			return p.failChar("in string escape code")
		}
		start = i
		i, nonASCII = plain(s, start)
		run = s[start:i]
	}
}

// invalidAt is the offset in run of its first byte that is not part of a
// valid UTF-8 sequence.
func invalidAt(run string) int {
	for k := 0; k < len(run); {
		r, n := utf8.DecodeRuneInString(run[k:])
		if r == utf8.RuneError && n == 1 {
			return k
		}
		k += n
	}
	return len(run)
}

// appendValid appends run to buf with each byte that is not part of a
// valid UTF-8 sequence replaced by U+FFFD, as encoding/json does.
func appendValid(buf []byte, run string) []byte {
	for len(run) > 0 {
		r, n := utf8.DecodeRuneInString(run)
		if r == utf8.RuneError && n == 1 {
			buf = append(buf, "\uFFFD"...)
		} else {
			buf = append(buf, run[:n]...)
		}
		run = run[n:]
	}
	return buf
}

// hex4 reads up to four hex digits at s[i:]: the value and how many were
// read (4 unless a non-hex byte or the end came first).
func hex4(s string, i int) (rune, int) {
	var r rune
	for k := 0; k < 4; k++ {
		if i+k >= len(s) {
			return r, k
		}
		c := s[i+k]
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return r, k
		}
		r = r<<4 | rune(c)
	}
	return r, 4
}

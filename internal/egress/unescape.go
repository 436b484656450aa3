package egress

import (
	"bytes"
	"sort"
	"sync"
	"unicode/utf8"
)

// Escaped forms of a secret: a server that puts the value it was sent into
// an HTML page or a JSON or JavaScript string escapes some of its
// characters, and which ones depends on the encoder ("/" as "&#47;",
// "&#x2F;" or "\u002f"; html/template writes "+" as "&#43;" and "&" as
// "&amp;"; a JSON encoder may escape any character as \uXXXX). The
// combinations cannot be listed per secret, so the redactor decodes one
// level of these escapes in a shadow copy of the text, looks for the
// secrets (and their other encodings) there too, and maps every match back
// to the bytes it came from.
//
// Line breaks inside base64 are decoded the same way, to nothing: MIME
// base64 (openssl base64, Python's base64.encodebytes, PEM) breaks its
// lines every 64 or 76 characters with LF or CRLF, and a JSON string
// holding it has them as \n or \r\n. A break counts when at least
// minB64Run base64 characters (either alphabet) come before it and one
// follows, so the breaks of ordinary text are left alone and a secret's
// base64 form that crosses a break is found like one that does not.

// escMark records that decoded bytes [dpos, dpos+dlen) came from the
// escape at [opos, opos+olen) of the original text. Between marks the two
// texts are the same bytes.
// int32 keeps a mark at 16 bytes: text of escapes only ("\n\n...") has
// one mark per two bytes, so a 2 MiB body can need 16 MiB of them.
type escMark struct {
	dpos, dlen, opos, olen int32
}

// mayHaveEscapes is the cheap test that keeps the decoder off ordinary
// text: each of the bytes is found with the vectorised IndexByte. Most
// text has a line break, so most bodies reach unescape, which looks at
// each break (see b64Break) and decodes nothing when none is in base64.
func mayHaveEscapes(b []byte) bool {
	return bytes.IndexByte(b, '&') >= 0 || bytes.IndexByte(b, '\\') >= 0 || bytes.IndexByte(b, '\n') >= 0
}

// minB64Run is how many base64 characters must come right before a line
// break for it to be taken as a break inside base64. MIME lines are 64 or
// 76 characters; 16 leaves room for a prefix on the first line ("data: ")
// while sparing the breaks of prose.
const minB64Run = 16

// b64Char says whether c is in the standard or URL base64 alphabet
// (padding excluded: it ends the encoding), or a backslash: a JSON
// encoder may write '/' as \/ (PHP's json_encode does).
var b64Char = func() (s byteSet) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_\\") {
		s.add(c)
	}
	return s
}()

// b64Break returns the length of a line break at b[i:] that sits inside
// base64 text (LF, CRLF, or their JSON escapes \n and \r\n, after at
// least minB64Run base64 characters and before one), or 0. i is where
// the break starts (at the CR of a CRLF).
func b64Break(b []byte, i int) int {
	n := 0
	switch {
	case b[i] == '\n':
		n = 1
	case b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n':
		n = 2
	case bytes.HasPrefix(b[i:], []byte(`\n`)):
		n = 2
	case bytes.HasPrefix(b[i:], []byte(`\r\n`)):
		n = 4
	default:
		return 0
	}
	if i < minB64Run || i+n >= len(b) || !b64Char.has(b[i+n]) || !b64Char.hasAll(b[i-minB64Run:i]) {
		return 0
	}
	return n
}

// byteSet is a set of byte values.
type byteSet [4]uint64

func (s *byteSet) add(c byte)      { s[c/64] |= 1 << (c % 64) }
func (s *byteSet) has(c byte) bool { return s[c/64]&(1<<(c%64)) != 0 }
func (s *byteSet) hasAll(b []byte) bool {
	for _, c := range b {
		if !s.has(c) {
			return false
		}
	}
	return true
}

// shadow is the decoded copy of a text and the marks that map it back. The
// buffers are pooled: a 2 MiB body would otherwise cost a fresh, zeroed
// 2 MiB allocation per redaction.
type shadow struct {
	text  []byte
	marks []escMark
}

var shadowPool = sync.Pool{New: func() any { return new(shadow) }}

// maxPooledShadow bounds what the pool keeps (about the 2 MiB body cap).
const maxPooledShadow = 4 << 20

func getShadow() *shadow { return shadowPool.Get().(*shadow) }

func putShadow(s *shadow) {
	// Marks too: text of nothing but "\n" has a 16-byte mark per 2 bytes.
	if cap(s.text) <= maxPooledShadow && cap(s.marks) <= maxPooledShadow/16 {
		s.text, s.marks = s.text[:0], s.marks[:0]
		shadowPool.Put(s)
	}
}

// unescape decodes HTML character references and backslash escapes in b,
// one level, left to right, into sh. It returns nil marks when nothing
// decoded.
//
// Only escapes whose decoded bytes all occur in some pattern (in) are
// decoded; the others are copied as they are, since no match can cover
// them. In a JSON body that is most of them ("\n", "\"", "\u00e9"), so
// the second search is usually skipped or short. An escape that is kept is
// still skipped whole, so "\\u0041" stays a backslash and "u0041".
func unescape(b []byte, in *byteSet, sh *shadow) ([]byte, []escMark) {
	var dec []byte
	var marks []escMark
	started := false
	pos := 0 // b[:pos] has been copied or decoded into dec
	amp, bs, nl := nextByte(b, 0, '&'), nextByte(b, 0, '\\'), nextByte(b, 0, '\n')
	for amp >= 0 || bs >= 0 || nl >= 0 {
		i := amp
		if i < 0 || bs >= 0 && bs < i {
			i = bs
		}
		if i < 0 || nl >= 0 && nl < i {
			i = nl
		}
		var r rune
		var n int
		brk := false // a line break inside base64: decodes to nothing
		switch b[i] {
		case '&':
			r, n = charRef(b[i:])
		case '\\':
			if n = b64Break(b, i); n > 0 {
				brk = true
			} else {
				r, n = backslash(b[i:])
			}
		default: // '\n', at the end of a CRLF when a CR precedes it
			if i > 0 && b[i-1] == '\r' && i-1 >= pos {
				if n = b64Break(b, i-1); n > 0 {
					i--
				}
			}
			if n == 0 {
				n = b64Break(b, i)
			}
			brk = n > 0
		}
		next := i + 1
		var enc [utf8.UTFMax]byte
		var d []byte
		if brk {
			d = enc[:0]
		} else if n > 0 {
			if r < 0 { // a raw byte (\xHH with HH >= 0x80)
				enc[0] = byte(-r)
				d = enc[:1]
			} else {
				d = enc[:utf8.EncodeRune(enc[:], r)]
			}
			if !in.hasAll(d) {
				n, next = 0, i+n // keep it, and do not look inside it
			}
		}
		if n > 0 {
			if !started {
				// Sized once: decoding only shrinks text, and there is at
				// most one mark per '&', '\' or LF.
				started = true
				dec = grow(sh.text, len(b))
				marks = growMarks(sh.marks, bytes.Count(b[i:], []byte{'&'})+bytes.Count(b[i:], []byte{'\\'})+bytes.Count(b[i:], []byte{'\n'}))
			}
			dec = append(dec, b[pos:i]...)
			m := escMark{dpos: int32(len(dec)), opos: int32(i), olen: int32(n), dlen: int32(len(d))}
			dec = append(dec, d...)
			marks = append(marks, m)
			pos = i + n
			next = pos
		}
		if amp >= 0 && amp < next {
			amp = nextByte(b, next, '&')
		}
		if bs >= 0 && bs < next {
			bs = nextByte(b, next, '\\')
		}
		if nl >= 0 && nl < next {
			nl = nextByte(b, next, '\n')
		}
	}
	if !started {
		return nil, nil
	}
	sh.text, sh.marks = append(dec, b[pos:]...), marks
	return sh.text, sh.marks
}

func grow(b []byte, n int) []byte {
	if cap(b) >= n {
		return b[:0]
	}
	return make([]byte, 0, n)
}

func growMarks(m []escMark, n int) []escMark {
	if cap(m) >= n {
		return m[:0]
	}
	return make([]escMark, 0, n)
}

func nextByte(b []byte, from int, c byte) int {
	if i := bytes.IndexByte(b[from:], c); i >= 0 {
		return from + i
	}
	return -1
}

// namedRef returns the character an HTML named character reference for
// ASCII punctuation stands for (what encoders use for the characters
// secrets are made of), or -1. A switch, not a map: it runs once per '&'
// of a body, and compiles to a few comparisons.
func namedRef(name []byte) rune {
	switch string(name) {
	case "amp":
		return '&'
	case "lt":
		return '<'
	case "gt":
		return '>'
	case "quot":
		return '"'
	case "apos":
		return '\''
	case "sol":
		return '/'
	case "bsol":
		return '\\'
	case "plus":
		return '+'
	case "equals":
		return '='
	case "colon":
		return ':'
	case "semi":
		return ';'
	case "comma":
		return ','
	case "period":
		return '.'
	case "excl":
		return '!'
	case "quest":
		return '?'
	case "num":
		return '#'
	case "dollar":
		return '$'
	case "percnt":
		return '%'
	case "lpar":
		return '('
	case "rpar":
		return ')'
	case "ast", "midast":
		return '*'
	case "lowbar":
		return '_'
	case "grave":
		return '`'
	case "tilde":
		return '~'
	case "lsqb", "lbrack":
		return '['
	case "rsqb", "rbrack":
		return ']'
	case "lcub", "lbrace":
		return '{'
	case "rcub", "rbrace":
		return '}'
	case "verbar", "vert":
		return '|'
	case "commat":
		return '@'
	case "Hat":
		return '^'
	case "hyphen", "dash":
		return '-'
	case "Tab":
		return '\t'
	case "NewLine":
		return '\n'
	case "nbsp":
		return 0xa0
	}
	return -1
}

// charRef decodes an HTML character reference at the start of s ("&#47;",
// "&#x2F;", "&sol;"; the semicolon may be missing after a numeric one and
// after amp, lt, gt and quot, as browsers allow). n is 0 if there is none.
func charRef(s []byte) (r rune, n int) {
	if len(s) < 3 {
		return 0, 0
	}
	if s[1] == '#' {
		i, base := 2, rune(10)
		if s[2] == 'x' || s[2] == 'X' {
			i, base = 3, 16
		}
		start := i
		for ; i < len(s) && i-start < 7; i++ {
			d := hexVal(s[i])
			if d < 0 || d >= base {
				break
			}
			r = r*base + d
		}
		if i == start || r > utf8.MaxRune || r >= 0xd800 && r <= 0xdfff || r == 0 {
			return 0, 0
		}
		if i < len(s) && s[i] == ';' {
			i++
		}
		return r, i
	}
	i := 1
	for i < len(s) && i < 10 && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	r = namedRef(s[1:i])
	if r < 0 {
		return 0, 0
	}
	if i < len(s) && s[i] == ';' {
		return r, i + 1
	}
	switch string(s[1:i]) {
	case "amp", "lt", "gt", "quot":
		return r, i
	}
	return 0, 0
}

// backslash decodes a JSON, JavaScript or C-style escape at the start of s:
// \uXXXX (with surrogate pairs), \xHH, and \/ \\ \" \' \n \r \t \b \f. A
// negative r is the raw byte -r (\xHH above 0x7f, as Go and C write an
// invalid byte). n is 0 if there is none.
func backslash(s []byte) (r rune, n int) {
	if len(s) < 2 {
		return 0, 0
	}
	switch s[1] {
	case '/', '\\', '"', '\'':
		return rune(s[1]), 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'x':
		if len(s) < 4 || hexVal(s[2]) < 0 || hexVal(s[3]) < 0 {
			return 0, 0
		}
		r = hexVal(s[2])<<4 | hexVal(s[3])
		if r >= 0x80 {
			return -r, 4
		}
		return r, 4
	case 'u':
		r, ok := hex4(s[2:])
		if !ok {
			return 0, 0
		}
		if r >= 0xd800 && r < 0xdc00 && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
			if lo, ok := hex4(s[8:]); ok && lo >= 0xdc00 && lo <= 0xdfff {
				return 0x10000 + (r-0xd800)<<10 + (lo - 0xdc00), 12
			}
		}
		if r >= 0xd800 && r <= 0xdfff {
			return 0, 0 // a lone surrogate decodes to nothing a secret holds
		}
		return r, 6
	}
	return 0, 0
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		d := hexVal(c)
		if d < 0 {
			return 0, false
		}
		r = r<<4 | d
	}
	return r, true
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

// origStart maps the start of a decoded span back to the original text: a
// span that starts inside a decoded escape starts at the escape.
func origStart(marks []escMark, d int) int {
	k := sort.Search(len(marks), func(k int) bool { return int(marks[k].dpos) > d }) - 1
	if k < 0 {
		return d
	}
	m := marks[k]
	if d < int(m.dpos+m.dlen) {
		return int(m.opos)
	}
	return int(m.opos+m.olen) + d - int(m.dpos+m.dlen)
}

// origEnd maps the (exclusive) end of a decoded span back: a span that
// ends inside a decoded escape takes the whole escape.
func origEnd(marks []escMark, d int) int {
	last := d - 1
	k := sort.Search(len(marks), func(k int) bool { return int(marks[k].dpos) > last }) - 1
	if k < 0 {
		return d
	}
	m := marks[k]
	if last < int(m.dpos+m.dlen) {
		return int(m.opos + m.olen)
	}
	return int(m.opos+m.olen) + last - int(m.dpos+m.dlen) + 1
}

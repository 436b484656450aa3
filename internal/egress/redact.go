package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strings"
)

// minEncodedLen is the shortest encoded form worth redacting: shorter
// fragments match ordinary text by chance. A secret that short is only
// redacted raw (see the package documentation).
const minEncodedLen = 4

// secretValue is a secret the redactor hides, with the name that replaces it.
type secretValue struct {
	name, value string
}

// pattern is one byte string to hide and the marker that replaces it.
// text is ASCII-lower-cased: matching ignores ASCII case (see matchAt).
type pattern struct {
	text   []byte
	marker string
}

// redactor replaces secret values and their encodings. Build one per set of
// secret values; it is immutable and safe for concurrent use.
//
// Matching is one pass over the text: at every position the next two
// bytes index a 64 Kibit table of the patterns' first two bytes, and only
// on a hit (rare in ordinary text) are the next four bytes looked up and the
// candidate patterns compared. That is about one load and a bit test per
// byte however many patterns there are, instead of one full scan of the
// text per pattern.
//
// Matching ignores ASCII case, because servers echo a value upper- or
// lower-cased (a header normaliser, an error page shouting it). The
// per-byte loop is unchanged: the two-byte filter holds every case of a
// pattern's first two bytes, and only a hit folds the text (the four-byte
// key, then the comparison). Non-ASCII case changes are patterns of their
// own (strings.ToUpper and ToLower of the value).
type redactor struct {
	pats   []pattern
	maxLen int              // longest of pats
	bytes  byteSet          // every byte of every pattern, in both ASCII cases
	short  []pattern        // under 4 bytes: tiny raw secrets in each ASCII case, scanned separately
	byKey  map[uint32][]int // first four bytes (lower-cased) → indices into pats, longest first
	filter *[1 << 16 / 64]uint64
}

func newRedactor(secrets []secretValue) *redactor {
	r := &redactor{byKey: map[uint32][]int{}, filter: new([1 << 16 / 64]uint64)}
	seen := map[string]bool{}
	for _, s := range secrets {
		if s.value == "" {
			continue
		}
		marker := "[REDACTED:" + s.name + "]"
		forms := encodings(s.value)
		raw := []string{s.value}
		// Case changes outside ASCII change the bytes (é, É): their own
		// patterns, encoded too (a server may change the case first).
		for _, v := range []string{strings.ToUpper(s.value), strings.ToLower(s.value)} {
			if foldString(v) != foldString(s.value) {
				forms = append(forms, encodings(v)...)
				raw = append(raw, v)
			}
		}
		for _, f := range forms {
			key := foldString(f)
			if seen[key] || !slices.Contains(raw, f) && len(f) < minEncodedLen {
				continue
			}
			seen[key] = true
			if len(f) < 4 {
				for _, c := range caseVariants(key) {
					r.short = append(r.short, pattern{[]byte(c), marker})
				}
			} else {
				r.pats = append(r.pats, pattern{[]byte(key), marker})
			}
		}
	}
	// Longest first, so at one position the fullest match decides the
	// marker (only visible when secrets overlap each other).
	slices.SortStableFunc(r.pats, func(a, b pattern) int { return len(b.text) - len(a.text) })
	for _, p := range append(r.pats[:len(r.pats):len(r.pats)], r.short...) {
		for _, c := range p.text {
			r.bytes.add(c)
			r.bytes.add(upper(c))
		}
	}
	for i, p := range r.pats {
		r.maxLen = max(r.maxLen, len(p.text))
		k := binary.LittleEndian.Uint32(p.text)
		r.byKey[k] = append(r.byKey[k], i)
		for _, a := range []byte{p.text[0], upper(p.text[0])} {
			for _, b := range []byte{p.text[1], upper(p.text[1])} {
				h := uint16(a) | uint16(b)<<8
				r.filter[h/64] |= 1 << (h % 64)
			}
		}
	}
	return r
}

// lowerTable maps ASCII upper-case letters to lower case, every other byte
// to itself.
var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] += 'a' - 'A'
		}
	}
	return t
}()

func upper(c byte) byte {
	if c >= 'a' && c <= 'z' {
		return c - ('a' - 'A')
	}
	return c
}

// foldString lower-cases the ASCII letters of s.
func foldString(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerTable[c]
	}
	return string(b)
}

// fold4 is the lower-cased first four bytes of b, as a key of byKey.
func fold4(b []byte) uint32 {
	_ = b[3]
	return uint32(lowerTable[b[0]]) | uint32(lowerTable[b[1]])<<8 | uint32(lowerTable[b[2]])<<16 | uint32(lowerTable[b[3]])<<24
}

// hasPrefixFold says whether b starts with the lower-cased p, ignoring
// ASCII case.
func hasPrefixFold(b, p []byte) bool {
	if len(b) < len(p) {
		return false
	}
	b = b[:len(p)]
	// Every byte, whatever the first difference: the time must not say
	// how many leading bytes of a tool's guess (echoed by a server) are
	// the secret's (BenchmarkRedactGuessPrefix; docs/credentials.md).
	var diff byte
	for i, c := range p {
		diff |= lowerTable[b[i]] ^ c
	}
	return diff == 0
}

// caseVariants lists every ASCII case of the lower-cased s (s is under
// four bytes, so at most eight).
func caseVariants(s string) []string {
	out := []string{""}
	for i := 0; i < len(s); i++ {
		c := s[i]
		var next []string
		for _, o := range out {
			next = append(next, o+s[i:i+1])
			if u := upper(c); u != c {
				next = append(next, o+string(rune(u)))
			}
		}
		out = next
	}
	return out
}

func (r *redactor) empty() bool { return r == nil || len(r.pats) == 0 && len(r.short) == 0 }

// encodings lists v and the forms a server might echo it back in.
func encodings(v string) []string {
	b := []byte(v)
	out := []string{v}
	// base64: the full padded token, and for each of the three byte
	// alignments the characters fully determined by v, so v is found
	// inside a larger encoded blob ("user:" + v in Basic auth, JSON in a
	// JWT, ...). Raw (unpadded) forms are covered by the fragments.
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, enc.EncodeToString(b))
		raw := enc.WithPadding(base64.NoPadding)
		for shift := range 3 {
			buf := make([]byte, shift+len(b))
			copy(buf[shift:], b)
			e := raw.EncodeToString(buf)
			start := (8*shift + 5) / 6 // first char without prefix bits
			end := 8 * (shift + len(b)) / 6
			if end > start {
				out = append(out, e[start:end])
			}
		}
	}
	// Hex and %XX escapes in either case: matching ignores ASCII case.
	out = append(out, hex.EncodeToString(b), url.QueryEscape(v), url.PathEscape(v), percentAll(b))
	var buf bytes.Buffer
	for _, html := range []bool{true, false} {
		buf.Reset()
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(html)
		if enc.Encode(v) == nil {
			j := strings.TrimSuffix(buf.String(), "\n")
			j = j[1 : len(j)-1]
			out = append(out, j, strings.ReplaceAll(j, "/", `\/`))
		}
	}
	return out
}

// percentAll escapes every byte, the way some clients encode form values.
func percentAll(b []byte) string {
	var s strings.Builder
	for _, c := range b {
		s.WriteByte('%')
		s.WriteByte(upperhex[c>>4])
		s.WriteByte(upperhex[c&15])
	}
	return s.String()
}

// span is a matched range [start, end) and the marker replacing it.
type span struct {
	start, end int
	marker     string
}

// addSpan appends a match, merging it into the last span when they overlap.
// Callers add spans in order of start, so a run of overlapping matches
// costs one span, not one per byte.
func addSpan(spans []span, s span) []span {
	if n := len(spans); n > 0 && s.start < spans[n-1].end {
		spans[n-1].end = max(spans[n-1].end, s.end)
		return spans
	}
	return append(spans, s)
}

// matchAt adds the patterns that start at b[i:].
func (r *redactor) matchAt(spans []span, b []byte, i int) []span {
	for _, pi := range r.byKey[fold4(b[i:])] {
		if p := r.pats[pi]; hasPrefixFold(b[i:], p.text) {
			spans = addSpan(spans, span{i, i + len(p.text), p.marker})
		}
	}
	return spans
}

// Bytes returns b with every match replaced. Matches that overlap are
// merged into one marker, so no fragment of any match survives. b itself is
// returned when nothing matches.
//
// Text with HTML character references or backslash escapes is searched a
// second time with those decoded (see unescape.go); a match there replaces
// the escaped bytes it came from.
func (r *redactor) Bytes(b []byte) []byte {
	if r.empty() {
		return b
	}
	spans := r.scan(nil, b, 0, len(b)-4)
	spans = r.scanShort(spans, b)
	// (Marks hold int32 offsets; nothing maiden redacts comes near 2 GiB.)
	if len(b) <= math.MaxInt32 && mayHaveEscapes(b) {
		sh := getShadow()
		defer putShadow(sh)
		if dec, marks := unescape(b, &r.bytes, sh); marks != nil {
			var ds []span
			// Only where a match could cover a decoded escape (it starts
			// less than maxLen before one, and not after it): anywhere else
			// the decoded text is the original, already searched. Windows
			// that touch are scanned as one.
			from, to := 0, -1
			for _, m := range marks {
				f, t := int(m.dpos)-r.maxLen+1, int(m.dpos+m.dlen)-1
				if f > to+1 {
					ds = r.scan(ds, dec, from, to)
					from = f
				}
				to = t
			}
			ds = r.scan(ds, dec, from, to)
			ds = r.scanShort(ds, dec)
			for _, d := range ds {
				spans = append(spans, span{origStart(marks, d.start), origEnd(marks, d.end), d.marker})
			}
		}
	}
	if len(spans) == 0 {
		return b
	}
	slices.SortStableFunc(spans, func(a, b span) int { return a.start - b.start })
	out := make([]byte, 0, len(b))
	cur := spans[0]
	pos := 0
	flush := func() {
		out = append(out, b[pos:cur.start]...)
		out = append(out, cur.marker...)
		pos = cur.end
	}
	for _, s := range spans[1:] {
		if s.start < cur.end {
			cur.end = max(cur.end, s.end)
			continue
		}
		flush()
		cur = s
	}
	flush()
	return append(out, b[pos:]...)
}

// scan adds the matches of pats that start at b[from..to] (inclusive; to
// is at most len(b)-4, so every lookup reads four bytes).
func (r *redactor) scan(spans []span, b []byte, from, to int) []span {
	if len(r.pats) == 0 {
		return spans
	}
	from, to = max(from, 0), min(to, len(b)-4)
	if from > to {
		return spans
	}
	w := b[from : to+2]
	for j := nextHit(r.filter, w, 0); j >= 0; j = nextHit(r.filter, w, j+1) {
		spans = r.matchAt(spans, b, from+j)
	}
	return spans
}

// nextHit returns the first j at or after from where w[j:j+2] are the first
// two bytes of some pattern, or -1. This is the per-byte loop of all
// redaction, written so the compiler keeps it tight: a leaf function (not
// inlined into scan, whose call to matchAt would spill its registers), one
// nil check before the loop, and a shrinking slice so no bounds checks.
//
//go:noinline
func nextHit(filter *[1 << 16 / 64]uint64, w []byte, from int) int {
	_ = filter[0]
	rest := w[from:]
	for k := 0; len(rest) >= 2; k++ {
		h := uint16(rest[0]) | uint16(rest[1])<<8
		if filter[h/64]&(1<<(h%64)) != 0 {
			return from + k
		}
		rest = rest[1:]
	}
	return -1
}

// scanShort adds the matches of the short patterns, anywhere in b.
func (r *redactor) scanShort(spans []span, b []byte) []span {
	for _, p := range r.short {
		// Per pattern, so addSpan merges a run of matches into one span
		// (they arrive in order of start only within one pattern).
		var ps []span
		for off := 0; off+len(p.text) <= len(b); {
			i := bytes.Index(b[off:], p.text)
			if i < 0 {
				break
			}
			ps = addSpan(ps, span{off + i, off + i + len(p.text), p.marker})
			off += i + 1
		}
		spans = append(spans, ps...)
	}
	return spans
}

// String is Bytes for text.
func (r *redactor) String(s string) string {
	if r.empty() || s == "" {
		return s
	}
	b := []byte(s)
	out := r.Bytes(b)
	if &out[0] == &b[0] && len(out) == len(b) {
		return s
	}
	return string(out)
}

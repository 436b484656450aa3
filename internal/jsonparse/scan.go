package jsonparse

import (
	"strconv"
	"unicode"
	"unicode/utf8"
)

// Limits are what Scan checks of an accepted document besides its
// validity: the limits a consumer (internal/jsonschema's input check) puts
// on the values it is given. A value past them is not a syntax error: Scan
// accepts the document and says so in Scanned.Problem.
type Limits struct {
	// Depth is how deeply arrays and objects may nest (the top-level one
	// is at depth 1); 0: no limit below MaxDepth.
	Depth int
	// LongNumber, if set, says whether a number longer than 4 bytes is
	// past the limits (a number of at most 4 bytes never is: it is called
	// for no other).
	LongNumber func(text string) bool
}

// Scanned is what Scan found in a document it accepted.
type Scanned struct {
	// Nodes counts the values and the objects' keys; Bytes the bytes of
	// the strings' and keys' values (unescaped): jsonschema's measures of
	// an input's size.
	Nodes, Bytes int
	// Problem: a value is past the Limits (the first one found starts at
	// byte ProblemAt).
	Problem   bool
	ProblemAt int
	// Object: the document is an object; Members are then its members in
	// order, each key unescaped and its value's text as it is in the
	// input (no whitespace around it). Decoding a member's text with
	// ParseStrict gives the value ParseStrict gives for it in the whole
	// document, and cannot fail.
	Object  bool
	Members []Member
	// FoldableKeys: some key holds an ASCII capital letter or a non-ASCII
	// character, so two keys of one object might differ only in case (Scan
	// then scans again, comparing keys folded).
	FoldableKeys bool
}

// Member is one member of a scanned object.
type Member struct {
	Key   string
	Value string // its text, a substring of the input
	// Plain: the value is a string with no escape (valid UTF-8, as Scan
	// checked), so its value is Value without the quotes.
	Plain bool
}

// Scan checks s as ParseStrict does, refusing what it refuses with the
// same *SyntaxError, and besides an object two of whose keys differ only
// in case (strings.EqualFold: Go's encoding/json fills a struct field from
// any of them, the last winning, where other readers keep both; found by
// a second pass, made only over a document with a key that has a capital
// letter or a non-ASCII character: FoldableKeys). It builds no value: it
// measures the document and checks it against lim in the same pass, and
// returns the top-level object's members as text. Keys and values without
// an escape are substrings of s.
//
// It reads s in one loop (scanFast), and only when that loop does not
// accept s, again with the recursive scan (scanTop) that words the error:
// a document costs at most two passes (the folded one is scanTop's).
func Scan(s string, lim Limits) (Scanned, error) {
	p := pool.Get().(*parser)
	p.s, p.i, p.depth, p.strict = s, 0, 0, true
	p.lim = lim
	if p.lim.Depth <= 0 {
		p.lim.Depth = MaxDepth
	}
	p.sc = Scanned{}
	var err error
	if !p.scanFast() {
		// The document is refused (scanFast accepts every document
		// ParseStrict accepts: checkScan holds it to that): scanTop says
		// why and where, exactly as ParseStrict does.
		clear(p.keys[:cap(p.keys)])
		p.i, p.depth, p.sc, p.keys = 0, 0, Scanned{}, p.keys[:0]
		err = p.scanTop()
	}
	if err == nil && p.sc.FoldableKeys {
		// Rare (most inputs' keys are lower-case ASCII): scan again, each
		// key compared folded.
		out := p.sc
		clear(p.keys[:cap(p.keys)])
		p.i, p.depth, p.sc, p.keys, p.fold = 0, 0, Scanned{}, p.keys[:0], true
		err = p.scanTop()
		p.sc, p.fold = out, false
	}
	out := p.sc
	p.s, p.sc, p.lim, p.memberKey = "", Scanned{}, Limits{}, ""
	clear(p.keys[:cap(p.keys)]) // the keys of objects left, and of an error's
	p.keys = p.keys[:0]
	clear(p.seen[:cap(p.seen)])
	p.seen = p.seen[:0]
	// scanFast's frames and key words stay up to the deepest document's
	// (at most 480 KB): a document nested 10,000 deep otherwise grows
	// them afresh each time, and scanned at a tenth of scanTop's speed.
	if cap(p.keys) <= maxPooled && cap(p.buf) <= maxPooled*16 && cap(p.outer) <= 2*MaxDepth && cap(p.kw) <= 2*MaxDepth {
		pool.Put(p)
	}
	if err != nil {
		return Scanned{}, err
	}
	return out, nil
}

func (p *parser) scanTop() error {
	p.skipSpace()
	if err := p.scanValue(); err != nil {
		return err
	}
	p.skipSpace()
	if p.i < len(p.s) {
		return p.failChar("after top-level value")
	}
	return nil
}

// problem records a value past the limits starting at byte at.
func (p *parser) problem(at int) {
	if !p.sc.Problem {
		p.sc.Problem, p.sc.ProblemAt = true, at
	}
}

// scanValue is value, building nothing.
func (p *parser) scanValue() error {
	if p.i >= len(p.s) {
		return p.fail("unexpected end of JSON input")
	}
	p.sc.Nodes++
	switch c := p.s[p.i]; c {
	case '"':
		n, err := p.scanStr()
		p.sc.Bytes += n
		return err
	case '{':
		return p.scanObject()
	case '[':
		return p.scanArray()
	case 't':
		_, err := p.literal("true", true)
		return err
	case 'f':
		_, err := p.literal("false", false)
		return err
	case 'n':
		_, err := p.literal("null", nil)
		return err
	default:
		if c == '-' || '0' <= c && c <= '9' {
			start := p.i
			if err := p.numberEnd(); err != nil {
				return err
			}
			if p.i-start > 4 && p.lim.LongNumber != nil && p.lim.LongNumber(p.s[start:p.i]) {
				p.problem(start)
			}
			return nil
		}
		return p.failChar("looking for beginning of value")
	}
}

// scanStr is str, building nothing: the length of the string's value.
func (p *parser) scanStr() (int, error) {
	s := p.s
	start := p.i + 1
	i, nonASCII := plain(s, start)
	if i < len(s) && s[i] == '"' {
		if v := s[start:i]; !nonASCII || utf8.ValidString(v) {
			p.i = i + 1
			p.plainStr = true
			return i - start, nil
		}
	}
	if err := p.strSlow(start, i, nonASCII); err != nil {
		return 0, err
	}
	return len(p.buf), nil
}

// enter is one level deeper for the array or object at p.i.
func (p *parser) enter() error {
	if p.depth++; p.depth > MaxDepth {
		return p.fail("exceeded max depth")
	}
	if p.depth > p.lim.Depth {
		p.problem(p.i)
	}
	return nil
}

func (p *parser) scanArray() error {
	if err := p.enter(); err != nil {
		return err
	}
	p.i++
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return nil
	}
	for {
		if err := p.scanValue(); err != nil {
			return err
		}
		if more, err := p.next(']', "after array element"); err != nil {
			return err
		} else if !more {
			break
		}
	}
	p.depth--
	return nil
}

// dupMapAfter is how many keys an object has before its duplicates are
// looked for in a map: below it, each key is compared with those before.
const dupMapAfter = 16

func (p *parser) scanObject() error {
	if err := p.enter(); err != nil {
		return err
	}
	top := p.depth == 1
	if top {
		p.sc.Object = true
	}
	p.i++
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.depth--
		return nil
	}
	mark := len(p.keys) // this object's keys are p.keys[mark:]
	var seen map[string]struct{}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return p.failChar("looking for beginning of object key string")
		}
		at := p.i
		key, err := p.scanKey()
		if err != nil {
			return err
		}
		if !p.sc.FoldableKeys && foldable(key) {
			p.sc.FoldableKeys = true
		}
		if p.fold {
			key = foldKey(key)
		}
		p.sc.Nodes++
		p.sc.Bytes += len(key)
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return p.failChar("after object key")
		}
		p.i++
		p.skipSpace()
		vstart := p.i
		p.plainStr = false
		if err := p.scanValue(); err != nil {
			return err
		}
		// A duplicate is refused after its value, as ParseStrict does
		// (an error inside the value is reported first).
		dup := false
		if seen != nil {
			_, dup = seen[key]
			seen[key] = struct{}{}
		} else {
			for _, k := range p.keys[mark:] {
				if k == key {
					dup = true
					break
				}
			}
			if p.keys = append(p.keys, key); len(p.keys)-mark > dupMapAfter {
				seen = make(map[string]struct{}, 2*dupMapAfter)
				for _, k := range p.keys[mark:] {
					seen[k] = struct{}{}
				}
			}
		}
		if dup {
			p.i = at
			if p.fold {
				k, _ := p.scanKey() // as written, for the message
				p.i = at
				return p.fail("key " + strconv.Quote(k) + " differs from an earlier key of the object only in case (readers that match keys case-insensitively, as Go's encoding/json does, take one for the other)")
			}
			return p.fail("duplicate key " + strconv.Quote(key))
		}
		if top {
			p.sc.Members = append(p.sc.Members, Member{Key: key, Value: p.s[vstart:p.i], Plain: p.plainStr && p.s[vstart] == '"'})
		}
		if more, err := p.next('}', "after object key:value pair"); err != nil {
			return err
		} else if !more {
			break
		}
	}
	p.keys = p.keys[:mark] // cleared when the scan ends
	p.depth--
	return nil
}

// scanKey is str for a key: a substring of the input unless it holds an
// escape (or invalid UTF-8, which ParseStrict refuses).
func (p *parser) scanKey() (string, error) {
	s := p.s
	start := p.i + 1
	i, nonASCII := plain(s, start)
	if i < len(s) && s[i] == '"' && !nonASCII {
		p.i = i + 1
		return s[start:i], nil
	}
	return p.str()
}

// foldable says whether key holds an ASCII capital letter or a non-ASCII
// byte: a key with neither equals no other key under case folding but
// itself (two different strings of lower-case ASCII, digits and
// punctuation differ in a byte no folding maps onto another).
func foldable(key string) bool {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c >= utf8.RuneSelf || c-'A' < 26 {
			return true
		}
	}
	return false
}

// foldKey maps key to one representative of the strings strings.EqualFold
// (and Go's encoding/json, matching keys to struct fields) holds equal to
// it, rune by rune (foldRune); a key foldable says no to is its own.
func foldKey(key string) string {
	if !foldable(key) {
		return key
	}
	b := make([]byte, 0, len(key))
	for _, r := range key {
		b = utf8.AppendRune(b, foldRune(r))
	}
	return string(b)
}

// foldRune is one member of r's simple case-folding orbit, the same for
// every member: an ASCII letter's lower case (also for the Kelvin sign and
// the long s, whose orbits hold K and S), else the orbit's least rune.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f < utf8.RuneSelf {
			return foldRune(f)
		}
		least = min(least, f)
	}
	return least
}

package jsonparse

import (
	"math/bits"
	"unicode/utf8"
)

// scanFast is Scan's pass over a document it accepts: one loop over the
// bytes with its own stack, scanTop's work without a function call per
// token. Short strings and keys are read in one 8-byte word, literals
// compared as one word, integers read in line; a key of at most 7 bytes is
// a word too, and duplicates among an object's first keys are found by
// comparing words. It fills p.sc as scanTop does and returns true, or
// returns false at the first byte it does not accept, building no error:
// Scan then scans again with scanTop, which says why, with ParseStrict's
// message and offset. So scanFast decides no refusal; what it must never
// do is accept what scanTop refuses, or measure differently (the tests
// hold it to both on its own, through ScanFast and ScanTop). It refuses a
// duplicate key when it reads the key, where ParseStrict reads the value
// first: the order matters only for the error, which is scanTop's.
//
// Few values live across its labels (the input, the position, the
// innermost container's frame): the rest is in p, so that the compiler
// keeps those few in registers (more locals measured slower: they were
// spilled and reloaded at every label).
func (p *parser) scanFast() bool {
	s := p.s
	i := 0
	// top is the innermost open container's frame: noFrame outside any,
	// -1 in an array, in an object where its keys' words start in p.kw
	// (>= 0; topObject for the top-level object, whose start at 0) or,
	// once it has more than dupMapAfter keys, -2-k for its keys in the map
	// p.seen[k]. p.outer[:p.nout] holds the frames around it, so the depth
	// of the innermost container is p.nout. Keys below the top level that
	// fit in a word are read in line and kept as words only; the others
	// (the top-level object's, for its members) go the longer way.
	top := int32(noFrame)
	p.nout, p.nkw, p.keys, p.seen, p.sig = 0, 0, p.keys[:0], p.seen[:0], 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}

value: // a value at s[i], maybe after whitespace
	if i >= len(s) {
		goto fail
	}
	if c := s[i]; c <= ' ' && isSpace(c) {
		i++
		goto value
	}
	p.sc.Nodes++
	switch c := s[i]; c {
	case '"':
		start := i + 1
		// A string of at most 7 ASCII bytes ends in its first word.
		if start+8 <= len(s) {
			x := load64(s, start)
			if m := stops(x); m != 0 {
				k := bits.TrailingZeros64(m) >> 3
				if x&(1<<(8*k)-1)&msb == 0 && byte(x>>(8*k)) == '"' {
					p.sc.Bytes += k
					i = start + k + 1
					p.plainStr = true
					goto after
				}
			}
		}
		j, nonASCII := plain(s, start)
		if j < len(s) && s[j] == '"' && (!nonASCII || utf8.ValidString(s[start:j])) {
			p.sc.Bytes += j - start
			i = j + 1
			p.plainStr = true
			goto after
		}
		p.i = i
		if p.strSlow(start, j, nonASCII) != nil {
			goto fail
		}
		p.sc.Bytes += len(p.buf)
		i = p.i
		goto after
	case '{', '[':
		// One level deeper.
		if p.nout >= MaxDepth {
			goto fail
		}
		if p.nout >= p.lim.Depth {
			p.problem(i)
		}
		if p.nout == 0 && c == '{' {
			p.sc.Object = true
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if c == '{' {
			if i < len(s) && s[i] == '}' {
				i++
				goto after
			}
			if p.nout == len(p.outer) {
				p.outer = append(p.outer, outer{})
				p.outer = p.outer[:cap(p.outer)]
			}
			p.outer[p.nout] = outer{top, p.sig}
			p.nout++
			top, p.sig = int32(p.nkw), 0
			if p.nout == 1 {
				top = topObject // its keys from 0 in p.kw
			}
			goto key
		}
		if i < len(s) && s[i] == ']' {
			i++
			goto after
		}
		if p.nout == len(p.outer) {
			p.outer = append(p.outer, outer{})
			p.outer = p.outer[:cap(p.outer)]
		}
		p.outer[p.nout] = outer{top, p.sig}
		p.nout++
		top = -1
		goto value
	case 't':
		if i+4 <= len(s) && s[i:i+4] == "true" {
			i += 4
			goto after
		}
		goto fail
	case 'f':
		if i+5 <= len(s) && s[i:i+5] == "false" {
			i += 5
			goto after
		}
		goto fail
	case 'n':
		if i+4 <= len(s) && s[i:i+4] == "null" {
			i += 4
			goto after
		}
		goto fail
	default:
		start := i
		if '1' <= c && c <= '9' {
			// An integer's digits; a fraction or an exponent after them
			// sends the number to numberEnd, from its start.
			i++
			for i < len(s) && isDigit(s[i]) {
				i++
			}
			if i < len(s) && (s[i] == '.' || s[i]|0x20 == 'e') {
				c = '-' // any byte numberEnd reads
			}
		}
		if c == '-' || c == '0' {
			p.i = start
			if p.numberEnd() != nil {
				goto fail
			}
			i = p.i
		} else if i == start {
			goto fail // not a value
		}
		if i-start > 4 && p.lim.LongNumber != nil && p.lim.LongNumber(s[start:i]) {
			p.problem(start)
		}
		goto after
	}

key: // an object's key at s[i], maybe after whitespace; top is the object's frame
	if i >= len(s) {
		goto fail
	}
	if c := s[i]; c != '"' {
		if isSpace(c) {
			i++
			goto key
		}
		goto fail
	}
	p.sc.Nodes++
	// A key of at most 7 ASCII bytes, in its first word, of an object
	// below the top level that has at most dupMapAfter keys: its word is
	// all the object keeps of it.
	if start := i + 1; start+8 <= len(s) && top >= 0 {
		x := load64(s, start)
		// With no stop in x, k is 8 and the byte at 8*k is 0: no quote.
		k := bits.TrailingZeros64(stops(x)) >> 3
		if low := x & (1<<(8*k) - 1); low&msb == 0 && byte(x>>(8*k)) == '"' {
			if (low+0x3f3f3f3f3f3f3f3f)&^(low+0x2525252525252525)&msb != 0 {
				p.sc.FoldableKeys = true // a byte in 'A'..'Z' (foldable)
			}
			w := low | uint64(k)<<56
			// The object's earlier short keys are compared only when one
			// of them has this key's bit in sig.
			if bit := uint64(1) << (w * 0x9e3779b97f4a7c15 >> 58); p.sig&bit == 0 {
				p.sig |= bit
			} else if p.hasWord(top, w) {
				goto fail
			}
			if p.nkw == len(p.kw) {
				p.growKW()
			}
			p.kw[p.nkw] = w
			if p.nkw++; p.nkw-int(top) > dupMapAfter {
				top = p.toMap(top)
			}
			p.sc.Bytes += k
			if i = start + k + 1; i < len(s) && s[i] == ':' {
				i++
				goto value
			}
			goto colon
		}
	}
	{
		var key string
		var w uint64 // the key's word (keyWord)
		ok := false
		start := i + 1
		if j, nonASCII := plain(s, start); j < len(s) && s[j] == '"' && !nonASCII {
			key = s[start:j]
			i = j + 1
		} else {
			p.i = i
			k, err := p.str() // unescaped (or valid non-ASCII: a substring)
			if err != nil {
				goto fail
			}
			key = k
			i = p.i
		}
		if !p.sc.FoldableKeys && foldable(key) {
			p.sc.FoldableKeys = true
		}
		w = keyWord(key)
		p.sc.Bytes += len(key)
		if top >= 0 || top == topObject {
			mark := max(top, 0)
			if w>>56 != longKey {
				if bit := uint64(1) << (w * 0x9e3779b97f4a7c15 >> 58); p.sig&bit == 0 {
					p.sig |= bit
				} else if p.hasWord(mark, w) {
					goto fail
				}
			} else if w, ok = p.longKey(mark, key); !ok {
				goto fail
			}
			if p.nkw == len(p.kw) {
				p.growKW()
			}
			p.kw[p.nkw] = w
			if p.nkw++; p.nkw-int(mark) > dupMapAfter {
				top = p.toMap(mark)
			}
		} else {
			seen := p.seen[-2-top]
			if _, dup := seen[key]; dup {
				goto fail
			}
			seen[key] = struct{}{}
		}
		if p.nout == 1 {
			p.memberKey = key
		}
	}

colon: // the colon after a key, maybe after whitespace
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	if i >= len(s) || s[i] != ':' {
		goto fail
	}
	i++
	if p.nout == 1 {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		p.memberAt, p.plainStr = i, false
	}
	goto value

after: // a value ended at s[i]
	if top == topObject || top < -1 && p.nout == 1 { // a member of the top-level object
		at := p.memberAt
		p.sc.Members = append(p.sc.Members, Member{Key: p.memberKey, Value: s[at:i], Plain: p.plainStr && s[at] == '"'})
	}
space: // what follows a value, maybe after whitespace
	if i >= len(s) {
		if top == noFrame {
			return true
		}
		goto fail
	}
	switch s[i] {
	case ',':
		i++
		if top == -1 {
			goto value
		}
		if top == noFrame {
			goto fail
		}
		goto key
	case '}':
		if top == -1 || top == noFrame {
			goto fail
		}
		i++
		p.closeObject(top)
	case ']':
		if top != -1 {
			goto fail
		}
		i++
	case ' ', '\t', '\n', '\r':
		i++
		goto space
	default:
		goto fail
	}
	p.nout--
	top, p.sig = p.outer[p.nout].top, p.outer[p.nout].sig
	goto after

fail:
	return false
}

// outer is the frame of a container scanFast is in, around the innermost
// one, and the sig of its keys if it is an object.
type outer struct {
	top int32
	sig uint64
}

// topObject is the frame of the top-level object while it has at most
// dupMapAfter keys (their words start at 0 in p.kw), noFrame scanFast's
// outside any container.
const (
	topObject = -1 << 30
	noFrame   = -1 << 31
)

// longKey is the top byte of the word of a key of 8 bytes or more: the rest
// of the word is where the key is in p.keys.
const longKey = 0xff

// keyWord is a key's word: for a key of at most 7 bytes, its bytes (the
// first in the lowest byte) and its length in the top byte, so two such
// keys are equal exactly when their words are; for a longer one, longKey
// in the top byte (the method longKey adds where it keeps the key).
func keyWord(key string) uint64 {
	if len(key) > 7 {
		return longKey << 56
	}
	w := uint64(len(key)) << 56
	for k := 0; k < len(key); k++ {
		w |= uint64(key[k]) << (8 * k)
	}
	return w
}

// hasWord says whether the object whose frame is top has a key whose
// word is w.
func (p *parser) hasWord(top int32, w uint64) bool {
	for _, e := range p.kw[top:p.nkw] {
		if e == w {
			return true
		}
	}
	return false
}

// growKW makes room in p.kw for one more word.
func (p *parser) growKW() {
	p.kw = append(p.kw, 0)
	p.kw = p.kw[:cap(p.kw)]
}

// longKey is the word of key, 8 bytes or more, as a key of the object
// whose frame is top: where it is now kept in p.keys; false if the object
// has it already.
func (p *parser) longKey(top int32, key string) (uint64, bool) {
	for _, e := range p.kw[top:p.nkw] {
		if e>>56 == longKey && p.keys[uint32(e)] == key {
			return 0, false
		}
	}
	p.keys = append(p.keys, key)
	return longKey<<56 | uint64(len(p.keys)-1), true
}

// dropKeys forgets the keys of the object whose frame is top (>= 0).
func (p *parser) dropKeys(top int32) {
	if len(p.keys) > 0 { // long keys, of this object or of those around it
		for _, e := range p.kw[top:p.nkw] {
			if e>>56 == longKey { // this object's first: the others follow
				clear(p.keys[uint32(e):])
				p.keys = p.keys[:uint32(e)]
				break
			}
		}
	}
	p.nkw = int(top)
}

// toMap moves the keys of the object whose frame is top (>= 0) into a map,
// and returns its new frame.
func (p *parser) toMap(top int32) int32 {
	seen := make(map[string]struct{}, 2*dupMapAfter)
	for _, e := range p.kw[top:p.nkw] {
		if e>>56 == longKey {
			seen[p.keys[uint32(e)]] = struct{}{}
			continue
		}
		var b [7]byte
		for k := range b {
			b[k] = byte(e >> (8 * k))
		}
		seen[string(b[:e>>56])] = struct{}{}
	}
	p.dropKeys(top)
	p.seen = append(p.seen, seen)
	return int32(-2 - (len(p.seen) - 1))
}

// closeObject forgets the keys of the object whose frame is top.
func (p *parser) closeObject(top int32) {
	if top >= 0 || top == topObject {
		p.dropKeys(max(top, 0))
		return
	}
	k := -2 - top
	p.seen[k] = nil
	p.seen = p.seen[:k]
}

package maiden

// The canonical ABI of world maiden:tool/tool@0.2.0 (and 0.1.0), for a
// 32-bit linear memory (addresses and lengths are little-endian u32). These
// helpers do not touch memory themselves: they work through the memory
// interface, which is the module's own linear memory on wasip1
// (abi_wasip1.go) and a byte slice in this package's tests, so the layouts
// are tested on the host.
//
//	string                              ptr u32, len u32 (UTF-8 bytes)
//	list<T>                             ptr u32, len u32 (elements)
//	tuple<string,string>                16 bytes: ptr, len, ptr, len
//	result<string,string> return area   12 bytes: tag u8 @0 (0 ok, 1 err), ptr @4, len @8
//	result<response, fetch-error>       24 bytes: tag u8 @0;
//	                                      ok:  status u16 @4, headers ptr/len @8/@12, body ptr/len @16/@20
//	                                      err: case u8 @4 (denied, timeout, too-large, failed),
//	                                           string ptr/len @8/@12 for denied and failed
//	http-fetch(request) flattens to 11 i32 (method, url, headers, body as
//	ptr/len pairs; credential as tag, ptr, len) plus the return-area address.
//
// 0.2.0 changed the bodies from list<u8> to string. Both are a ptr/len pair
// with alignment 4, so every layout above is the same in both versions; only
// the bytes a body's pair points at differ (encodeBody).

import (
	"errors"
	"fmt"
	"unsafe"
)

// Layout sizes.
const (
	resultAreaSize  = 12
	fetchResultSize = 24
	headerTupleSize = 16
)

// memory is a view of linear memory.
type memory interface {
	// bytes returns the n bytes at ptr (not a copy). It may panic if the
	// range is outside memory.
	bytes(ptr, n uint32) []byte
}

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

func put32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func load32(m memory, p uint32) uint32 { return le32(m.bytes(p, 4)) }

// loadString copies the string whose ptr/len pair is at p.
func loadString(m memory, p uint32) string {
	ptr, n := load32(m, p), load32(m, p+4)
	if n == 0 {
		return ""
	}
	return string(m.bytes(ptr, n))
}

// liftFetchResult decodes http-fetch's return area at ret, copying every
// string and list out of m (whose storage the caller reuses). stringBody
// says the body is a 0.2.0 string to decode (decodeBody). The error is nil,
// a *FetchError from the host, or a malformed-result error.
func liftFetchResult(m memory, ret uint32, stringBody bool) (Response, error) {
	area := m.bytes(ret, fetchResultSize)
	switch area[0] {
	case 0:
		resp := Response{Status: int(le16(area[4:]))}
		hp, hn := le32(area[8:]), le32(area[12:])
		if hn > 0 {
			if uint64(hn)*headerTupleSize > 1<<32 {
				return Response{}, fmt.Errorf("maiden: fetch: malformed result: %d headers", hn)
			}
			resp.Header = make(Headers, hn)
			for i := range resp.Header {
				t := hp + uint32(i)*headerTupleSize
				resp.Header[i] = Header{Name: loadString(m, t), Value: loadString(m, t+8)}
			}
		}
		if bn := le32(area[20:]); bn > 0 {
			raw := m.bytes(le32(area[16:]), bn)
			if !stringBody {
				resp.Body = append([]byte(nil), raw...)
			} else if b, ok := decodeBody(raw); ok {
				resp.Body = b
			} else {
				return Response{}, errors.New("maiden: fetch: malformed result: body has a character above U+00FF")
			}
		}
		return resp, nil
	case 1:
		e := &FetchError{Kind: FetchErrorKind(area[4])}
		switch e.Kind {
		case FetchDenied, FetchFailed:
			e.Message = loadString(m, ret+8)
		case FetchTimeout, FetchTooLarge:
		default:
			return Response{}, fmt.Errorf("maiden: fetch: malformed result: error case %d", area[4])
		}
		return Response{}, e
	}
	return Response{}, fmt.Errorf("maiden: fetch: malformed result: tag %d", area[0])
}

// encodeBody is maiden:tool@0.2.0's body encoding: byte b becomes the code
// point U+0000+b in UTF-8 ("latin-1 in UTF-8"), so ASCII (JSON, text) is
// unchanged and a byte >= 0x80 takes two bytes. It returns b itself when b
// is ASCII. Chosen over base64, which grows every body by a third, because
// most bodies are text; binary costs half a byte more per byte.
//
// Both directions are table-driven and branch-free per byte: a body of
// mixed bytes would otherwise mispredict a branch on every other byte,
// which in a wasm guest tripled the time to decode a binary body.
func encodeBody(b []byte) []byte {
	high := 0
	for _, c := range b {
		high += int(c >> 7)
	}
	if high == 0 {
		return b
	}
	out := make([]byte, len(b)+high+1) // +1: each step writes two bytes
	n := 0
	for _, c := range b {
		e := encodeTab[c]
		out[n], out[n+1] = byte(e), byte(e>>8)
		n += 1 + int(c>>7)
	}
	return out[:n]
}

// encodeTab[b] is b's encoding, first byte low (a second byte for ASCII is
// overwritten by the next step).
var encodeTab = func() (t [256]uint16) {
	for c := range 256 {
		if c < 0x80 {
			t[c] = uint16(c)
		} else {
			t[c] = uint16(0xc0|c>>6) | uint16(0x80|c&0x3f)<<8
		}
	}
	return t
}()

// Properties of a byte of an encoded body, in decodeTab.
const (
	decKeep  = 0xff    // bits 0-7: the bits of this byte that go to the output byte
	decCarry = 8       // bits 8-15: the bits a lead byte gives the next output byte
	decEmit  = 1 << 16 // an output byte is complete after this byte
	decCont  = 1 << 17 // a continuation byte (0x80..0xbf)
	decLead  = 1 << 18 // a lead byte of U+0080..U+00FF (0xc2, 0xc3)
	decBad   = 1 << 19 // a byte that cannot occur in an encoded body
)

var decodeTab = func() (t [256]uint32) {
	for c := range 256 {
		switch {
		case c < 0x80:
			t[c] = uint32(c) | decEmit
		case c < 0xc0:
			t[c] = uint32(c&0x3f) | decEmit | decCont
		case c == 0xc2 || c == 0xc3:
			t[c] = uint32(c&3)<<6<<decCarry | decLead
		default:
			t[c] = decBad
		}
	}
	return t
}()

// decodeBody undoes encodeBody, copying out of s (which may be the arena).
// It reports false for anything but an encoded body: a character above
// U+00FF (which stands for no byte), a truncated or stray sequence.
//
// ASCII runs (text bodies are the common case) are found eight bytes per
// load and copied whole. Other bytes go through decodeTab with no branch on
// the data (random binary would mispredict one on every other byte);
// violations are collected in bad and checked once at the end.
func decodeBody(s []byte) ([]byte, bool) {
	out := make([]byte, len(s)) // the decoded body is never longer
	n := 0
	// lead is 1 after a lead byte (the next byte must continue it), carry
	// the bits that lead byte gives the next output byte.
	var carry, lead, bad uint32
	for i := 0; i < len(s); {
		if lead == 0 {
			j := i
			for j+8 <= len(s) && load64(s[j:])&0x8080808080808080 == 0 {
				j += 8
			}
			if j > i {
				n += copy(out[n:], s[i:j])
				i = j
				continue
			}
		}
		end := min(i+8, len(s))
		for _, c := range s[i:end] {
			p := decodeTab[c]
			out[n] = byte(p&decKeep) | byte(carry)
			n += int(p >> 16 & 1)
			bad |= (p>>17&1 ^ lead) | p>>19&1
			lead = p >> 18 & 1
			carry = p >> decCarry & 0xff
		}
		i = end
	}
	if bad|lead != 0 {
		return nil, false
	}
	return out[:n], true
}

// load64 reads b[0:8] in one load (little-endian on both wasm and the
// hosts the tests run on), where le64's byte-wise form costs eight in a
// wasm guest.
func load64(b []byte) uint64 {
	_ = b[7]
	return *(*uint64)(unsafe.Pointer(unsafe.SliceData(b)))
}

// lowerRequest flattens req into http-fetch's first 11 parameters. addr and
// addrString return the linear-memory address of bytes that stay put and
// alive while the import runs (on wasip1: the Go data itself, which its
// caller keeps alive along with the returned header table: n 16-byte
// tuples).
func lowerRequest(req Request, addr func([]byte) uint32, addrString func(string) uint32) (params [11]uint32, table []byte) {
	str := func(s string) (uint32, uint32) {
		if s == "" {
			return 0, 0
		}
		return addrString(s), uint32(len(s))
	}
	params[0], params[1] = str(req.Method)
	params[2], params[3] = str(req.URL)
	if n := len(req.Header); n > 0 {
		table = make([]byte, n*headerTupleSize)
		for i, h := range req.Header {
			t := table[i*headerTupleSize:]
			p, l := str(h.Name)
			put32(t[0:], p)
			put32(t[4:], l)
			p, l = str(h.Value)
			put32(t[8:], p)
			put32(t[12:], l)
		}
		params[4], params[5] = addr(table), uint32(n)
	}
	if len(req.Body) > 0 {
		params[6], params[7] = addr(req.Body), uint32(len(req.Body))
	}
	if req.Credential != "" {
		params[8] = 1
		params[9], params[10] = str(req.Credential)
	}
	return params, table
}

// bump hands out aligned blocks of [base, base+size) and never frees one;
// reset makes all of it available again.
type bump struct {
	base, size, used uint32
}

// alloc returns the address of n bytes aligned to align (a power of two;
// anything else counts as 8), or false if they do not fit.
func (b *bump) alloc(align, n uint32) (uint32, bool) {
	if align == 0 || align&(align-1) != 0 {
		align = 8
	}
	start := (uint64(b.base) + uint64(b.used) + uint64(align) - 1) &^ (uint64(align) - 1)
	end := start + uint64(n)
	if end > uint64(b.base)+uint64(b.size) {
		return 0, false
	}
	b.used = uint32(end - uint64(b.base))
	return uint32(start), true
}

func (b *bump) reset() { b.used = 0 }

// realloc implements cabi_realloc's contract over an arena with a fallback:
// spill is asked for blocks the arena cannot hold. move copies n bytes
// between addresses.
func realloc(a *bump, oldPtr, oldSize, align, newSize uint32, spill func(align, n uint32) uint32, move func(dst, src, n uint32)) uint32 {
	if oldPtr != 0 && newSize <= oldSize {
		return oldPtr
	}
	if newSize == 0 {
		// Any aligned, non-null address will do for an empty block.
		if align == 0 || align&(align-1) != 0 {
			return 8
		}
		return align
	}
	p, ok := a.alloc(align, newSize)
	if !ok {
		p = spill(align, newSize)
	}
	if oldPtr != 0 && oldSize > 0 {
		move(p, oldPtr, oldSize)
	}
	return p
}

package wasmscan

import (
	"errors"
	"fmt"
)

// ErrMalformed means the bytes are not a well-formed component (or a core
// module inside it is not): wasmtime would refuse to compile them too.
var ErrMalformed = errors.New("malformed component")

// reader decodes the WebAssembly binary encoding from one byte slice. The
// first failure sticks: later reads return zeros and consume nothing, so a
// decoder checks r.err once per entry rather than after every read. Every
// read either consumes at least one byte or fails, which is what keeps every
// loop over a count bounded by the bytes that are really there.
type reader struct {
	b    []byte
	off  int
	base int // offset of b[0] in the whole file, for messages
	err  error
}

func (r *reader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: at byte %d: %s", ErrMalformed, r.base+r.off, fmt.Sprintf(format, args...))
	}
}

func (r *reader) done() bool { return r.err != nil || r.off >= len(r.b) }

func (r *reader) remaining() int {
	if r.err != nil {
		return 0
	}
	return len(r.b) - r.off
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail("unexpected end of data")
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (r *reader) uleb(bits uint) uint64 {
	var v uint64
	var shift uint
	for {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits || (bits-shift < 7 && c&0x7f>>(bits-shift) != 0) {
			r.fail("integer too large for %d bits", bits)
			return 0
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) u32() uint32 { return uint32(r.uleb(32)) }
func (r *reader) u64() uint64 { return r.uleb(64) }

// sleb reads a signed LEB128 of at most bits bits.
func (r *reader) sleb(bits uint) int64 {
	var v int64
	var shift uint
	for {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if shift >= bits {
			r.fail("signed integer too large for %d bits", bits)
			return 0
		}
		v |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
}

// count reads a vector length and checks that many entries could fit in the
// bytes left, at least minSize bytes each, so no caller ever loops or
// allocates on a length the data does not back.
func (r *reader) count(what string, minSize int) uint32 {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(minSize) > uint64(r.remaining()) {
		r.fail("%s count %d does not fit in the %d bytes left", what, n, r.remaining())
		return 0
	}
	return n
}

// take returns the next n bytes (shared, not copied) and a reader over them
// that reports offsets in the whole file.
func (r *reader) take(n uint32, what string) *reader {
	if r.err != nil {
		return &reader{err: r.err}
	}
	if uint64(n) > uint64(r.remaining()) {
		r.fail("%s of %d bytes runs past the end (%d bytes left)", what, n, r.remaining())
		return &reader{err: r.err}
	}
	sub := &reader{b: r.b[r.off : r.off+int(n)], base: r.base + r.off}
	r.off += int(n)
	return sub
}

func (r *reader) skip(n uint32, what string) {
	if r.err != nil {
		return
	}
	if uint64(n) > uint64(r.remaining()) {
		r.fail("%s of %d bytes runs past the end (%d bytes left)", what, n, r.remaining())
		return
	}
	r.off += int(n)
}

// name skips a length-prefixed UTF-8 name (validity is wasmtime's business).
func (r *reader) name() { r.skip(r.u32(), "name") }

// finish folds a sub-reader's failure into r, or reports bytes left over.
func (r *reader) finish(sub *reader, what string) {
	if r.err != nil {
		return
	}
	if sub.err != nil {
		r.err = sub.err
		return
	}
	if sub.off != len(sub.b) {
		r.err = fmt.Errorf("%w: at byte %d: %d bytes left over at the end of %s", ErrMalformed, sub.base+sub.off, len(sub.b)-sub.off, what)
	}
}

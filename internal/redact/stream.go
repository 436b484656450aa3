package redact

import (
	"io"
	"strings"
)

const (
	// StreamWindow is how much of a stream Writer holds back so that a
	// secret split across writes is seen whole: longer than any built-in
	// credential (an RSA-4096 PEM key, JSON-escaped, is about 3.3 KiB).
	StreamWindow = 16 << 10
	// streamMax is the most Writer buffers before it must write out even
	// inside an open JSON string or PEM block.
	streamMax = 256 << 10
)

// Writer redacts a stream (a tool's log, output written in pieces) and
// writes the result to an underlying writer. It holds back the last
// StreamWindow bytes, never cuts inside a match (a password's key and
// value included) or an open JSON string (up to 256 KiB), prefers to cut
// after a newline, and carries whether the cut fell inside a JSON string,
// so the pairing of quotes, and the decoding of escapes, continues across
// writes. Close writes the rest. A Writer is not safe for concurrent use.
//
// A password value is matched whole only once it is all held, so in a
// stream one is replaced whole when its key and value together are at
// most StreamWindow bytes. Longer, it may be cut, depending on where the
// cuts fall (always, past twice the window): a bare value is matched as
// far as the text held goes, so it is held while it runs on and replaced
// whole if it ends within about 240 KiB (256 KiB less the window); past
// that forced cut, its tail is written as it is. A quoted value still
// open at a cut is not matched: the text before the cut (the key and the
// value's beginning; for a double quote, the cut moves to the open
// string's quote, so the key only) is written as it is, and so is the
// rest, which no key precedes.
type Writer struct {
	r        *Redactor
	w        io.Writer
	buf      []byte
	inString bool // the emitted text ended inside a JSON string literal
	next     int  // flush when the buffer reaches this (0: 2·StreamWindow)
	err      error
}

// NewWriter returns a Writer that writes r's redaction of what it is
// given to w.
func (r *Redactor) NewWriter(w io.Writer) *Writer {
	return &Writer{r: r, w: w}
}

// Write buffers p and writes out what can no longer be part of a secret
// that continues in a later write.
func (x *Writer) Write(p []byte) (int, error) {
	if x.err != nil {
		return 0, x.err
	}
	x.buf = append(x.buf, p...)
	if len(x.buf) >= max(x.next, 2*StreamWindow) {
		x.flush(false)
	}
	return len(p), x.err
}

// Close writes out the rest (it does not close the underlying writer).
func (x *Writer) Close() error {
	if x.err == nil {
		x.flush(true)
	}
	return x.err
}

func (x *Writer) flush(final bool) {
	text := string(x.buf)
	prefix := ""
	if x.inString { // re-open the string the previous piece left open
		prefix = `"`
	}
	cut := len(text)
	if !final {
		cut = x.cut(prefix+text) - len(prefix)
		if cut <= 0 {
			if len(text) < streamMax {
				// Wait for more, and do not look again before another
				// window's worth arrives (byte-sized writes stay linear).
				x.next = len(text) + StreamWindow
				return
			}
			cut = len(text) - StreamWindow // too long to hold: cut anyway
		}
	}
	out := x.r.Redact(prefix + text[:cut])
	out = strings.TrimPrefix(out, prefix) // a replaced literal also starts with '"'
	x.inString = endsInString(prefix + text[:cut])
	if _, err := io.WriteString(x.w, out); err != nil {
		x.err = err
		return
	}
	x.buf = append(x.buf[:0], text[cut:]...)
	x.next = 0
}

// cut chooses where to split text: before its last StreamWindow bytes,
// after a newline if there is one, and never inside a replacement or an
// open JSON string with escapes.
func (x *Writer) cut(text string) int {
	cut := len(text) - StreamWindow
	if i := strings.LastIndexByte(text[:cut], '\n'); i >= 0 {
		cut = i + 1
	}
	// Not inside a match, its key included (a password's value cut from
	// its key would be written as it is): moved to a match's beginning,
	// the cut may fall inside an earlier one's key, so look again until
	// it stays.
	spans := x.r.find(text, 0)
	for moved := true; moved; {
		moved = false
		for i := len(spans) - 1; i >= 0; i-- {
			if s := spans[i]; s.from < cut && cut < s.end {
				cut, moved = s.from, true
			}
		}
	}
	if start := openString(text[:cut]); start >= 0 {
		cut = start
	}
	return cut
}

// openString returns where the JSON string literal open at the end of
// text starts, or -1 if text ends outside one. Pairing is the same as in
// jsonStrings.
func openString(text string) int {
	i := 0
	for {
		q := strings.IndexByte(text[i:], '"')
		if q < 0 {
			return -1
		}
		start := i + q
		end, _ := scanString(text, start+1)
		if end < 0 {
			return start
		}
		i = end + 1
	}
}

func endsInString(text string) bool { return openString(text) >= 0 }

package worker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/internal/sandbox"
)

// TestHeaderCountIsBounded: a worker's header count is refused before
// anything is allocated for it when it is more than the bytes left could
// hold (8 each: two empty strings), or more than maxHeaders even when the
// frame is big enough to hold them.
func TestHeaderCountIsBounded(t *testing.T) {
	t.Parallel()
	frame := func(count uint32, present int) []byte {
		b := binary.BigEndian.AppendUint32(nil, count)
		return append(b, make([]byte, 8*present)...) // present empty headers
	}
	for _, c := range []struct {
		name           string
		count, present int
	}{
		{"a count the frame cannot hold", 9_999, 10},
		{"more than maxHeaders, all present", maxHeaders + 1, maxHeaders + 1},
	} {
		d := &dec{b: frame(uint32(c.count), c.present)}
		hs := d.headers()
		if d.err == nil || !strings.Contains(d.err.Error(), "does not fit the frame") || hs != nil {
			t.Errorf("%s: %d headers, %v; want refused: header count %d does not fit the frame", c.name, len(hs), d.err, c.count)
		}
	}
	d := &dec{b: frame(maxHeaders, maxHeaders)}
	if hs := d.headers(); d.err != nil || len(hs) != maxHeaders {
		t.Errorf("maxHeaders empty headers: %d, %v; want all read", len(hs), d.err)
	}
}

// TestWorkerFrameLimits: what a worker sends is refused, before its body
// is read, one byte over its type's limit: a call's output, a log line, a
// fetch, a reveal, a hello; a call worker's compiled-code frame is held
// to the small limit, only a compile worker's may be as big as any frame.
func TestWorkerFrameLimits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		typ   byte
		limit int
		of    func(byte) int
	}{
		{"done", msgDone, 2*sandbox.DefaultMaxOutputBytes + 64<<10, workerFrameLimit},
		{"log", msgLog, sandbox.DefaultMaxLogBytes + 4<<10, workerFrameLimit},
		{"fetch", msgFetch, 64 << 20, workerFrameLimit},
		{"reveal", msgReveal, maxHandleBytes + 64, workerFrameLimit},
		{"hello", msgHello, 64 << 10, workerFrameLimit},
		{"compiled from a call worker", msgCompiled, 64 << 10, workerFrameLimit},
		{"compiled from a compile worker", msgCompiled, maxFrame, compileFrameLimit},
		{"done from a compile worker", msgDone, 2*sandbox.DefaultMaxOutputBytes + 64<<10, compileFrameLimit},
	} {
		// A header claiming limit+1 bytes, and nothing more: refused
		// before the body is read (else io.ErrUnexpectedEOF).
		hdr := binary.BigEndian.AppendUint32(nil, uint32(c.limit+1))
		_, _, err := readFrameLimited(bytes.NewReader(append(hdr, c.typ)), c.of)
		if !errors.Is(err, errTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes, limit %d", c.limit+1, c.limit)) {
			t.Errorf("%s: a frame of %d bytes: %v; want refused over the limit of %d", c.name, c.limit+1, err, c.limit)
		}
		if c.limit > 4<<20 {
			continue // reading one at the limit would allocate it
		}
		hdr = binary.BigEndian.AppendUint32(nil, uint32(c.limit))
		if _, _, err := readFrameLimited(bytes.NewReader(append(hdr, c.typ)), c.of); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%s: a frame of exactly %d bytes: %v; want its body read (unexpected EOF here)", c.name, c.limit, err)
		}
	}
}

// TestDecodeRefusesBadBoolean: a worker's boolean is 0 or 1; any other
// byte fails the frame rather than being read as false.
func TestDecodeRefusesBadBoolean(t *testing.T) {
	t.Parallel()
	p := doneMsg{ID: 1, Output: "ok", Interrupted: true}.encode()[5:] // the payload, after length and type
	i := len(p) - 4 - 1                                               // Interrupted, before HostErr's empty string
	if p[i] != 1 {
		t.Fatalf("the encoding moved: byte %d is %d", i, p[i])
	}
	p[i] = 2
	if _, err := decodeDone(p); err == nil || err.Error() != "bad boolean" {
		t.Errorf("decodeDone with a boolean of 2: %v; want bad boolean", err)
	}
}

package worker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unsafe"
)

// The wire protocol between the parent and a worker: a stream of frames over
// one socket, each a 4-byte big-endian length n followed by n bytes whose
// first byte is the message type. Fields are encoded in a fixed order per
// type: integers big-endian, byte strings as a 4-byte length and the bytes.
// Every decoder is bounds-checked and refuses trailing bytes: the parent
// reads what a possibly compromised worker wrote, and must survive any bytes
// (FuzzDecode).
//
// protocolVersion changes with any change to a message's fields; a worker
// announces it in its hello and the parent refuses a mismatch.
const protocolVersion = 5

// maxFrame bounds one frame. The largest payloads are a compiled component
// (parent → worker, once per worker and version), a wasm file to compile
// and an input (capped by max_input_bytes, at most 64 MiB).
const maxFrame = 512 << 20

// Message types. Parent → worker below 64, worker → parent from 64.
const (
	msgLoad        byte = 1 // digest, compiled code (or its size, sent by descriptor)
	msgRun         byte = 2 // run one export
	msgFetchReply  byte = 3 // the answer to a worker's fetch
	msgCancel      byte = 4 // interrupt the running call
	msgCompile     byte = 5 // compile a component binary
	msgDrop        byte = 6 // forget compiled code
	msgRevealReply byte = 7 // the answer to a worker's reveal

	msgHello    byte = 64 // protocol version, engine fingerprint
	msgLog      byte = 65 // one log line of the running call
	msgFetch    byte = 66 // the running call's http-fetch
	msgDone     byte = 67 // the running call ended
	msgCompiled byte = 68 // the compile result
	msgLoaded   byte = 69 // the load result
	msgReveal   byte = 70 // the running call's reveal (maiden:tool@0.3.0)
)

var (
	errShort    = errors.New("frame truncated")
	errTrailing = errors.New("trailing bytes in frame")
	errTooLarge = errors.New("frame over the size limit")
)

// enc builds one frame.
type enc struct{ b []byte }

func newEnc(typ byte) *enc {
	e := &enc{b: make([]byte, 4, 64)}
	e.b = append(e.b, typ)
	return e
}

func (e *enc) u8(v byte)    { e.b = append(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) bool(v bool) {
	if v {
		e.u8(1)
	} else {
		e.u8(0)
	}
}
func (e *enc) str(s string)   { e.u32(uint32(len(s))); e.b = append(e.b, s...) }
func (e *enc) bytes(p []byte) { e.u32(uint32(len(p))); e.b = append(e.b, p...) }

// frame finishes the frame: the length prefix is filled in.
func (e *enc) frame() []byte {
	binary.BigEndian.PutUint32(e.b[:4], uint32(len(e.b)-4))
	return e.b
}

// dec reads the fields of one frame; the first error sticks.
type dec struct {
	b   []byte
	err error
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) u8() byte {
	p := d.take(1)
	if p == nil {
		return 0
	}
	return p[0]
}

func (d *dec) u32() uint32 {
	p := d.take(4)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (d *dec) u64() uint64 {
	p := d.take(8)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

func (d *dec) bool() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	if d.err == nil {
		d.err = errors.New("bad boolean")
	}
	return false
}

// bytes returns a slice of the frame, not a copy: readFrame allocates each
// frame afresh, so nothing else writes to it, and a 46 MB compiled
// component is not held twice.
func (d *dec) bytes() []byte {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	return d.take(int(n))
}

func (d *dec) str() string { return string(d.bytes()) }

// shared is str without the copy, for a call's input and output (a copy
// of 1 MiB and its garbage, each way): the string shares the frame, which
// nothing writes to again (see bytes).
func (d *dec) shared() string {
	b := d.bytes()
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

func (d *dec) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errTrailing
	}
	return d.err
}

// readFrame reads one frame, refusing one over limit before reading its
// body.
func readFrame(r io.Reader, limit int) (byte, []byte, error) {
	return readFrameLimited(r, func(byte) int { return limit })
}

// readFrameLimited is readFrame with a limit per message type: the type
// byte is read first, so a frame is refused before its body is allocated.
func readFrameLimited(r io.Reader, limitOf func(typ byte) int) (byte, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return 0, nil, errShort
	}
	var typ [1]byte
	if _, err := io.ReadFull(r, typ[:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	if limit := limitOf(typ[0]); uint64(n) > uint64(limit) {
		return 0, nil, fmt.Errorf("%w: type %d, %d bytes, limit %d", errTooLarge, typ[0], n, limit)
	}
	body := make([]byte, n)
	body[0] = typ[0]
	if _, err := io.ReadFull(r, body[1:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return body[0], body[1:], nil
}

// Messages.

type hello struct {
	Version     uint32
	Fingerprint string
	// Confinement says how the worker is confined (the Landlock ABI, or
	// why Landlock is unavailable), for the parent's log.
	Confinement string
}

func (m hello) encode() []byte {
	e := newEnc(msgHello)
	e.u32(m.Version)
	e.str(m.Fingerprint)
	e.str(m.Confinement)
	return e.frame()
}

func decodeHello(p []byte) (m hello, err error) {
	d := &dec{b: p}
	m.Version, m.Fingerprint, m.Confinement = d.u32(), d.str(), d.str()
	return m, d.finish()
}

// runMsg asks the worker to run one export of loaded code.
type runMsg struct {
	ID        uint64
	Digest    string
	Export    string
	Input     string
	TimeoutNS uint64
	Memory    uint64
	// SpinNS is how long the worker waits awake for the next call after
	// answering this one (0: it sleeps at once; see freecpu.go).
	SpinNS uint64
}

func (m runMsg) encode() []byte {
	// Sized once: the digest and input outgrow newEnc's 64 bytes.
	e := &enc{b: make([]byte, 4, 4+1+8+4+len(m.Digest)+4+len(m.Export)+4+len(m.Input)+3*8)}
	e.b = append(e.b, msgRun)
	e.u64(m.ID)
	e.str(m.Digest)
	e.str(m.Export)
	e.str(m.Input)
	e.u64(m.TimeoutNS)
	e.u64(m.Memory)
	e.u64(m.SpinNS)
	return e.frame()
}

func decodeRun(p []byte) (m runMsg, err error) {
	d := &dec{b: p}
	m.ID, m.Digest, m.Export, m.Input = d.u64(), d.str(), d.str(), d.shared()
	m.TimeoutNS, m.Memory, m.SpinNS = d.u64(), d.u64(), d.u64()
	return m, d.finish()
}

// loadMsg hands a worker compiled code: the bytes (Code), or, with Code
// empty, the Size bytes of the sealed memfd sent ahead of the frame over
// the worker's code channel (codefd.go).
type loadMsg struct {
	Digest string
	Code   []byte
	Size   uint64
}

func (m loadMsg) encode() []byte {
	e := newEnc(msgLoad)
	e.str(m.Digest)
	e.bytes(m.Code)
	e.u64(m.Size)
	return e.frame()
}

func decodeLoad(p []byte) (m loadMsg, err error) {
	d := &dec{b: p}
	m.Digest, m.Code, m.Size = d.str(), d.bytes(), d.u64()
	return m, d.finish()
}

// loadedMsg acknowledges a load; Err is empty on success.
type loadedMsg struct {
	Digest string
	Err    string
}

func (m loadedMsg) encode() []byte {
	e := newEnc(msgLoaded)
	e.str(m.Digest)
	e.str(m.Err)
	return e.frame()
}

func decodeLoaded(p []byte) (m loadedMsg, err error) {
	d := &dec{b: p}
	m.Digest, m.Err = d.str(), d.str()
	return m, d.finish()
}

type dropMsg struct{ Digest string }

func (m dropMsg) encode() []byte {
	e := newEnc(msgDrop)
	e.str(m.Digest)
	return e.frame()
}

func decodeDrop(p []byte) (m dropMsg, err error) {
	d := &dec{b: p}
	m.Digest = d.str()
	return m, d.finish()
}

type cancelMsg struct{ ID uint64 }

func (m cancelMsg) encode() []byte {
	e := newEnc(msgCancel)
	e.u64(m.ID)
	return e.frame()
}

func decodeCancel(p []byte) (m cancelMsg, err error) {
	d := &dec{b: p}
	m.ID = d.u64()
	return m, d.finish()
}

type compileMsg struct {
	ID   uint64
	Wasm []byte
}

func (m compileMsg) encode() []byte {
	e := newEnc(msgCompile)
	e.u64(m.ID)
	e.bytes(m.Wasm)
	return e.frame()
}

func decodeCompile(p []byte) (m compileMsg, err error) {
	d := &dec{b: p}
	m.ID, m.Wasm = d.u64(), d.bytes()
	return m, d.finish()
}

// compiledMsg is the compile result: Code on success, else Err (the
// component is not a loadable tool).
type compiledMsg struct {
	ID   uint64
	Code []byte
	Err  string
}

func (m compiledMsg) encode() []byte {
	e := newEnc(msgCompiled)
	e.u64(m.ID)
	e.bytes(m.Code)
	e.str(m.Err)
	return e.frame()
}

func decodeCompiled(p []byte) (m compiledMsg, err error) {
	d := &dec{b: p}
	m.ID, m.Code, m.Err = d.u64(), d.bytes(), d.str()
	return m, d.finish()
}

type logMsg struct {
	ID      uint64
	Level   string
	Source  string
	Message string
}

func (m logMsg) encode() []byte {
	e := newEnc(msgLog)
	e.u64(m.ID)
	e.str(m.Level)
	e.str(m.Source)
	e.str(m.Message)
	return e.frame()
}

func decodeLog(p []byte) (m logMsg, err error) {
	d := &dec{b: p}
	m.ID, m.Level, m.Source, m.Message = d.u64(), d.str(), d.str(), d.str()
	return m, d.finish()
}

type header struct{ Name, Value string }

// maxHeaders bounds the header count a decoder accepts before allocating.
const maxHeaders = 10_000

func (e *enc) headers(hs []header) {
	e.u32(uint32(len(hs)))
	for _, h := range hs {
		e.str(h.Name)
		e.str(h.Value)
	}
}

func (d *dec) headers() []header {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	// Each header takes at least 8 bytes on the wire: a count larger than
	// the bytes left is a lie, refused before allocating for it.
	if n > maxHeaders || uint64(n)*8 > uint64(len(d.b)) {
		d.err = fmt.Errorf("header count %d does not fit the frame", n)
		return nil
	}
	hs := make([]header, 0, n)
	for i := uint32(0); i < n && d.err == nil; i++ {
		hs = append(hs, header{Name: d.str(), Value: d.str()})
	}
	return hs
}

// fetchMsg is a tool's http-fetch request, as the tool wrote it.
type fetchMsg struct {
	ID            uint64
	Method        string
	URL           string
	Headers       []header
	Body          []byte
	HasCredential bool
	Credential    string
}

func (m fetchMsg) encode() []byte {
	e := newEnc(msgFetch)
	e.u64(m.ID)
	e.str(m.Method)
	e.str(m.URL)
	e.headers(m.Headers)
	e.bytes(m.Body)
	e.bool(m.HasCredential)
	e.str(m.Credential)
	return e.frame()
}

func decodeFetch(p []byte) (m fetchMsg, err error) {
	d := &dec{b: p}
	m.ID, m.Method, m.URL = d.u64(), d.str(), d.str()
	m.Headers, m.Body = d.headers(), d.bytes()
	m.HasCredential, m.Credential = d.bool(), d.str()
	return m, d.finish()
}

// fetchReplyMsg is a response (ErrKind empty) or a fetch error.
type fetchReplyMsg struct {
	ID         uint64
	Status     uint32
	Headers    []header
	Body       []byte
	ErrKind    string
	ErrMessage string
}

func (m fetchReplyMsg) encode() []byte {
	e := newEnc(msgFetchReply)
	e.u64(m.ID)
	e.u32(m.Status)
	e.headers(m.Headers)
	e.bytes(m.Body)
	e.str(m.ErrKind)
	e.str(m.ErrMessage)
	return e.frame()
}

func decodeFetchReply(p []byte) (m fetchReplyMsg, err error) {
	d := &dec{b: p}
	m.ID, m.Status, m.Headers, m.Body = d.u64(), d.u32(), d.headers(), d.bytes()
	m.ErrKind, m.ErrMessage = d.str(), d.str()
	return m, d.finish()
}

// revealMsg is a tool's reveal: the handle it asks about, as it gave it.
type revealMsg struct {
	ID     uint64
	Handle string
}

func (m revealMsg) encode() []byte {
	e := newEnc(msgReveal)
	e.u64(m.ID)
	e.str(m.Handle)
	return e.frame()
}

func decodeReveal(p []byte) (m revealMsg, err error) {
	d := &dec{b: p}
	m.ID, m.Handle = d.u64(), d.str()
	return m, d.finish()
}

// revealReplyMsg is the parent's decision on a reveal: the value when OK,
// else the refusal's message for the tool.
type revealReplyMsg struct {
	ID      uint64
	OK      bool
	Value   string
	Refusal string
}

func (m revealReplyMsg) encode() []byte {
	e := newEnc(msgRevealReply)
	e.u64(m.ID)
	e.bool(m.OK)
	e.str(m.Value)
	e.str(m.Refusal)
	return e.frame()
}

func decodeRevealReply(p []byte) (m revealReplyMsg, err error) {
	d := &dec{b: p}
	m.ID, m.OK, m.Value, m.Refusal = d.u64(), d.bool(), d.str(), d.str()
	return m, d.finish()
}

// doneMsg ends a run. Failure kind empty means success.
type doneMsg struct {
	ID          uint64
	Output      string
	FailKind    string
	FailMessage string
	MemoryPeak  uint64
	// Interrupted: the parent's cancel stopped it.
	Interrupted bool
	// HostErr: the worker's sandbox failed (not the tool).
	HostErr string
}

func (m doneMsg) encode() []byte {
	// Sized once: an output outgrows newEnc's 64 bytes.
	e := &enc{b: make([]byte, 4, 4+1+8+4+len(m.Output)+4+len(m.FailKind)+4+len(m.FailMessage)+8+1+4+len(m.HostErr))}
	e.b = append(e.b, msgDone)
	e.u64(m.ID)
	e.str(m.Output)
	e.str(m.FailKind)
	e.str(m.FailMessage)
	e.u64(m.MemoryPeak)
	e.bool(m.Interrupted)
	e.str(m.HostErr)
	return e.frame()
}

func decodeDone(p []byte) (m doneMsg, err error) {
	d := &dec{b: p}
	m.ID, m.Output, m.FailKind, m.FailMessage = d.u64(), d.shared(), d.str(), d.str()
	m.MemoryPeak, m.Interrupted, m.HostErr = d.u64(), d.bool(), d.str()
	return m, d.finish()
}

// nsDuration converts a wire duration, clamping what does not fit.
func nsDuration(ns uint64) int64 {
	if ns > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(ns)
}

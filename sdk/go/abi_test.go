package maiden

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeMemory is linear memory for the host-side tests of the layouts:
// addresses are offsets into the slice, and 0 is never handed out.
type fakeMemory struct{ b []byte }

func newFakeMemory() *fakeMemory { return &fakeMemory{b: make([]byte, 8)} }

func (m *fakeMemory) bytes(ptr, n uint32) []byte {
	if uint64(ptr)+uint64(n) > uint64(len(m.b)) {
		panic(fmt.Sprintf("out of bounds: %d+%d > %d", ptr, n, len(m.b)))
	}
	return m.b[ptr : ptr+n]
}

// place appends b at a 4-aligned address and returns it.
func (m *fakeMemory) place(b []byte) uint32 {
	for len(m.b)%4 != 0 {
		m.b = append(m.b, 0)
	}
	p := uint32(len(m.b))
	m.b = append(m.b, b...)
	return p
}

func (m *fakeMemory) placeString(s string) uint32 { return m.place([]byte(s)) }

func (m *fakeMemory) area(n int) (uint32, []byte) {
	p := m.place(make([]byte, n))
	return p, m.b[p : p+uint32(n)]
}

// str writes a string's ptr/len pair at b, which must not be in m (m.b may
// move when it grows).
func (m *fakeMemory) str(b []byte, s string) {
	put32(b, m.placeString(s))
	put32(b[4:], uint32(len(s)))
}

func TestLiftFetchResultOK(t *testing.T) {
	m := newFakeMemory()
	headers := []Header{{"Content-Type", "application/json"}, {"X-Empty", ""}, {"Set-Cookie", "a=1"}}
	table := make([]byte, len(headers)*headerTupleSize)
	for i, h := range headers {
		m.str(table[i*16:], h.Name)
		m.str(table[i*16+8:], h.Value)
	}
	tableAddr := m.place(table)
	body := m.place([]byte(`{"ok":true}`))
	ret, area := m.area(fetchResultSize)
	area[0] = 0
	area[4], area[5] = 0x2d, 0x01 // 301
	put32(area[8:], tableAddr)
	put32(area[12:], uint32(len(headers)))
	put32(area[16:], body)
	put32(area[20:], 11)

	got, err := liftFetchResult(m, ret, false)
	if err != nil {
		t.Fatal(err)
	}
	want := Response{Status: 301, Header: headers, Body: []byte(`{"ok":true}`)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	// The result must not alias memory the arena will reuse.
	copy(m.b[body:], "XXXXXXXXXXX")
	if string(got.Body) != `{"ok":true}` {
		t.Errorf("body aliases linear memory: %q", got.Body)
	}
	if got.Header.Get("content-type") != "application/json" || got.Header.Get("missing") != "" {
		t.Errorf("Headers.Get: %q", got.Header.Get("content-type"))
	}
}

func TestLiftFetchResultEmpty(t *testing.T) {
	m := newFakeMemory()
	ret, area := m.area(fetchResultSize)
	area[4] = 204
	got, err := liftFetchResult(m, ret, true)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Response{Status: 204}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestLiftFetchResultErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		kase     byte
		msg      string
		want     *FetchError
		sentinel error
	}{
		{"denied", 0, "host evil.test is not in http_allow", &FetchError{FetchDenied, "host evil.test is not in http_allow"}, ErrDenied},
		{"timeout", 1, "", &FetchError{FetchTimeout, ""}, ErrTimeout},
		{"too-large", 2, "", &FetchError{FetchTooLarge, ""}, ErrTooLarge},
		{"failed", 3, "tls: bad certificate", &FetchError{FetchFailed, "tls: bad certificate"}, ErrFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeMemory()
			msg := m.placeString(tt.msg)
			ret, area := m.area(fetchResultSize)
			area[0], area[4] = 1, tt.kase
			put32(area[8:], msg)
			put32(area[12:], uint32(len(tt.msg)))
			_, err := liftFetchResult(m, ret, true)
			var fe *FetchError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v, want a *FetchError", err)
			}
			if diff := cmp.Diff(tt.want, fe); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, s := range []error{ErrDenied, ErrTimeout, ErrTooLarge, ErrFailed} {
				if errors.Is(err, s) != (s == tt.sentinel) {
					t.Errorf("errors.Is(err, %v) = %v", s, !(s == tt.sentinel))
				}
			}
			if !strings.HasPrefix(err.Error(), "fetch "+tt.name) {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestLiftFetchResultMalformed(t *testing.T) {
	for _, tt := range []struct {
		name string
		tag  byte
		kase byte
	}{{"tag", 2, 0}, {"case", 1, 4}} {
		t.Run(tt.name, func(t *testing.T) {
			m := newFakeMemory()
			ret, area := m.area(fetchResultSize)
			area[0], area[4] = tt.tag, tt.kase
			_, err := liftFetchResult(m, ret, true)
			var fe *FetchError
			if err == nil || errors.As(err, &fe) || !strings.Contains(err.Error(), "malformed") {
				t.Errorf("err = %v, want a malformed-result error", err)
			}
		})
	}
}

func TestLowerRequest(t *testing.T) {
	m := newFakeMemory()
	req := Request{
		Method:     "POST",
		URL:        "https://api.example.test/v1",
		Header:     Headers{{"Content-Type", "application/json"}, {"X-Empty", ""}},
		Body:       []byte(`{"q":1}`),
		Credential: "API_TOKEN",
	}
	p, table := lowerRequest(req, m.place, m.placeString)
	str := func(ptr, n uint32) string { return string(m.bytes(ptr, n)) }
	if str(p[0], p[1]) != "POST" || str(p[2], p[3]) != "https://api.example.test/v1" {
		t.Errorf("method/url: %v", p[:4])
	}
	if p[5] != 2 || len(table) != 32 {
		t.Fatalf("headers: len %d, table %d bytes", p[5], len(table))
	}
	if p[4]%4 != 0 {
		t.Errorf("header table at %d is not 4-aligned", p[4])
	}
	var got []Header
	for i := range p[5] {
		tp := p[4] + i*headerTupleSize
		got = append(got, Header{loadString(m, tp), loadString(m, tp+8)})
	}
	if diff := cmp.Diff([]Header(req.Header), got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	if str(p[6], p[7]) != `{"q":1}` {
		t.Errorf("body %q", str(p[6], p[7]))
	}
	if p[8] != 1 || str(p[9], p[10]) != "API_TOKEN" {
		t.Errorf("credential: tag %d %q", p[8], str(p[9], p[10]))
	}

	// The zero request: GET, nothing else, option none.
	p, table = lowerRequest(Request{}, m.place, m.placeString)
	if p != [11]uint32{} || table != nil {
		t.Errorf("empty request lowered to %v, table %v", p, table)
	}
}

func TestBump(t *testing.T) {
	b := bump{base: 1000, size: 64}
	type step struct {
		align, n uint32
		want     uint32
		ok       bool
	}
	for i, s := range []step{
		{1, 3, 1000, true},
		{4, 4, 1004, true},
		{8, 1, 1008, true},
		{3, 1, 1016, true}, // not a power of two: treated as 8
		{1, 47, 1017, true},
		{1, 1, 0, false}, // full
		{0, 0, 1064, true},
	} {
		got, ok := b.alloc(s.align, s.n)
		if got != s.want || ok != s.ok {
			t.Errorf("step %d alloc(%d, %d) = %d, %v; want %d, %v", i, s.align, s.n, got, ok, s.want, s.ok)
		}
	}
	b.reset()
	// 1008 is the first 16-aligned address; 56 bytes remain after it.
	if _, ok := b.alloc(16, 57); ok {
		t.Error("alloc(16, 57) after reset succeeded; only 56 bytes fit after alignment")
	}
	if got, ok := b.alloc(16, 56); !ok || got != 1008 {
		t.Errorf("alloc(16, 56) after reset = %d, %v; want 1008", got, ok)
	}
	b = bump{base: 0xffff_fff0, size: 16}
	if _, ok := b.alloc(1, 1<<31); ok {
		t.Error("allocation past 4 GiB succeeded")
	}
}

func TestRealloc(t *testing.T) {
	mem := make([]byte, 256)
	arena := bump{base: 16, size: 64}
	var spills []uint32
	next := uint32(128)
	spill := func(align, n uint32) uint32 {
		p := (next + align - 1) &^ (align - 1)
		next = p + n
		spills = append(spills, p)
		return p
	}
	move := func(dst, src, n uint32) { copy(mem[dst:dst+n], mem[src:src+n]) }

	p := realloc(&arena, 0, 0, 1, 10, spill, move)
	if p != 16 {
		t.Fatalf("first block at %d, want 16", p)
	}
	copy(mem[p:], "0123456789")
	// Shrinking or keeping the size returns the same block.
	if q := realloc(&arena, p, 10, 1, 4, spill, move); q != p {
		t.Errorf("shrink moved the block to %d", q)
	}
	// Growing copies the old contents.
	q := realloc(&arena, p, 10, 1, 20, spill, move)
	if q == p || string(mem[q:q+10]) != "0123456789" {
		t.Errorf("grow: block %d holds %q", q, mem[q:q+10])
	}
	// Past the arena: the spill function is asked.
	r := realloc(&arena, 0, 0, 8, 100, spill, move)
	if len(spills) != 1 || r != spills[0] || r%8 != 0 {
		t.Errorf("big block at %d, spills %v", r, spills)
	}
	// Empty blocks need no memory but an aligned, non-zero address.
	if e := realloc(&arena, 0, 0, 4, 0, spill, move); e == 0 || e%4 != 0 {
		t.Errorf("empty block at %d", e)
	}
}

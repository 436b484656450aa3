package worker

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	frames := []struct {
		name string
		b    []byte
		dec  func([]byte) (any, error)
		want any
	}{
		{"hello", hello{Version: 1, Fingerprint: "fp"}.encode(), func(p []byte) (any, error) { return decodeHello(p) }, hello{Version: 1, Fingerprint: "fp"}},
		{"run", runMsg{ID: 7, Digest: "d", Export: "execute", Input: `{"a":1}`, TimeoutNS: 5, Memory: 9, SpinNS: 11}.encode(), func(p []byte) (any, error) { return decodeRun(p) },
			runMsg{ID: 7, Digest: "d", Export: "execute", Input: `{"a":1}`, TimeoutNS: 5, Memory: 9, SpinNS: 11}},
		{"fetch", fetchMsg{ID: 1, Method: "POST", URL: "https://x/", Headers: []header{{"a", "b"}}, Body: []byte{0, 255}, HasCredential: true, Credential: "T"}.encode(),
			func(p []byte) (any, error) { return decodeFetch(p) },
			fetchMsg{ID: 1, Method: "POST", URL: "https://x/", Headers: []header{{"a", "b"}}, Body: []byte{0, 255}, HasCredential: true, Credential: "T"}},
		{"reply", fetchReplyMsg{ID: 1, Status: 200, Headers: []header{{"k", "v"}}, Body: []byte("x")}.encode(),
			func(p []byte) (any, error) { return decodeFetchReply(p) }, fetchReplyMsg{ID: 1, Status: 200, Headers: []header{{"k", "v"}}, Body: []byte("x")}},
		{"done", doneMsg{ID: 2, Output: "o", FailKind: "tool", FailMessage: "m", MemoryPeak: 3, Interrupted: true, HostErr: "h"}.encode(),
			func(p []byte) (any, error) { return decodeDone(p) }, doneMsg{ID: 2, Output: "o", FailKind: "tool", FailMessage: "m", MemoryPeak: 3, Interrupted: true, HostErr: "h"}},
		{"log", logMsg{ID: 3, Level: "info", Source: "log", Message: "hi"}.encode(), func(p []byte) (any, error) { return decodeLog(p) }, logMsg{ID: 3, Level: "info", Source: "log", Message: "hi"}},
		{"compiled", compiledMsg{ID: 4, Code: []byte{1}, Err: "e"}.encode(), func(p []byte) (any, error) { return decodeCompiled(p) }, compiledMsg{ID: 4, Code: []byte{1}, Err: "e"}},
		{"reveal", revealMsg{ID: 5, Handle: "maiden-secret-handle:ab"}.encode(), func(p []byte) (any, error) { return decodeReveal(p) }, revealMsg{ID: 5, Handle: "maiden-secret-handle:ab"}},
		{"reveal reply", revealReplyMsg{ID: 6, OK: true, Value: "v", Refusal: "r"}.encode(), func(p []byte) (any, error) { return decodeRevealReply(p) },
			revealReplyMsg{ID: 6, OK: true, Value: "v", Refusal: "r"}},
	}
	for _, f := range frames {
		t.Run(f.name, func(t *testing.T) {
			_, p, err := readFrame(bytes.NewReader(f.b), maxFrame)
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.dec(p)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(f.want, got, cmp.AllowUnexported(header{})); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			// Every strict prefix of the payload is refused, never a panic.
			for i := 0; i < len(p); i++ {
				if _, err := f.dec(p[:i]); err == nil {
					t.Errorf("prefix of %d bytes decoded", i)
				}
			}
			if _, err := f.dec(append(p, 0)); err == nil {
				t.Error("trailing byte accepted")
			}
		})
	}
}

// FuzzDecode: the parent reads whatever a compromised worker writes, and
// the worker whatever a broken parent writes; neither may panic, allocate
// beyond the frame, or accept a frame with bytes left over.
func FuzzDecode(f *testing.F) {
	f.Add(hello{Version: 1, Fingerprint: "x"}.encode())
	f.Add(doneMsg{ID: 1, Output: "ok"}.encode())
	f.Add(fetchMsg{ID: 1, Headers: []header{{"a", "b"}}, Body: []byte("b")}.encode())
	f.Add(fetchReplyMsg{ID: 1, Status: 200}.encode())
	f.Add(logMsg{ID: 1, Message: "m"}.encode())
	f.Add(revealMsg{ID: 1, Handle: "h"}.encode())
	f.Add(revealReplyMsg{ID: 1, OK: true, Value: "v"}.encode())
	f.Add([]byte{0, 0, 0, 5, 66, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bufio.NewReader(bytes.NewReader(b))
		for {
			typ, p, err := readFrame(r, 1<<20)
			if err != nil {
				return
			}
			if len(p) > len(b) {
				t.Fatalf("payload of %d bytes from %d input bytes", len(p), len(b))
			}
			_, _ = decodeHello(p)
			_, _ = decodeRun(p)
			_, _ = decodeLoad(p)
			_, _ = decodeLoaded(p)
			_, _ = decodeDrop(p)
			_, _ = decodeCancel(p)
			_, _ = decodeCompile(p)
			_, _ = decodeCompiled(p)
			_, _ = decodeLog(p)
			_, _ = decodeFetch(p)
			_, _ = decodeFetchReply(p)
			_, _ = decodeDone(p)
			_, _ = decodeReveal(p)
			_, _ = decodeRevealReply(p)
			_ = typ
		}
	})
}

package mcpimport

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/maiden-run/maiden/api"
)

// The tests of this file were written in the eighth mutation pass
// (docs/security-tests.md): each kills a planted bug the package's tests
// let through, by asserting the refusal the bug took away.

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func pinTool(name, desc string) Tool {
	return Tool{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

// TestDecideRefusesWhatNoOperatorAccepted: without accept_new_tools, a
// tool nobody pinned is refused (kind denied, naming the command that
// accepts it) and nothing is written to the pin file.
func TestDecideRefusesWhatNoOperatorAccepted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "maiden-pins.json")
	var s PinFile
	_, terr := s.Decide(path, "shop", false, "shop.pay", pinTool("pay", "pays"), quietLog())
	if terr == nil || terr.Kind != api.KindDenied || !strings.Contains(terr.Message, "which no operator has accepted; an operator must run maiden mcp accept shop") {
		t.Fatalf("a new tool of an import without accept_new_tools: %v; want it refused as never accepted", terr)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("the refused tool was pinned: the pin file exists")
	}
}

// TestUnreadablePinFileRefusesEveryTool: a pin file maiden cannot read
// (not JSON, another version, a key it does not know) refuses every
// imported tool naming the file, accept_new_tools or not; the file is
// left as it is (an operator's file maiden cannot read is not replaced by
// one new pin).
func TestUnreadablePinFileRefusesEveryTool(t *testing.T) {
	for name, content := range map[string]string{
		"not JSON":      `{"version":1,"tools":{`,
		"version 2":     `{"version":2,"tools":{}}`,
		"unknown field": `{"version":1,"tools":{},"revoked":["shop.pay"]}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "maiden-pins.json")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, acceptNew := range []bool{false, true} {
				var s PinFile
				_, terr := s.Decide(path, "shop", acceptNew, "shop.pay", pinTool("pay", "pays"), quietLog())
				if terr == nil || terr.Kind != api.KindDenied || !strings.Contains(terr.Message, "every imported tool is refused until it is fixed") || !strings.Contains(terr.Message, path) {
					t.Errorf("accept_new_tools %v, a pin file holding %s: %v; want every tool refused naming the file", acceptNew, content, terr)
				}
			}
			if b, _ := os.ReadFile(path); string(b) != content {
				t.Errorf("the unreadable pin file was rewritten: %s", b)
			}
		})
	}
}

// TestRemovedPinFileAcceptsNothing: an operator who removes the pin file
// withdraws every acceptance, at the next read by the same PinFile.
func TestRemovedPinFileAcceptsNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "maiden-pins.json")
	var s PinFile
	if err := s.Save(path, map[string]Pin{"shop.pay": PinOf(pinTool("pay", "pays"))}); err != nil {
		t.Fatal(err)
	}
	if _, terr := s.Decide(path, "shop", false, "shop.pay", pinTool("pay", "pays"), quietLog()); terr != nil {
		t.Fatalf("the accepted tool: %v", terr)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	_, terr := s.Decide(path, "shop", false, "shop.pay", pinTool("pay", "pays"), quietLog())
	if terr == nil || !strings.Contains(terr.Message, "no operator has accepted") {
		t.Fatalf("after the pin file was removed: %v; want the tool refused as never accepted", terr)
	}
}

// TestAcceptNewToolsUnsavedIsRefused: accept_new_tools serves a new tool
// only once its pin is written; a pin file that cannot be written refuses
// the tool (else every later definition would be served, none pinned).
func TestAcceptNewToolsUnsavedIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no-such-dir", "maiden-pins.json")
	var s PinFile
	_, terr := s.Decide(path, "shop", true, "shop.pay", pinTool("pay", "pays"), quietLog())
	if terr == nil || terr.Kind != api.KindDenied || !strings.Contains(terr.Message, "accept_new_tools could not pin it") {
		t.Fatalf("accept_new_tools with a pin file that cannot be written: %v; want the tool refused", terr)
	}
}

// TestPinFileCapIsExact: Save writes the file with a trailing newline, so
// a file of exactly maxPinsBytes is written and read back, and one whose
// JSON alone is maxPinsBytes bytes (the newline making it one more) is
// refused: written, it would refuse every imported tool at its next read.
func TestPinFileCapIsExact(t *testing.T) {
	dir := t.TempDir()
	// The size of a file with one pin whose description is n bytes of 'x'
	// is base+n (accepted_at has a fixed width).
	probe := filepath.Join(dir, "probe.json")
	var p PinFile
	if err := p.Save(probe, map[string]Pin{"up.a": PinOf(pinTool("a", ""))}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(probe)
	if err != nil {
		t.Fatal(err)
	}
	base := int(fi.Size()) - len(PinOf(pinTool("a", "")).Digest) // the digest's width does not change
	base += len(PinOf(pinTool("a", "x")).Digest)
	for _, c := range []struct {
		size int
		ok   bool
	}{{maxPinsBytes, true}, {maxPinsBytes + 1, false}} {
		path := filepath.Join(dir, "pins.json")
		_ = os.Remove(path)
		var s PinFile
		err := s.Save(path, map[string]Pin{"up.a": PinOf(pinTool("a", strings.Repeat("x", c.size-base)))})
		switch {
		case c.ok && err != nil:
			t.Errorf("a pin file of exactly %d bytes: %v; want it written", c.size, err)
		case c.ok:
			var fresh PinFile
			if fi, _ := os.Stat(path); fi == nil || fi.Size() != int64(c.size) {
				t.Fatalf("the test's arithmetic: the file is %v bytes, want %d", fi.Size(), c.size)
			}
			if _, ok, err := fresh.Get(path, "up.a"); !ok || err != nil {
				t.Errorf("the %d-byte pin file read back: %v, %v", c.size, ok, err)
			}
		case err == nil:
			fi, _ := os.Stat(path)
			var fresh PinFile
			_, _, rerr := fresh.Get(path, "up.a")
			t.Errorf("a pin file of %d bytes (%d written) was written; want it refused naming the cap (read back: %v)", c.size, fi.Size(), rerr)
		}
	}
}

// TestPinFileReadAgainWhenChanged: a running maiden reads the pin file
// again when it changes: a pin an operator removed (by hand, or another
// process's rewrite) refuses the tool at its next use, and a tool accepted
// by another process (maiden mcp accept) is served.
func TestPinFileReadAgainWhenChanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "maiden-pins.json")
	var s PinFile
	if err := s.Save(path, map[string]Pin{"shop.pay": PinOf(pinTool("pay", "pays"))}); err != nil {
		t.Fatal(err)
	}
	if _, terr := s.Decide(path, "shop", false, "shop.pay", pinTool("pay", "pays"), quietLog()); terr != nil {
		t.Fatalf("the accepted tool: %v", terr)
	}
	if err := os.WriteFile(path, []byte(`{"version":1,"tools":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, terr := s.Decide(path, "shop", false, "shop.pay", pinTool("pay", "pays"), quietLog()); terr == nil || !strings.Contains(terr.Message, "no operator has accepted") {
		t.Errorf("after its pin was removed from the file: %v; want the tool refused as never accepted", terr)
	}
	var other PinFile // another process: maiden mcp accept
	if err := other.Save(path, map[string]Pin{"shop.refund": PinOf(pinTool("refund", "refunds"))}); err != nil {
		t.Fatal(err)
	}
	if _, terr := s.Decide(path, "shop", false, "shop.refund", pinTool("refund", "refunds"), quietLog()); terr != nil {
		t.Errorf("a tool another process accepted: %v; want it served", terr)
	}
}

// TestPinCoversTheTitle: the title an agent is shown is pinned as the
// description and the schema are: a changed title changes the digest and
// is named as the change.
func TestPinCoversTheTitle(t *testing.T) {
	a := pinTool("pay", "pays")
	b := a
	b.Title = "Pay (now also refunds)"
	if got := PinOf(a).Changes(PinOf(b)); len(got) != 1 || got[0] != "title" {
		t.Errorf("a changed title: changes %v, digests %s and %s; want [title]", got, PinOf(a).Digest, PinOf(b).Digest)
	}
}

package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The tests of this file were added by the mutation pass over the parsers
// and file guards (docs/security-tests.md, "Fifteenth pass: parsers and file
// guards"; docs/mutation/parsers.tsv): each is red with a bug it names
// planted.

// TestFileGrownAfterItsCheckRefused: a file within the limit when its
// descriptor is checked, grown past it before it is read, is refused as
// too large, never read cut at the limit; one that stays at the limit is
// read whole.
func TestFileGrownAfterItsCheckRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "grows")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	grow := ""
	testHookBeforeRead = func(name string) {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		if _, err := f.WriteString(grow); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { testHookBeforeRead = nil })
	data, err := Read(p, 10)
	if err != nil || string(data) != "0123456789" {
		t.Fatalf("a file of exactly the limit: %q %v; want it whole", data, err)
	}
	grow = "abcde"
	data, err = Read(p, 10)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 10 bytes") || data != nil {
		t.Fatalf("a file of 10 bytes grown to 15 after its check: %q %v; want ErrTooLarge, more than 10 bytes", data, err)
	}
}

//go:build !wasip1

package maiden

import (
	"errors"
	"strings"
	"testing"
)

type revealHost struct {
	defaultHost
	values map[string]string
}

func (h revealHost) Reveal(handle string) (string, error) {
	if v, ok := h.values[handle]; ok {
		return v, nil
	}
	return "", &RevealError{Message: "unknown handle"}
}

// TestRevealStandIn: outside maiden, Reveal asks a stand-in Host that
// implements Revealer, and a Host that does not refuses.
func TestRevealStandIn(t *testing.T) {
	v, err := Reveal("h")
	var re *RevealError
	if !errors.As(err, &re) || v != "" || !strings.Contains(err.Error(), "no maiden host") {
		t.Fatalf("default host: got (%q, %v), want a RevealError naming the missing host", v, err)
	}
	restore := SetHost(revealHost{values: map[string]string{HandlePrefix + "1": "value"}})
	defer restore()
	if v, err := Reveal(HandlePrefix + "1"); err != nil || v != "value" {
		t.Fatalf("stand-in: got (%q, %v)", v, err)
	}
	if _, err := Reveal(HandlePrefix + "2"); !errors.As(err, &re) || re.Message != "unknown handle" {
		t.Fatalf("stand-in, unknown handle: got %v", err)
	}
	if _, err := Reveal("\xff"); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("invalid UTF-8 handle: got %v", err)
	}
	if !IsHandle(HandlePrefix+"abc") || IsHandle("GITHUB_TOKEN") {
		t.Fatal("IsHandle")
	}
}

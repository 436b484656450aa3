package main

import (
	"reflect"
	"testing"

	"github.com/pelletier/go-toml/v2"

	"github.com/maiden-run/maiden/config"
)

// TestKeylessLineParsesBack: the verify line maiden add and pull write
// holds what it was given, whatever the identity or the path hold: Go's
// %q (which it used) writes a control character as \a or \x1b, which TOML
// has not, and the table then failed to parse (refused, never half
// written, but the identity could not be pinned).
func TestKeylessLineParsesBack(t *testing.T) {
	t.Parallel()
	kv := &config.KeylessVerify{Issuer: "https://issuer.example/\"q\"", Identity: "ci@example.com\a\x1b[2J", TransparencyLog: false}
	root := "/srv/keys/ro\\ot\u202e.json"
	line := keylessLine(kv, root)
	var doc struct {
		Verify map[string]any `toml:"verify"`
	}
	if err := toml.Unmarshal([]byte(line), &doc); err != nil {
		t.Fatalf("keylessLine = %q: does not parse as TOML: %v", line, err)
	}
	want := map[string]any{"issuer": kv.Issuer, "identity": kv.Identity, "trusted_root": root, "transparency_log": false}
	if !reflect.DeepEqual(doc.Verify, want) {
		t.Errorf("keylessLine = %q parses as %v; want %v", line, doc.Verify, want)
	}
}
